/*
 * kernels/ref/pooling.c - MAX_POOL_2D (4 channels per pass) and AVERAGE_POOL_2D.
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

static inline int32_t max_i32(int32_t x, int32_t y)
{
    return x > y ? x : y;
}

/* The window of output (oy, ox): its top-left input (iy0, ix0) and the filter rows [fy0, fy1) and
 * columns [fx0, fx1) that fall on the input (padding taps are skipped, as TFLM does). */
static inline void pool_window(const snapuq_pool_args_t *a, int32_t oy, int32_t ox, int32_t *iy0,
                               int32_t *ix0, int32_t *fy0, int32_t *fy1, int32_t *fx0, int32_t *fx1)
{
    *iy0 = oy * a->pool.stride.h - a->pool.padding.h;
    *ix0 = ox * a->pool.stride.w - a->pool.padding.w;
    *fy0 = *iy0 < 0 ? -*iy0 : 0;
    *fx0 = *ix0 < 0 ? -*ix0 : 0;
    *fy1 = a->filter_dims.h < a->in_dims.h - *iy0 ? a->filter_dims.h : a->in_dims.h - *iy0;
    *fx1 = a->filter_dims.w < a->in_dims.w - *ix0 ? a->filter_dims.w : a->in_dims.w - *ix0;
}

snapuq_status_t snapuq_maxpool_ref(const snapuq_pool_args_t *a)
{
    /* 4 channels at a time in registers, window rows walked by pointer */
    const int32_t D = a->in_dims.c;
    const ptrdiff_t row = (ptrdiff_t)a->in_dims.w * D;
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->in_dims.n; b++) {
        for (oy = 0; oy < a->out_dims.h; oy++) {
            for (ox = 0; ox < a->out_dims.w; ox++) {
                int32_t iy0, ix0, fy0, fy1, fx0, fx1;
                pool_window(a, oy, ox, &iy0, &ix0, &fy0, &fy1, &fx0, &fx1);
                const int32_t empty = fy0 >= fy1 || fx0 >= fx1; /* no input under the window */
                const int8_t *base = empty ? a->in : a->in + (((size_t)b * a->in_dims.h + iy0 + fy0) * a->in_dims.w + ix0 + fx0) * D;
                int8_t *out = a->out + (((size_t)b * a->out_dims.h + oy) * a->out_dims.w + ox) * D;
                for (c = 0; c + 4 <= D; c += 4) {
                    int32_t m0 = -128, m1 = -128, m2 = -128, m3 = -128;
                    const int8_t *r = base + c;
                    for (fy = fy0; fy < fy1; fy++) {
                        const int8_t *p = r;
                        for (fx = fx0; fx < fx1; fx++) {
                            m0 = max_i32(m0, p[0]);
                            m1 = max_i32(m1, p[1]);
                            m2 = max_i32(m2, p[2]);
                            m3 = max_i32(m3, p[3]);
                            p += D;
                        }
                        r += row;
                    }
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->pool.activation.min, a->pool.activation.max);
                    out[c + 1] = (int8_t)snapuq_clamp_i32(m1, a->pool.activation.min, a->pool.activation.max);
                    out[c + 2] = (int8_t)snapuq_clamp_i32(m2, a->pool.activation.min, a->pool.activation.max);
                    out[c + 3] = (int8_t)snapuq_clamp_i32(m3, a->pool.activation.min, a->pool.activation.max);
                }
                for (; c < D; c++) {
                    int32_t m0 = -128;
                    const int8_t *r = base + c;
                    for (fy = fy0; fy < fy1; fy++) {
                        const int8_t *p = r;
                        for (fx = fx0; fx < fx1; fx++) {
                            m0 = max_i32(m0, p[0]);
                            p += D;
                        }
                        r += row;
                    }
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->pool.activation.min, a->pool.activation.max);
                }
            }
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_avgpool_ref(const snapuq_pool_args_t *a)
{
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->in_dims.n; b++) {
        for (oy = 0; oy < a->out_dims.h; oy++) {
            for (ox = 0; ox < a->out_dims.w; ox++) {
                int32_t iy0, ix0, fy0, fy1, fx0, fx1;
                pool_window(a, oy, ox, &iy0, &ix0, &fy0, &fy1, &fx0, &fx1);
                for (c = 0; c < a->in_dims.c; c++) {
                    int32_t acc = 0, count = 0;
                    for (fy = fy0; fy < fy1; fy++) {
                        for (fx = fx0; fx < fx1; fx++) {
                            acc = snapuq_add_wrap(acc, a->in[(((size_t)b * a->in_dims.h + iy0 + fy) * a->in_dims.w + ix0 + fx) * a->in_dims.c + c]);
                            count++;
                        }
                    }
                    if (count == 0) {
                        return SNAPUQ_ERR_SHAPE;
                    }
                    acc = (int32_t)(acc > 0 ? ((int64_t)acc + count / 2) / count : ((int64_t)acc - count / 2) / count);
                    acc = snapuq_clamp_i32(acc, a->pool.activation.min, a->pool.activation.max);
                    a->out[(((size_t)b * a->out_dims.h + oy) * a->out_dims.w + ox) * a->in_dims.c + c] = (int8_t)acc;
                }
            }
        }
    }
    return SNAPUQ_OK;
}
