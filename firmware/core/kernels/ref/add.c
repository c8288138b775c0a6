/*
 * kernels/ref/add.c - element-wise ADD (TFLM AddFunc arithmetic; SMLAL requantization when no
 * multiplier is INT32_MIN).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (default double rounding); the loop
 * order only changes the order of exact int32 sums, never a result.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_simd.h"

/* snapuq_mbqm for a multiplier other than INT32_MIN (shift split into left/right once): one SMLAL,
 * floor((a*b + 2^30) / 2^31) being the rounding doubling high multiply for such b, then the
 * rounding right shift */
static inline int32_t mbqm_split(int32_t x, int32_t m, int left, int right)
{
    const int64_t p = (int64_t)snapuq_shl_wrap(x, left) * m + ((int64_t)1 << 30);
    const int32_t y = (int32_t)(p >> 31); /* arithmetic shift on every supported compiler */
    return right > 0 ? snapuq_rshift_round(y, right) : y;
}

snapuq_status_t snapuq_add_ref(const snapuq_add_args_t *a)
{
    int32_t i;
    if (a->in1_mult != INT32_MIN && a->in2_mult != INT32_MIN && a->out_mult != INT32_MIN) {
        const int l1 = a->in1_shift > 0 ? (int)a->in1_shift : 0, r1 = a->in1_shift > 0 ? 0 : (int)-a->in1_shift;
        const int l2 = a->in2_shift > 0 ? (int)a->in2_shift : 0, r2 = a->in2_shift > 0 ? 0 : (int)-a->in2_shift;
        const int lo = a->out_shift > 0 ? (int)a->out_shift : 0, ro = a->out_shift > 0 ? 0 : (int)-a->out_shift;
        for (i = 0; i < a->n; i++) {
            const int32_t x1 = snapuq_shl_wrap(a->in1_offset + a->in1[i], a->left_shift);
            const int32_t x2 = snapuq_shl_wrap(a->in2_offset + a->in2[i], a->left_shift);
            const int32_t s1 = mbqm_split(x1, a->in1_mult, l1, r1);
            const int32_t s2 = mbqm_split(x2, a->in2_mult, l2, r2);
            const int32_t raw = mbqm_split((int32_t)((uint32_t)s1 + (uint32_t)s2), a->out_mult, lo, ro) + a->out_offset;
            a->out[i] = (int8_t)snapuq_clamp_i32(raw, a->act_min, a->act_max);
        }
        return SNAPUQ_OK;
    }
    for (i = 0; i < a->n; i++) {
        const int32_t x1 = snapuq_shl_wrap(a->in1_offset + a->in1[i], a->left_shift);
        const int32_t x2 = snapuq_shl_wrap(a->in2_offset + a->in2[i], a->left_shift);
        const int32_t s1 = snapuq_mbqm(x1, a->in1_mult, a->in1_shift);
        const int32_t s2 = snapuq_mbqm(x2, a->in2_mult, a->in2_shift);
        const int32_t raw = snapuq_mbqm((int32_t)((uint32_t)s1 + (uint32_t)s2), a->out_mult, a->out_shift) +
                            a->out_offset;
        a->out[i] = (int8_t)snapuq_clamp_i32(raw, a->act_min, a->act_max);
    }
    return SNAPUQ_OK;
}
