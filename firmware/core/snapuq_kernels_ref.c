/*
 * snapuq_kernels_ref.c - portable reference int8 kernels.
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); every
 * loop order below only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_simd.h"

static inline int8_t requant(int32_t acc, int32_t m, int32_t s, const snapuq_conv_args_t *a)
{
    acc = snapuq_mbqm(acc, m, s) + a->out_offset;
    return (int8_t)snapuq_clamp_i32(acc, a->act_min, a->act_max);
}

void snapuq_conv_ref(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, oc, ky, kx, ic;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                for (oc = 0; oc < a->out_c; oc++) {
                    int32_t acc = 0;
                    for (ky = 0; ky < a->k_h; ky++) {
                        const int32_t iy = iy0 + a->dil_h * ky;
                        if (iy < 0 || iy >= a->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < a->k_w; kx++) {
                            const int32_t ix = ix0 + a->dil_w * kx;
                            const int8_t *in;
                            const int8_t *f;
                            if (ix < 0 || ix >= a->in_w) {
                                continue;
                            }
                            in = a->in + (((size_t)b * a->in_h + iy) * a->in_w + ix) * a->in_c;
                            f = a->filter + (((size_t)oc * a->k_h + ky) * a->k_w + kx) * a->in_c;
                            for (ic = 0; ic < a->in_c; ic++) {
                                acc = snapuq_add_wrap(acc, (int32_t)f[ic] * ((int32_t)in[ic] + a->in_offset));
                            }
                        }
                    }
                    if (a->bias != NULL) {
                        acc = snapuq_add_wrap(acc, a->bias[oc]);
                    }
                    out[oc] = requant(acc, a->mult[oc], a->shift[oc], a);
                }
            }
        }
    }
}

void snapuq_dwconv_ref(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, ic, m, ky, kx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                for (ic = 0; ic < a->in_c; ic++) {
                    for (m = 0; m < a->depth_mult; m++) {
                        const int32_t oc = ic * a->depth_mult + m;
                        int32_t acc = 0;
                        for (ky = 0; ky < a->k_h; ky++) {
                            const int32_t iy = iy0 + a->dil_h * ky;
                            if (iy < 0 || iy >= a->in_h) {
                                continue;
                            }
                            for (kx = 0; kx < a->k_w; kx++) {
                                const int32_t ix = ix0 + a->dil_w * kx;
                                if (ix < 0 || ix >= a->in_w) {
                                    continue;
                                }
                                acc = snapuq_add_wrap(acc, (int32_t)a->filter[((size_t)ky * a->k_w + kx) * a->out_c + oc] *
                                       ((int32_t)a->in[(((size_t)b * a->in_h + iy) * a->in_w + ix) *
                                                           a->in_c + ic] +
                                        a->in_offset));
                            }
                        }
                        if (a->bias != NULL) {
                            acc = snapuq_add_wrap(acc, a->bias[oc]);
                        }
                        out[oc] = requant(acc, a->mult[oc], a->shift[oc], a);
                    }
                }
            }
        }
    }
}

void snapuq_fc_ref(const snapuq_fc_args_t *a)
{
    int32_t b, oc, d;
    for (b = 0; b < a->batches; b++) {
        const int8_t *in = a->in + (size_t)b * a->depth;
        for (oc = 0; oc < a->out_c; oc++) {
            const int8_t *f = a->filter + (size_t)oc * a->depth;
            int32_t acc = 0;
            for (d = 0; d < a->depth; d++) {
                acc = snapuq_add_wrap(acc, (int32_t)f[d] * ((int32_t)in[d] + a->in_offset));
            }
            if (a->bias != NULL) {
                acc = snapuq_add_wrap(acc, a->bias[oc]);
            }
            acc = snapuq_mbqm(acc, a->mult[oc], a->shift[oc]) + a->out_offset;
            a->out[(size_t)b * a->out_c + oc] = (int8_t)snapuq_clamp_i32(acc, a->act_min, a->act_max);
        }
    }
}

static inline int32_t max_i32(int32_t x, int32_t y)
{
    return x > y ? x : y;
}

void snapuq_maxpool_ref(const snapuq_pool_args_t *a)
{
    /* 4 channels at a time in registers, window rows walked by pointer */
    const int32_t D = a->depth;
    const ptrdiff_t row = (ptrdiff_t)a->in_w * D;
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t iy0 = oy * a->stride_h - a->pad_h;
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                const int32_t fy0 = iy0 < 0 ? -iy0 : 0;
                const int32_t fx0 = ix0 < 0 ? -ix0 : 0;
                const int32_t fy1 = a->f_h < a->in_h - iy0 ? a->f_h : a->in_h - iy0;
                const int32_t fx1 = a->f_w < a->in_w - ix0 ? a->f_w : a->in_w - ix0;
                const int32_t empty = fy0 >= fy1 || fx0 >= fx1; /* no input under the window */
                const int8_t *base = empty ? a->in : a->in + (((size_t)b * a->in_h + iy0 + fy0) * a->in_w + ix0 + fx0) * D;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * D;
                for (c = 0; c + 4 <= D; c += 4) {
                    int32_t m0 = -128, m1 = -128, m2 = -128, m3 = -128;
                    const int8_t *r = base + c;
                    for (fy = fy0; fy < fy1; fy++) {
                        const int8_t *p = r;
                        for (fx = fx0; fx < fx1; fx++) {
                            m0 = max_i32(m0, p[0]);
                            m1 = max_i32(m1, p[1]);
                            m2 = max_i32(m2, p[2]);
                            m3 = max_i32(m3, p[3]);
                            p += D;
                        }
                        r += row;
                    }
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->act_min, a->act_max);
                    out[c + 1] = (int8_t)snapuq_clamp_i32(m1, a->act_min, a->act_max);
                    out[c + 2] = (int8_t)snapuq_clamp_i32(m2, a->act_min, a->act_max);
                    out[c + 3] = (int8_t)snapuq_clamp_i32(m3, a->act_min, a->act_max);
                }
                for (; c < D; c++) {
                    int32_t m0 = -128;
                    const int8_t *r = base + c;
                    for (fy = fy0; fy < fy1; fy++) {
                        const int8_t *p = r;
                        for (fx = fx0; fx < fx1; fx++) {
                            m0 = max_i32(m0, p[0]);
                            p += D;
                        }
                        r += row;
                    }
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->act_min, a->act_max);
                }
            }
        }
    }
}

