/*
 * run_snap.c - host test driver for the SNAP core (built by tests/host/test_c_snap.py).
 *
 *   run_snap score MODEL.snapuq RECORDS.bin OUT.bin integer scoring, FIXED_POINT.md v2
 *   run_snap fit SAMPLES.bin                        logistic fit; prints JSON
 *   run_snap welford VALUES.bin                     Welford over float32 values (one tap per
 *                                                   column: first int32 = taps); prints JSON
 *   run_snap monitor STREAM.bin                     drift monitor; prints JSON
 *
 * MODEL.snapuq: a model blob (docs/BLOB.md); the SNAP constants come from the core's blob reader
 *   (snapuq_blob_open, snapuq_model_init, snapuq_blob_snap_config), as on a device.
 * RECORDS.bin: int32 N, then N records of int8: logits[C], probs[C], per tap a[d] mu[d] logvar[d].
 * OUT.bin: per record int32: ebar16[n_taps], s16[n_taps], S16, F16, m16, P16, A16, Z16, U16, pred,
 *   flag.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapuq_blob.h"
#include "snapuq_runtime.h"
#include "snapuq_snap.h"

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

typedef struct {
    const unsigned char *p;
    size_t left;
} rd_t;

static int32_t next_i32(rd_t *r)
{
    int32_t v;
    if (r->left < 4) {
        fprintf(stderr, "error: short file\n");
        exit(65);
    }
    memcpy(&v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return v;
}

static float next_f32(rd_t *r)
{
    int32_t v = next_i32(r);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

static snapuq_model_t g_model;

static int do_score(const char *blob_path, const char *rec_path, const char *out_path)
{
    size_t len;
    unsigned char *blob = read_file(blob_path, &len), *recb;
    rd_t r;
    snapuq_blob_t b;
    snapuq_snap_config_t cfg;
    snapuq_snap_params_t params;
    char why[SNAPUQ_ERROR_LEN] = "";
    int32_t i, k, n;
    FILE *fo;
    if (blob == NULL) {
        return 66;
    }
    if (snapuq_blob_open(&b, blob, len, why, sizeof why) != SNAPUQ_OK ||
        snapuq_model_init(&g_model, b.tflite, b.tflite_len) != SNAPUQ_OK ||
        snapuq_blob_snap_config(&b, &g_model, &cfg, why, sizeof why) != SNAPUQ_OK ||
        snapuq_snap_params_init(&cfg, &params) != SNAPUQ_OK) {
        fprintf(stderr, "error: bad blob: %s %s\n", why, snapuq_model_error(&g_model));
        return 3;
    }
    recb = read_file(rec_path, &len);
    if (recb == NULL) {
        return 66;
    }
    r.p = recb;
    r.left = len;
    n = next_i32(&r);
    fo = fopen(out_path, "wb");
    for (i = 0; i < n; i++) {
        snapuq_snap_inputs_t in;
        snapuq_snap_result_t res;
        const int8_t *p = (const int8_t *)r.p;
        int32_t row[2 * SNAPUQ_MAX_TAPS + 9];
        int32_t m = 0;
        snapuq_status_t st;
        memset(&in, 0, sizeof in);
        in.logits = p;
        p += cfg.n_classes;
        in.probs = p;
        p += cfg.n_classes;
        for (k = 0; k < cfg.n_taps; k++) {
            in.a[k] = p;
            p += cfg.taps[k].d;
            in.mu[k] = p;
            p += cfg.taps[k].d;
            in.logvar[k] = p;
            p += cfg.taps[k].d;
        }
        if (cfg.has_intap) { /* the record's input codes follow its outputs */
            const size_t nx = (size_t)cfg.intap.rows * cfg.intap.cols;
            if ((size_t)((const unsigned char *)p - r.p) + nx > r.left ||
                snapuq_snap_input_tap(&cfg, p, nx, &in.s_in16) != SNAPUQ_OK) {
                fprintf(stderr, "error: short records\n");
                return 65;
            }
            p += nx;
        }
        if ((size_t)((const unsigned char *)p - r.p) > r.left) {
            fprintf(stderr, "error: short records\n");
            return 65;
        }
        r.left -= (size_t)((const unsigned char *)p - r.p);
        r.p = (const unsigned char *)p;
        st = snapuq_snap_score(&cfg, &params, &in, &res);
        if (st != SNAPUQ_OK) {
            fprintf(stderr, "error: score: %s\n", snapuq_status_str(st));
            return 4;
        }
        for (k = 0; k < cfg.n_taps; k++) {
            row[m++] = res.ebar16[k];
        }
        for (k = 0; k < cfg.n_taps; k++) {
            row[m++] = res.s16[k];
        }
        row[m++] = res.S16;
        row[m++] = res.F16;
        row[m++] = res.m16;
        row[m++] = res.P16;
        row[m++] = res.A16;
        row[m++] = res.Z16;
        row[m++] = res.U16;
        row[m++] = res.pred;
        row[m++] = res.flag;
        fwrite(row, sizeof(int32_t), (size_t)m, fo);
    }
    fclose(fo);
    free(recb);
    free(blob);
    return 0;
}

/* SAMPLES.bin: int32 N, uint16 max_iter (as int32), float l2, float tol, int32 nonneg, then N x
 * (float s, float m, int32 y). Prints {"status", "beta": [...], "iters", "beta_q": [...]} */
