/*
 * kernels/ref/quantize.c - QUANTIZE int8 -> int8 (requantize).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"

snapuq_status_t snapuq_requant_ref(const snapuq_requant_args_t *a)
{
    int32_t i;
    for (i = 0; i < a->n; i++) {
        const int32_t v = snapuq_mbqm((int32_t)a->in[i] - a->in_zp, a->mult, a->shift) + a->out_zp;
        a->out[i] = (int8_t)snapuq_clamp_i32(v, -128, 127);
    }
    return SNAPUQ_OK;
}
