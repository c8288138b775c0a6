/*
 * op_logistic.c - LOGISTIC int8 -> int8 (output scale 1/256, zero point -128), TFLM's
 * reference integer arithmetic.
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

static snapuq_status_t parse_logistic(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_logistic_data_t *d = &o->u.logistic;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    uint32_t mi, bits;
    int32_t ei, s;
    (void)opts;
    if (!snapuq_same_shape(in, out)) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": LOGISTIC changes the shape");
    }
    memcpy(&bits, &out->scale, sizeof bits);
    if (out->zero_point != -128 || bits != 0x3B800000u) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": LOGISTIC output must have scale 1/256, zero point -128");
    }
    if (snapuq_f32_decompose(in->scale, &mi, &ei)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad LOGISTIC scale");
    }
    /* frexp(s_in * 2^27): exact, then round(q * 2^31) without the 2^31 carry fix-up:
     * the 24-bit mantissa as a Q31 fraction is mi * 2^7 */
    s = ei + 27 + 24; /* value = (mi / 2^24) * 2^s */
    if (s > 30 || s < -31) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": LOGISTIC input scale out of range");
    }
    d->mult = (int32_t)(((uint64_t)mi << 8) >> 1);
    d->left_shift = s;
    /* input radius: floor(15 * 2^27 / 2^s) */
    d->input_radius = s >= 1 ? (int32_t)((((int64_t)15) << 27) >> s) : INT32_MAX;
    return SNAPUQ_OK;
}

static snapuq_status_t eval_logistic(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    snapuq_logistic_args_t a;
    a.in = snapuq_tensor_ptr(md, o->in[0]);
    a.out = snapuq_tensor_ptr(md, o->out);
    a.n = (int32_t)snapuq_tensor_elems(in);
    a.in_zp = in->zero_point;
    a.range_radius = o->u.logistic.input_radius;
    a.mult = o->u.logistic.mult;
    a.left_shift = o->u.logistic.left_shift;
    return snapuq_kernel_status(md, op, snapuq_logistic_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_logistic = {
    SNAPUQ_OP_LOGISTIC, SNAPUQ_OPF_INT8_IO, parse_logistic, NULL, eval_logistic, NULL, NULL};
