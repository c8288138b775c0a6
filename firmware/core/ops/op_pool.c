/*
 * op_pool.c - MAX_POOL_2D and AVERAGE_POOL_2D (int8, same quantization in and out).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

static snapuq_status_t parse_pool(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_pool_data_t *d = &o->u.pool;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    int16_t fw = 1, fh = 1;
    uint8_t activation = 0;
    /* Pool2DOptions: padding, stride_w, stride_h, filter_width, filter_height, activation */
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 0, 0, &d->win.padding));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 1, 1, &d->win.stride_w));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 2, 1, &d->win.stride_h));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 3, 1, &fw));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 4, 1, &fh));
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 5, 0, &activation));
    d->win.dil_h = d->win.dil_w = 1;
    SNAPUQ_TRY(snapuq_window(md, op, &d->win, in, out, fh, fw));
    if (in->dims[3] != out->dims[3]) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": pooling changes the channel count");
    }
    if (in->zero_point != out->zero_point || memcmp(&in->scale, &out->scale, sizeof(float)) != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": pooling input and output quantization differ");
    }
    return snapuq_act_range(md, op, activation, out, &d->act_min, &d->act_max);
}

static SNAPUQ_ALWAYS_INLINE void pool_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_pool_args_t *a)
{
    const snapuq_pool_data_t *d = &o->u.pool;
    a->pool.stride.h = d->win.stride_h;
    a->pool.stride.w = d->win.stride_w;
    a->pool.padding.h = d->win.pad_h;
    a->pool.padding.w = d->win.pad_w;
    a->pool.activation.min = d->act_min;
    a->pool.activation.max = d->act_max;
    a->in_dims = snapuq_dims_of(snapuq_tc(md, o->in[0]));
    a->filter_dims.n = a->filter_dims.c = 1;
    a->filter_dims.h = d->win.filter_h;
    a->filter_dims.w = d->win.filter_w;
    a->out_dims = snapuq_dims_of(snapuq_tc(md, o->out));
    a->in = snapuq_tensor_ptr(md, o->in[0]);
    a->out = snapuq_tensor_ptr(md, o->out);
}

static snapuq_status_t eval_max(snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    pool_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_maxpool_ref(&a));
}

static snapuq_status_t eval_avg(snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    pool_args(md, &md->ops[op], &a);
    if (snapuq_avgpool_ref(&a) != SNAPUQ_OK) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": average pool window outside the input");
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_max_pool_2d = {
    SNAPUQ_OP_MAX_POOL_2D, SNAPUQ_OPF_INT8_IO, parse_pool, NULL, eval_max, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_average_pool_2d = {
    SNAPUQ_OP_AVERAGE_POOL_2D, SNAPUQ_OPF_INT8_IO, parse_pool, NULL, eval_avg, NULL, NULL};
