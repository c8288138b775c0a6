/*
 * snapuq_simd.h - internal: the few Armv7E-M DSP instructions the DSP kernels use, as static
 * inline functions (not a public header).
 *
 * On a core with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4/M7/M33/M55) each function is one
 * instruction written as inline assembly, including the rotated forms (SXTB16 / SXTAB16 with
 * ROR #8) that C cannot express as one instruction. Elsewhere (host builds, tests) they are
 * portable C with the instructions' exact semantics, so the same kernels run and are tested
 * everywhere.
 *
 *   sxtb16(x)          lanes (int16)x[7:0], (int16)x[23:16]
 *   sxtb16_ror8(x)     lanes (int16)x[15:8], (int16)x[31:24]
 *   sxtab16(a, x)      a + sxtb16(x), lane-wise modulo 2^16
 *   sxtab16_ror8(a, x) a + sxtb16_ror8(x), lane-wise modulo 2^16
 *   smlad(x, y, acc)   acc + x.lo*y.lo + x.hi*y.hi (int32, wraps)
 *   smlabb / smlatt    acc + x.lo*y.lo / acc + x.hi*y.hi (int32, wraps)
 *   smlabt / smlatb    acc + x.lo*y.hi / acc + x.hi*y.lo (int32, wraps)
 *   smlawb / smlawt    acc + ((m * x.lo) >> 16) / acc + ((m * x.hi) >> 16) (48-bit product's top
 *                      32 bits; the sum wraps)
 *   sadd16(x, y)       lane-wise 16-bit add modulo 2^16
 *   max_s8x4(x, y)     lane-wise signed 8-bit maximum (SSUB8 + SEL)
 *   uxtab16(a, x)      a + lanes (uint16)x[7:0], (uint16)x[23:16], lane-wise modulo 2^16
 *   uxtab16_ror8(a, x) a + lanes (uint16)x[15:8], (uint16)x[31:24], lane-wise modulo 2^16
 *   usada8(x, y, acc)  acc + sum of |x[i] - y[i]| over the 4 unsigned bytes (wraps)
 *   absdiff_s8x4(x, y) byte i = |x[i] - y[i]| of the signed bytes, as an unsigned byte (0..255:
 *                      exact; SSUB8 twice + SEL)
 */
#ifndef SNAPUQ_SIMD_H
#define SNAPUQ_SIMD_H

#include <stdint.h>
#include <string.h>

