/*
 * kernels/ref/conv.c - reference CONV_2D (portable C; kernels/dsp/conv.c is the DSP alternative).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

snapuq_status_t snapuq_conv_ref(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, oc, ky, kx, ic;
    for (b = 0; b < a->in_dims.n; b++) {
        for (oy = 0; oy < a->out_dims.h; oy++) {
            const int32_t iy0 = oy * a->conv.stride.h - a->conv.padding.h;
            for (ox = 0; ox < a->out_dims.w; ox++) {
                const int32_t ix0 = ox * a->conv.stride.w - a->conv.padding.w;
                int8_t *out = a->out + (((size_t)b * a->out_dims.h + oy) * a->out_dims.w + ox) * a->out_dims.c;
                for (oc = 0; oc < a->out_dims.c; oc++) {
                    int32_t acc = 0;
                    for (ky = 0; ky < a->filter_dims.h; ky++) {
                        const int32_t iy = iy0 + a->conv.dilation.h * ky;
                        if (iy < 0 || iy >= a->in_dims.h) {
                            continue;
                        }
                        for (kx = 0; kx < a->filter_dims.w; kx++) {
                            const int32_t ix = ix0 + a->conv.dilation.w * kx;
                            const int8_t *in;
                            const int8_t *f;
                            if (ix < 0 || ix >= a->in_dims.w) {
                                continue;
                            }
                            in = a->in + (((size_t)b * a->in_dims.h + iy) * a->in_dims.w + ix) * a->in_dims.c;
                            f = a->filter + (((size_t)oc * a->filter_dims.h + ky) * a->filter_dims.w + kx) * a->in_dims.c;
                            for (ic = 0; ic < a->in_dims.c; ic++) {
                                acc = snapuq_add_wrap(acc, (int32_t)f[ic] * ((int32_t)in[ic] + a->conv.in_offset));
                            }
                        }
                    }
                    if (a->bias != NULL) {
                        acc = snapuq_add_wrap(acc, a->bias[oc]);
                    }
                    out[oc] = snapuq_requant_i8(acc, a->quant.mult[oc * a->quant.step], a->quant.shift[oc * a->quant.step], a->conv.out_offset,
                                                a->conv.activation.min, a->conv.activation.max);
                }
            }
        }
    }
    return SNAPUQ_OK;
}
