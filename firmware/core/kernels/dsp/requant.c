/*
 * kernels/dsp/requant.c - per-channel (or per-tensor) requantization shared by the DSP CONV_2D,
 * DEPTHWISE_CONV_2D and FULLY_CONNECTED kernels: TFLite's rounding doubling high multiply as
 * floor((a*b + 2^30) / 2^31), which equals the reference's nudge-and-truncate for every a, b except
 * b = INT32_MIN (the reference path takes that): one SMMULR of 2a and b where 2a fits, an SMLAL
 * otherwise; then the rounding shift (ASRS + ADC).
 */
#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP

int snapuq_dsp_requant_fast_ok(const int32_t *mult, const int32_t *shift, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        if (shift[i] >= 0 || shift[i] < -31 || mult[i] == INT32_MIN) {
            return 0;
        }
    }
    return 1;
}

/* the 64-bit form of rq_fast (any x): out of line, so the common path carries none of it */
static SNAPUQ_NOINLINE int32_t rq_wide(int32_t x, int32_t m, int32_t e)
{
    return snapuq_rshift_round((int32_t)(((int64_t)x * m + ((int64_t)1 << 30)) >> 31), e);
}

/* TFLite's rounding doubling high multiply of x by m (m != INT32_MIN), then its rounding right shift
 * by e (1..31), plus z. For |x| < 2^30, SMMULR of 2x and m is floor((x m + 2^30) / 2^31) exactly and
 * that product is below 2^29 in magnitude (so y + (y >> 31) cannot wrap); any other x takes rq_wide. */
static inline int32_t rq_fast(int32_t x, int32_t m, int32_t e, int32_t z)
{
    if (SNAPUQ_LIKELY((uint32_t)x + 0x40000000u < 0x80000000u)) {
        return snapuq_rshift_round_add(snapuq_smmulr((int32_t)((uint32_t)x << 1), m), e, z);
    }
    return rq_wide(x, m, e) + z;
}

/* requantize n int32 sums of channels oc0 .. oc0 + n - 1 (one pixel) into out[oc0 ..]; with fast
 * (requant_fast_ok): rq_fast per output (SMMULR, a rounding shift with the offset added by ADC) and
 * SSAT or the clamp; a per-tensor pair is read once */
void snapuq_dsp_requant_run(const int32_t *mult_all, const int32_t *shift_all, int32_t step, int32_t out_off,
                            int32_t lo, int32_t hi, int fast, const int32_t *acc, int8_t *out, int32_t oc0,
                            int32_t n)
{
    const int32_t *mult = mult_all + oc0 * step, *shift = shift_all + oc0 * step;
    int32_t i;
    out += oc0;
    if (fast && step == 0) {
        const int32_t m = mult[0], e = -shift[0];
        if (lo == -128 && hi == 127) {
            for (i = 0; i < n; i++) {
                out[i] = (int8_t)snapuq_ssat8(rq_fast(acc[i], m, e, out_off));
            }
        } else {
            for (i = 0; i < n; i++) {
                const int32_t v = rq_fast(acc[i], m, e, out_off);
                out[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
        return;
    }
    if (fast) {
        if (lo == -128 && hi == 127) {
            for (i = 0; i < n; i++) {
                out[i] = (int8_t)snapuq_ssat8(rq_fast(acc[i], mult[i], -shift[i], out_off));
            }
        } else {
            for (i = 0; i < n; i++) {
                const int32_t v = rq_fast(acc[i], mult[i], -shift[i], out_off);
                out[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
        return;
    }
    for (i = 0; i < n; i++) {
        const int32_t m = mult[i * step], s = shift[i * step];
        int32_t v;
        if (s <= 0 && m != INT32_MIN) {
            const int32_t r = -s;
            const int64_t p = (int64_t)acc[i] * m + ((int64_t)1 << 30);
            const int32_t y = (int32_t)(p >> 31);
            const int32_t mask = (int32_t)(((uint32_t)1 << r) - 1u);
            v = (y >> r) + ((y & mask) > (mask >> 1) + (int32_t)((uint32_t)y >> 31) ? 1 : 0);
        } else {
            v = snapuq_mbqm(acc[i], m, s);
        }
        v += out_off;
        out[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_requant_dsp_unused_t;
#endif
