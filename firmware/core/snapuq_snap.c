/*
 * snapuq_snap.c - SNAP-UQ scoring, integer only (docs/FIXED_POINT.md v2): config checks, the
 * per-tap surprisal and aggregation (steps 1-7), the two combines of step 8 (perr_alarm,
 * logistic) and scoring straight from a model's outputs.
 *
 * The rest of snapuq_snap.h: on-device calibration in snapuq_snap_calib.c, the drift monitor
 * and quantiles in snapuq_snap_monitor.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_runtime.h"
#include "snapuq_simd.h"
#include "snapuq_snap.h"

#define T_MAX ((int64_t)16777215)
#define CAP31 ((int64_t)2147483647)
#define CAP30 ((int64_t)1073741823)
#define Z_CLAMP ((int64_t)1048575)

/* mul_shift(x, M, n) of the spec: x*M, rounded half up by 2^n (arithmetic shift) */
static int64_t mul_shift(int64_t x, int32_t m, int32_t n)
{
    const int64_t p = x * (int64_t)m;
    if (n == 0) {
        return p;
    }
    return (p + ((int64_t)1 << (n - 1))) >> n;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t abs64(int64_t a)
{
    return a < 0 ? -a : a;
}

/* the one-line messages of the checks (snapuq_status.h): written only on failure, msg may be NULL */
#define FAIL(text) snapuq_message(msg, msg_len, SNAPUQ_ERR_ARG, "SNAP config: " text)
#define FAIL_PARAMS(text) snapuq_message(msg, msg_len, SNAPUQ_ERR_ARG, "SNAP parameters: " text)

static snapuq_status_t check_core(const snapuq_snap_config_t *cfg, char *msg, size_t msg_len)
{
    uint8_t l;
    if (cfg == NULL) {
        return FAIL("NULL");
    }
    if (cfg->spec_version < 1 || cfg->spec_version > SNAPUQ_SNAP_SPEC_VERSION) {
        return FAIL("fixed-point spec version not supported");
    }
    if (cfg->n_taps < 1 || cfg->n_taps > SNAPUQ_MAX_TAPS) {
        return FAIL("tap count outside 1..SNAPUQ_MAX_TAPS");
    }
    if (cfg->n_classes < 2) {
        return FAIL("fewer than 2 classes");
    }
    if (cfg->conf_a_q16 < 0 || cfg->conf_a_q16 > 65536) {
        return FAIL("conf a_q16 outside 0..65536");
    }
    if (cfg->variant > SNAPUQ_SNAP_LITERAL || cfg->combine > SNAPUQ_COMBINE_PERR_ALARM) {
        return FAIL("unknown variant or combine");
    }
    if (cfg->sigmoid_lut == NULL || (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM && cfg->perr_lut == NULL)) {
        return FAIL("sigmoid or p_err LUT missing");
    }

    if (cfg->has_intap) {
        const snapuq_snap_intap_t *it = &cfg->intap;
        const uint32_t rows = it->rows, cols = it->cols;
        const uint32_t j = cols + rows + (rows > 1 ? cols : 0) + (cols > 1 ? rows : 0);
        if (rows < 1 || cols < 1 || it->n_feat != j || j > 16384 || it->g_m == NULL || it->g_n == NULL ||
            it->h_q12 == NULL) {
            return FAIL("input tap rows, cols, n_feat or tables do not fit");
        }
        if (it->p_n < 0 || it->p_n > 62 || it->w_q16 < 0 || it->w_q16 >= (1 << 30)) {
            return FAIL("input tap p_n outside 0..62 or w_q16 outside [0, 2^30)");
        }
    }
    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        if (t->d < 1 || t->d > 16384 || t->inv_sigma_lut == NULL) {
            return FAIL("tap size d outside 1..16384 or its LUT missing");
        }
        if (t->lut_shift < 0 || t->lut_shift > 62 || t->p_n < 0 || t->p_n > 62 || t->q_n < 0 || t->q_n > 62) {
            return FAIL("tap lut_shift, p_n or q_n outside 0..62");
        }
        if (t->k_a < 0 || t->k_a > (1 << 20) || t->k_mu < 0 || t->k_mu > (1 << 20)) {
            return FAIL("tap k_a or k_mu outside 0..2^20");
        }
    }
    return SNAPUQ_OK;
}

