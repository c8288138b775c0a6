/*
 * snapuq_snap_calib.c - on-device calibration for SNAP-UQ (API in snapuq_snap.h): Welford
 * running variance, inverse-variance tap weights, the logistic fit of U = sigmoid(b0 + b1 s +
 * b2 m) by damped (projected) Newton, and storing a float beta as the score's Q16 / (M, n)
 * constants. Float32 throughout (one FPU operation per step on Cortex-M4F/M7); no libm.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_snap.h"

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
