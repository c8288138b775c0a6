/*
 * kernels/dsp/pooling.c - AVERAGE_POOL_2D for cores with the Armv7E-M DSP extension: 4 channels per
 * word, each window element added into two words of 16-bit lane sums by SXTAB16 (and its ROR #8 form),
 * exact for windows of up to 256 elements; then the reference's rounded division and clamp. The
 * same-named kernels/ref/pooling.c is the reference (the registration, ops/dsp/op_pool.c, runs it for
 * other shapes).
 */
#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP

int snapuq_avgpool_dsp_supported(const snapuq_pool_args_t *a)
{
    /* 256 int8 values sum to -32768 .. 32512: a 16-bit lane holds them */
    return a->in_dims.c % 4 == 0 && a->in_dims.c > 0 && a->filter_dims.h * a->filter_dims.w <= 256;
}

/* the reference's round-half-away division of a window sum, then the activation clamp */
static inline int8_t avg_out(int32_t sum, int32_t count, int32_t lo, int32_t hi)
{
    const int32_t v = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* lane 0 / 1 of a word of 16-bit sums */
static inline int32_t lane16(uint32_t w, int hi)
{
    const uint16_t h = (uint16_t)(hi ? w >> 16 : w);
    return h >= 0x8000u ? (int32_t)h - 0x10000 : (int32_t)h;
}

snapuq_status_t snapuq_avgpool_dsp(const snapuq_pool_args_t *a)
{
    const int32_t D = a->in_dims.c, lo = a->pool.activation.min, hi = a->pool.activation.max;
    const ptrdiff_t row = (ptrdiff_t)a->in_dims.w * D;
    int32_t b, oy, ox, c, fy, fx;
    if (!snapuq_avgpool_dsp_supported(a)) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE;
    }
    for (b = 0; b < a->in_dims.n; b++) {
        for (oy = 0; oy < a->out_dims.h; oy++) {
            int32_t fy0, fy1;
            const int32_t iy0 = oy * a->pool.stride.h - a->pool.padding.h;
            tap_range(oy, a->pool.stride.h, a->pool.padding.h, 1, a->filter_dims.h, a->in_dims.h, &fy0, &fy1);
            for (ox = 0; ox < a->out_dims.w; ox++) {
                int32_t fx0, fx1, count;
                const int32_t ix0 = ox * a->pool.stride.w - a->pool.padding.w;
                int8_t *out = a->out + (((size_t)b * a->out_dims.h + oy) * a->out_dims.w + ox) * D;
                const int8_t *base;
                tap_range(ox, a->pool.stride.w, a->pool.padding.w, 1, a->filter_dims.w, a->in_dims.w, &fx0, &fx1);
                count = (fy1 - fy0) * (fx1 - fx0);
                if (count <= 0) {
                    return SNAPUQ_ERR_SHAPE; /* no input under the window (the reference fails too) */
                }
                base = a->in + (((size_t)b * a->in_dims.h + iy0 + fy0) * a->in_dims.w + ix0 + fx0) * D;
                for (c = 0; c < D; c += 4) {
                    uint32_t se = 0, so = 0; /* channels c, c + 2 / c + 1, c + 3 */
                    const int8_t *r = base + c;
                    for (fy = fy0; fy < fy1; fy++) {
                        const int8_t *p = r;
                        for (fx = fx0; fx < fx1; fx++) {
                            const uint32_t v = snapuq_ld4(p);
                            se = snapuq_sxtab16(se, v);
                            so = snapuq_sxtab16_ror8(so, v);
                            p += D;
                        }
                        r += row;
                    }
                    out[c] = avg_out(lane16(se, 0), count, lo, hi);
                    out[c + 1] = avg_out(lane16(so, 0), count, lo, hi);
                    out[c + 2] = avg_out(lane16(se, 1), count, lo, hi);
                    out[c + 3] = avg_out(lane16(so, 1), count, lo, hi);
                }
            }
        }
    }
    return SNAPUQ_OK;
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_pooling_dsp_unused_t;
#endif