/* what snapuq_snap_score_model checks on every call (its cost is part of the measured score) */
static snapuq_status_t check_tables(const snapuq_snap_config_t *cfg, char *msg, size_t msg_len)
{
    uint16_t k;
    snapuq_status_t st;
    if ((st = check_core(cfg, msg, msg_len)) != SNAPUQ_OK) {
        return st;
    }
    if (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM) {
        for (k = 0; k < SNAPUQ_PERR_LUT_LEN; k++) {
            if (cfg->perr_lut[k] < 0 || cfg->perr_lut[k] > 65536) {
                return FAIL("p_err LUT entry outside 0..65536");
            }
        }
    }
    /* the input tap's per-statistic shifts: once here (at load), not in every score's check_core */
    for (k = 0; cfg->has_intap && k < cfg->intap.n_feat; k++) {
        if (cfg->intap.g_n[k] < 0 || cfg->intap.g_n[k] > 62) {
            return FAIL("input tap g_n shift outside 0..62");
        }
    }
    return SNAPUQ_OK;
}

static int zero_point_ok(int32_t z)
{
    return z >= -128 && z <= 127;
}

snapuq_status_t snapuq_snap_check(const snapuq_snap_config_t *cfg, char *msg, size_t msg_len)
{
    uint16_t k;
    uint8_t l;
    snapuq_status_t st;
    (void)snapuq_message(msg, msg_len, SNAPUQ_OK, "");
    if ((st = check_tables(cfg, msg, msg_len)) != SNAPUQ_OK) {
        return st;
    }
    /* Once, at load: what the score's arithmetic relies on without checking it on every call (the
     * int8 zero points keep (q - z) * k and the logvar sum in int32; L in [0, 2^30) keeps t >= 0 and
     * t * t in int64; a sigmoid table in 0..65536 keeps U in 0..65536), and the default calibration
     * parameters, which snapuq_snap_score would otherwise refuse on every inference. */
    if (cfg->has_intap && !zero_point_ok(cfg->intap.z_x)) {
        return FAIL("input tap zero point outside int8");
    }
    for (k = 0; k < SNAPUQ_SIGMOID_LUT_LEN; k++) {
        if (cfg->sigmoid_lut[k] < 0 || cfg->sigmoid_lut[k] > 65536) {
            return FAIL("sigmoid LUT entry outside 0..65536");
        }
    }
    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        if (!zero_point_ok(t->z_a) || !zero_point_ok(t->z_mu) || !zero_point_ok(t->z_v)) {
            return FAIL("tap zero point outside int8");
        }
        for (k = 0; k < SNAPUQ_SNAP_LUT_LEN; k++) {
            if (t->inv_sigma_lut[k] < 0 || t->inv_sigma_lut[k] >= (1 << 30)) {
                return FAIL("inverse-sigma LUT entry outside [0, 2^30)");
            }
        }
    }
    return snapuq_snap_params_check(cfg, &cfg->defaults, msg, msg_len);
}

