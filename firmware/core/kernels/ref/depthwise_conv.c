/*
 * kernels/ref/depthwise_conv.c - reference DEPTHWISE_CONV_2D (any depth multiplier).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

void snapuq_dwconv_ref(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, ic, m, ky, kx;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                for (ic = 0; ic < a->in_c; ic++) {
                    for (m = 0; m < a->depth_mult; m++) {
                        const int32_t oc = ic * a->depth_mult + m;
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
                                acc = snapuq_add_wrap(acc, (int32_t)a->filter[((size_t)ky * a->k_w + kx) * a->out_c + oc] *
                                       ((int32_t)a->in[(((size_t)b * a->in_h + iy) * a->in_w + ix) *
                                                           a->in_c + ic] +
                                        a->in_offset));
                            }
                        }
                        if (a->bias != NULL) {
                            acc = snapuq_add_wrap(acc, a->bias[oc]);
                        }
                        out[oc] = snapuq_requant_i8(acc, a->mult[oc * a->q_step], a->shift[oc * a->q_step], a->out_offset,
                                                    a->act_min, a->act_max);
                    }
                }
            }
        }
    }
}
