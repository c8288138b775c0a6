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
    *iy0 = oy * a->stride_h - a->pad_h;
    *ix0 = ox * a->stride_w - a->pad_w;
    *fy0 = *iy0 < 0 ? -*iy0 : 0;
    *fx0 = *ix0 < 0 ? -*ix0 : 0;
    *fy1 = a->f_h < a->in_h - *iy0 ? a->f_h : a->in_h - *iy0;
    *fx1 = a->f_w < a->in_w - *ix0 ? a->f_w : a->in_w - *ix0;
}

void snapuq_maxpool_ref(const snapuq_pool_args_t *a)
{
    /* 4 channels at a time in registers, window rows walked by pointer */
    const int32_t D = a->depth;
    const ptrdiff_t row = (ptrdiff_t)a->in_w * D;
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            for (ox = 0; ox < a->out_w; ox++) {
                int32_t iy0, ix0, fy0, fy1, fx0, fx1;
                pool_window(a, oy, ox, &iy0, &ix0, &fy0, &fy1, &fx0, &fx1);
                const int32_t empty = fy0 >= fy1 || fx0 >= fx1; /* no input under the window */
                const int8_t *base = empty ? a->in : a->in + (((size_t)b * a->in_h + iy0 + fy0) * a->in_w + ix0 + fx0) * D;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * D;
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
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->act_min, a->act_max);
                    out[c + 1] = (int8_t)snapuq_clamp_i32(m1, a->act_min, a->act_max);
                    out[c + 2] = (int8_t)snapuq_clamp_i32(m2, a->act_min, a->act_max);
                    out[c + 3] = (int8_t)snapuq_clamp_i32(m3, a->act_min, a->act_max);
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
                    out[c] = (int8_t)snapuq_clamp_i32(m0, a->act_min, a->act_max);
                }
            }
        }
    }
}

int snapuq_avgpool_ref(const snapuq_pool_args_t *a)
{
    int32_t b, oy, ox, c, fy, fx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            for (ox = 0; ox < a->out_w; ox++) {
                int32_t iy0, ix0, fy0, fy1, fx0, fx1;
                pool_window(a, oy, ox, &iy0, &ix0, &fy0, &fy1, &fx0, &fx1);
                for (c = 0; c < a->depth; c++) {
                    int32_t acc = 0, count = 0;
                    for (fy = fy0; fy < fy1; fy++) {
                        for (fx = fx0; fx < fx1; fx++) {
                            acc = snapuq_add_wrap(acc, a->in[(((size_t)b * a->in_h + iy0 + fy) * a->in_w + ix0 + fx) * a->depth + c]);
                            count++;
                        }
                    }
                    if (count == 0) {
                        return 0;
                    }
                    acc = (int32_t)(acc > 0 ? ((int64_t)acc + count / 2) / count : ((int64_t)acc - count / 2) / count);
                    acc = snapuq_clamp_i32(acc, a->act_min, a->act_max);
                    a->out[(((size_t)b * a->out_h + oy) * a->out_w + ox) * a->depth + c] = (int8_t)acc;
                }
            }
        }
    }
    return 1;
}
