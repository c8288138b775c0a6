/*
 * snapuq_app.c - harness firmware commands (protocol grammar in snapuq_proto.h and
 * docs/FIRMWARE.md). Every reply is one or more "m-..." / "e-..." lines, then "m-ready lines=N";
 * every line ends with '*' and its CRC-32 (snapuq_proto_endl).
 */
#include "snapuq_app.h"

#include <string.h>

#include "../core/snapuq_runtime.h"
#include "../port/snapuq_port.h"
#include "snapuq_app_model.h"
#include "snapuq_sha256.h"
#include "snapuq_proto.h"

#if SNAPUQ_APP_WITH_SNAP
#include "../core/snapuq_blob.h"
#include "../core/snapuq_snap.h"
#endif

#ifndef SNAPUQ_APP_FIT_CAPACITY
#define SNAPUQ_APP_FIT_CAPACITY 256u
#endif
#ifndef SNAPUQ_APP_MONITOR_MAX
#define SNAPUQ_APP_MONITOR_MAX 128 /* largest monitor window (the Small-MCU builds use 32) */
#endif
#define SNAPUQ_APP_STR2(x) #x
#define SNAPUQ_APP_STR(x) SNAPUQ_APP_STR2(x)
#ifndef SNAPUQ_APP_ENS_MAX_CLASSES
#define SNAPUQ_APP_ENS_MAX_CLASSES 32u
#endif
#define APP_VERSION "1"

typedef struct {
    snapuq_model_t model;
    uint8_t loaded;            /* model initialised and given an arena */
    uint16_t in_index;
    uint32_t in_bytes;
    uint8_t *staging;          /* the last uploaded input (copied in before every invoke) */
    uint8_t direct_input;      /* no room for a staging copy: uploads go straight into the model's
                                  input tensor, and each upload is consumed by one inference */
    uint8_t have_input;
    uint8_t have_result;
    size_t model_bytes;
    uint8_t model_uploaded;
    /* an uploaded model's bytes in the pool, [up_off, up_off + up_len), and their CRC-32: kept
       intact while the next upload arrives (it goes to the other end of the pool), so a bad upload
       falls back to them; up_len == 0: none (the model, if any, is the compiled-in one) */
    size_t up_off, up_len;
    uint32_t up_crc;
    size_t rx_off;             /* where the upload being received goes */
    uint8_t kept;              /* what a failed upload falls back to: KEPT_NONE / _BUILTIN / _UPLOAD */
    char model_sha256[65];     /* of the flatbuffer it runs (compiled in or uploaded) */
    char snap_sha256[65];      /* of the SNAP constants it scores with (a blob's section; "" unknown) */
    size_t arena_need, arena_persist, arena_act, arena_act_noreuse;
    uint8_t *pool;
    size_t pool_len;
    /* hex upload (MLPerf "db") */
    uint32_t db_want, db_got;
    /* profiling */
    uint8_t prof_on;
    uint64_t prof_t0;
    uint64_t op_ticks[SNAPUQ_MAX_OPS];
    /* last timing */
    uint64_t last_model_ticks, last_snap_ticks;
#if SNAPUQ_APP_WITH_SNAP
    uint8_t snap_ok;
    const snapuq_snap_config_t *snap_cfg; /* compiled-in config, or blob_cfg after a blob upload */
    int32_t s_in16;                       /* input tap of the staged input (step 4b), read before invoke */
    snapuq_snap_config_t blob_cfg;        /* LUTs point into the uploaded blob in the pool */
    snapuq_snap_params_t params;
    snapuq_snap_result_t result;
    snapuq_welford_t welford[SNAPUQ_MAX_TAPS];
    snapuq_fit_t fit;
    snapuq_fit_sample_t fit_buf[SNAPUQ_APP_FIT_CAPACITY];
    snapuq_monitor_t monitor;
    uint8_t monitor_on, last_alarm;
    int32_t monitor_ring[SNAPUQ_APP_MONITOR_MAX];
#endif
#if SNAPUQ_APP_ENSEMBLE
    /* ensemble: the members share one model struct and one arena (sized for the largest);
       switching members re-parses the flatbuffer and re-derives its multipliers (counted) */
    size_t ens_arena_max;
    size_t ens_loaded;        /* member whose flatbuffer the model struct holds now */
    uint16_t ens_classes;     /* elements of every summed softmax output */
    uint16_t ens_terms;       /* softmax outputs summed in the last inference */
    int32_t ens_pred;
    uint64_t switch_ticks;    /* member switches of the timed runs */
    int32_t ens_sum[SNAPUQ_APP_ENS_MAX_CLASSES]; /* sum over members / exits of (q - zero_point) */
#endif
} app_t;

static app_t app;
static snapuq_proto_t proto;

/* ------------------------------------------------------------------ helpers */

static void port_write(void *ctx, const char *buf, size_t len)
{
    (void)ctx;
    snapuq_port_write(buf, len);
}

static void status_error(snapuq_proto_t *p, const char *what, snapuq_status_t st)
{
    snapuq_proto_puts(p, "e-");
    snapuq_proto_puts(p, what);
    snapuq_proto_kv_s(p, "status", snapuq_status_str(st));
    if (app.model.error[0] != '\0') {
        snapuq_proto_puts(p, " msg=\"");
        snapuq_proto_puts(p, snapuq_model_error(&app.model));
        snapuq_proto_puts(p, "\"");
    }
    p->n_errors++;
    snapuq_proto_endl(p);
}

static int need_model(snapuq_proto_t *p)
{
    if (!app.loaded) {
        snapuq_proto_error(p, "no-model", "no model loaded (see boot message)");
        return 0;
    }
    return 1;
}

static void profile_hook(void *ctx, uint16_t op, int32_t code, int begin)
{
    (void)ctx;
    (void)code;
    if (begin) {
        app.prof_t0 = snapuq_port_counter();
    } else if (op < SNAPUQ_MAX_OPS) {
        app.op_ticks[op] += snapuq_port_counter() - app.prof_t0;
    }
}

