/*
 * snapuq_app_snap.c - the runner of a SNAP image (SNAP=1): every inference scored by the SNAP core
 * (the input tap before the invoke, the score after it), a .snapuq blob upload configuring SNAP for
 * its model, on-device calibration (calib) and the drift monitor (monitor).
 */
#include <string.h>

#include "../core/snapuq_blob.h"
#include "../core/snapuq_input.h"
#include "../core/snapuq_snap.h"
#include "../port/snapuq_port.h"
#include "snapuq_app_internal.h"
#include "snapuq_sha256.h"

#ifndef SNAPUQ_APP_FIT_CAPACITY
#define SNAPUQ_APP_FIT_CAPACITY 256u
#endif
#ifndef SNAPUQ_APP_MONITOR_MAX
#define SNAPUQ_APP_MONITOR_MAX 128 /* largest monitor window (the Small-MCU builds use 32) */
#endif
#define SNAPUQ_APP_STR2(x) #x
#define SNAPUQ_APP_STR(x) SNAPUQ_APP_STR2(x)

static struct {
    uint8_t ok;
    const snapuq_snap_config_t *cfg; /* compiled-in config, or blob_cfg after a blob upload */
    int32_t s_in16;                  /* input tap of the staged input (step 4b), read before invoke */
    snapuq_snap_config_t blob_cfg;   /* LUTs point into the uploaded blob in the pool */
    snapuq_snap_params_t params;
    snapuq_snap_result_t result;
    snapuq_welford_t welford[SNAPUQ_MAX_TAPS];
    snapuq_fit_t fit;
    snapuq_fit_sample_t fit_buf[SNAPUQ_APP_FIT_CAPACITY];
    snapuq_monitor_t monitor;
    uint8_t monitor_on, last_alarm;
    int32_t monitor_ring[SNAPUQ_APP_MONITOR_MAX];
} snap;

static void use_snap_config(const snapuq_snap_config_t *cfg)
{
    char why[SNAPUQ_ERROR_LEN];
    snap.cfg = cfg;
    if (snapuq_snap_check(cfg, why, sizeof why) == SNAPUQ_OK &&
        snapuq_snap_params_init(cfg, &snap.params) == SNAPUQ_OK) {
        snap.ok = 1u;
    } else {
        snapuq_proto_error(&snapuq_app_proto, "snap", why);
    }
}

/* a blob upload (its arena and staging in [lo, hi)); the SNAP section configures SNAP for its model */
static void load_blob(const uint8_t *blob, size_t len, size_t lo, size_t hi)
{
    snapuq_blob_t b;
    char why[SNAPUQ_ERROR_LEN];
    snapuq_status_t st = snapuq_blob_open(&b, blob, len, why, sizeof why);
    if (st != SNAPUQ_OK) {
        snapuq_proto_error(&snapuq_app_proto, "blob", why);
        return;
    }
    snapuq_app_load_model(b.tflite, b.tflite_len, lo, hi, 1u);
    if (!snapuq_app.loaded) {
        return;
    }
    snapuq_app.model_bytes = len;
    st = snapuq_blob_snap_config(&b, &snapuq_app.model, &snap.blob_cfg, why, sizeof why);
    if (st != SNAPUQ_OK) {
        snapuq_app.loaded = 0u;
        snapuq_proto_error(&snapuq_app_proto, "blob", why);
        return;
    }
    snapuq_sha256_hex(b.snap, b.snap_len, snapuq_app.snap_sha256);
    use_snap_config(&snap.blob_cfg);
}

/* ------------------------------------------------------------------ calibration and monitor */

static void put_params(snapuq_proto_t *p)
{
    const snapuq_snap_params_t *q = &snap.params;
    snapuq_proto_puts(p, "m-calib");
    snapuq_proto_kv_i32v(p, "w_q16", q->w_q16, snap.cfg->n_taps);
    snapuq_proto_kv_i(p, "hinge_q_q16", q->hinge_q_q16);
    snapuq_proto_kv_i(p, "hinge_m", q->hinge_m);
    snapuq_proto_kv_i(p, "hinge_n", q->hinge_n);
    snapuq_proto_kv_i(p, "b0_q16", q->b0_q16);
    snapuq_proto_kv_i(p, "b1_m", q->b1_m);
    snapuq_proto_kv_i(p, "b1_n", q->b1_n);
    snapuq_proto_kv_i(p, "b2_m", q->b2_m);
    snapuq_proto_kv_i(p, "b2_n", q->b2_n);
    snapuq_proto_kv_i(p, "u_threshold_q16", q->u_threshold_q16);
    snapuq_proto_kv_u(p, "samples", snap.fit.count);
    snapuq_proto_kv_u(p, "welford_n", snap.welford[0].n);
    snapuq_proto_endl(p);
}

static void calib_reset(void)
{
    uint8_t l;
    for (l = 0; l < SNAPUQ_MAX_TAPS; l++) {
        (void)snapuq_welford_init(&snap.welford[l]);
    }
    (void)snapuq_fit_init(&snap.fit, snap.fit_buf, sizeof snap.fit_buf);
}