static int do_fit(const char *path)
{
    size_t len;
    unsigned char *b = read_file(path, &len);
    rd_t r;
    int32_t n, i;
    snapuq_fit_options_t opt;
    snapuq_fit_t fit;
    void *buf;
    float beta[3] = {0, 0, 0};
    uint16_t iters = 0;
    snapuq_status_t st;
    snapuq_snap_params_t p;
    if (b == NULL) {
        return 66;
    }
    r.p = b;
    r.left = len;
    n = next_i32(&r);
    opt.max_iter = (uint16_t)next_i32(&r);
    opt.l2 = next_f32(&r);
    opt.tol = next_f32(&r);
    opt.nonneg = (uint8_t)next_i32(&r);
    buf = malloc(snapuq_fit_buffer_size((uint32_t)n));
    if (snapuq_fit_init(&fit, buf, snapuq_fit_buffer_size((uint32_t)n)) != SNAPUQ_OK) {
        return 3;
    }
    for (i = 0; i < n; i++) {
        const float s = next_f32(&r), m = next_f32(&r);
        const int32_t y = next_i32(&r);
        if (snapuq_fit_push(&fit, s, m, y) != SNAPUQ_OK) {
            return 4;
        }
    }
    st = snapuq_fit_solve(&fit, &opt, beta, &iters);
    memset(&p, 0, sizeof p);
    printf("{\"status\": \"%s\", \"beta\": [%.9g, %.9g, %.9g], \"iters\": %u", snapuq_status_str(st),
           (double)beta[0], (double)beta[1], (double)beta[2], (unsigned)iters);
    if (snapuq_snap_set_beta(&p, beta) == SNAPUQ_OK) {
        printf(", \"beta_q\": [%ld, %ld, %ld, %ld, %ld]", (long)p.b0_q16, (long)p.b1_m, (long)p.b1_n,
               (long)p.b2_m, (long)p.b2_n);
    }
    printf("}\n");
    free(buf);
    free(b);
    return 0;
}

/* VALUES.bin: int32 taps, int32 N, then N rows of taps float32. Prints mean/var per tap and
 * the inverse-variance weights. */
static int do_welford(const char *path)
{
    size_t len;
    unsigned char *b = read_file(path, &len);
    rd_t r;
    int32_t taps, n, i, k;
    snapuq_welford_t w[SNAPUQ_MAX_TAPS];
    snapuq_snap_config_t cfg;
    snapuq_snap_params_t p;
    snapuq_status_t st;
    if (b == NULL) {
        return 66;
    }
    r.p = b;
    r.left = len;
    taps = next_i32(&r);
    n = next_i32(&r);
    if (taps < 1 || taps > SNAPUQ_MAX_TAPS) {
        return 65;
    }
    for (k = 0; k < taps; k++) {
        snapuq_welford_init(&w[k]);
    }
    for (i = 0; i < n; i++) {
        for (k = 0; k < taps; k++) {
            snapuq_welford_push(&w[k], next_f32(&r));
        }
    }
    memset(&cfg, 0, sizeof cfg);
    memset(&p, 0, sizeof p);
    cfg.n_taps = (uint8_t)taps;
    st = snapuq_snap_weights_from_welford(&cfg, w, &p);
    printf("{\"status\": \"%s\", \"mean\": [", snapuq_status_str(st));
    for (k = 0; k < taps; k++) {
        printf("%s%.9g", k ? ", " : "", (double)w[k].mean);
    }
    printf("], \"var\": [");
    for (k = 0; k < taps; k++) {
        float v = 0.0f;
        snapuq_welford_variance(&w[k], &v);
        printf("%s%.9g", k ? ", " : "", (double)v);
    }
    printf("], \"w_q16\": [");
    for (k = 0; k < taps; k++) {
        printf("%s%ld", k ? ", " : "", (long)p.w_q16[k]);
    }
    printf("]}\n");
    free(b);
    return 0;
}

/* STREAM.bin: int32 window, threshold, ref, h, N, then N int32 U16 values.
 * Prints the per-step alarm bits as a string and the first alarm index. */
static int do_monitor(const char *path)
{
    size_t len;
    unsigned char *b = read_file(path, &len);
    rd_t r;
    int32_t window, thr, ref, h, n, i;
    int32_t *ring, *vals;
    snapuq_monitor_t mon;
    int32_t q;
    if (b == NULL) {
        return 66;
    }
    r.p = b;
    r.left = len;
    window = next_i32(&r);
    thr = next_i32(&r);
    ref = next_i32(&r);
    h = next_i32(&r);
    n = next_i32(&r);
    ring = (int32_t *)malloc(sizeof(int32_t) * (size_t)window);
    vals = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (snapuq_monitor_init(&mon, ring, (uint32_t)window, thr, ref, h) != SNAPUQ_OK) {
        return 3;
    }
    printf("{\"alarms\": \"");
    for (i = 0; i < n; i++) {
        uint8_t al = 0;
        vals[i] = next_i32(&r);
        snapuq_monitor_push(&mon, vals[i], &al);
        printf("%u", (unsigned)al);
    }
    printf("\", \"first_alarm\": %lu", (unsigned long)mon.first_alarm);
    if (n > 0 && snapuq_quantile_i32(vals, (uint32_t)n, 990, &q) == SNAPUQ_OK) {
        printf(", \"q990\": %ld", (long)q);
    }
    printf("}\n");
    free(ring);
    free(vals);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "score") == 0) {
        return do_score(argv[2], argv[3], argv[4]);
    }
    if (argc == 3 && strcmp(argv[1], "fit") == 0) {
        return do_fit(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "welford") == 0) {
        return do_welford(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "monitor") == 0) {
        return do_monitor(argv[2]);
    }
    fprintf(stderr, "usage: run_snap score|fit|welford|monitor ...\n");
    return 64;
}