/* one unaligned-safe 32-bit load (a single LDR on Cortex-M3/M4/M7/M33) */
static inline uint32_t snapuq_ld4(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline void snapuq_st4(int8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
#define SNAPUQ_SIMD_NATIVE 1

static inline uint32_t snapuq_sxtb16(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1" : "=r"(r) : "r"(x));
    return r;
}
static inline uint32_t snapuq_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
static inline uint32_t snapuq_sxtab16(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2" : "=r"(r) : "r"(a), "r"(x));
    return r;
}
static inline uint32_t snapuq_sxtab16_ror8(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}
static inline int32_t snapuq_smlad(uint32_t x, uint32_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}
/* (a * b + 2^31) >> 32: the rounded high word of the signed product */
static inline int32_t snapuq_smmulr(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
static inline int32_t snapuq_smlabb(uint32_t x, uint32_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlabb %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}
static inline int32_t snapuq_smlatt(uint32_t x, uint32_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlatt %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}
static inline uint32_t snapuq_sadd16(uint32_t x, uint32_t y)
{
    uint32_t r;
    __asm__("sadd16 %0, %1, %2" : "=r"(r) : "r"(x), "r"(y));
    return r;
}
static inline int32_t snapuq_smlawb(int32_t m, uint32_t x, int32_t acc)
{
    int32_t r;
    __asm__("smlawb %0, %1, %2, %3" : "=r"(r) : "r"(m), "r"(x), "r"(acc));
    return r;
}
static inline int32_t snapuq_smlawt(int32_t m, uint32_t x, int32_t acc)
{
    int32_t r;
    __asm__("smlawt %0, %1, %2, %3" : "=r"(r) : "r"(m), "r"(x), "r"(acc));
    return r;
}
static inline uint32_t snapuq_max_s8x4(uint32_t x, uint32_t y)
{
    uint32_t r;
    /* SSUB8 sets GE[i] where x[i] >= y[i]; SEL then picks x there, y elsewhere */
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(x), "r"(y) : "cc");
    return r;
}
static inline uint32_t snapuq_uxtab16(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("uxtab16 %0, %1, %2" : "=r"(r) : "r"(a), "r"(x));
    return r;
}
static inline uint32_t snapuq_uxtab16_ror8(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("uxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}
static inline uint32_t snapuq_usada8(uint32_t x, uint32_t y, uint32_t acc)
{
    uint32_t r;
    __asm__("usada8 %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}
static inline uint32_t snapuq_absdiff_s8x4(uint32_t x, uint32_t y)
{
    uint32_t r, t;
    /* y - x first; x - y then leaves GE[i] where x[i] >= y[i], and SEL picks x - y there (mod 256 that
       byte is |x[i] - y[i]| <= 255 exactly), y - x elsewhere */
    __asm__("ssub8 %1, %3, %2\n\tssub8 %0, %2, %3\n\tsel %0, %0, %1" : "=&r"(r), "=&r"(t) : "r"(x), "r"(y) : "cc");
    return r;
}

#else
#define SNAPUQ_SIMD_NATIVE 0

static inline uint32_t snapuq_lane16(int32_t v)
{
    return (uint32_t)v & 0xFFFFu;
}
static inline int32_t snapuq_lo16(uint32_t x)
{
    return (int32_t)(int16_t)(uint16_t)(x & 0xFFFFu);
}
static inline int32_t snapuq_hi16(uint32_t x)
{
    return (int32_t)(int16_t)(uint16_t)(x >> 16);
}
static inline uint32_t snapuq_sxtb16(uint32_t x)
{
    return snapuq_lane16((int8_t)(uint8_t)(x & 0xFFu)) | (snapuq_lane16((int8_t)(uint8_t)((x >> 16) & 0xFFu)) << 16);
}
static inline uint32_t snapuq_sxtb16_ror8(uint32_t x)
{
    return snapuq_sxtb16((x >> 8) | (x << 24));
}
static inline uint32_t snapuq_sadd16(uint32_t x, uint32_t y)
{
    return ((x + y) & 0xFFFFu) | ((((x >> 16) + (y >> 16)) & 0xFFFFu) << 16);
}
static inline uint32_t snapuq_sxtab16(uint32_t a, uint32_t x)
{
    return snapuq_sadd16(a, snapuq_sxtb16(x));
}
static inline uint32_t snapuq_sxtab16_ror8(uint32_t a, uint32_t x)
{
    return snapuq_sadd16(a, snapuq_sxtb16_ror8(x));
}
static inline int32_t snapuq_smlad(uint32_t x, uint32_t y, int32_t acc)
{
    const int32_t p0 = snapuq_lo16(x) * snapuq_lo16(y);
    const int32_t p1 = snapuq_hi16(x) * snapuq_hi16(y);
    return (int32_t)((uint32_t)acc + (uint32_t)p0 + (uint32_t)p1);
}
static inline int32_t snapuq_smmulr(int32_t a, int32_t b)
{
    return (int32_t)(((int64_t)a * b + ((int64_t)1 << 31)) >> 32); /* arithmetic shift on every supported compiler */
}
static inline int32_t snapuq_smlabb(uint32_t x, uint32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(snapuq_lo16(x) * snapuq_lo16(y)));
}
static inline int32_t snapuq_smlatt(uint32_t x, uint32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(snapuq_hi16(x) * snapuq_hi16(y)));
}
static inline int32_t snapuq_smlawb(int32_t m, uint32_t x, int32_t acc)
{
    /* (m * bottom halfword) >> 16, the 48-bit product's top 32 bits, plus acc (wrapping) */
    return (int32_t)((uint32_t)(int32_t)(((int64_t)m * snapuq_lo16(x)) >> 16) + (uint32_t)acc);
}
static inline int32_t snapuq_smlawt(int32_t m, uint32_t x, int32_t acc)
{
    return (int32_t)((uint32_t)(int32_t)(((int64_t)m * snapuq_hi16(x)) >> 16) + (uint32_t)acc);
}
static inline uint32_t snapuq_max_s8x4(uint32_t x, uint32_t y)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8) {
        const int32_t a = (int8_t)(uint8_t)((x >> i) & 0xFFu);
        const int32_t b = (int8_t)(uint8_t)((y >> i) & 0xFFu);
        r |= ((uint32_t)(uint8_t)(int8_t)(a >= b ? a : b)) << i;
    }
    return r;
}
static inline uint32_t snapuq_uxtab16(uint32_t a, uint32_t x)
{
    return snapuq_sadd16(a, x & 0x00FF00FFu);
}
static inline uint32_t snapuq_uxtab16_ror8(uint32_t a, uint32_t x)
{
    return snapuq_sadd16(a, (x >> 8) & 0x00FF00FFu);
}
static inline uint32_t snapuq_usada8(uint32_t x, uint32_t y, uint32_t acc)
{
    int i;
    for (i = 0; i < 32; i += 8) {
        const int32_t a = (int32_t)((x >> i) & 0xFFu), b = (int32_t)((y >> i) & 0xFFu);
        acc += (uint32_t)(a >= b ? a - b : b - a);
    }
    return acc;
}
static inline uint32_t snapuq_absdiff_s8x4(uint32_t x, uint32_t y)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8) {
        const int32_t a = (int8_t)(uint8_t)((x >> i) & 0xFFu);
        const int32_t b = (int8_t)(uint8_t)((y >> i) & 0xFFu);
        r |= (uint32_t)(a >= b ? a - b : b - a) << i;
    }
    return r;
}
#endif