#if SNAPUQ_APP_WITH_SNAP
static void use_snap_config(const snapuq_snap_config_t *cfg)
{
    app.snap_cfg = cfg;
    if (snapuq_snap_check(cfg) == SNAPUQ_OK && snapuq_snap_params_init(cfg, &app.params) == SNAPUQ_OK) {
        app.snap_ok = 1u;
    } else {
        snapuq_proto_error(&proto, "snap", "SNAP config rejected by snapuq_snap_check");
    }
}
#endif

#define KEPT_NONE 0u
#define KEPT_BUILTIN 1u
#define KEPT_UPLOAD 2u
#define ALIGN16(x) (((x) + 15u) & ~(size_t)15u)

/* Plan the part [lo, hi) of the pool as [arena | input staging]. The compiled-in model (in flash)
 * gets the whole pool; an uploaded model's bytes lie at one end of the pool and [lo, hi) is the
 * rest (see cmd_model). */
static void load_model(const uint8_t *tflite, size_t len, size_t lo, size_t hi, uint8_t uploaded)
{
    snapuq_status_t st;
    snapuq_tensor_info_t info;
    size_t off;
    uint8_t *arena = app.pool + lo;
    app.loaded = 0u;
    app.model_bytes = len;
    app.model_uploaded = uploaded;
    snapuq_sha256_hex(tflite, len, app.model_sha256);
    app.snap_sha256[0] = '\0';
    app.have_input = 0u;
    app.have_result = 0u;
    st = snapuq_model_init(&app.model, tflite, len);
    if (st != SNAPUQ_OK) {
        status_error(&proto, "model", st);
        return;
    }
    (void)snapuq_model_arena_size(&app.model, &app.arena_need);
#if SNAPUQ_APP_ENSEMBLE
    if (!uploaded && app.ens_arena_max > app.arena_need) {
        app.arena_need = app.ens_arena_max;
    }
    app.ens_loaded = 0u;
#endif
    (void)snapuq_model_arena_breakdown(&app.model, &app.arena_persist, &app.arena_act,
                                       &app.arena_act_noreuse);
    if (snapuq_model_input_count(&app.model) != 1u) {
        snapuq_proto_error(&proto, "model", "needs exactly one input");
        return;
    }
    (void)snapuq_model_input_info(&app.model, 0u, &info);
    app.in_index = 0u;
    app.in_bytes = info.bytes;
    off = lo + ALIGN16(app.arena_need);
    /* Without room for a staging copy of the input (and for single models only: ensemble members
       share the arena and need the input kept), the input tensor itself is the upload buffer. */
    app.direct_input = (uint8_t)(lo <= hi && off + app.in_bytes > hi && off <= hi && !SNAPUQ_APP_ENSEMBLE);
    if (lo > hi || off + (app.direct_input ? 0u : app.in_bytes) > hi) {
        /* need: the pool bytes this model takes (its own bytes when uploaded, arena, staging) */
        snapuq_proto_puts(&proto, "e-arena need=");
        snapuq_proto_put_u64(&proto, (uint64_t)(lo + (app.pool_len - hi) + ALIGN16(app.arena_need) +
                                                app.in_bytes));
        snapuq_proto_puts(&proto, " have=");
        snapuq_proto_put_u64(&proto, (uint64_t)app.pool_len);
        snapuq_proto_puts(&proto, " msg=\"model does not fit the board's RAM budget\"");
        proto.n_errors++;
        snapuq_proto_endl(&proto);
        return;
    }
    st = snapuq_model_set_arena(&app.model, arena, app.arena_need);
    if (st != SNAPUQ_OK) {
        status_error(&proto, "arena", st);
        return;
    }
    app.staging = app.pool + off;
    if (app.direct_input) {
        (void)snapuq_model_input_info(&app.model, 0u, &info);
        app.staging = (uint8_t *)info.data;
    }
    app.loaded = 1u;
#if SNAPUQ_APP_WITH_SNAP
    app.snap_ok = 0u;
    if (app.model_uploaded) {
        return; /* the compiled-in SNAP configuration belongs to the compiled-in model */
    }
#ifdef SNAPUQ_MODEL_SNAP_SHA256 /* written by `snapuq export` into snapuq_model.h */
    {
        static const char sha[] = SNAPUQ_MODEL_SNAP_SHA256;
        memcpy(app.snap_sha256, sha, sizeof sha < sizeof app.snap_sha256 ? sizeof sha : sizeof app.snap_sha256);
        app.snap_sha256[sizeof app.snap_sha256 - 1u] = '\0';
    }
#endif
    use_snap_config(&SNAPUQ_APP_SNAP_CONFIG);
#endif
}

#if SNAPUQ_APP_WITH_SNAP
/* a blob upload (its arena and staging in [lo, hi)); the SNAP section configures SNAP for its model */
static void load_blob(const uint8_t *blob, size_t len, size_t lo, size_t hi)
{
    snapuq_blob_t b;
    const char *why = "";
    snapuq_status_t st = snapuq_blob_open(&b, blob, len, &why);
    if (st != SNAPUQ_OK) {
        snapuq_proto_error(&proto, "blob", why);
        return;
    }
    load_model(b.tflite, b.tflite_len, lo, hi, 1u);
    if (!app.loaded) {
        return;
    }
    app.model_bytes = len;
    st = snapuq_blob_snap_config(&b, &app.model, &app.blob_cfg, &why);
    if (st != SNAPUQ_OK) {
        app.loaded = 0u;
        snapuq_proto_error(&proto, "blob", why);
        return;
    }
    snapuq_sha256_hex(b.snap, b.snap_len, app.snap_sha256);
    use_snap_config(&app.blob_cfg);
}
#endif

#if SNAPUQ_APP_WITH_SNAP
static snapuq_status_t score(void)
{
    return snapuq_snap_score_model(app.snap_cfg, &app.params, &app.model, app.s_in16, &app.result);
}
#endif

