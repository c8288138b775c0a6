/*
 * snapuq_app_lifecycle.c - the model the harness firmware runs: the compiled-in one or an upload
 * (its bytes in the RAM pool), the pool planned as [arena | input staging], and the commands that run
 * it and read what it computed (infer, results, outputs). What differs between images (SNAP, the
 * ensemble) is the runner's (snapuq_app_internal.h).
 */
#include <string.h>

#include "../port/snapuq_port.h"
#include "snapuq_app_internal.h"
#include "snapuq_sha256.h"

static void profile_hook(void *ctx, uint16_t op, int32_t code, int begin)
{
    (void)ctx;
    (void)code;
    if (begin) {
        snapuq_app.prof_t0 = snapuq_port_counter();
    } else if (op < SNAPUQ_MAX_OPS) {
        snapuq_app.op_ticks[op] += snapuq_port_counter() - snapuq_app.prof_t0;
    }
}

/* Plan the part [lo, hi) of the pool as [arena | input staging]. The compiled-in model (in flash)
 * gets the whole pool; an uploaded model's bytes lie at one end of the pool and [lo, hi) is the
 * rest (see cmd_model). */
void snapuq_app_load_model(const uint8_t *tflite, size_t len, size_t lo, size_t hi, uint8_t uploaded)
{
    snapuq_proto_t *p = &snapuq_app_proto;
    snapuq_status_t st;
    snapuq_tensor_info_t info;
    size_t off;
    uint8_t *arena = snapuq_app.pool + lo;
    snapuq_app.loaded = 0u;
    snapuq_app.model_bytes = len;
    snapuq_app.model_uploaded = uploaded;
    snapuq_sha256_hex(tflite, len, snapuq_app.model_sha256);
    snapuq_app.snap_sha256[0] = '\0';
    snapuq_app.have_input = 0u;
    snapuq_app.have_result = 0u;
    st = snapuq_model_init(&snapuq_app.model, tflite, len);
    if (st != SNAPUQ_OK) {
        snapuq_app_status_error(p, "model", st);
        return;
    }
    (void)snapuq_model_arena_size(&snapuq_app.model, &snapuq_app.arena_need);
    snapuq_app.arena_need = snapuq_app_run_arena(snapuq_app.arena_need, uploaded);
    (void)snapuq_model_arena_breakdown(&snapuq_app.model, &snapuq_app.arena_persist,
                                       &snapuq_app.arena_act, &snapuq_app.arena_act_noreuse);
    if (snapuq_model_input_count(&snapuq_app.model) != 1u) {
        snapuq_proto_error(p, "model", "needs exactly one input");
        return;
    }
    (void)snapuq_model_input_info(&snapuq_app.model, 0u, &info);
    snapuq_app.in_index = 0u;
    snapuq_app.in_bytes = info.bytes;
    off = lo + SNAPUQ_APP_ALIGN16(snapuq_app.arena_need);
    /* Without room for a staging copy of the input (and for single models only: ensemble members
       share the arena and need the input kept), the input tensor itself is the upload buffer. */
    snapuq_app.direct_input =
        (uint8_t)(lo <= hi && off + snapuq_app.in_bytes > hi && off <= hi && !SNAPUQ_APP_ENSEMBLE);
    if (lo > hi || off + (snapuq_app.direct_input ? 0u : snapuq_app.in_bytes) > hi) {
        /* need: the pool bytes this model takes (its own bytes when uploaded, arena, staging) */
        snapuq_proto_puts(p, "e-arena need=");
        snapuq_proto_put_u64(p, (uint64_t)(lo + (snapuq_app.pool_len - hi) +
                                           SNAPUQ_APP_ALIGN16(snapuq_app.arena_need) + snapuq_app.in_bytes));
        snapuq_proto_puts(p, " have=");
        snapuq_proto_put_u64(p, (uint64_t)snapuq_app.pool_len);
        snapuq_proto_puts(p, " msg=\"model does not fit the board's RAM budget\"");
        p->n_errors++;
        snapuq_proto_endl(p);
        return;
    }
    st = snapuq_model_set_arena(&snapuq_app.model, arena, snapuq_app.arena_need);
    if (st != SNAPUQ_OK) {
        snapuq_app_status_error(p, "arena", st);
        return;
    }
    snapuq_app.staging = snapuq_app.pool + off;
    if (snapuq_app.direct_input) {
        (void)snapuq_model_input_info(&snapuq_app.model, 0u, &info);
        snapuq_app.staging = (uint8_t *)info.data;
    }
    snapuq_app.loaded = 1u;
    snapuq_app_run_loaded();
}

/* The upload at [off, off + n) of the pool (a .snapuq blob or a .tflite): its arena and staging
 * take the rest of the pool, on the side of it away from the pool's end it sits at. */
void snapuq_app_load_upload(size_t off, size_t n)
{
    const uint8_t *b = snapuq_app.pool + off;
    size_t lo = off == 0u ? SNAPUQ_APP_ALIGN16(n) : 0u;
    size_t hi = off == 0u ? snapuq_app.pool_len : off;
    if (!snapuq_app_run_open(b, n, lo, hi)) {
        snapuq_app_load_model(b, n, lo, hi, 1u);
    }
}

