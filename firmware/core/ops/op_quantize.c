/*
 * op_quantize.c - QUANTIZE int8 -> int8 (requantization) and DEQUANTIZE int8 -> float32.
 *
 * DEQUANTIZE computes float(scale * (q - zp)) as TFLM does; the product of a float32 scale and
 * an integer below 2^9 is exact in double, so one float32 multiplication rounds it identically.
 */
#include <stdint.h>

#include "snapuq_op.h"

static snapuq_status_t parse_quantize(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    (void)opts;
    if (!snapuq_same_shape(in, out)) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": QUANTIZE changes the shape");
    }
    if (snapuq_qm_ratio_pot(in->scale, out->scale, 0, &o->u.quantize.mult, &o->u.quantize.shift)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad QUANTIZE scales");
    }
    return SNAPUQ_OK;
}

static snapuq_status_t eval_quantize(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    snapuq_requant_args_t a;
    a.in = snapuq_tensor_ptr(md, o->in[0]);
    a.out = snapuq_tensor_ptr(md, o->out);
    a.n = (int32_t)snapuq_tensor_elems(in);
    a.in_zp = in->zero_point;
    a.out_zp = snapuq_tc(md, o->out)->zero_point;
    a.mult = o->u.quantize.mult;
    a.shift = o->u.quantize.shift;
    return snapuq_kernel_status(md, op, snapuq_requant_ref(&a));
}

static snapuq_status_t parse_dequantize(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    (void)opts;
    if (o->n_in != 1) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": DEQUANTIZE needs 1 input");
    }
    SNAPUQ_TRY(snapuq_need_int8_act(md, op, o->in[0], ": input must be int8"));
    if (out->type != SNAPUQ_DTYPE_FLOAT32) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": DEQUANTIZE output must be float32");
    }
    if (!snapuq_same_shape(in, out)) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": DEQUANTIZE changes the shape");
    }
    return SNAPUQ_OK;
}

static snapuq_status_t eval_dequantize(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    const int8_t *x = snapuq_tensor_ptr(md, o->in[0]);
    float *y = (float *)(void *)snapuq_tensor_ptr(md, o->out); /* arena offsets are 16-aligned */
    const uint32_t n = snapuq_tensor_elems(in);
    uint32_t i;
    for (i = 0; i < n; i++) {
        y[i] = (float)((int32_t)x[i] - in->zero_point) * in->scale;
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_quantize = {
    SNAPUQ_OP_QUANTIZE, SNAPUQ_OPF_INT8_IO, parse_quantize, NULL, eval_quantize, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_dequantize = {
    SNAPUQ_OP_DEQUANTIZE, 0, parse_dequantize, NULL, eval_dequantize, NULL, NULL};