int snapuq_avgpool_ref(const snapuq_pool_args_t *a)
{
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t iy0 = oy * a->stride_h - a->pad_h;
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                const int32_t fy0 = iy0 < 0 ? -iy0 : 0;
                const int32_t fx0 = ix0 < 0 ? -ix0 : 0;
                const int32_t fy1 = a->f_h < a->in_h - iy0 ? a->f_h : a->in_h - iy0;
                const int32_t fx1 = a->f_w < a->in_w - ix0 ? a->f_w : a->in_w - ix0;
                for (c = 0; c < a->depth; c++) {
                    int32_t acc = 0, count = 0;
                    for (fy = fy0; fy < fy1; fy++) {
                        for (fx = fx0; fx < fx1; fx++) {
                            acc = snapuq_add_wrap(acc, a->in[(((size_t)b * a->in_h + iy0 + fy) * a->in_w + ix0 + fx) * a->depth + c]);
                            count++;
                        }
                    }
                    if (count == 0) {
                        return 0;
                    }
                    acc = (int32_t)(acc > 0 ? ((int64_t)acc + count / 2) / count : ((int64_t)acc - count / 2) / count);
                    acc = snapuq_clamp_i32(acc, a->act_min, a->act_max);
                    a->out[(((size_t)b * a->out_h + oy) * a->out_w + ox) * a->depth + c] = (int8_t)acc;
                }
            }
        }
    }
    return 1;
}

/* snapuq_mbqm for a multiplier other than INT32_MIN (shift split into left/right once): one SMLAL,
 * floor((a*b + 2^30) / 2^31) being the rounding doubling high multiply for such b, then the
 * rounding right shift */
static inline int32_t mbqm_split(int32_t x, int32_t m, int left, int right)
{
    const int64_t p = (int64_t)snapuq_shl_wrap(x, left) * m + ((int64_t)1 << 30);
    const int32_t y = (int32_t)(p >> 31); /* arithmetic shift on every supported compiler */
    return right > 0 ? snapuq_rshift_round(y, right) : y;
}