#if SNAPUQ_APP_ENSEMBLE
/* Arena of the largest member; every member must take the same input. Called once at boot. */
static void ens_prepare(void)
{
    size_t k, need = 0u;
    for (k = 0; k < snapuq_blob_count; k++) {
        snapuq_tensor_info_t info;
        size_t a = 0u;
        snapuq_status_t st = snapuq_model_init(&app.model, snapuq_blob_members[k], snapuq_blob_member_len[k]);
        if (st == SNAPUQ_OK) {
            st = snapuq_model_input_info(&app.model, 0u, &info);
        }
        if (st != SNAPUQ_OK) {
            status_error(&proto, "member", st);
            return;
        }
        if (k == 0u) {
            app.in_bytes = info.bytes;
        } else if (info.bytes != app.in_bytes) {
            snapuq_proto_error(&proto, "member", "ensemble members take different inputs");
            return;
        }
        (void)snapuq_model_arena_size(&app.model, &a);
        if (a > need) {
            need = a;
        }
    }
    app.ens_arena_max = need;
}

/* Add every int8 output of the current member (softmax probabilities) into ens_sum. */
static snapuq_status_t ens_accumulate(void)
{
    uint16_t i, n = snapuq_model_output_count(&app.model);
    for (i = 0; i < n; i++) {
        snapuq_tensor_info_t info;
        uint32_t c;
        if (snapuq_model_output_info(&app.model, i, &info) != SNAPUQ_OK || info.type != SNAPUQ_DTYPE_INT8) {
            continue;
        }
        if (app.ens_classes == 0u) {
            if (info.elements == 0u || info.elements > SNAPUQ_APP_ENS_MAX_CLASSES) {
                return SNAPUQ_ERR_LIMIT;
            }
            app.ens_classes = (uint16_t)info.elements;
        }
        if (info.elements != app.ens_classes) {
            return SNAPUQ_ERR_SHAPE;
        }
        for (c = 0; c < info.elements; c++) {
            app.ens_sum[c] += (int32_t)((const int8_t *)info.data)[c] - info.zero_point;
        }
        app.ens_terms++;
    }
    return SNAPUQ_OK;
}

/* Every member in turn on the staged input; the prediction is the argmax of the summed
 * probabilities (= of their average; ties go to the lower class index). */
static snapuq_status_t ens_run(void)
{
    snapuq_status_t st = SNAPUQ_OK;
    size_t k, n = app.model_uploaded ? 1u : snapuq_blob_count;
    uint16_t c;
    memset(app.ens_sum, 0, sizeof app.ens_sum);
    app.ens_classes = 0u;
    app.ens_terms = 0u;
    for (k = 0; k < n && st == SNAPUQ_OK; k++) {
        if (k != app.ens_loaded) {
            uint64_t t0 = snapuq_port_counter();
            st = snapuq_model_init(&app.model, snapuq_blob_members[k], snapuq_blob_member_len[k]);
            if (st == SNAPUQ_OK) {
                st = snapuq_model_set_arena(&app.model, app.pool, app.arena_need);
            }
            app.switch_ticks += snapuq_port_counter() - t0;
            if (st != SNAPUQ_OK) {
                app.loaded = 0u;
                return st;
            }
            app.ens_loaded = k;
        }
        st = snapuq_model_set_input(&app.model, app.in_index, app.staging, app.in_bytes);
        if (st == SNAPUQ_OK) {
            st = snapuq_model_invoke(&app.model);
        }
        if (st == SNAPUQ_OK) {
            st = ens_accumulate();
        }
    }
    app.ens_pred = 0;
    for (c = 1; c < app.ens_classes; c++) {
        if (app.ens_sum[c] > app.ens_sum[app.ens_pred]) {
            app.ens_pred = (int32_t)c;
        }
    }
    return st;
}
#endif

/* One inference on the staged input; returns status, fills the tick split. */
static snapuq_status_t run_once(uint64_t *model_ticks, uint64_t *snap_ticks)
{
    snapuq_status_t st;
    uint64_t t0, t1, t2, tin = 0;
    t0 = snapuq_port_counter();
#if SNAPUQ_APP_ENSEMBLE
    st = ens_run();
#else
    st = app.direct_input ? SNAPUQ_OK : snapuq_model_set_input(&app.model, app.in_index, app.staging, app.in_bytes);
#if SNAPUQ_APP_WITH_SNAP
    /* the input tap reads the input before the inference (the arena may reuse the input's memory);
       its time counts as SNAP's */
    app.s_in16 = 0;
    if (st == SNAPUQ_OK && app.snap_ok && app.snap_cfg->has_intap) {
        snapuq_tensor_info_t info;
        const uint64_t ti = snapuq_port_counter();
        st = snapuq_model_input_info(&app.model, app.in_index, &info);
        if (st == SNAPUQ_OK) {
            st = snapuq_snap_input_tap(app.snap_cfg, (const int8_t *)info.data, info.elements, &app.s_in16);
        }
        tin = snapuq_port_counter() - ti;
    }
#endif
    if (st == SNAPUQ_OK) {
        st = snapuq_model_invoke(&app.model);
    }
#endif
    t1 = snapuq_port_counter();
#if SNAPUQ_APP_WITH_SNAP
    if (st == SNAPUQ_OK && app.snap_ok) {
        st = score();
    }
#endif
    t2 = snapuq_port_counter();
    *model_ticks = t1 - t0 - tin;
    *snap_ticks = t2 - t1 + tin;
    return st;
}

/* ------------------------------------------------------------------ commands */

static void cmd_name(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-name-snapuq-");
    snapuq_proto_puts(p, snapuq_port_board());
    snapuq_proto_endl(p);
}