/* calib reset | feed LABEL | fit [nonneg] | weights | default | show */
void snapuq_app_cmd_calib(snapuq_proto_t *p, int argc, char **argv)
{
    const char *sub = argv[1];
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if (!snap.ok) {
        snapuq_proto_error(p, "snap", "SNAP unavailable for this model");
        return;
    }
    if (strcmp(sub, "reset") == 0) {
        calib_reset();
    } else if (strcmp(sub, "default") == 0) {
        (void)snapuq_snap_params_init(snap.cfg, &snap.params);
    } else if (strcmp(sub, "feed") == 0) {
        uint32_t label;
        float s, m;
        uint8_t l;
        if (argc != 3 || snapuq_proto_parse_u32(argv[2], &label) != 0) {
            snapuq_proto_error(p, "args", "calib feed LABEL");
            return;
        }
        if (!snapuq_app.have_result) {
            snapuq_proto_error(p, "no-result", "run infer first");
            return;
        }
        for (l = 0; l < snap.result.n_taps; l++) {
            (void)snapuq_welford_push(&snap.welford[l], (float)snap.result.ebar16[l] / 65536.0f);
        }
        (void)snapuq_snap_features(&snap.result, &s, &m);
        (void)snapuq_fit_push(&snap.fit, s, m, (uint32_t)snap.result.pred != label);
    } else if (strcmp(sub, "fit") == 0) {
        snapuq_fit_options_t opt;
        float beta[3];
        uint16_t iters = 0;
        snapuq_status_t st;
        opt.max_iter = 25u;
        opt.l2 = 1e-3f;
        opt.tol = 1e-5f;
        opt.nonneg = (uint8_t)(argc == 3 && strcmp(argv[2], "nonneg") == 0);
        st = snapuq_fit_solve(&snap.fit, &opt, beta, &iters);
        if (st != SNAPUQ_OK) {
            snapuq_app_status_error(p, "calib-fit", st);
            return;
        }
        (void)snapuq_snap_set_beta(&snap.params, beta);
        snapuq_proto_puts(p, "m-calib-fit");
        snapuq_proto_kv_u(p, "iters", iters);
        snapuq_proto_kv_i(p, "beta0_e6", (int64_t)(beta[0] * 1e6f));
        snapuq_proto_kv_i(p, "beta1_e6", (int64_t)(beta[1] * 1e6f));
        snapuq_proto_kv_i(p, "beta2_e6", (int64_t)(beta[2] * 1e6f));
        snapuq_proto_endl(p);
    } else if (strcmp(sub, "weights") == 0) {
        snapuq_status_t st =
            snapuq_snap_weights_from_welford(snap.cfg, snap.welford, &snap.params);
        if (st != SNAPUQ_OK) {
            snapuq_app_status_error(p, "calib-weights", st);
            return;
        }
    } else if (strcmp(sub, "show") != 0) {
        snapuq_proto_error(p, "args", "calib reset|feed LABEL|fit [nonneg]|weights|default|show");
        return;
    }
    put_params(p);
}

/* monitor W THRESHOLD CUSUM_REF CUSUM_H | monitor off | monitor show */
void snapuq_app_cmd_monitor(snapuq_proto_t *p, int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "off") == 0) {
        snap.monitor_on = 0u;
    } else if (argc == 5) {
        int64_t thr, ref, h;
        uint32_t w;
        snapuq_status_t st;
        if (snapuq_proto_parse_u32(argv[1], &w) != 0 || w == 0u || w > SNAPUQ_APP_MONITOR_MAX ||
            snapuq_proto_parse_i64(argv[2], &thr) != 0 || snapuq_proto_parse_i64(argv[3], &ref) != 0 ||
            snapuq_proto_parse_i64(argv[4], &h) != 0 || thr < INT32_MIN || thr > INT32_MAX ||
            ref < INT32_MIN || ref > INT32_MAX) {
            snapuq_proto_error(p, "args",
                               "monitor W(1.." SNAPUQ_APP_STR(SNAPUQ_APP_MONITOR_MAX) ") THRESHOLD CUSUM_REF CUSUM_H");
            return;
        }
        st = snapuq_monitor_init(&snap.monitor, snap.monitor_ring, w, (int32_t)thr, (int32_t)ref, h);
        if (st != SNAPUQ_OK) {
            snapuq_app_status_error(p, "monitor", st);
            return;
        }
        snap.monitor_on = 1u;
    } else if (!(argc == 2 && strcmp(argv[1], "show") == 0)) {
        snapuq_proto_error(p, "args", "monitor W THRESHOLD CUSUM_REF CUSUM_H | off | show");
        return;
    }
    snapuq_proto_puts(p, "m-monitor");
    snapuq_proto_kv_u(p, "on", snap.monitor_on);
    if (snap.monitor_on) {
        snapuq_proto_kv_u(p, "seen", snap.monitor.n_seen);
        snapuq_proto_kv_u(p, "first_alarm", snap.monitor.first_alarm);
        snapuq_proto_kv_i(p, "cusum", snap.monitor.cusum);
    }
    snapuq_proto_endl(p);
}

