/*
 * op_pool.c - MAX_POOL_2D and AVERAGE_POOL_2D (int8, same quantization in and out): the shared parse,
 * MAX_POOL_2D's registration and the reference AVERAGE_POOL_2D one; with -DSNAPUQ_KERNELS_DSP=1,
 * ops/dsp/op_pool.c defines AVERAGE_POOL_2D's instead.
 */
#include <stdint.h>
#include <string.h>

#include "op_args.h"
#include "snapuq_op.h"

snapuq_status_t snapuq_pool_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
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

static snapuq_status_t eval_max(snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    snapuq_pool_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_maxpool_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_max_pool_2d = {
    SNAPUQ_OP_MAX_POOL_2D, SNAPUQ_OPF_INT8_IO, snapuq_pool_parse, NULL, eval_max, NULL, NULL};

#if !SNAPUQ_KERNELS_DSP
static snapuq_status_t eval_avg(snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    snapuq_pool_args(md, &md->ops[op], &a);
    if (snapuq_avgpool_ref(&a) != SNAPUQ_OK) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": average pool window outside the input");
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_average_pool_2d = {
    SNAPUQ_OP_AVERAGE_POOL_2D, SNAPUQ_OPF_INT8_IO, snapuq_pool_parse, NULL, eval_avg, NULL, NULL};
#endif