void snapuq_add_ref(const snapuq_add_args_t *a)
{
    int32_t i;
    if (a->in1_mult != INT32_MIN && a->in2_mult != INT32_MIN && a->out_mult != INT32_MIN) {
        const int l1 = a->in1_shift > 0 ? (int)a->in1_shift : 0, r1 = a->in1_shift > 0 ? 0 : (int)-a->in1_shift;
        const int l2 = a->in2_shift > 0 ? (int)a->in2_shift : 0, r2 = a->in2_shift > 0 ? 0 : (int)-a->in2_shift;
        const int lo = a->out_shift > 0 ? (int)a->out_shift : 0, ro = a->out_shift > 0 ? 0 : (int)-a->out_shift;
        for (i = 0; i < a->n; i++) {
            const int32_t x1 = snapuq_shl_wrap(a->in1_offset + a->in1[i], a->left_shift);
            const int32_t x2 = snapuq_shl_wrap(a->in2_offset + a->in2[i], a->left_shift);
            const int32_t s1 = mbqm_split(x1, a->in1_mult, l1, r1);
            const int32_t s2 = mbqm_split(x2, a->in2_mult, l2, r2);
            const int32_t raw = mbqm_split((int32_t)((uint32_t)s1 + (uint32_t)s2), a->out_mult, lo, ro) + a->out_offset;
            a->out[i] = (int8_t)snapuq_clamp_i32(raw, a->act_min, a->act_max);
        }
        return;
    }
    for (i = 0; i < a->n; i++) {
        const int32_t x1 = snapuq_shl_wrap(a->in1_offset + a->in1[i], a->left_shift);
        const int32_t x2 = snapuq_shl_wrap(a->in2_offset + a->in2[i], a->left_shift);
        const int32_t s1 = snapuq_mbqm(x1, a->in1_mult, a->in1_shift);
        const int32_t s2 = snapuq_mbqm(x2, a->in2_mult, a->in2_shift);
        const int32_t raw = snapuq_mbqm((int32_t)((uint32_t)s1 + (uint32_t)s2), a->out_mult, a->out_shift) +
                            a->out_offset;
        a->out[i] = (int8_t)snapuq_clamp_i32(raw, a->act_min, a->act_max);
    }
}

/* requantization shared by all channels of a MEAN (TFLM folds 1/n into the multiplier) */
typedef struct {
    uint32_t zp_n;
    int32_t mult, left, right, out_zp, fast;
} mean_q_t;

static inline int8_t mean_q(const mean_q_t *q, uint32_t sum)
{
    const int32_t acc = (int32_t)(sum - q->zp_n);
    int32_t v;
    if (q->fast) {
        /* one SMLAL: floor((a*b + 2^30) / 2^31) is the reference's rounding doubling high multiply
         * for every b except INT32_MIN */
        const int64_t p = (int64_t)snapuq_shl_wrap(acc, q->left) * q->mult + ((int64_t)1 << 30);
        const int32_t y = (int32_t)(p >> 31); /* arithmetic shift on every supported compiler */
        v = q->right > 0 ? snapuq_rshift_round(y, q->right) : y;
    } else {
        v = snapuq_mbqm(acc, q->mult, q->left - q->right);
    }
    return (int8_t)snapuq_ssat8(v + q->out_zp);
}

/* NHWC MEAN over H and W (global average pooling, the SNAP heads' input): channels 4 at a time in
 * registers, one pass over the pixels */