snapuq_status_t snapuq_snap_params_init(const snapuq_snap_config_t *cfg, snapuq_snap_params_t *params)
{
    if (cfg == NULL || params == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *params = cfg->defaults;
    return SNAPUQ_OK;
}

static int32_t clamp_u16p(int32_t v)
{
    return v < 0 ? 0 : (v > 65536 ? 65536 : v);
}

snapuq_status_t snapuq_snap_params_check(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *p,
                                         char *msg, size_t msg_len)
{
    uint8_t l;
    if (cfg == NULL || p == NULL || cfg->n_taps > SNAPUQ_MAX_TAPS) {
        return FAIL_PARAMS("NULL or a config with too many taps");
    }
    for (l = 0; l < cfg->n_taps; l++) {
        if (p->w_q16[l] < 0 || p->w_q16[l] >= (1 << 30)) {
            return FAIL_PARAMS("tap weight w_q16 outside [0, 2^30)");
        }
    }
    if (p->hinge_n < 0 || p->hinge_n > 62 || p->b1_n < 0 || p->b1_n > 62 || p->b2_n < 0 || p->b2_n > 62) {
        return FAIL_PARAMS("hinge_n, b1_n or b2_n outside 0..62");
    }
    /* hinge_m >= 0: F = max(0, (S - q) / sd) stays >= 0 (perr_alarm divides by F + k) */
    if (cfg->hinge && p->hinge_m < 0) {
        return FAIL_PARAMS("hinge_m below 0");
    }
    if (p->alarm_k_q16 < 0 || (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM && p->alarm_k_q16 < 1)) {
        return FAIL_PARAMS("alarm_k_q16 below 1 (perr_alarm) or below 0");
    }
    return SNAPUQ_OK;
}

/* step 4b, the input tap: one standardized squared residual per row / column statistic */
static uint64_t intap_sq_wide(const snapuq_snap_intap_t *it, int32_t v, uint32_t j)
{
    const int64_t z = mul_shift(v, it->g_m[j], it->g_n[j]) - it->h_q12[j];
    const int64_t zc = z > T_MAX ? T_MAX : (z < -T_MAX ? -T_MAX : z);
    return (uint64_t)(zc * zc);
}

/* intap_sq_wide in 32-bit halves for g_n in 2..32: q = p >> (n - 1), then (q + 1) >> 1 = (q >> 1) + (q & 1),
 * when q fits in int32 (|p| < 2^55: it does unless the statistic is far out) and so does h (then the
 * difference does: |q >> 1| < 2^30); anything else takes the 64-bit form */
static inline uint64_t intap_sq(const snapuq_snap_intap_t *it, int32_t v, uint32_t j)
{
    const int32_t n = it->g_n[j], h = it->h_q12[j];
    if (n >= 2 && n <= 32 && (uint32_t)h + 0x40000000u < 0x80000000u) {
        const int64_t p = (int64_t)v * it->g_m[j];
        const uint32_t lo = (uint32_t)p, e = (uint32_t)n - 1u;
        const int32_t hi = (int32_t)(p >> 32); /* arithmetic shifts on every supported compiler */
        const int32_t q = (int32_t)((lo >> e) | ((uint32_t)hi << (32u - e)));
        if ((hi >> e) == (q >> 31)) {
            const int32_t z = (q >> 1) + (q & 1) - h;
            const int32_t zc = z > (int32_t)T_MAX ? (int32_t)T_MAX : (z < -(int32_t)T_MAX ? -(int32_t)T_MAX : z);
            return (uint64_t)((int64_t)zc * zc);
        }
    }
    return intap_sq_wide(it, v, j);
}

/* Word-at-a-time statistics (4 int8 elements per 32-bit load) where the core has the DSP extension,
 * and on hosts, where snapuq_simd.h's portable helpers let the tests check the same path; a core
 * without the extension (Cortex-M0 / M3) keeps the scalar loops, cheaper there than the emulation. */
#if SNAPUQ_SIMD_NATIVE || !defined(__arm__)
#define INTAP_WORDS 1
#else
#define INTAP_WORDS 0
#endif

/* rows per column strip: its 16-bit lanes hold sum x (|sum| <= 128 * 256) and sum |diff| (<= 255 * 255) */
#define INTAP_STRIP_ROWS 256u

#if INTAP_WORDS
/* the column statistics of columns k_use .. k0 + 3 (k0 <= k_use): one strip of 4 columns walked down
 * the rows, one word per row: SXTAB16 adds the codes into lanes (k0, k0 + 2) / (k0 + 1, k0 + 3),
 * |row r - row r-1| per byte (SSUB8, SSUB8, SEL) goes into two more lane words by UXTAB16 */
static uint64_t intap_strip(const snapuq_snap_intap_t *it, const int8_t *x, uint32_t k0, uint32_t k_use)
{
    const uint32_t rows = it->rows, cols = it->cols, j_cdif = cols + rows;
    const int8_t *p = x + k0;
    uint32_t prev = snapuq_ld4(p);
    uint32_t se = snapuq_sxtb16(prev), so = snapuq_sxtb16_ror8(prev), de = 0, dd = 0;
    uint64_t acc = 0;
    uint32_t r, k;
    for (r = 1; r < rows; r++) {
        uint32_t w, d;
        p += cols;
        w = snapuq_ld4(p);
        d = snapuq_absdiff_s8x4(w, prev);
        se = snapuq_sxtab16(se, w);
        so = snapuq_sxtab16_ror8(so, w);
        de = snapuq_uxtab16(de, d);
        dd = snapuq_uxtab16_ror8(dd, d);
        prev = w;
    }
    for (k = k_use; k < k0 + 4; k++) {
        /* column k's lanes: k0 -> low of (se, de), k0 + 1 -> low of (so, dd), k0 + 2 / k0 + 3 -> high */
        const uint32_t i = k - k0, sh = (i & 2u) << 3;
        const uint32_t sl = (i & 1u) ? so : se, dl = (i & 1u) ? dd : de;
        const int32_t sum = (int32_t)(int16_t)(uint16_t)(sl >> sh) - (int32_t)rows * it->z_x;
        acc += intap_sq(it, sum, k);
        if (rows > 1) {
            acc += intap_sq(it, (int32_t)((dl >> sh) & 0xFFFFu), j_cdif + k);
        }
    }
    return acc;
}
#endif

/* the statistics of row r: sum (x - z) and sum |x[k] - x[k-1]|; 4 elements per step by USADA8 on the
 * codes + 128 (the words at k and k + 1: 4 neighbour differences, and the sum against 0) */
static uint64_t intap_row(const snapuq_snap_intap_t *it, const int8_t *x, uint32_t r)
{
    const uint32_t rows = it->rows, cols = it->cols;
    const uint32_t j_row = cols, j_rdif = cols + rows + (rows > 1 ? cols : 0);
    const int8_t *p = x + r * cols;
    uint32_t su = 0, tv = 0, k = 0;
    uint64_t acc;
#if INTAP_WORDS
    for (; k + 4 < cols; k += 4) {
        const uint32_t a = snapuq_ld4(p + k) ^ 0x80808080u, b = snapuq_ld4(p + k + 1) ^ 0x80808080u;
        tv = snapuq_usada8(a, b, tv);
        su = snapuq_usada8(a, 0u, su);
    }
    if (k >= 4) {
        /* the last t = cols - k (1..4) codes: the row's last word a and the word before it by one, b;
           the top t bytes of a are the codes not summed yet, the top t - 1 lanes of (a, b) the
           differences not taken yet (masked lanes are 0 in both) */
        const uint32_t t = cols - k, ms = 0xFFFFFFFFu << (8u * (4u - t));
        const uint32_t md = t >= 2u ? 0xFFFFFFFFu << (8u * (5u - t)) : 0u;
        const uint32_t a = snapuq_ld4(p + cols - 4) ^ 0x80808080u, b = snapuq_ld4(p + cols - 5) ^ 0x80808080u;
        tv = snapuq_usada8(a & md, b & md, tv);
        su = snapuq_usada8(a & ms, 0u, su);
        k = cols;
    }
#endif
    for (; k < cols; k++) {
        su += (uint32_t)((int32_t)p[k] + 128);
        if (k + 1 < cols) {
            const int32_t d = (int32_t)p[k + 1] - p[k];
            tv += (uint32_t)(d < 0 ? -d : d);
        }
    }
    acc = intap_sq(it, (int32_t)su - (int32_t)cols * (128 + it->z_x), j_row + r);
    if (cols > 1) {
        acc += intap_sq(it, (int32_t)tv, j_rdif + r);
    }
    return acc;
}

static int32_t intap_score(const snapuq_snap_intap_t *it, const int8_t *x)
{
    /* column statistics by strips of 4 columns (a last strip overlapping the one before), else one
       pass per column; then one pass per row; int32 sums (|v| <= 255 * 65535 < 2^24). The statistics'
       order (col, row, col |diff|, row |diff|) only fixes their constants' index j */
    const uint32_t rows = it->rows, cols = it->cols;
    const uint32_t j_cdif = cols + rows;
    const int32_t zx = it->z_x;
    uint64_t acc = 0;
    uint32_t r, k = 0;
    int64_t y, s;
#if INTAP_WORDS
    if (cols >= 4 && rows <= INTAP_STRIP_ROWS) {
        for (; k < cols; k += 4) {
            acc += intap_strip(it, x, k + 4 <= cols ? k : cols - 4, k);
        }
    }
#endif
    for (; k < cols; k++) {
        const int8_t *p = x + k;
        int32_t sum = (int32_t)p[0] - zx, tv = 0;
        for (r = 1; r < rows; r++) {
            const int32_t d = (int32_t)p[cols] - p[0];
            p += cols;
            sum += (int32_t)p[0] - zx;
            tv += d < 0 ? -d : d;
        }
        acc += intap_sq(it, sum, k);
        if (rows > 1) {
            acc += intap_sq(it, tv, j_cdif + k);
        }
    }
    for (r = 0; r < rows; r++) {
        acc += intap_row(it, x, r);
    }
    y = min64((int64_t)(acc / (256u * (uint64_t)it->n_feat)), CAP31);
    s = abs64(mul_shift(y, it->p_m, it->p_n) + it->r_q16);
    return (int32_t)min64(s, CAP30);
}

snapuq_status_t snapuq_snap_input_tap(const snapuq_snap_config_t *cfg, const int8_t *x, size_t n,
                                      int32_t *s_in16)
{
    /* the config was checked once (snapuq_snap_check at load); only what this pass needs here */
    if (cfg == NULL || x == NULL || s_in16 == NULL || !cfg->has_intap || cfg->intap.g_m == NULL ||
        cfg->intap.g_n == NULL || cfg->intap.h_q12 == NULL || cfg->intap.n_feat < 1) {
        return SNAPUQ_ERR_ARG;
    }
    if (n != (size_t)cfg->intap.rows * cfg->intap.cols) {
        return SNAPUQ_ERR_SIZE;
    }
    *s_in16 = intap_score(&cfg->intap, x);
    return SNAPUQ_OK;
}

/* step 8, perr_alarm: p_err by the 257-entry table, alarm = F / (F + k), noisy-OR */
static void combine_perr_alarm(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *params,
                               snapuq_snap_result_t *out)
{
    const int32_t i = (out->m16 >> 8) < 255 ? (out->m16 >> 8) : 255;
    const int32_t f = out->m16 - (i << 8);
    /* table entries are 0..65536 (snapuq_snap_check; clamped here so that no table overflows) */
    const int32_t lo = clamp_u16p(cfg->perr_lut[i]), hi = clamp_u16p(cfg->perr_lut[i + 1]);
    const int64_t k = params->alarm_k_q16;
    const int32_t pe = lo + (int32_t)((((int64_t)hi - lo) * f + 128) >> 8);
    const int32_t al = (int32_t)(((int64_t)out->F16 << 16) / ((int64_t)out->F16 + k));
    out->P16 = pe;
    out->A16 = al;
    out->Z16 = 0;
    out->U16 = pe + (int32_t)(((int64_t)al * (65536 - pe) + 32768) >> 16);
}

/* step 8, logistic (v1): U = sigmoid(b0 + b1 F + b2 m) by the 513-entry table; p_err = U */
static void combine_logistic(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *params,
                             snapuq_snap_result_t *out)
{
    int64_t z = (int64_t)params->b0_q16 + mul_shift(out->F16, params->b1_m, params->b1_n) +
                mul_shift(out->m16, params->b2_m, params->b2_n);
    int64_t a;
    int32_t i, f, lo, hi, v;
    z = z > Z_CLAMP ? Z_CLAMP : (z < -Z_CLAMP ? -Z_CLAMP : z);
    out->Z16 = (int32_t)z;
    a = abs64(z);
    i = (int32_t)(a >> 11);
    f = (int32_t)(a & 2047);
    lo = cfg->sigmoid_lut[i];
    hi = cfg->sigmoid_lut[i + 1];
    v = lo + (int32_t)((((int64_t)hi - lo) * f + 1024) >> 11);
    out->U16 = z >= 0 ? v : 65536 - v;
    out->P16 = out->U16;
    out->A16 = 0;
}

/* step 4 of one tap: sum over i of min(round(|da - dm| * inv_sigma / 2^R), T_MAX)^2, and lam = sum of
 * (logvar code - z_v). |da|, |dm| < 2^28 (int8 zero points, k <= 2^20), so da - dm fits in int32. For R in
 * 33..62 the rounded shift reads only the product's high word: (p >> (R - 1) + 1) >> 1 with
 * p >> (R - 1) = hi >> (R - 33), in int32 (|hi| < 2^27); smaller R take the 64-bit form. */
static uint64_t tap_energy(const snapuq_snap_tap_t *t, const int8_t *qa, const int8_t *qm, const int8_t *qv,
                           int32_t *lam)
{
    const int32_t r = t->lut_shift, za = t->z_a, zm = t->z_mu, ka = t->k_a, km = t->k_mu;
    const int32_t *const lut = t->inv_sigma_lut + 128;
    const uint16_t d = t->d;
    uint64_t e = 0;
    int32_t sv = 0;
    uint16_t i;
    if (r >= 33) {
        const int32_t sh = r - 33;
        for (i = 0; i < d; i++) {
            const int32_t da = ((int32_t)qa[i] - za) * ka, dm = ((int32_t)qm[i] - zm) * km;
            const int32_t delta = da >= dm ? da - dm : dm - da;
            const int32_t q = (int32_t)(((int64_t)delta * lut[qv[i]]) >> 32) >> sh; /* arithmetic shifts */
            const int32_t tt = (q >> 1) + (q & 1);
            const int32_t tc = tt < (int32_t)T_MAX ? tt : (int32_t)T_MAX;
            e += (uint64_t)((int64_t)tc * tc);
            sv += qv[i];
        }
    } else {
        for (i = 0; i < d; i++) {
            const int32_t da = ((int32_t)qa[i] - za) * ka;
            const int32_t dm = ((int32_t)qm[i] - zm) * km;
            const int64_t delta = abs64((int64_t)da - dm);
            const int64_t p = delta * (int64_t)lut[qv[i]];
            const int64_t tt = min64(r ? (p + ((int64_t)1 << (r - 1))) >> r : p, T_MAX);
            e += (uint64_t)(tt * tt);
            sv += qv[i];
        }
    }
    *lam = sv - (int32_t)d * t->z_v; /* |lam| <= 16384 * 255 */
    return e;
}

snapuq_status_t snapuq_snap_score(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *params,
                                  const snapuq_snap_inputs_t *in, snapuq_snap_result_t *out)
{
    uint8_t l;
    uint16_t j;
    int64_t acc = 0, s_cap;
    int32_t p1 = -1, p2 = -1, best;
    if (cfg == NULL || params == NULL || in == NULL || out == NULL || in->logits == NULL ||
        in->probs == NULL || check_core(cfg, NULL, 0) != SNAPUQ_OK ||
        snapuq_snap_params_check(cfg, params, NULL, 0) != SNAPUQ_OK ||
        (cfg->has_intap && (in->s_in16 < 0 || in->s_in16 > CAP30))) {
        return SNAPUQ_ERR_ARG;
    }
    memset(out, 0, sizeof *out);
    out->n_taps = cfg->n_taps;
    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        const int8_t *qa = in->a[l], *qm = in->mu[l], *qv = in->logvar[l];
        int32_t lam;
        uint64_t e;
        int64_t s;
        if (qa == NULL || qm == NULL || qv == NULL) {
            return SNAPUQ_ERR_ARG;
        }
        e = tap_energy(t, qa, qm, qv, &lam);
        out->ebar16[l] = (int32_t)min64((int64_t)(e / (256u * (uint64_t)t->d)), CAP31);
        s = abs64(mul_shift(out->ebar16[l], t->p_m, t->p_n) + mul_shift(lam, t->q_m, t->q_n) + t->r_q16);
        out->s16[l] = (int32_t)min64(s, CAP30);
        acc += (int64_t)out->s16[l] * params->w_q16[l];
    }
    if (cfg->has_intap) {
        out->s_in16 = in->s_in16;
        acc += (int64_t)out->s_in16 * cfg->intap.w_q16;
    }
    s_cap = min64((acc + ((int64_t)1 << 15)) >> 16, CAP31);
    out->S16 = (int32_t)s_cap;
    if (cfg->hinge) {
        const int64_t d = (int64_t)out->S16 - params->hinge_q_q16;
        out->F16 = d <= 0 ? 0 : (int32_t)min64(mul_shift(min64(d, CAP31), params->hinge_m, params->hinge_n), CAP31);
    } else {
        out->F16 = out->S16;
    }
    /* m(x) from the two largest probability codes */
    for (j = 0; j < cfg->n_classes; j++) {
        const int32_t v = (int32_t)in->probs[j] + 128;
        if (v > p1) {
            p2 = p1;
            p1 = v;
        } else if (v > p2) {
            p2 = v;
        }
    }
    out->m16 = 65536 - 256 * p1 + ((cfg->conf_a_q16 * p2 + 128) >> 8);
    best = 0;
    for (j = 1; j < cfg->n_classes; j++) {
        if (in->logits[j] > in->logits[best]) {
            best = j;
        }
    }
    out->pred = (int16_t)best;
    if (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM) {
        combine_perr_alarm(cfg, params, out);
    } else {
        combine_logistic(cfg, params, out);
    }
    out->flag = (uint8_t)(out->U16 >= params->u_threshold_q16);
    return SNAPUQ_OK;
}

