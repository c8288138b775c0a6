/*
 * op_softmax.c - SOFTMAX over the last axis, int8 -> int8 (output scale 1/256, zero point -128).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

static snapuq_status_t parse_softmax(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_softmax_data_t *d = &o->u.softmax;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    float beta = 1.0f;
    uint32_t mb, mi, bits;
    int32_t eb, ei;
    /* SoftmaxOptions: beta */
    SNAPUQ_TRY(snapuq_opt_f32(md, op, opts, 0, 1.0f, &beta));
    if (!snapuq_same_shape(in, out) || in->ndim < 1) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": SOFTMAX changes the shape");
    }
    memcpy(&bits, &out->scale, sizeof bits);
    if (out->zero_point != -128 || bits != 0x3B800000u) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": SOFTMAX output must have scale 1/256, zero point -128");
    }
    if (snapuq_f32_decompose(beta, &mb, &eb) || snapuq_f32_decompose(in->scale, &mi, &ei)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad SOFTMAX beta or scale");
    }
    /* QuantizeMultiplierGreaterThanOne(min(beta * s_in * 2^26, 2^31 - 1)) */
    snapuq_quantize_ratio((uint64_t)mb * mi, eb + ei + 26, 1, 0, 1, &d->mult, &d->left_shift);
    if (d->left_shift < 1 || d->left_shift > 30) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": SOFTMAX input scale too small");
    }
    d->diff_min = -(int32_t)((((int64_t)31) << 26) >> d->left_shift);
    return SNAPUQ_OK;
}

static snapuq_status_t eval_softmax(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    snapuq_softmax_args_t a;
    a.in = snapuq_tensor_ptr(md, o->in[0]);
    a.out = snapuq_tensor_ptr(md, o->out);
    a.depth = in->dims[in->ndim - 1];
    a.outer = (int32_t)(snapuq_tensor_elems(in) / (uint32_t)a.depth);
    a.mult = o->u.softmax.mult;
    a.left_shift = o->u.softmax.left_shift;
    a.diff_min = o->u.softmax.diff_min;
    return snapuq_kernel_status(md, op, snapuq_softmax_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_softmax = {
    SNAPUQ_OP_SOFTMAX, SNAPUQ_OPF_INT8_IO, parse_softmax, NULL, eval_softmax, NULL, NULL};