static void mean_hw(const snapuq_mean_args_t *a, int32_t mult, int32_t shift, int32_t n_red)
{
    const int32_t B = a->dims[0], HW = a->dims[1] * a->dims[2], C = a->dims[3];
    mean_q_t q;
    int32_t b, c, p;
    q.zp_n = (uint32_t)a->in_zp * (uint32_t)n_red;
    q.mult = mult;
    q.left = shift > 0 ? shift : 0;
    q.right = shift > 0 ? 0 : -shift;
    q.out_zp = a->out_zp;
    q.fast = mult != INT32_MIN;
    for (b = 0; b < B; b++) {
        const int8_t *in = a->in + (size_t)b * HW * C;
        int8_t *out = a->out + (size_t)b * C;
        c = 0;
#if SNAPUQ_SIMD_NATIVE
        /* DSP, 8 channels (two words) per pixel step, 16-bit lanes flushed every 255 pixels */
        for (; HW >= 16 && c + 8 <= C; c += 8) {
            const int8_t *x = in + c;
            uint32_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int32_t j;
            for (p = 0; p < HW;) {
                const int32_t end = HW - p < 255 ? HW : p + 255;
                uint32_t e0 = 0, o0 = 0, e1 = 0, o1 = 0;
                for (; p < end; p++) {
                    const uint32_t w0 = snapuq_ld4(x), w1 = snapuq_ld4(x + 4);
                    e0 = snapuq_sxtab16(e0, w0);
                    o0 = snapuq_sxtab16_ror8(o0, w0);
                    e1 = snapuq_sxtab16(e1, w1);
                    o1 = snapuq_sxtab16_ror8(o1, w1);
                    x += C;
                }
                t[0] += (uint32_t)(int32_t)(int16_t)(e0 & 0xFFFFu);
                t[2] += (uint32_t)(int32_t)(int16_t)(e0 >> 16);
                t[1] += (uint32_t)(int32_t)(int16_t)(o0 & 0xFFFFu);
                t[3] += (uint32_t)(int32_t)(int16_t)(o0 >> 16);
                t[4] += (uint32_t)(int32_t)(int16_t)(e1 & 0xFFFFu);
                t[6] += (uint32_t)(int32_t)(int16_t)(e1 >> 16);
                t[5] += (uint32_t)(int32_t)(int16_t)(o1 & 0xFFFFu);
                t[7] += (uint32_t)(int32_t)(int16_t)(o1 >> 16);
            }
            for (j = 0; j < 8; j++) {
                out[c + j] = mean_q(&q, t[j]);
            }
        }
#endif
        for (; c + 4 <= C; c += 4) {
            const int8_t *x = in + c;
            uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#if SNAPUQ_SIMD_NATIVE
            /* DSP: one word = 4 channels; SXTAB16 (and its ROR #8 form) adds channels 0,2 and 1,3
             * into 16-bit lanes, exact for up to 255 pixels (|sum| <= 255 * 128 < 2^15), then
             * the lanes are flushed into the int32 sums */
            for (p = 0; HW >= 16 && p < HW;) {
                const int32_t end = HW - p < 255 ? HW : p + 255;
                uint32_t e = 0, o = 0;
                for (; p < end; p++) {
                    const uint32_t w = snapuq_ld4(x);
                    e = snapuq_sxtab16(e, w);
                    o = snapuq_sxtab16_ror8(o, w);
                    x += C;
                }
                s0 += (uint32_t)(int32_t)(int16_t)(e & 0xFFFFu);
                s2 += (uint32_t)(int32_t)(int16_t)(e >> 16);
                s1 += (uint32_t)(int32_t)(int16_t)(o & 0xFFFFu);
                s3 += (uint32_t)(int32_t)(int16_t)(o >> 16);
            }
#endif
            for (p = SNAPUQ_SIMD_NATIVE && HW >= 16 ? HW : 0; p < HW; p++) {
                s0 += (uint32_t)(int32_t)x[0];
                s1 += (uint32_t)(int32_t)x[1];
                s2 += (uint32_t)(int32_t)x[2];
                s3 += (uint32_t)(int32_t)x[3];
                x += C;
            }
            out[c] = mean_q(&q, s0);
            out[c + 1] = mean_q(&q, s1);
            out[c + 2] = mean_q(&q, s2);
            out[c + 3] = mean_q(&q, s3);
        }
        for (; c < C; c++) {
            const int8_t *x = in + c;
            uint32_t s0 = 0;
            for (p = 0; p < HW; p++) {
                s0 += (uint32_t)(int32_t)x[0];
                x += C;
            }
            out[c] = mean_q(&q, s0);
        }
    }
}

