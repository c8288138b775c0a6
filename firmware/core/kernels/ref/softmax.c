/*
 * kernels/ref/softmax.c - SOFTMAX and LOGISTIC (both on gemmlowp-style fixed-point exp).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

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

snapuq_status_t snapuq_softmax_ref(const snapuq_softmax_args_t *a)
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
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_logistic_ref(const snapuq_logistic_args_t *a)
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
    return SNAPUQ_OK;
}
