/*
 * dsp_common.h - helpers shared by the DSP kernels (the files of kernels/dsp); internal, not installed.
 */
#ifndef SNAPUQ_DSP_COMMON_H
#define SNAPUQ_DSP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_simd.h"

/* the kernels' multi-instruction assembly loops (up to 14 registers each): only in optimized builds, where
 * the compiler can give them that many; -O0 builds run the same loops written in C (same results) */
#if SNAPUQ_SIMD_NATIVE && defined(__OPTIMIZE__)
#define SNAPUQ_DSP_ASM 1
#else
#define SNAPUQ_DSP_ASM 0
#endif

/* keeps a kernel's large paths out of line (their register allocation stays their own) */
#if defined(__GNUC__)
#define SNAPUQ_NOINLINE __attribute__((noinline))
#define SNAPUQ_LIKELY(c) __builtin_expect(!!(c), 1) /* the branch the code is laid out for */
#else
#define SNAPUQ_NOINLINE
#define SNAPUQ_LIKELY(c) (c)
#endif

/* the most arena scratch (bytes) CONV_2D's GEMM path takes for a filter larger than 1x1 (the widened patches
 * of a pixel pair, 4 k_h k_w in_c bytes); larger patches, or all with 0, run the direct path (no scratch) */
#ifndef SNAPUQ_CONV_GEMM_MAX
#define SNAPUQ_CONV_GEMM_MAX 4096
#endif

/* output channels accumulated before requantizing (two int32 arrays of that many on the stack; the Small-MCU
 * builds set 32) */
#ifndef SNAPUQ_CONV_CHUNK
#define SNAPUQ_CONV_CHUNK 64
#endif
#define CONV_CHUNK SNAPUQ_CONV_CHUNK

/* valid kernel taps [*k0, *k1) of output position o along one axis (none outside the input) */
static inline void tap_range(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t in,
                             int32_t *k0, int32_t *k1)
{
    const int32_t i0 = o * stride - pad;
    int32_t a = 0, b = k;
    while (a < b && i0 + dil * a < 0) {
        a++;
    }
    while (b > a && i0 + dil * (b - 1) >= in) {
        b--;
    }
    *k0 = a;
    *k1 = b;
}

/* 1 when every channel has a right shift (shift < 0) and no multiplier is INT32_MIN: the common
 * case, requantized by snapuq_dsp_requant_run without per-output checks */
int snapuq_dsp_requant_fast_ok(const int32_t *mult, const int32_t *shift, int32_t n);

/* requantize n int32 sums of channels oc0 .. oc0 + n - 1 (one pixel) into out[oc0 ..]; channel oc
 * uses mult_all[oc * step], shift_all[oc * step] (step 1 per-channel, 0 per-tensor); fast: see
 * snapuq_dsp_requant_fast_ok */
void snapuq_dsp_requant_run(const int32_t *mult_all, const int32_t *shift_all, int32_t step, int32_t out_off,
                            int32_t lo, int32_t hi, int fast, const int32_t *acc, int8_t *out, int32_t oc0,
                            int32_t n);

#endif /* SNAPUQ_DSP_COMMON_H */
