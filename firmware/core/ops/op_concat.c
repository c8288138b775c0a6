/*
 * op_concat.c - CONCATENATION of int8 tensors (2 or 3 inputs) along one axis.
 *
 * TFLite's int8 kernel (and TFLM's) copies bytes: the converter gives every input the output's
 * scale and zero point, so no requantization happens. A model whose inputs are quantized
 * differently, or with a fused activation, is refused at parse.
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

/* ConcatenationOptions: axis (field 0, int32), fused_activation_function (field 1, byte) */
static snapuq_status_t parse_concat(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    int32_t axis = 0, sum = 0;
    uint8_t activation = 0;
    uint8_t k, d;
    if (o->n_in < 2 || o->n_in > 3) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": CONCATENATION needs 2 or 3 inputs");
    }
    if (opts->present && (snapuq_fb_i32(opts->fb, &opts->t, 0, 0, &axis) != 0 ||
                          snapuq_fb_u8(opts->fb, &opts->t, 1, 0, &activation) != 0)) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: options of operator ", op, "");
    }
    if (activation != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "operator ", op,
                           ": CONCATENATION with a fused activation");
    }
    if (axis < 0) {
        axis += out->ndim;
    }
    if (axis < 0 || axis >= (int32_t)out->ndim) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": CONCATENATION axis out of range");
    }
    for (k = 0; k < o->n_in; k++) {
        const snapuq_priv_tensor_t *in;
        if (o->in[k] < 0) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": CONCATENATION input missing");
        }
        in = snapuq_t(md, o->in[k]);
        if (in->data != NULL) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "operator ", op,
                               ": CONCATENATION of a constant tensor");
        }
        SNAPUQ_TRY(snapuq_need_int8_act(md, op, o->in[k], ": CONCATENATION input must be int8"));
        if (in->scale != out->scale || in->zero_point != out->zero_point) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op,
                               ": CONCATENATION inputs quantized differently from the output");
        }
        if (in->ndim != out->ndim) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": CONCATENATION rank mismatch");
        }
        for (d = 0; d < out->ndim; d++) {
            if ((int32_t)d != axis && in->dims[d] != out->dims[d]) {
                return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": CONCATENATION shape mismatch");
            }
        }
        sum += in->dims[axis];
    }
    if (sum != out->dims[axis]) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": CONCATENATION output size mismatch");
    }
    o->u.concat.axis = (uint8_t)axis;
    return SNAPUQ_OK;
}

static snapuq_status_t eval_concat(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *out = snapuq_tc(md, o->out);
    int32_t axis = (int32_t)o->u.concat.axis;
    uint32_t outer = 1, base = 1, pos = 0, i;
    int8_t *dst = snapuq_tensor_ptr(md, o->out);
    uint8_t k, d;
    for (d = 0; d < out->ndim; d++) {
        if ((int32_t)d < axis) {
            outer *= (uint32_t)out->dims[d];
        } else if ((int32_t)d > axis) {
            base *= (uint32_t)out->dims[d];
        }
    }
    for (i = 0; i < outer; i++) {
        for (k = 0; k < o->n_in; k++) {
            const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[k]);
            uint32_t chunk = (uint32_t)in->dims[axis] * base;
            memcpy(dst + pos, snapuq_tensor_ptr(md, o->in[k]) + i * chunk, chunk);
            pos += chunk;
        }
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_concatenation = {
    SNAPUQ_OP_CONCATENATION, SNAPUQ_OPF_INT8_IO, parse_concat, NULL, eval_concat, NULL, NULL};
