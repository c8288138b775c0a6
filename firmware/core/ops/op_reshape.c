/*
 * op_reshape.c - RESHAPE, SQUEEZE and EXPAND_DIMS of int8 data: the bytes do not change, so the
 * planner lets the output share the input's memory (SNAPUQ_OPF_ALIAS) and eval copies only when
 * it cannot.
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

static snapuq_status_t check_same_bytes(snapuq_model_t *md, uint16_t op, const char *what,
                                        const char *what_type)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    if (in->type != out->type || in->bytes != out->bytes) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, what);
    }
    if (in->type != SNAPUQ_DTYPE_INT8) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, what_type);
    }
    return SNAPUQ_OK;
}

static snapuq_status_t parse_reshape(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    (void)opts; /* new_shape in the options duplicates the output tensor's shape */
    if (md->ops[op].n_in < 1 || md->ops[op].n_in > 2) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": RESHAPE needs 1 or 2 inputs");
    }
    return check_same_bytes(md, op, ": RESHAPE changes the size or type",
                            ": RESHAPE of non-int8 data");
}

/* SqueezeOptions.squeeze_dims (field 0): the axes to drop, or every size-1 axis when empty;
 * the output shape must be the input shape without them. */
static snapuq_status_t parse_squeeze(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    uint32_t dims = 0, n = 0, i;
    uint8_t mask = 0, k = 0;
    if (o->n_in != 1) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": SQUEEZE needs 1 input");
    }
    SNAPUQ_TRY(check_same_bytes(md, op, ": SQUEEZE changes the size or type",
                                ": SQUEEZE of non-int8 data"));
    if (opts->present && snapuq_fb_vec(opts->fb, &opts->t, 0, 4, &dims, &n) != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: options of operator ", op, "");
    }
    for (i = 0; i < n; i++) {
        int32_t a = snapuq_rd_i32(opts->fb->b + dims + 4u * i);
        if (a < 0) {
            a += in->ndim;
        }
        if (a < 0 || a >= (int32_t)in->ndim || in->dims[a] != 1) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": SQUEEZE axis out of range or not of size 1");
        }
        mask = (uint8_t)(mask | (1u << a));
    }
    for (i = 0; i < in->ndim; i++) {
        if (n == 0 && in->dims[i] == 1) {
            mask = (uint8_t)(mask | (1u << i));
        }
        if (((mask >> i) & 1u) == 0) {
            if (k >= out->ndim || out->dims[k] != in->dims[i]) {
                return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": SQUEEZE output shape does not match");
            }
            k++;
        }
    }
    if (k != out->ndim) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": SQUEEZE output shape does not match");
    }
    o->u.squeeze.squeeze_mask = mask;
    return SNAPUQ_OK;
}

/* EXPAND_DIMS: input 1 is a constant int32 scalar (or 1-element vector) axis in
 * [-(ndim + 1), ndim]; the output shape must be the input shape with a 1 inserted there. */
static snapuq_status_t parse_expand_dims(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    const snapuq_priv_tensor_t *ax;
    int32_t a;
    uint8_t i, k = 0;
    (void)opts;
    if (o->n_in != 2 || o->in[1] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": EXPAND_DIMS needs input and axis");
    }
    SNAPUQ_TRY(check_same_bytes(md, op, ": EXPAND_DIMS changes the size or type",
                                ": EXPAND_DIMS of non-int8 data"));
    ax = snapuq_t(md, o->in[1]);
    if (ax->data == NULL || ax->type != SNAPUQ_DTYPE_INT32 || snapuq_tensor_elems(ax) != 1) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op,
                           ": EXPAND_DIMS axis must be one constant int32");
    }
    a = snapuq_rd_i32(ax->data);
    if (a < 0) {
        a += (int32_t)in->ndim + 1;
    }
    if (a < 0 || a > (int32_t)in->ndim || out->ndim != in->ndim + 1) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": EXPAND_DIMS axis out of range");
    }
    for (i = 0; i < out->ndim; i++) {
        if ((int32_t)i == a ? out->dims[i] != 1 : out->dims[i] != in->dims[k++]) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": EXPAND_DIMS output shape does not match");
        }
    }
    return SNAPUQ_OK;
}

static snapuq_status_t eval_copy(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    int8_t *src = snapuq_tensor_ptr(md, o->in[0]);
    int8_t *dst = snapuq_tensor_ptr(md, o->out);
    if (src != dst) {
        memmove(dst, src, snapuq_tc(md, o->out)->bytes);
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_reshape = {SNAPUQ_OP_RESHAPE, SNAPUQ_OPF_ALIAS, parse_reshape, NULL, eval_copy, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_expand_dims = {
    SNAPUQ_OP_EXPAND_DIMS, SNAPUQ_OPF_ALIAS, parse_expand_dims, NULL, eval_copy, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_squeeze = {SNAPUQ_OP_SQUEEZE, SNAPUQ_OPF_ALIAS, parse_squeeze, NULL, eval_copy, NULL, NULL};
