/*
 * snapuq_fixed.h - internal: TFLite/gemmlowp-compatible fixed-point primitives (static inline).
 *
 * Semantics follow TFLite Micro's reference integer kernels with the default double rounding:
 *   srdhm(a, b)    = saturating rounding doubling high multiply of two int32 (Q0.31 product)
 *   rdbpot(x, e)   = rounding (half away from zero) arithmetic right shift by e (0..31)
 *   mbqm(x, M, s)  = rdbpot(srdhm(x << max(s, 0), M), max(-s, 0))
 * Signed overflow is avoided everywhere (wrapping is done in uint32 where TFLite wraps).
 */
#ifndef SNAPUQ_FIXED_H
#define SNAPUQ_FIXED_H

#include <stdint.h>

static inline int32_t snapuq_srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    {
        const int64_t ab = (int64_t)a * (int64_t)b;
        const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
        /* C99 division truncates toward zero, as the reference does */
        return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
    }
}

static inline int32_t snapuq_rdbpot(int32_t x, int exponent)
{
    const int32_t mask = (int32_t)(((uint32_t)1 << exponent) - 1u);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* arithmetic shift of negative values: implementation-defined in C99, arithmetic on every
     * compiler snapuq supports (gcc, clang, arm-none-eabi-gcc) */
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* x * 2^left with int32 wrap-around (TFLite computes x * (1 << shift) in int32). */
static inline int32_t snapuq_shl_wrap(int32_t x, int left)
{
    return (int32_t)((uint32_t)x << left);
}

/* a + b with int32 wrap-around (TFLite accumulates in int32; overflow only occurs for
 * adversarial models and must not be undefined behaviour here) */
static inline int32_t snapuq_add_wrap(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

static inline int32_t snapuq_mbqm(int32_t x, int32_t multiplier, int32_t shift)
{
    const int left = shift > 0 ? (int)shift : 0;
    const int right = shift > 0 ? 0 : (int)-shift;
    return snapuq_rdbpot(snapuq_srdhm(snapuq_shl_wrap(x, left), multiplier), right);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT with a positive exponent (saturating left shift). */
static inline int32_t snapuq_sat_shl(int32_t x, int exponent)
{
    const int32_t threshold = (int32_t)((((uint32_t)1) << (31 - exponent)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return snapuq_shl_wrap(x, exponent);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<e> for any sign of e. */
static inline int32_t snapuq_mul_pot(int32_t x, int exponent)
{
    if (exponent > 0) {
        return snapuq_sat_shl(x, exponent);
    }
    if (exponent < 0) {
        return snapuq_rdbpot(x, -exponent);
    }
    return x;
}

static inline int32_t snapuq_clamp_i32(int32_t x, int32_t lo, int32_t hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

/* One int32 accumulator to an int8 output: TFLM's MultiplyByQuantizedMultiplier, the output
 * offset, then the fused activation's clamp (CONV_2D, DEPTHWISE_CONV_2D reference kernels). */
static inline int8_t snapuq_requant_i8(int32_t acc, int32_t m, int32_t s, int32_t out_offset,
                                       int32_t act_min, int32_t act_max)
{
    return (int8_t)snapuq_clamp_i32(snapuq_mbqm(acc, m, s) + out_offset, act_min, act_max);
}

static inline int snapuq_clz32(uint32_t x)
{
    int n = 0;
    if (x == 0) {
        return 32;
    }
    while ((x & 0x80000000u) == 0) {
        x <<= 1;
        n++;
    }
    return n;
}

#endif /* SNAPUQ_FIXED_H */