static snapuq_status_t output_ptr(const snapuq_model_t *model, int16_t idx, uint32_t n, const int8_t **p)
{
    snapuq_tensor_info_t info;
    snapuq_status_t st;
    if (idx < 0) {
        return SNAPUQ_ERR_ARG;
    }
    st = snapuq_model_output_info(model, (uint16_t)idx, &info);
    if (st != SNAPUQ_OK) {
        return st;
    }
    if (info.data == NULL) {
        return SNAPUQ_ERR_STATE;
    }
    if (info.elements != n || info.type != SNAPUQ_DTYPE_INT8) {
        return SNAPUQ_ERR_SIZE;
    }
    *p = (const int8_t *)info.data;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_snap_score_model(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *params,
                                        const struct snapuq_model *model, int32_t s_in16,
                                        snapuq_snap_result_t *out)
{
    snapuq_snap_inputs_t in;
    snapuq_status_t st;
    uint8_t l;
    if (cfg == NULL || model == NULL || check_tables(cfg, NULL, 0) != SNAPUQ_OK) {
        return SNAPUQ_ERR_ARG;
    }
    memset(&in, 0, sizeof in);
    if ((st = output_ptr(model, cfg->out_logits, cfg->n_classes, &in.logits)) != SNAPUQ_OK ||
        (st = output_ptr(model, cfg->out_probs, cfg->n_classes, &in.probs)) != SNAPUQ_OK) {
        return st;
    }
    in.s_in16 = s_in16;
    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        if ((st = output_ptr(model, t->out_a, t->d, &in.a[l])) != SNAPUQ_OK ||
            (st = output_ptr(model, t->out_mu, t->d, &in.mu[l])) != SNAPUQ_OK ||
            (st = output_ptr(model, t->out_logvar, t->d, &in.logvar[l])) != SNAPUQ_OK) {
            return st;
        }
    }
    return snapuq_snap_score(cfg, params, &in, out);
}