static void cmd_profile(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-profile");
    snapuq_proto_kv_s(p, "fw", "snapuq");
    snapuq_proto_kv_s(p, "version", APP_VERSION);
    snapuq_proto_kv_s(p, "board", snapuq_port_board());
    snapuq_proto_kv_s(p, "cpu", snapuq_port_cpu());
    snapuq_proto_kv_u(p, "cpu_hz", snapuq_port_cpu_hz());
    snapuq_proto_kv_s(p, "clock", snapuq_port_clock());
    snapuq_proto_kv_s(p, "counter", snapuq_port_counter_kind());
    snapuq_proto_kv_u(p, "counter_hz", snapuq_port_counter_hz());
    snapuq_proto_kv_s(p, "kernels", snapuq_kernels_name());
    snapuq_proto_kv_s(p, "model", SNAPUQ_APP_MODEL_NAME);
    if (app.model_bytes != 0u) {
        snapuq_proto_kv_s(p, "model_sha256", app.model_sha256);
    }
    snapuq_proto_kv_u(p, "snap", SNAPUQ_APP_WITH_SNAP);
    if (app.snap_sha256[0] != '\0') {
        snapuq_proto_kv_s(p, "snap_sha256", app.snap_sha256); /* the harness checks it against snapuq.json */
    }
#if SNAPUQ_APP_ENSEMBLE
    snapuq_proto_kv_u(p, "members", snapuq_blob_count);
#endif
    snapuq_proto_kv_u(p, "loaded", app.loaded);
    if (app.loaded) {
        snapuq_proto_kv_u(p, "in_bytes", app.in_bytes);
        snapuq_proto_kv_u(p, "outputs", snapuq_model_output_count(&app.model));
        snapuq_proto_kv_u(p, "ops", snapuq_model_op_count(&app.model));
#if SNAPUQ_APP_WITH_SNAP
        snapuq_proto_kv_u(p, "snap_ok", app.snap_ok);
        if (app.snap_ok) {
            snapuq_proto_kv_u(p, "taps", app.snap_cfg->n_taps);
            snapuq_proto_kv_u(p, "classes", app.snap_cfg->n_classes);
        }
#endif
    }
    snapuq_proto_endl(p);
}

static void cmd_stats(snapuq_proto_t *p, int argc, char **argv)
{
    size_t stack_peak = snapuq_port_stack_peak();
    size_t ram_static = snapuq_port_ram_static();
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-stats");
    snapuq_proto_kv_u(p, "flash", snapuq_port_flash_used());
    snapuq_proto_kv_u(p, "flash_size", snapuq_port_flash_size());
    snapuq_proto_kv_u(p, "ram_static", ram_static);
    snapuq_proto_kv_u(p, "ram_size", snapuq_port_ram_size());
    snapuq_proto_kv_u(p, "pool", app.pool_len);
    snapuq_proto_kv_u(p, "arena", app.arena_need);
    snapuq_proto_kv_u(p, "arena_persist", app.arena_persist);
    snapuq_proto_kv_u(p, "arena_act", app.arena_act);
    snapuq_proto_kv_u(p, "arena_act_noreuse", app.arena_act_noreuse);
    snapuq_proto_kv_u(p, "input", app.in_bytes);
    snapuq_proto_kv_u(p, "direct_input", app.direct_input);
    snapuq_proto_kv_u(p, "stack_peak", stack_peak);
    snapuq_proto_kv_u(p, "stack_size", snapuq_port_stack_size());
    snapuq_proto_kv_u(p, "ram_peak",
                      ram_static + ((app.arena_need + 15u) & ~(size_t)15u) +
                          (app.direct_input ? 0u : app.in_bytes) + stack_peak +
                          (app.model_uploaded ? ((app.model_bytes + 15u) & ~(size_t)15u) : 0u));
    snapuq_proto_kv_u(p, "model_bytes", app.model_bytes);
    snapuq_proto_kv_u(p, "model_in_ram", app.model_uploaded);
    snapuq_proto_kv_u(p, "model_struct", sizeof(snapuq_model_t));
    snapuq_proto_kv_u(p, "commands", p->n_commands_ok);
    snapuq_proto_kv_u(p, "errors", p->n_errors);
    snapuq_proto_endl(p);
}

static void load_done(snapuq_proto_t *p, int ok, uint32_t got)
{
    if (!ok) {
        app.have_input = 0u;
        return; /* the parser already sent e-crc / e-timeout */
    }
    if (!app.loaded) {
        (void)need_model(p);
        app.have_input = 0u;
        return;
    }
    if (got != app.in_bytes) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", got);
        snapuq_proto_kv_u(p, "want", app.in_bytes);
        p->n_errors++;
        snapuq_proto_endl(p);
        app.have_input = 0u;
        return;
    }
    app.have_input = 1u;
    app.have_result = 0u;
    snapuq_proto_puts(p, "m-load-done");
    snapuq_proto_kv_u(p, "bytes", got);
    snapuq_proto_puts(p, " crc=");
    snapuq_proto_put_hex32(p, p->bin_crc);
    snapuq_proto_endl(p);
}