void snapuq_mean_ref(const snapuq_mean_args_t *a)
{
    /* output element = sum over the reduced axes; output layout = input layout with reduced
     * axes of size 1 (keep_dims or not: same flat order) */
    int32_t od[4];
    int32_t i0, i1, i2, i3, k, n_out = 1, n_red = 1;
    int32_t mult = a->mult, shift = a->shift, sh;
    for (k = 0; k < 4; k++) {
        od[k] = a->reduce[k] ? 1 : a->dims[k];
        n_out *= od[k];
        if (a->reduce[k]) {
            n_red *= a->dims[k];
        }
    }
    /* TFLM folds 1/n into the multiplier: shift = floor(log2 n), capped */
    if (n_red > 0) {
        uint32_t v = (uint32_t)n_red;
        sh = 0;
        while (v > 1u) {
            v >>= 1;
            sh++;
        }
    } else {
        sh = 31 - snapuq_clz32((uint32_t)n_red);
    }
    if (sh > 32) {
        sh = 32;
    }
    if (sh > 31 + shift) {
        sh = 31 + shift;
    }
    mult = (int32_t)(((int64_t)mult * ((int64_t)1 << sh)) / n_red);
    shift = shift - sh;
    if (!a->reduce[0] && a->reduce[1] && a->reduce[2] && !a->reduce[3]) {
        mean_hw(a, mult, shift, n_red);
        return;
    }
    for (k = 0; k < n_out; k++) {
        a->out[k] = 0;
    }
    for (i0 = 0; i0 < od[0]; i0++) {
        for (i1 = 0; i1 < od[1]; i1++) {
            for (i2 = 0; i2 < od[2]; i2++) {
                for (i3 = 0; i3 < od[3]; i3++) {
                    int32_t j0, j1, j2, j3, acc = 0, v;
                    for (j0 = 0; j0 < (a->reduce[0] ? a->dims[0] : 1); j0++) {
                        for (j1 = 0; j1 < (a->reduce[1] ? a->dims[1] : 1); j1++) {
                            for (j2 = 0; j2 < (a->reduce[2] ? a->dims[2] : 1); j2++) {
                                for (j3 = 0; j3 < (a->reduce[3] ? a->dims[3] : 1); j3++) {
                                    const int32_t x0 = a->reduce[0] ? j0 : i0;
                                    const int32_t x1 = a->reduce[1] ? j1 : i1;
                                    const int32_t x2 = a->reduce[2] ? j2 : i2;
                                    const int32_t x3 = a->reduce[3] ? j3 : i3;
                                    acc = snapuq_add_wrap(acc, a->in[((x0 * a->dims[1] + x1) * a->dims[2] + x2) * a->dims[3] + x3]);
                                }
                            }
                        }
                    }
                    acc = (int32_t)((uint32_t)acc - (uint32_t)a->in_zp * (uint32_t)n_red);
                    v = snapuq_mbqm(acc, mult, shift) + a->out_zp;
                    a->out[((i0 * od[1] + i1) * od[2] + i2) * od[3] + i3] = (int8_t)snapuq_clamp_i32(v, -128, 127);
                }
            }
        }
    }
}

/* ---- gemmlowp-style fixed point for SOFTMAX / LOGISTIC ---- */

/* exp(x) for x in [-1/4, 0), Q0.31 in and out */
static int32_t exp_quarter(int32_t a)
{
    const int32_t constant_term = 1895147668;  /* exp(-1/8) in Q0.31 */
    const int32_t one_third = 715827883;       /* 1/3 in Q0.31 */
    const int32_t x = a + (1 << 28);           /* a + 1/8 */
    const int32_t x2 = snapuq_srdhm(x, x);
    const int32_t x3 = snapuq_srdhm(x2, x);
    const int32_t x4 = snapuq_srdhm(x2, x2);
    const int32_t x4_4 = snapuq_rdbpot(x4, 2);
    const int32_t poly = snapuq_rdbpot(snapuq_srdhm(x4_4 + x3, one_third) + x2, 1);
    return constant_term + snapuq_srdhm(constant_term, x + poly);
}

/* exp(a) for a <= 0 given with `int_bits` integer bits (Q(int_bits).(31-int_bits)); Q0.31 out */
static int32_t exp_negative(int32_t a, int int_bits)
{
    static const int32_t mults[7] = {1672461947, 1302514674, 790015084, 290630308,
                                     39332535,   720401,     242};
    const int frac = 31 - int_bits;
    const int32_t quarter = (int32_t)1 << (frac - 2);
    const int32_t mask = quarter - 1;
    const int32_t mod_minus_quarter = (a & mask) - quarter;
    int32_t result = exp_quarter(snapuq_mul_pot(mod_minus_quarter, int_bits));
    const int32_t remainder = (int32_t)((uint32_t)mod_minus_quarter - (uint32_t)a);
    int e;
    for (e = -2; e <= 4; e++) {
        if (int_bits > e) {
            const int sh = frac + e;
            if (sh < 31 && (remainder & ((int32_t)1 << sh)) != 0) {
                result = snapuq_srdhm(result, mults[e + 2]);
            }
        }
    }
    if (int_bits > 5) {
        const int32_t clamp = -((int32_t)1 << (36 - int_bits));
        if (a < clamp) {
            result = 0;
        }
    }
    if (a == 0) {
        result = INT32_MAX;
    }
    return result;
}

