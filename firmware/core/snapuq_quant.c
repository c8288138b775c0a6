/*
 * snapuq_quant.c - integer-only QuantizeMultiplier (see snapuq_quant.h).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_quant.h"

int snapuq_f32_decompose(float f, uint32_t *mant, int32_t *exp)
{
    uint32_t u;
    uint32_t e;
    memcpy(&u, &f, sizeof u);
    e = (u >> 23) & 0xFFu;
    if ((u & 0x80000000u) != 0 || e == 0 || e == 0xFFu) {
        return -1; /* negative, zero, denormal, inf, nan */
    }
    *mant = (u & 0x7FFFFFu) | 0x800000u;
    *exp = (int32_t)e - 127 - 23;
    return 0;
}

static int bitlen64(uint64_t x)
{
    int n = 0;
    while (x != 0) {
        n++;
        x >>= 1;
    }
    return n;
}

/* Correctly rounded (round-to-nearest-even) quotient num/den with `bits` significant bits:
 * result = *q * 2^*e, *q in [2^(bits-1), 2^bits). num < 2^50, den < 2^25, bits <= 60. */
static void div_round(uint64_t num, uint64_t den, int bits, uint64_t *q, int32_t *e)
{
    uint64_t quo = num / den;
    uint64_t rem = num % den;
    int32_t k = 0;
    int guard;
    int len = bitlen64(quo); /* tracked incrementally: one bit per step */
    while (len < bits + 1) {
        rem <<= 1;
        quo = (quo << 1) | (rem >= den ? 1u : 0u);
        if (rem >= den) {
            rem -= den;
        }
        len = quo == 0 ? 0 : (len == 0 ? 1 : len + 1);
        k++;
    }
    while (bitlen64(quo) > bits + 1) { /* only when num/den is already large */
        rem |= quo & 1u;
        quo >>= 1;
        k--;
    }
    guard = (int)(quo & 1u);
    quo >>= 1;
    k--;
    if (guard && (rem != 0 || (quo & 1u))) {
        quo++;
        if ((quo >> bits) != 0) {
            quo >>= 1;
            k--;
        }
    }
    *q = quo;
    *e = -k;
}

void snapuq_quantize_ratio(uint64_t num_mant, int32_t num_exp, uint64_t den_mant, int32_t den_exp,
                           int clamp_max, int32_t *mult, int32_t *shift)
{
    uint64_t q53, q31;
    int32_t e, s;
    div_round(num_mant, den_mant, 53, &q53, &e);
    e += num_exp - den_exp;
    s = e + 53; /* value = (q53 / 2^53) * 2^s, q53 / 2^53 in [0.5, 1) */
    if (clamp_max && (s > 31 || (s == 31 && q53 > (((uint64_t)1 << 31) - 1u) << 22))) {
        *mult = INT32_MAX;
        *shift = 31;
        return;
    }
    q31 = (q53 + ((uint64_t)1 << 21)) >> 22;
    if (q31 == ((uint64_t)1 << 31)) {
        q31 >>= 1;
        s++;
    }
    if (s < -31) {
        q31 = 0;
        s = 0;
    }
    *mult = (int32_t)q31;
    *shift = s;
}

int snapuq_qm_product_ratio(float a, float b, float c, int32_t *mult, int32_t *shift)
{
    uint32_t ma, mb, mc;
    int32_t ea, eb, ec;
    if (snapuq_f32_decompose(a, &ma, &ea) || snapuq_f32_decompose(b, &mb, &eb) ||
        snapuq_f32_decompose(c, &mc, &ec)) {
        return -1;
    }
    snapuq_quantize_ratio((uint64_t)ma * mb, ea + eb, mc, ec, 0, mult, shift);
    return *shift > 30 ? -1 : 0; /* x * 2^shift must stay an int32 shift */
}

int snapuq_qm_ratio_pot(float a, float c, int32_t p, int32_t *mult, int32_t *shift)
{
    uint32_t ma, mc;
    int32_t ea, ec;
    if (snapuq_f32_decompose(a, &ma, &ea) || snapuq_f32_decompose(c, &mc, &ec)) {
        return -1;
    }
    snapuq_quantize_ratio(ma, ea + p, mc, ec, 0, mult, shift);
    return *shift > 30 ? -1 : 0;
}

int32_t snapuq_quantize_int(int32_t f, float scale, int32_t zero_point)
{
    uint32_t ms;
    int32_t es, e;
    uint64_t q;
    int64_t r;
    uint32_t af = (uint32_t)(f < 0 ? -f : f);
    if (f == 0) {
        return zero_point;
    }
    if (snapuq_f32_decompose(scale, &ms, &es)) {
        return zero_point;
    }
    div_round(af, ms, 24, &q, &e); /* float32 quotient = q * 2^(e - es) */
    e -= es;
    if (e >= 0) {
        r = e > 20 ? ((int64_t)1 << 40) : (int64_t)(q << e);
    } else if (e < -60) {
        r = 0;
    } else {
        r = (int64_t)((q + ((uint64_t)1 << (-e - 1))) >> (-e));
    }
    if (r > ((int64_t)1 << 40)) {
        r = (int64_t)1 << 40;
    }
    r = f < 0 ? -r : r;
    r += zero_point;
    if (r > INT32_MAX) {
        r = INT32_MAX;
    }
    if (r < INT32_MIN) {
        r = INT32_MIN;
    }
    return (int32_t)r;
}