/* load N CRC  -> N raw bytes follow the '%' */
static void cmd_load(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n, crc;
    (void)argc;
    if (snapuq_proto_parse_u32(argv[1], &n) != 0 || snapuq_proto_parse_u32(argv[2], &crc) != 0 ||
        n == 0u) {
        snapuq_proto_error(p, "args", "load N CRC32 (N > 0 raw bytes follow)");
        return;
    }
    /* A frame longer than the input buffer (or with no model, no buffer at all) is refused at once:
       none of it is consumed, so a damaged or absurd N (load 4294967295) never makes the board swallow
       bytes until its byte-gap timeout; what the sender sent after the command is junk to the text
       parser up to the next '%' (the host's resync). A shorter frame is received (and discarded)
       to stay in step with its sender, and its size error reported after it. */
    if (!need_model(p)) {
        return;
    }
    if (n > app.in_bytes) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", n);
        snapuq_proto_kv_u(p, "want", app.in_bytes);
        snapuq_proto_puts(p, " msg=\"frame longer than the input buffer; nothing received\"");
        p->n_errors++;
        snapuq_proto_endl(p);
        app.have_input = 0u;
        return;
    }
    if (n != app.in_bytes) {
        snapuq_proto_expect_binary(p, NULL, n, crc, load_done);
    } else {
        snapuq_proto_expect_binary(p, app.staging, n, crc, load_done);
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* MLPerf Tiny style: "db load N" then "db HEXBYTES" chunks until N bytes arrived. */
static void cmd_db(snapuq_proto_t *p, int argc, char **argv)
{
    const char *h;
    (void)argc;
    if (!need_model(p)) {
        return;
    }
    if (strcmp(argv[1], "load") == 0) {
        uint32_t n;
        if (argc != 3 || snapuq_proto_parse_u32(argv[2], &n) != 0 || n != app.in_bytes) {
            snapuq_proto_puts(p, "e-size");
            snapuq_proto_kv_u(p, "want", app.in_bytes);
            p->n_errors++;
            snapuq_proto_endl(p);
            return;
        }
        app.db_want = n;
        app.db_got = 0u;
        app.have_input = 0u;
        snapuq_proto_line(p, "m-load-ready");
        return;
    }
    if (argc != 2 || app.db_want == 0u) {
        snapuq_proto_error(p, "args", "db load N first, then db HEX");
        return;
    }
    for (h = argv[1]; h[0] != '\0'; h += 2) {
        int hi = hexval(h[0]);
        int lo = h[1] != '\0' ? hexval(h[1]) : -1;
        if (hi < 0 || lo < 0) {
            snapuq_proto_error(p, "hex", "odd length or non-hex digit");
            app.db_want = 0u;
            return;
        }
        if (app.db_got >= app.db_want) {
            snapuq_proto_error(p, "size", "more bytes than announced");
            app.db_want = 0u;
            return;
        }
        app.staging[app.db_got++] = (uint8_t)((hi << 4) | lo);
    }
    if (app.db_got == app.db_want) {
        app.db_want = 0u;
        app.have_input = 1u;
        app.have_result = 0u;
        snapuq_proto_puts(p, "m-load-done");
        snapuq_proto_kv_u(p, "bytes", app.db_got);
        snapuq_proto_endl(p);
    }
}

/* infer N W : W warm-up runs, then N timed runs on the loaded input */
static void cmd_infer(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n = 1u, w = 0u, i;
    uint64_t sum = 0u, sum_model = 0u, sum_snap = 0u, tmin = UINT64_MAX, tmax = 0u;
    snapuq_status_t st = SNAPUQ_OK;
    if (!need_model(p)) {
        return;
    }
    if ((argc > 1 && snapuq_proto_parse_u32(argv[1], &n) != 0) ||
        (argc > 2 && snapuq_proto_parse_u32(argv[2], &w) != 0) || n == 0u || n > 100000u ||
        w > 100000u) {
        snapuq_proto_error(p, "args", "infer [N>=1] [W]");
        return;
    }
    if (!app.have_input) {
        snapuq_proto_error(p, "no-input", "load an input first");
        return;
    }
    if (app.direct_input && (n != 1u || w != 0u)) {
        snapuq_proto_error(p, "args",
                           "direct-input build (the input tensor is the upload buffer): infer 1 0 per load");
        return;
    }
    (void)snapuq_model_set_profiler(&app.model, NULL, NULL);
    for (i = 0; i < w && st == SNAPUQ_OK; i++) {
        uint64_t a, b;
        st = run_once(&a, &b);
    }
    if (app.prof_on) {
        memset(app.op_ticks, 0, sizeof app.op_ticks);
        (void)snapuq_model_set_profiler(&app.model, profile_hook, NULL);
    }
#if SNAPUQ_APP_ENSEMBLE
    app.switch_ticks = 0u;
#endif
    snapuq_port_timestamp(1);
    for (i = 0; i < n && st == SNAPUQ_OK; i++) {
        uint64_t a, b;
        st = run_once(&a, &b);
        sum_model += a;
        sum_snap += b;
        sum += a + b;
        if (a + b < tmin) {
            tmin = a + b;
        }
        if (a + b > tmax) {
            tmax = a + b;
        }
    }
    snapuq_port_timestamp(0);
    (void)snapuq_model_set_profiler(&app.model, NULL, NULL);
    if (st != SNAPUQ_OK) {
        status_error(p, "infer", st);
        app.have_result = 0u;
        return;
    }
    app.have_result = 1u;
    if (app.direct_input) {
        app.have_input = 0u; /* the inference reused the input tensor's memory */
    }
    app.last_model_ticks = sum_model / n;
    app.last_snap_ticks = sum_snap / n;
#if SNAPUQ_APP_WITH_SNAP
    app.last_alarm = 0u;
    if (app.monitor_on && app.snap_ok) {
        (void)snapuq_monitor_push(&app.monitor, app.result.U16, &app.last_alarm);
    }
#endif
    snapuq_proto_puts(p, "m-infer");
    snapuq_proto_kv_u(p, "n", n);
    snapuq_proto_kv_u(p, "w", w);
    snapuq_proto_kv_u(p, "ticks", sum);
    snapuq_proto_kv_u(p, "model_ticks", sum_model);
    snapuq_proto_kv_u(p, "snap_ticks", sum_snap);
    snapuq_proto_kv_u(p, "ticks_min", tmin);
    snapuq_proto_kv_u(p, "ticks_max", tmax);
    snapuq_proto_kv_u(p, "hz", snapuq_port_counter_hz());
    snapuq_proto_kv_u(p, "prof", app.prof_on);
#if SNAPUQ_APP_ENSEMBLE
    snapuq_proto_kv_u(p, "switch_ticks", app.switch_ticks);
#endif
    snapuq_proto_endl(p);
}

static void cmd_results(snapuq_proto_t *p, int argc, char **argv)
{
    snapuq_tensor_info_t info;
    (void)argc;
    (void)argv;
    if (!need_model(p)) {
        return;
    }
    if (!app.have_result) {
        snapuq_proto_error(p, "no-result", "run infer first");
        return;
    }
    snapuq_proto_puts(p, "m-results");
#if SNAPUQ_APP_ENSEMBLE
    snapuq_proto_kv_i(p, "pred", app.ens_pred);
    snapuq_proto_kv_i32v(p, "psum", app.ens_sum, app.ens_classes);
    snapuq_proto_kv_u(p, "terms", app.ens_terms);
    snapuq_proto_endl(p);
    (void)info;
    return;
#endif
#if SNAPUQ_APP_WITH_SNAP
    if (app.snap_ok) {
        const snapuq_snap_result_t *r = &app.result;
        (void)snapuq_model_output_info(&app.model, (uint16_t)app.snap_cfg->out_logits, &info);
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
        if (app.monitor_on) {
            snapuq_proto_kv_u(p, "alarm", app.last_alarm);
        }
        snapuq_proto_endl(p);
        return;
    }
#endif
    (void)snapuq_model_output_info(&app.model, 0u, &info);
    snapuq_proto_kv_i8v(p, "logits", (const int8_t *)info.data, info.elements);
    snapuq_proto_endl(p);
}

/* every output tensor of the last inference: m-output idx=I name=NAME hex=... (int8 codes) */
static void cmd_outputs(snapuq_proto_t *p, int argc, char **argv)
{
    uint16_t i, n;
    (void)argc;
    (void)argv;
    if (!need_model(p)) {
        return;
    }
    if (!app.have_result) {
        snapuq_proto_error(p, "no-result", "run infer first");
        return;
    }
    n = snapuq_model_output_count(&app.model);
    for (i = 0; i < n; i++) {
        snapuq_tensor_info_t info;
        if (snapuq_model_output_info(&app.model, i, &info) != SNAPUQ_OK || info.data == NULL) {
            continue;
        }
        snapuq_proto_puts(p, "m-output");
        snapuq_proto_kv_u(p, "idx", i);
        snapuq_proto_kv_s(p, "name", info.name != NULL ? info.name : "?");
        snapuq_proto_kv_hex(p, "hex", (const uint8_t *)info.data, info.elements);
        snapuq_proto_endl(p);
    }
}

/* prof on|off|show : per-operator ticks of the last profiled infer */
static void cmd_prof(snapuq_proto_t *p, int argc, char **argv)
{
    uint16_t i, n;
    (void)argc;
    if (strcmp(argv[1], "on") == 0 || strcmp(argv[1], "off") == 0) {
        app.prof_on = (uint8_t)(argv[1][1] == 'n');
        snapuq_proto_puts(p, "m-prof");
        snapuq_proto_kv_u(p, "on", app.prof_on);
        snapuq_proto_endl(p);
        return;
    }
    if (strcmp(argv[1], "show") != 0) {
        snapuq_proto_error(p, "args", "prof on|off|show");
        return;
    }
    if (!need_model(p)) {
        return;
    }
    n = snapuq_model_op_count(&app.model);
    for (i = 0; i < n && i < SNAPUQ_MAX_OPS; i++) {
        int32_t code = -1;
        (void)snapuq_model_op_code(&app.model, i, &code);
        snapuq_proto_puts(p, "m-prof");
        snapuq_proto_kv_u(p, "op", i);
        snapuq_proto_kv_s(p, "code", snapuq_builtin_name(code));
        snapuq_proto_kv_u(p, "ticks", app.op_ticks[i]);
        snapuq_proto_endl(p);
    }
}

#if SNAPUQ_APP_WITH_SNAP
static void put_params(snapuq_proto_t *p)
{
    const snapuq_snap_params_t *q = &app.params;
    snapuq_proto_puts(p, "m-calib");
    snapuq_proto_kv_i32v(p, "w_q16", q->w_q16, app.snap_cfg->n_taps);
    snapuq_proto_kv_i(p, "hinge_q_q16", q->hinge_q_q16);
    snapuq_proto_kv_i(p, "hinge_m", q->hinge_m);
    snapuq_proto_kv_i(p, "hinge_n", q->hinge_n);
    snapuq_proto_kv_i(p, "b0_q16", q->b0_q16);
    snapuq_proto_kv_i(p, "b1_m", q->b1_m);
    snapuq_proto_kv_i(p, "b1_n", q->b1_n);
    snapuq_proto_kv_i(p, "b2_m", q->b2_m);
    snapuq_proto_kv_i(p, "b2_n", q->b2_n);
    snapuq_proto_kv_i(p, "u_threshold_q16", q->u_threshold_q16);
    snapuq_proto_kv_u(p, "samples", app.fit.count);
    snapuq_proto_kv_u(p, "welford_n", app.welford[0].n);
    snapuq_proto_endl(p);
}

static void calib_reset(void)
{
    uint8_t l;
    for (l = 0; l < SNAPUQ_MAX_TAPS; l++) {
        (void)snapuq_welford_init(&app.welford[l]);
    }
    (void)snapuq_fit_init(&app.fit, app.fit_buf, sizeof app.fit_buf);
}

/* calib reset | feed LABEL | fit [nonneg] | weights | default | show */
static void cmd_calib(snapuq_proto_t *p, int argc, char **argv)
{
    const char *sub = argv[1];
    if (!need_model(p)) {
        return;
    }
    if (!app.snap_ok) {
        snapuq_proto_error(p, "snap", "SNAP unavailable for this model");
        return;
    }
    if (strcmp(sub, "reset") == 0) {
        calib_reset();
    } else if (strcmp(sub, "default") == 0) {
        (void)snapuq_snap_params_init(app.snap_cfg, &app.params);
    } else if (strcmp(sub, "feed") == 0) {
        uint32_t label;
        float s, m;
        uint8_t l;
        if (argc != 3 || snapuq_proto_parse_u32(argv[2], &label) != 0) {
            snapuq_proto_error(p, "args", "calib feed LABEL");
            return;
        }
        if (!app.have_result) {
            snapuq_proto_error(p, "no-result", "run infer first");
            return;
        }
        for (l = 0; l < app.result.n_taps; l++) {
            (void)snapuq_welford_push(&app.welford[l], (float)app.result.ebar16[l] / 65536.0f);
        }
        (void)snapuq_snap_features(&app.result, &s, &m);
        (void)snapuq_fit_push(&app.fit, s, m, (uint32_t)app.result.pred != label);
    } else if (strcmp(sub, "fit") == 0) {
        snapuq_fit_options_t opt;
        float beta[3];
        uint16_t iters = 0;
        snapuq_status_t st;
        opt.max_iter = 25u;
        opt.l2 = 1e-3f;
        opt.tol = 1e-5f;
        opt.nonneg = (uint8_t)(argc == 3 && strcmp(argv[2], "nonneg") == 0);
        st = snapuq_fit_solve(&app.fit, &opt, beta, &iters);
        if (st != SNAPUQ_OK) {
            status_error(p, "calib-fit", st);
            return;
        }
        (void)snapuq_snap_set_beta(&app.params, beta);
        snapuq_proto_puts(p, "m-calib-fit");
        snapuq_proto_kv_u(p, "iters", iters);
        snapuq_proto_kv_i(p, "beta0_e6", (int64_t)(beta[0] * 1e6f));
        snapuq_proto_kv_i(p, "beta1_e6", (int64_t)(beta[1] * 1e6f));
        snapuq_proto_kv_i(p, "beta2_e6", (int64_t)(beta[2] * 1e6f));
        snapuq_proto_endl(p);
    } else if (strcmp(sub, "weights") == 0) {
        snapuq_status_t st =
            snapuq_snap_weights_from_welford(app.snap_cfg, app.welford, &app.params);
        if (st != SNAPUQ_OK) {
            status_error(p, "calib-weights", st);
            return;
        }
    } else if (strcmp(sub, "show") != 0) {
        snapuq_proto_error(p, "args", "calib reset|feed LABEL|fit [nonneg]|weights|default|show");
        return;
    }
    put_params(p);
}

/* monitor W THRESHOLD CUSUM_REF CUSUM_H | monitor off | monitor show */
static void cmd_monitor(snapuq_proto_t *p, int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "off") == 0) {
        app.monitor_on = 0u;
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
        st = snapuq_monitor_init(&app.monitor, app.monitor_ring, w, (int32_t)thr, (int32_t)ref, h);
        if (st != SNAPUQ_OK) {
            status_error(p, "monitor", st);
            return;
        }
        app.monitor_on = 1u;
    } else if (!(argc == 2 && strcmp(argv[1], "show") == 0)) {
        snapuq_proto_error(p, "args", "monitor W THRESHOLD CUSUM_REF CUSUM_H | off | show");
        return;
    }
    snapuq_proto_puts(p, "m-monitor");
    snapuq_proto_kv_u(p, "on", app.monitor_on);
    if (app.monitor_on) {
        snapuq_proto_kv_u(p, "seen", app.monitor.n_seen);
        snapuq_proto_kv_u(p, "first_alarm", app.monitor.first_alarm);
        snapuq_proto_kv_i(p, "cusum", app.monitor.cusum);
    }
    snapuq_proto_endl(p);
}
#endif

