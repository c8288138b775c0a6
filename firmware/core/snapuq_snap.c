/*
 * snapuq_snap.c - SNAP-UQ scoring (docs/FIXED_POINT.md v1, integer only), on-device
 * calibration (Welford, logistic fit; float32) and the drift monitor.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_runtime.h"
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

static snapuq_status_t check_core(const snapuq_snap_config_t *cfg)
{
    uint8_t l;
    if (cfg == NULL || cfg->spec_version != SNAPUQ_SNAP_SPEC_VERSION || cfg->n_taps < 1 ||
        cfg->n_taps > SNAPUQ_MAX_TAPS || cfg->n_classes < 2 || cfg->sigmoid_lut == NULL ||
        cfg->conf_a_q16 < 0 || cfg->conf_a_q16 > 65536 || cfg->variant > SNAPUQ_SNAP_LITERAL ||
        cfg->combine > SNAPUQ_COMBINE_PERR_ALARM ||
        (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM && cfg->perr_lut == NULL)) {
        return SNAPUQ_ERR_ARG;
    }

    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        if (t->d < 1 || t->d > 16384 || t->inv_sigma_lut == NULL || t->lut_shift < 0 || t->lut_shift > 62 ||
            t->k_a < 0 || t->k_a > (1 << 20) || t->k_mu < 0 || t->k_mu > (1 << 20) || t->p_n < 0 ||
            t->p_n > 62 || t->q_n < 0 || t->q_n > 62) {
            return SNAPUQ_ERR_ARG;
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_snap_check(const snapuq_snap_config_t *cfg)
{
    uint16_t k;
    if (check_core(cfg) != SNAPUQ_OK) {
        return SNAPUQ_ERR_ARG;
    }
    if (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM) {
        for (k = 0; k < SNAPUQ_PERR_LUT_LEN; k++) {
            if (cfg->perr_lut[k] < 0 || cfg->perr_lut[k] > 65536) {
                return SNAPUQ_ERR_ARG;
            }
        }
    }
    return SNAPUQ_OK;
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

static int params_ok(const snapuq_snap_params_t *p, uint8_t n_taps)
{
    uint8_t l;
    for (l = 0; l < n_taps; l++) {
        if (p->w_q16[l] < 0 || p->w_q16[l] >= (1 << 30)) {
            return 0;
        }
    }
    return p->hinge_n >= 0 && p->hinge_n <= 62 && p->b1_n >= 0 && p->b1_n <= 62 && p->b2_n >= 0 &&
           p->b2_n <= 62 && p->alarm_k_q16 >= 0;
}

snapuq_status_t snapuq_snap_score(const snapuq_snap_config_t *cfg, const snapuq_snap_params_t *params,
                                  const snapuq_snap_inputs_t *in, snapuq_snap_result_t *out)
{
    uint8_t l;
    uint16_t j;
    int64_t acc = 0, s_cap, z, a;
    int32_t p1 = -1, p2 = -1, best;
    if (cfg == NULL || params == NULL || in == NULL || out == NULL || in->logits == NULL ||
        in->probs == NULL || check_core(cfg) != SNAPUQ_OK || !params_ok(params, cfg->n_taps) ||
        (cfg->combine == SNAPUQ_COMBINE_PERR_ALARM && params->alarm_k_q16 < 1)) {
        return SNAPUQ_ERR_ARG;
    }
    memset(out, 0, sizeof *out);
    out->n_taps = cfg->n_taps;
    for (l = 0; l < cfg->n_taps; l++) {
        const snapuq_snap_tap_t *t = &cfg->taps[l];
        const int8_t *qa = in->a[l], *qm = in->mu[l], *qv = in->logvar[l];
        const int32_t r = t->lut_shift;
        uint64_t e = 0;
        int32_t lam = 0;
        uint16_t i;
        int64_t s;
        if (qa == NULL || qm == NULL || qv == NULL) {
            return SNAPUQ_ERR_ARG;
        }
        for (i = 0; i < t->d; i++) {
            const int32_t da = ((int32_t)qa[i] - t->z_a) * t->k_a;
            const int32_t dm = ((int32_t)qm[i] - t->z_mu) * t->k_mu;
            const int64_t delta = abs64((int64_t)da - dm);
            const int64_t p = delta * (int64_t)t->inv_sigma_lut[(int32_t)qv[i] + 128];
            const int64_t tt = min64(r ? (p + ((int64_t)1 << (r - 1))) >> r : p, T_MAX);
            e += (uint64_t)(tt * tt);
            lam += (int32_t)qv[i] - t->z_v;
        }
        out->ebar16[l] = (int32_t)min64((int64_t)(e / (256u * (uint64_t)t->d)), CAP31);
        s = abs64(mul_shift(out->ebar16[l], t->p_m, t->p_n) + mul_shift(lam, t->q_m, t->q_n) + t->r_q16);
        out->s16[l] = (int32_t)min64(s, CAP30);
        acc += (int64_t)out->s16[l] * params->w_q16[l];
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
        /* step 8, perr_alarm: p_err by the 257-entry table, alarm = F / (F + k), noisy-OR */
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
        out->flag = (uint8_t)(out->U16 >= params->u_threshold_q16);
        return SNAPUQ_OK;
    }
    z = (int64_t)params->b0_q16 + mul_shift(out->F16, params->b1_m, params->b1_n) +
        mul_shift(out->m16, params->b2_m, params->b2_n);
    z = z > Z_CLAMP ? Z_CLAMP : (z < -Z_CLAMP ? -Z_CLAMP : z);
    out->Z16 = (int32_t)z;
    a = abs64(z);
    {
        const int32_t i = (int32_t)(a >> 11), f = (int32_t)(a & 2047);
        const int32_t lo = cfg->sigmoid_lut[i], hi = cfg->sigmoid_lut[i + 1];
        const int32_t v = lo + (int32_t)((((int64_t)hi - lo) * f + 1024) >> 11);
        out->U16 = z >= 0 ? v : 65536 - v;
    }
    out->P16 = out->U16;
    out->A16 = 0;
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
                                        const struct snapuq_model *model, snapuq_snap_result_t *out)
{
    snapuq_snap_inputs_t in;
    snapuq_status_t st;
    uint8_t l;
    if (cfg == NULL || model == NULL || snapuq_snap_check(cfg) != SNAPUQ_OK) {
        return SNAPUQ_ERR_ARG;
    }
    memset(&in, 0, sizeof in);
    if ((st = output_ptr(model, cfg->out_logits, cfg->n_classes, &in.logits)) != SNAPUQ_OK ||
        (st = output_ptr(model, cfg->out_probs, cfg->n_classes, &in.probs)) != SNAPUQ_OK) {
        return st;
    }
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

/* ------------------------------------------------------------------ calibration (float32) */

static int finite_f(float x)
{
    return x == x && x < 3.0e38f && x > -3.0e38f;
}

snapuq_status_t snapuq_welford_init(snapuq_welford_t *w)
{
    if (w == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    w->n = 0;
    w->mean = 0.0f;
    w->m2 = 0.0f;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_welford_push(snapuq_welford_t *w, float x)
{
    float delta;
    if (w == NULL || !finite_f(x)) {
        return SNAPUQ_ERR_ARG;
    }
    w->n++;
    delta = x - w->mean;
    w->mean += delta / (float)w->n;
    w->m2 += delta * (x - w->mean);
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_welford_variance(const snapuq_welford_t *w, float *var)
{
    if (w == NULL || var == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (w->n < 2) {
        return SNAPUQ_ERR_NUMERIC;
    }
    *var = w->m2 / (float)(w->n - 1);
    return SNAPUQ_OK;
}

static int32_t round_q16(float x)
{
    const float v = x * 65536.0f;
    return (int32_t)(v >= 0.0f ? v + 0.5f : v - 0.5f);
}

snapuq_status_t snapuq_snap_weights_from_welford(const snapuq_snap_config_t *cfg, const snapuq_welford_t *per_tap,
                                                 snapuq_snap_params_t *params)
{
    float inv[SNAPUQ_MAX_TAPS], sum = 0.0f;
    uint8_t l;
    if (cfg == NULL || per_tap == NULL || params == NULL || cfg->n_taps < 1 || cfg->n_taps > SNAPUQ_MAX_TAPS) {
        return SNAPUQ_ERR_ARG;
    }
    for (l = 0; l < cfg->n_taps; l++) {
        float v;
        if (snapuq_welford_variance(&per_tap[l], &v) != SNAPUQ_OK || !(v > 1e-30f)) {
            return SNAPUQ_ERR_NUMERIC;
        }
        inv[l] = 1.0f / v;
        sum += inv[l];
    }
    if (!finite_f(sum)) {
        return SNAPUQ_ERR_NUMERIC;
    }
    for (l = 0; l < cfg->n_taps; l++) {
        params->w_q16[l] = round_q16(inv[l] / sum);
    }
    return SNAPUQ_OK;
}

size_t snapuq_fit_buffer_size(uint32_t capacity)
{
    return (size_t)capacity * sizeof(snapuq_fit_sample_t);
}

snapuq_status_t snapuq_fit_init(snapuq_fit_t *fit, void *buffer, size_t bytes)
{
    if (fit == NULL || buffer == NULL || bytes < sizeof(snapuq_fit_sample_t) ||
        ((uintptr_t)buffer % sizeof(float)) != 0) {
        return SNAPUQ_ERR_ARG;
    }
    fit->samples = (snapuq_fit_sample_t *)buffer;
    fit->capacity = (uint32_t)(bytes / sizeof(snapuq_fit_sample_t));
    fit->count = 0;
    fit->head = 0;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_fit_push(snapuq_fit_t *fit, float s, float m, int wrong)
{
    snapuq_fit_sample_t *p;
    if (fit == NULL || fit->samples == NULL || !finite_f(s) || !finite_f(m)) {
        return SNAPUQ_ERR_ARG;
    }
    p = &fit->samples[fit->head];
    p->s = s;
    p->m = m;
    p->y = (uint8_t)(wrong != 0);
    fit->head = (fit->head + 1u) % fit->capacity;
    if (fit->count < fit->capacity) {
        fit->count++;
    }
    return SNAPUQ_OK;
}

/* exp(x) in float32 without libm: 2^k * e^r, |r| <= ln2/2, degree-6 polynomial (rel. err < 3e-7) */
static float exp_f(float x)
{
    const float ln2 = 0.69314718f;
    float r, p, scale = 1.0f;
    int32_t k, i;
    if (x > 80.0f) {
        x = 80.0f;
    }
    if (x < -80.0f) {
        x = -80.0f;
    }
    k = (int32_t)(x / ln2 + (x >= 0.0f ? 0.5f : -0.5f));
    r = x - (float)k * ln2;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    if (k > 0) {
        for (i = 0; i < k; i++) {
            scale *= 2.0f;
        }
    } else {
        for (i = 0; i < -k; i++) {
            scale *= 0.5f;
        }
    }
    return p * scale;
}

/* log(1 + e^z) - y z, numerically safe */
static float nll_term(float z, uint8_t y)
{
    const float az = z < 0.0f ? -z : z;
    /* log(1 + e^-|z|) by a short series is inaccurate near 0; use log1p via atanh-style series */
    const float u = exp_f(-az);
    /* log(1+u) for u in (0, 1]: 2 atanh(u / (2 + u)) */
    const float w = u / (2.0f + u), w2 = w * w;
    const float l1p = 2.0f * w * (1.0f + w2 * (1.0f / 3 + w2 * (1.0f / 5 + w2 * (1.0f / 7 + w2 * (1.0f / 9)))));
    return (z > 0.0f ? z : 0.0f) + l1p - (y ? z : 0.0f);
}

static float objective(const snapuq_fit_t *fit, const float b[3], float l2)
{
    float f = 0.5f * l2 * (b[1] * b[1] + b[2] * b[2]);
    uint32_t i;
    for (i = 0; i < fit->count; i++) {
        const snapuq_fit_sample_t *p = &fit->samples[i];
        f += nll_term(b[0] + b[1] * p->s + b[2] * p->m, p->y);
    }
    return f;
}

/* solve the n x n (n <= 3) symmetric system H x = g by Gaussian elimination with pivoting */
static int solve3(float h[3][3], float g[3], int n, float x[3])
{
    int i, j, k;
    for (i = 0; i < n; i++) {
        int piv = i;
        float best = h[i][i] < 0 ? -h[i][i] : h[i][i];
        for (k = i + 1; k < n; k++) {
            const float v = h[k][i] < 0 ? -h[k][i] : h[k][i];
            if (v > best) {
                best = v;
                piv = k;
            }
        }
        if (!(best > 1e-20f)) {
            return -1;
        }
        if (piv != i) {
            for (j = 0; j < n; j++) {
                const float t = h[i][j];
                h[i][j] = h[piv][j];
                h[piv][j] = t;
            }
            {
                const float t = g[i];
                g[i] = g[piv];
                g[piv] = t;
            }
        }
        for (k = i + 1; k < n; k++) {
            const float f = h[k][i] / h[i][i];
            for (j = i; j < n; j++) {
                h[k][j] -= f * h[i][j];
            }
            g[k] -= f * g[i];
        }
    }
    for (i = n - 1; i >= 0; i--) {
        float s = g[i];
        for (j = i + 1; j < n; j++) {
            s -= h[i][j] * x[j];
        }
        x[i] = s / h[i][i];
    }
    return 0;
}

snapuq_status_t snapuq_fit_solve(const snapuq_fit_t *fit, const snapuq_fit_options_t *opt, float beta[3],
                                 uint16_t *iters)
{
    uint32_t i, n_pos = 0;
    uint16_t it;
    float b[3] = {0.0f, 0.0f, 0.0f};
    float l2, f_old;
    if (fit == NULL || opt == NULL || beta == NULL || fit->samples == NULL || opt->max_iter == 0 ||
        !(opt->l2 >= 0.0f) || !(opt->tol > 0.0f)) {
        return SNAPUQ_ERR_ARG;
    }
    for (i = 0; i < fit->count; i++) {
        n_pos += fit->samples[i].y;
    }
    if (n_pos < 2 || fit->count - n_pos < 2) {
        return SNAPUQ_ERR_NUMERIC;
    }
    l2 = opt->l2;
    /* start at the intercept-only solution */
    b[0] = 0.0f;
    {
        const float pr = (float)n_pos / (float)fit->count;
        /* log(p / (1 - p)) via Newton on the 1-D problem is not needed: a few steps below fix it */
        b[0] = (pr - 0.5f) * 4.0f;
    }
    f_old = objective(fit, b, l2);
    for (it = 0; it < opt->max_iter; it++) {
        float g[3] = {0.0f, 0.0f, 0.0f}, h[3][3] = {{0.0f}}, step[3] = {0.0f, 0.0f, 0.0f};
        float hs[3][3], gs[3], xs[3];
        int free_idx[3], n_free = 0, j, k;
        float t = 1.0f, maxstep = 0.0f;
        for (i = 0; i < fit->count; i++) {
            const snapuq_fit_sample_t *p = &fit->samples[i];
            const float x[3] = {1.0f, p->s, p->m};
            const float z = b[0] + b[1] * p->s + b[2] * p->m;
            const float pr = z >= 0.0f ? 1.0f / (1.0f + exp_f(-z)) : exp_f(z) / (1.0f + exp_f(z));
            const float r = pr - (float)p->y, wgt = pr * (1.0f - pr);
            for (j = 0; j < 3; j++) {
                g[j] += r * x[j];
                for (k = 0; k < 3; k++) {
                    h[j][k] += wgt * x[j] * x[k];
                }
            }
        }
        for (j = 1; j < 3; j++) {
            g[j] += l2 * b[j];
            h[j][j] += l2;
        }
        /* projected Newton: coefficients held at 0 with a gradient pushing them negative stay fixed */
        for (j = 0; j < 3; j++) {
            if (opt->nonneg && j > 0 && b[j] <= 0.0f && g[j] > 0.0f) {
                continue;
            }
            free_idx[n_free++] = j;
        }
        for (j = 0; j < n_free; j++) {
            gs[j] = g[free_idx[j]];
            for (k = 0; k < n_free; k++) {
                hs[j][k] = h[free_idx[j]][free_idx[k]];
            }
        }
        if (solve3(hs, gs, n_free, xs) != 0) {
            beta[0] = b[0];
            beta[1] = b[1];
            beta[2] = b[2];
            if (iters != NULL) {
                *iters = it;
            }
            return SNAPUQ_ERR_NUMERIC;
        }
        for (j = 0; j < n_free; j++) {
            step[free_idx[j]] = xs[j];
        }
        /* damped step: halve until the objective does not increase */
        for (k = 0; k < 30; k++) {
            float nb[3], f_new;
            for (j = 0; j < 3; j++) {
                nb[j] = b[j] - t * step[j];
                if (opt->nonneg && j > 0 && nb[j] < 0.0f) {
                    nb[j] = 0.0f;
                }
            }
            f_new = objective(fit, nb, l2);
            if (f_new <= f_old + 1e-6f * (f_old < 0 ? -f_old : f_old)) {
                for (j = 0; j < 3; j++) {
                    const float d = nb[j] - b[j];
                    const float ad = d < 0 ? -d : d;
                    maxstep = ad > maxstep ? ad : maxstep;
                    b[j] = nb[j];
                }
                f_old = f_new;
                break;
            }
            t *= 0.5f;
        }
        if (maxstep < opt->tol) {
            beta[0] = b[0];
            beta[1] = b[1];
            beta[2] = b[2];
            if (iters != NULL) {
                *iters = (uint16_t)(it + 1);
            }
            return (finite_f(b[0]) && finite_f(b[1]) && finite_f(b[2])) ? SNAPUQ_OK : SNAPUQ_ERR_NUMERIC;
        }
    }
    beta[0] = b[0];
    beta[1] = b[1];
    beta[2] = b[2];
    if (iters != NULL) {
        *iters = opt->max_iter;
    }
    return SNAPUQ_ERR_NUMERIC;
}

snapuq_status_t snapuq_snap_features(const snapuq_snap_result_t *r, float *s, float *m)
{
    if (r == NULL || s == NULL || m == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *s = (float)r->F16 / 65536.0f;
    *m = (float)r->m16 / 65536.0f;
    return SNAPUQ_OK;
}

/* float -> (M, n) with M in [2^30, 2^31) (sign applied), value = M / 2^n, n in [0, 62] */
static int encode_mn(float x, int32_t *m, int32_t *n)
{
    uint32_t u, e, mant;
    int32_t ex, nn;
    memcpy(&u, &x, sizeof u);
    e = (u >> 23) & 0xFFu;
    if (e == 0xFFu) {
        return -1;
    }
    if (e == 0) { /* zero or denormal: 0 */
        *m = 0;
        *n = 0;
        return 0;
    }
    mant = (u & 0x7FFFFFu) | 0x800000u;
    ex = (int32_t)e - 150; /* x = mant * 2^ex */
    nn = 7 - ex;           /* M = mant << 7 */
    if (nn < 0) {
        return -1;
    }
    if (nn > 62) {
        *m = 0;
        *n = 0;
        return 0;
    }
    *m = (int32_t)(mant << 7);
    if (u & 0x80000000u) {
        *m = -*m;
    }
    *n = nn;
    return 0;
}

snapuq_status_t snapuq_snap_set_beta(snapuq_snap_params_t *params, const float beta[3])
{
    int32_t m1, n1, m2, n2;
    if (params == NULL || beta == NULL || !finite_f(beta[0]) || beta[0] >= 16384.0f || beta[0] <= -16384.0f ||
        !(beta[1] < 16384.0f && beta[1] > -16384.0f) || !(beta[2] < 16384.0f && beta[2] > -16384.0f) ||
        encode_mn(beta[1], &m1, &n1) != 0 || encode_mn(beta[2], &m2, &n2) != 0) {
        return SNAPUQ_ERR_ARG;
    }
    params->b0_q16 = round_q16(beta[0]);
    params->b1_m = m1;
    params->b1_n = n1;
    params->b2_m = m2;
    params->b2_n = n2;
    return SNAPUQ_OK;
}

/* ------------------------------------------------------------------ drift monitor */

snapuq_status_t snapuq_monitor_init(snapuq_monitor_t *mon, int32_t *ring, uint32_t window, int32_t window_threshold,
                                    int32_t cusum_ref, int64_t cusum_h)
{
    if (mon == NULL || ring == NULL || window == 0 || cusum_h <= 0) {
        return SNAPUQ_ERR_ARG;
    }
    memset(mon, 0, sizeof *mon);
    mon->ring = ring;
    mon->window = window;
    mon->window_threshold = window_threshold;
    mon->cusum_ref = cusum_ref;
    mon->cusum_h = cusum_h;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_monitor_reset(snapuq_monitor_t *mon)
{
    if (mon == NULL || mon->ring == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    mon->count = 0;
    mon->head = 0;
    mon->sum = 0;
    mon->cusum = 0;
    mon->n_seen = 0;
    mon->first_alarm = 0;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_monitor_push(snapuq_monitor_t *mon, int32_t u, uint8_t *alarm)
{
    uint8_t al = 0;
    int64_t c;
    if (mon == NULL || mon->ring == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (mon->count == mon->window) {
        mon->sum -= mon->ring[mon->head];
    } else {
        mon->count++;
    }
    mon->ring[mon->head] = u;
    mon->sum += u;
    mon->head = (mon->head + 1u) % mon->window;
    /* window mean >= threshold  <=>  sum >= threshold * window (exact in integers) */
    if (mon->count == mon->window && mon->sum >= (int64_t)mon->window_threshold * (int64_t)mon->window) {
        al |= 1u;
    }
    c = mon->cusum + (int64_t)u - mon->cusum_ref;
    mon->cusum = c > 0 ? c : 0;
    if (mon->cusum >= mon->cusum_h) {
        al |= 2u;
    }
    mon->n_seen++;
    if (al != 0 && mon->first_alarm == 0) {
        mon->first_alarm = mon->n_seen;
    }
    if (alarm != NULL) {
        *alarm = al;
    }
    return SNAPUQ_OK;
}

static void sift_down(int32_t *v, uint32_t start, uint32_t n)
{
    uint32_t root = start;
    while (2u * root + 1u < n) {
        uint32_t child = 2u * root + 1u, sw = root;
        if (v[sw] < v[child]) {
            sw = child;
        }
        if (child + 1u < n && v[sw] < v[child + 1u]) {
            sw = child + 1u;
        }
        if (sw == root) {
            return;
        }
        {
            const int32_t t = v[root];
            v[root] = v[sw];
            v[sw] = t;
        }
        root = sw;
    }
}

snapuq_status_t snapuq_quantile_i32(int32_t *values, uint32_t n, uint16_t q_permille, int32_t *out)
{
    uint32_t i, rank;
    if (values == NULL || out == NULL || n == 0 || q_permille > 1000) {
        return SNAPUQ_ERR_ARG;
    }
    for (i = n / 2u; i-- > 0;) { /* heap sort, O(n log n), in place */
        sift_down(values, i, n);
    }
    for (i = n - 1u; i > 0; i--) {
        const int32_t t = values[0];
        values[0] = values[i];
        values[i] = t;
        sift_down(values, 0, i);
    }
    rank = (uint32_t)(((uint64_t)q_permille * n + 999u) / 1000u); /* nearest rank, 1-based */
    *out = values[rank == 0 ? 0 : rank - 1u];
    return SNAPUQ_OK;
}
