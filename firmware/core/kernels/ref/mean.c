/*
 * kernels/ref/mean.c - MEAN over a set of axes; a dedicated NHWC path over H and W.
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_simd.h" /* snapuq_rshift_round, snapuq_ssat8 */

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
 * registers, one pass over the pixels (kernels/dsp/mean.c: the SIMD version) */
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
        for (; c + 4 <= C; c += 4) {
            const int8_t *x = in + c;
            uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (p = 0; p < HW; p++) {
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

void snapuq_mean_fold(int32_t mult, int32_t shift, int32_t n_red, int32_t *mult_n, int32_t *shift_n)
{
    int32_t sh;
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
    *mult_n = (int32_t)(((int64_t)mult * ((int64_t)1 << sh)) / n_red);
    *shift_n = shift - sh;
}

snapuq_status_t snapuq_mean_ref(const snapuq_mean_args_t *a)
{
    /* output element = sum over the reduced axes; output layout = input layout with reduced
     * axes of size 1 (keep_dims or not: same flat order) */
    int32_t od[4];
    int32_t i0, i1, i2, i3, k, n_out = 1, n_red = 1;
    int32_t mult, shift;
    for (k = 0; k < 4; k++) {
        od[k] = a->reduce[k] ? 1 : a->dims[k];
        n_out *= od[k];
        if (a->reduce[k]) {
            n_red *= a->dims[k];
        }
    }
    snapuq_mean_fold(a->mult, a->shift, n_red, &mult, &shift);
    if (!a->reduce[0] && a->reduce[1] && a->reduce[2] && !a->reduce[3]) {
        mean_hw(a, mult, shift, n_red);
        return SNAPUQ_OK;
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
    return SNAPUQ_OK;
}