/* The upload at [off, off + n) of the pool (a .snapuq blob or a .tflite): its arena and staging
 * take the rest of the pool, on the side of it away from the pool's end it sits at. */
static void load_upload(size_t off, size_t n)
{
    const uint8_t *b = app.pool + off;
    size_t lo = off == 0u ? ALIGN16(n) : 0u;
    size_t hi = off == 0u ? app.pool_len : off;
#if SNAPUQ_APP_WITH_SNAP
    if (n >= 4u && memcmp(b, "SNUQ", 4) == 0) {
        load_blob(b, n, lo, hi);
        return;
    }
#endif
    load_model(b, n, lo, hi, 1u);
}

static void load_builtin(void)
{
    app.up_len = 0u;
#if SNAPUQ_APP_BUILTIN_MODEL
    load_model(SNAPUQ_APP_TFLITE, SNAPUQ_APP_TFLITE_LEN, 0u, app.pool_len, 0u);
#endif
}

/* A failed upload: the model loaded before it runs again. An uploaded one is loaded again from its
 * bytes when their CRC-32 still holds (the new model's arena may have been planned over them, see
 * cmd_model), else the compiled-in model. */
static void restore_kept(snapuq_proto_t *p)
{
    if (app.kept == KEPT_UPLOAD) {
        if (snapuq_crc32_update(0u, app.pool + app.up_off, app.up_len) == app.up_crc) {
            load_upload(app.up_off, app.up_len);
        }
        if (!app.loaded) {
            app.kept = KEPT_BUILTIN;
        }
    }
    if (app.kept == KEPT_BUILTIN && !app.loaded) {
        load_builtin();
    }
    if (app.loaded) {
        snapuq_proto_puts(p, "m-model-kept");
        snapuq_proto_kv_u(p, "builtin", (uint64_t)(app.up_len == 0u));
        snapuq_proto_kv_u(p, "bytes", app.model_bytes);
        snapuq_proto_endl(p);
    } else {
        app.up_len = 0u;
    }
}

