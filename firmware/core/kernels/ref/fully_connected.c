/*
 * kernels/ref/fully_connected.c - reference FULLY_CONNECTED.
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

snapuq_status_t snapuq_fc_ref(const snapuq_fc_args_t *a)
{
    int32_t b, oc, d;
    for (b = 0; b < a->in_dims.n; b++) {
        const int8_t *in = a->in + (size_t)b * a->filter_dims.c;
        for (oc = 0; oc < a->out_dims.c; oc++) {
            const int8_t *f = a->filter + (size_t)oc * a->filter_dims.c;
            int32_t acc = 0;
            for (d = 0; d < a->filter_dims.c; d++) {
                acc = snapuq_add_wrap(acc, (int32_t)f[d] * ((int32_t)in[d] + a->fc.in_offset));
            }
            if (a->bias != NULL) {
                acc = snapuq_add_wrap(acc, a->bias[oc]);
            }
            acc = snapuq_mbqm(acc, a->quant.mult[oc * a->quant.step], a->quant.shift[oc * a->quant.step]) + a->fc.out_offset;
            a->out[(size_t)b * a->out_dims.c + oc] = (int8_t)snapuq_clamp_i32(acc, a->fc.activation.min, a->fc.activation.max);
        }
    }
    return SNAPUQ_OK;
}
