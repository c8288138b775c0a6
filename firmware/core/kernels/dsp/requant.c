/*
 * kernels/dsp/requant.c - per-channel (or per-tensor) requantization shared by the DSP CONV_2D,
 * DEPTHWISE_CONV_2D and FULLY_CONNECTED kernels: one SMLAL for TFLite's rounding doubling high
 * multiply (exact: floor((a*b + 2^30) / 2^31) equals the reference's nudge-and-truncate for every
 * a, b except b = INT32_MIN, which takes the reference path), then the rounding shift (ASRS + ADC).
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

/* requantize n int32 sums of channels oc0 .. oc0 + n - 1 (one pixel) into out[oc0 ..]; with fast
 * (requant_fast_ok) one SMLAL, a rounding shift (ASRS + ADC) and the clamp per output */
void snapuq_dsp_requant_run(const int32_t *mult_all, const int32_t *shift_all, int32_t step, int32_t out_off,
                            int32_t lo, int32_t hi, int fast, const int32_t *acc, int8_t *out, int32_t oc0,
                            int32_t n)
{
    const int32_t *mult = mult_all + oc0 * step, *shift = shift_all + oc0 * step;
    int32_t i;
    out += oc0;
    if (fast && lo == -128 && hi == 127) {
        for (i = 0; i < n; i++) {
            const int64_t p = (int64_t)acc[i] * mult[i * step] + ((int64_t)1 << 30);
            out[i] = (int8_t)snapuq_ssat8(snapuq_rshift_round((int32_t)(p >> 31), -shift[i * step]) + out_off);
        }
        return;
    }
    if (fast) {
        for (i = 0; i < n; i++) {
            /* floor((a*b + 2^30) / 2^31) == the reference's rounding doubling high multiply for
             * b != INT32_MIN; arithmetic shift of a negative int64 on every supported compiler */
            const int64_t p = (int64_t)acc[i] * mult[i * step] + ((int64_t)1 << 30);
            int32_t v = snapuq_rshift_round((int32_t)(p >> 31), -shift[i * step]) + out_off;
            v = v < lo ? lo : v;
            out[i] = (int8_t)(v > hi ? hi : v);
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