static void model_done(snapuq_proto_t *p, int ok, uint32_t got)
{
    if (ok) {
        load_upload(app.rx_off, got);
        if (app.loaded) {
            app.up_off = app.rx_off;
            app.up_len = got;
            app.up_crc = p->bin_crc;
            snapuq_proto_puts(p, "m-model-loaded");
            snapuq_proto_kv_u(p, "bytes", got);
#if SNAPUQ_APP_WITH_SNAP
            snapuq_proto_kv_u(p, "snap", app.snap_ok);
#endif
            snapuq_proto_kv_u(p, "arena", app.arena_need);
            snapuq_proto_kv_u(p, "in_bytes", app.in_bytes);
            snapuq_proto_endl(p);
            return;
        }
    }
    restore_kept(p); /* the frame failed (e-crc / e-timeout) or the model did not load */
}

/* model N CRC + N raw bytes: a .tflite or .snapuq blob into the RAM pool; model builtin: back to
 * the compiled-in one.
 * The pool holds the upload and its arena + input staging. While an upload arrives the current
 * model stays: the compiled-in one lives in flash (its arena is planned again when the upload
 * fails), an uploaded one keeps its bytes at one end of the pool and the new upload goes to the
 * other end. So N may be the whole pool when the current model is the compiled-in one (or none),
 * and the pool less the kept upload otherwise (`model builtin` first frees it). A larger N is
 * refused at once (e-size max=ROOM), before any byte of the frame is consumed; else the device
 * says m-model-go (a line of this command's reply) and the host sends the N bytes only then. */