/* 1 / (1 + x) for x in [0, 1) as Q0.31 (Newton-Raphson, 3 steps, Q2.29 internally) */
static int32_t one_over_one_plus_x(int32_t a)
{
    const int64_t sum = (int64_t)a + INT32_MAX;
    const int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    const int32_t c48_17 = 1515870810;
    const int32_t cm32_17 = -1010580540;
    int32_t x = c48_17 + snapuq_srdhm(half_denominator, cm32_17);
    int i;
    for (i = 0; i < 3; i++) {
        const int32_t hdx = snapuq_srdhm(half_denominator, x);
        const int32_t one_minus = ((int32_t)1 << 29) - hdx;
        x = x + snapuq_mul_pot(snapuq_srdhm(x, one_minus), 2);
    }
    return snapuq_mul_pot(x, 1);
}

void snapuq_softmax_ref(const snapuq_softmax_args_t *a)
{
    int32_t i, c;
    for (i = 0; i < a->outer; i++) {
        const int8_t *in = a->in + (size_t)i * a->depth;
        int8_t *out = a->out + (size_t)i * a->depth;
        int32_t mx = -128, sum = 0, headroom, shifted_scale, bits_over_unit, exponent;
        for (c = 0; c < a->depth; c++) {
            mx = in[c] > mx ? in[c] : mx;
        }
        for (c = 0; c < a->depth; c++) {
            const int32_t diff = (int32_t)in[c] - mx;
            if (diff >= a->diff_min) {
                const int32_t r = snapuq_srdhm(snapuq_shl_wrap(diff, a->left_shift), a->mult);
                sum = snapuq_add_wrap(sum, snapuq_rdbpot(exp_negative(r, 5), 12));
            }
        }
        headroom = snapuq_clz32((uint32_t)sum);
        bits_over_unit = 12 - headroom;
        shifted_scale = one_over_one_plus_x(
            (int32_t)(((uint32_t)sum << headroom) - ((uint32_t)1 << 31)));
        exponent = bits_over_unit + 31 - 8;
        for (c = 0; c < a->depth; c++) {
            const int32_t diff = (int32_t)in[c] - mx;
            if (diff >= a->diff_min) {
                const int32_t r = snapuq_srdhm(snapuq_shl_wrap(diff, a->left_shift), a->mult);
                const int32_t e = exp_negative(r, 5);
                const int32_t v = snapuq_rdbpot(snapuq_srdhm(shifted_scale, e), exponent) - 128;
                out[c] = (int8_t)snapuq_clamp_i32(v, -128, 127);
            } else {
                out[c] = -128;
            }
        }
    }
}

void snapuq_logistic_ref(const snapuq_logistic_args_t *a)
{
    int32_t i;
    for (i = 0; i < a->n; i++) {
        const int32_t x = (int32_t)a->in[i] - a->in_zp;
        int32_t v;
        if (x <= -a->range_radius) {
            a->out[i] = -128;
            continue;
        }
        if (x >= a->range_radius) {
            a->out[i] = 127;
            continue;
        }
        {
            const int32_t q4 = snapuq_mbqm(x, a->mult, a->left_shift);
            int32_t res;
            if (q4 == 0) {
                res = 1 << 30;
            } else {
                const int32_t absx = q4 > 0 ? q4 : -q4;
                const int32_t pos = one_over_one_plus_x(exp_negative(-absx, 4));
                res = q4 > 0 ? pos : (int32_t)((uint32_t)INT32_MAX - (uint32_t)pos);
            }
            v = snapuq_rdbpot(res, 23) - 128;
            a->out[i] = (int8_t)snapuq_clamp_i32(v, -128, 127);
        }
    }
}

void snapuq_requant_ref(const snapuq_requant_args_t *a)
{
    int32_t i;
    for (i = 0; i < a->n; i++) {
        const int32_t v = snapuq_mbqm((int32_t)a->in[i] - a->in_zp, a->mult, a->shift) + a->out_zp;
        a->out[i] = (int8_t)snapuq_clamp_i32(v, -128, 127);
    }
}