/* ------------------------------------------------------------------ the runner */

void snapuq_app_run_boot(void)
{
    calib_reset();
}

size_t snapuq_app_run_arena(size_t need, uint8_t uploaded)
{
    (void)uploaded;
    return need;
}

void snapuq_app_run_loaded(void)
{
    static const char sha[] = SNAPUQ_APP_SNAP_SHA256; /* of the compiled-in model's SNAP constants */
    snap.ok = 0u;
    if (snapuq_app.model_uploaded) {
        return; /* the compiled-in SNAP configuration belongs to the compiled-in model */
    }
    memcpy(snapuq_app.snap_sha256, sha,
           sizeof sha < sizeof snapuq_app.snap_sha256 ? sizeof sha : sizeof snapuq_app.snap_sha256);
    snapuq_app.snap_sha256[sizeof snapuq_app.snap_sha256 - 1u] = '\0';
    use_snap_config(&SNAPUQ_APP_SNAP_CONFIG);
}

int snapuq_app_run_open(const uint8_t *b, size_t n, size_t lo, size_t hi)
{
    if (n < 4u || memcmp(b, "SNUQ", 4) != 0) {
        return 0;
    }
    load_blob(b, n, lo, hi);
    return 1;
}

snapuq_status_t snapuq_app_run_once(uint64_t *model_ticks, uint64_t *snap_ticks)
{
    snapuq_app_t *a = &snapuq_app;
    snapuq_status_t st;
    int32_t none;
    uint64_t t0, t1, t2, tin = 0;
    t0 = snapuq_port_counter();
    /* the input path of the core: the staged codes into the model's input (timed as the model's),
       then the input tap, which reads them before the inference (the arena may reuse the input's
       memory; timed as SNAP's) */
    st = snapuq_input_from_int8(&a->model, a->direct_input ? NULL : (const int8_t *)a->staging, a->in_bytes,
                                NULL, &none);
    snap.s_in16 = 0;
    if (st == SNAPUQ_OK && snap.ok && snap.cfg->has_intap) {
        const uint64_t ti = snapuq_port_counter();
        st = snapuq_input_from_int8(&a->model, NULL, a->in_bytes, snap.cfg, &snap.s_in16);
        tin = snapuq_port_counter() - ti;
    }
    if (st == SNAPUQ_OK) {
        st = snapuq_model_invoke(&a->model);
    }
    t1 = snapuq_port_counter();
    if (st == SNAPUQ_OK && snap.ok) {
        st = snapuq_snap_score_model(snap.cfg, &snap.params, &a->model, snap.s_in16, &snap.result);
    }
    t2 = snapuq_port_counter();
    *model_ticks = t1 - t0 - tin;
    *snap_ticks = t2 - t1 + tin;
    return st;
}

void snapuq_app_run_timed_begin(void)
{
}

void snapuq_app_run_timed_end(void)
{
    snap.last_alarm = 0u;
    if (snap.monitor_on && snap.ok) {
        (void)snapuq_monitor_push(&snap.monitor, snap.result.U16, &snap.last_alarm);
    }
}

void snapuq_app_run_infer_kv(snapuq_proto_t *p)
{
    (void)p;
}

int snapuq_app_run_results(snapuq_proto_t *p)
{
    const snapuq_snap_result_t *r = &snap.result;
    snapuq_tensor_info_t info;
    if (!snap.ok) {
        return 0;
    }
    (void)snapuq_model_output_info(&snapuq_app.model, (uint16_t)snap.cfg->out_logits, &info);
    snapuq_proto_kv_i(p, "pred", r->pred);
    snapuq_proto_kv_i8v(p, "logits", (const int8_t *)info.data, info.elements);
    snapuq_proto_kv_i32v(p, "ebar", r->ebar16, r->n_taps);
    snapuq_proto_kv_i32v(p, "z", r->s16, r->n_taps);
    snapuq_proto_kv_i(p, "s", r->S16);
    snapuq_proto_kv_i(p, "sf", r->F16);
    snapuq_proto_kv_i(p, "m", r->m16);
    snapuq_proto_kv_i(p, "u", r->U16);
    snapuq_proto_kv_i(p, "pe", r->P16);
    snapuq_proto_kv_i(p, "al", r->A16);
    snapuq_proto_kv_i(p, "zl", r->Z16);
    snapuq_proto_kv_u(p, "flag", r->flag);
    if (snap.monitor_on) {
        snapuq_proto_kv_u(p, "alarm", snap.last_alarm);
    }
    return 1;
}

void snapuq_app_run_profile_image(snapuq_proto_t *p)
{
    (void)p;
}

void snapuq_app_run_profile_model(snapuq_proto_t *p)
{
    snapuq_proto_kv_u(p, "snap_ok", snap.ok);
    if (snap.ok) {
        snapuq_proto_kv_u(p, "taps", snap.cfg->n_taps);
        snapuq_proto_kv_u(p, "classes", snap.cfg->n_classes);
    }
}

void snapuq_app_run_model_kv(snapuq_proto_t *p)
{
    snapuq_proto_kv_u(p, "snap", snap.ok);
}