static void cmd_model(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n, crc;
    size_t room;
    if (argc == 2 && strcmp(argv[1], "builtin") == 0) {
#if SNAPUQ_APP_BUILTIN_MODEL
        load_builtin();
        if (app.loaded) {
            snapuq_proto_line(p, "m-model-loaded builtin=1");
        }
#else
        snapuq_proto_error(p, "no-model", "this build has no compiled-in model");
#endif
        return;
    }
    if (argc != 3 || snapuq_proto_parse_u32(argv[1], &n) != 0 ||
        snapuq_proto_parse_u32(argv[2], &crc) != 0 || n == 0u) {
        snapuq_proto_error(p, "args", "model N CRC32 (+ N raw bytes) | model builtin");
        return;
    }
    if (!app.loaded) {
        app.up_len = 0u;
    }
    room = app.up_len == 0u ? app.pool_len
           : (app.up_off == 0u ? app.pool_len - ALIGN16(app.up_len) : app.up_off);
    if (n > room) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", n);
        snapuq_proto_kv_u(p, "max", room);
        snapuq_proto_puts(p, app.up_len == 0u
                                 ? " msg=\"model larger than the RAM pool; nothing received\""
                                 : " msg=\"model larger than the RAM pool beside the uploaded model kept until the "
                                   "new one loads (model builtin frees it); nothing received\"");
        p->n_errors++;
        snapuq_proto_endl(p);
        return;
    }
    app.kept = !app.loaded ? KEPT_NONE : (app.up_len == 0u ? KEPT_BUILTIN : KEPT_UPLOAD);
    /* the kept upload at the pool's top: the new one at the bottom; else at the top */
    app.rx_off = (app.up_len != 0u && app.up_off != 0u) ? 0u : ((app.pool_len - n) & ~(size_t)15u);
    app.loaded = 0u;
    app.have_input = 0u;
    app.have_result = 0u;
    snapuq_proto_puts(p, "m-model-go");
    snapuq_proto_kv_u(p, "bytes", n);
    snapuq_proto_puts(p, " crc=");
    snapuq_proto_put_hex32(p, crc);
    snapuq_proto_kv_u(p, "max", room);
    snapuq_proto_endl(p);
    snapuq_proto_expect_binary(p, app.pool + app.rx_off, n, crc, model_done);
}

static void cmd_timeout(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t bin, text;
    (void)argc;
    if (snapuq_proto_parse_u32(argv[1], &bin) != 0 || snapuq_proto_parse_u32(argv[2], &text) != 0 ||
        bin == 0u || bin > 60000u || text > 600000u) {
        snapuq_proto_error(p, "args", "timeout BINARY_MS(1..60000) TEXT_MS(0..600000, 0 = none)");
        return;
    }
    p->binary_timeout_ms = bin;
    p->text_timeout_ms = text;
    snapuq_proto_puts(p, "m-timeout");
    snapuq_proto_kv_u(p, "binary_ms", bin);
    snapuq_proto_kv_u(p, "text_ms", text);
    snapuq_proto_endl(p);
}

static void cmd_reset(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_line(p, "m-reset");
    snapuq_port_reset();
}

static const snapuq_proto_command_t commands[] = {
    {"name", cmd_name, 0, 0, "-> m-name-snapuq-BOARD"},
    {"profile", cmd_profile, 0, 0, "-> m-profile key=value..."},
    {"stats", cmd_stats, 0, 0, "-> m-stats flash= ram_static= arena= stack_peak= ..."},
    {"load", cmd_load, 2, 2, "N CRC32 + N raw bytes: input tensor (int8)"},
    {"db", cmd_db, 1, 2, "load N | HEX: input tensor as hex text (MLPerf style)"},
    {"infer", cmd_infer, 0, 2, "[N] [W]: W warm-up + N timed inferences"},
    {"results", cmd_results, 0, 0, "-> m-results pred= logits= ebar= z= s= sf= m= u= flag="},
    {"outputs", cmd_outputs, 0, 0, "-> m-output idx= name= hex= (every output tensor)"},
    {"prof", cmd_prof, 1, 1, "on|off|show: per-operator ticks"},
#if SNAPUQ_APP_WITH_SNAP
    {"calib", cmd_calib, 1, 2, "reset|feed LABEL|fit [nonneg]|weights|default|show"},
    {"monitor", cmd_monitor, 1, 4, "W THRESHOLD CUSUM_REF CUSUM_H | off | show"},
#endif
    {"model", cmd_model, 1, 2, "N CRC32 + N raw bytes (.tflite or .snapuq blob into RAM) | builtin"},
    {"timeout", cmd_timeout, 2, 2, "BINARY_MS TEXT_MS"},
    {"reset", cmd_reset, 0, 0, "reset the board"},
};

void snapuq_app_init(void)
{
    memset(&app, 0, sizeof app);
    snapuq_proto_init(&proto, commands, sizeof commands / sizeof commands[0], port_write, NULL, &app);
    app.pool = snapuq_port_pool(&app.pool_len);
#if SNAPUQ_APP_WITH_SNAP
    calib_reset();
#endif
#if SNAPUQ_APP_ENSEMBLE
    ens_prepare();
#endif
    load_builtin();
    snapuq_proto_puts(&proto, "m-boot");
    snapuq_proto_kv_s(&proto, "fw", "snapuq");
    snapuq_proto_kv_s(&proto, "board", snapuq_port_board());
    snapuq_proto_kv_s(&proto, "clock", snapuq_port_clock());
    snapuq_proto_kv_s(&proto, "model", SNAPUQ_APP_MODEL_NAME);
    snapuq_proto_kv_u(&proto, "loaded", app.loaded);
    snapuq_proto_endl(&proto);
    snapuq_proto_ready(&proto);
}

void snapuq_app_feed(uint8_t byte)
{
    snapuq_proto_feed(&proto, byte, snapuq_port_millis());
}

void snapuq_app_poll(void)
{
    snapuq_proto_poll(&proto, snapuq_port_millis());
}