/* TFLite's rounding right shift (half away from zero) of y by e in 1..31: subtract 1 from a
 * negative y (INT32_MIN is even: left alone), shift, and add the last bit shifted out
 * (ASRS sets the carry to it; ADC adds it) */
static inline int32_t snapuq_rshift_round(int32_t y, int32_t e)
{
    const int32_t t = (y < 0 && y != INT32_MIN) ? y - 1 : y;
#if SNAPUQ_SIMD_NATIVE
    int32_t r;
    __asm__("asrs %0, %1, %2\n\tadc %0, %0, #0" : "=&r"(r) : "r"(t), "r"(e) : "cc");
    return r;
#else
    return (t >> e) + ((t >> (e - 1)) & 1); /* arithmetic shifts on every supported compiler */
#endif
}

/* snapuq_rshift_round(y, e) + z for y != INT32_MIN, e in 1..31: the ADC adds z with the carry */
static inline int32_t snapuq_rshift_round_add(int32_t y, int32_t e, int32_t z)
{
    const int32_t t = y + (y >> 31); /* y - 1 for a negative y; arithmetic shift on every supported compiler */
#if SNAPUQ_SIMD_NATIVE
    int32_t r;
    __asm__("asrs %0, %1, %2\n\tadc %0, %0, %3" : "=&r"(r) : "r"(t), "r"(e), "r"(z) : "cc");
    return r;
#else
    return (t >> e) + ((t >> (e - 1)) & 1) + z;
#endif
}

/* v clamped to [-128, 127] (SSAT #8) */
static inline int32_t snapuq_ssat8(int32_t v)
{
#if SNAPUQ_SIMD_NATIVE
    int32_t r;
    __asm__("ssat %0, #8, %1" : "=r"(r) : "r"(v) : "cc");
    return r;
#else
    return v < -128 ? -128 : (v > 127 ? 127 : v);
#endif
}

/* both 16-bit lanes set to v (v in int16 range) */
static inline uint32_t snapuq_dup16(int32_t v)
{
    const uint32_t l = (uint32_t)v & 0xFFFFu;
    return l | (l << 16);
}

#endif /* SNAPUQ_SIMD_H */