void snapuq_app_load_builtin(void)
{
    snapuq_app.up_len = 0u;
    if (SNAPUQ_APP_BUILTIN_MODEL) {
        snapuq_app_load_model(SNAPUQ_APP_TFLITE, SNAPUQ_APP_TFLITE_LEN, 0u, snapuq_app.pool_len, 0u);
    }
}

/* infer N W : W warm-up runs, then N timed runs on the loaded input */
void snapuq_app_cmd_infer(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n = 1u, w = 0u, i;
    uint64_t sum = 0u, sum_model = 0u, sum_snap = 0u, tmin = UINT64_MAX, tmax = 0u;
    snapuq_status_t st = SNAPUQ_OK;
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if ((argc > 1 && snapuq_proto_parse_u32(argv[1], &n) != 0) ||
        (argc > 2 && snapuq_proto_parse_u32(argv[2], &w) != 0) || n == 0u || n > 100000u ||
        w > 100000u) {
        snapuq_proto_error(p, "args", "infer [N>=1] [W]");
        return;
    }
    if (!snapuq_app.have_input) {
        snapuq_proto_error(p, "no-input", "load an input first");
        return;
    }
    if (snapuq_app.direct_input && (n != 1u || w != 0u)) {
        snapuq_proto_error(p, "args",
                           "direct-input build (the input tensor is the upload buffer): infer 1 0 per load");
        return;
    }
    (void)snapuq_model_set_profiler(&snapuq_app.model, NULL, NULL);
    for (i = 0; i < w && st == SNAPUQ_OK; i++) {
        uint64_t a, b;
        st = snapuq_app_run_once(&a, &b);
    }
    if (snapuq_app.prof_on) {
        memset(snapuq_app.op_ticks, 0, sizeof snapuq_app.op_ticks);
        (void)snapuq_model_set_profiler(&snapuq_app.model, profile_hook, NULL);
    }
    snapuq_app_run_timed_begin();
    snapuq_port_timestamp(1);
    for (i = 0; i < n && st == SNAPUQ_OK; i++) {
        uint64_t a, b;
        st = snapuq_app_run_once(&a, &b);
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
    (void)snapuq_model_set_profiler(&snapuq_app.model, NULL, NULL);
    if (st != SNAPUQ_OK) {
        snapuq_app_status_error(p, "infer", st);
        snapuq_app.have_result = 0u;
        return;
    }
    snapuq_app.have_result = 1u;
    if (snapuq_app.direct_input) {
        snapuq_app.have_input = 0u; /* the inference reused the input tensor's memory */
    }
    snapuq_app.last_model_ticks = sum_model / n;
    snapuq_app.last_snap_ticks = sum_snap / n;
    snapuq_app_run_timed_end();
    snapuq_proto_puts(p, "m-infer");
    snapuq_proto_kv_u(p, "n", n);
    snapuq_proto_kv_u(p, "w", w);
    snapuq_proto_kv_u(p, "ticks", sum);
    snapuq_proto_kv_u(p, "model_ticks", sum_model);
    snapuq_proto_kv_u(p, "snap_ticks", sum_snap);
    snapuq_proto_kv_u(p, "ticks_min", tmin);
    snapuq_proto_kv_u(p, "ticks_max", tmax);
    snapuq_proto_kv_u(p, "hz", snapuq_port_counter_hz());
    snapuq_proto_kv_u(p, "prof", snapuq_app.prof_on);
    snapuq_app_run_infer_kv(p);
    snapuq_proto_endl(p);
}

void snapuq_app_cmd_results(snapuq_proto_t *p, int argc, char **argv)
{
    snapuq_tensor_info_t info;
    (void)argc;
    (void)argv;
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if (!snapuq_app.have_result) {
        snapuq_proto_error(p, "no-result", "run infer first");
        return;
    }
    snapuq_proto_puts(p, "m-results");
    if (snapuq_app_run_results(p)) {
        snapuq_proto_endl(p);
        return;
    }
    (void)snapuq_model_output_info(&snapuq_app.model, 0u, &info);
    snapuq_proto_kv_i8v(p, "logits", (const int8_t *)info.data, info.elements);
    snapuq_proto_endl(p);
}

/* every output tensor of the last inference: m-output idx=I name=NAME hex=... (int8 codes) */
void snapuq_app_cmd_outputs(snapuq_proto_t *p, int argc, char **argv)
{
    uint16_t i, n;
    (void)argc;
    (void)argv;
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if (!snapuq_app.have_result) {
        snapuq_proto_error(p, "no-result", "run infer first");
        return;
    }
    n = snapuq_model_output_count(&snapuq_app.model);
    for (i = 0; i < n; i++) {
        snapuq_tensor_info_t info;
        if (snapuq_model_output_info(&snapuq_app.model, i, &info) != SNAPUQ_OK || info.data == NULL) {
            continue;
        }
        snapuq_proto_puts(p, "m-output");
        snapuq_proto_kv_u(p, "idx", i);
        snapuq_proto_kv_s(p, "name", info.name != NULL ? info.name : "?");
        snapuq_proto_kv_hex(p, "hex", (const uint8_t *)info.data, info.elements);
        snapuq_proto_endl(p);
    }
}
