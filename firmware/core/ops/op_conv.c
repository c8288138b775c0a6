/*
 * op_conv.c - CONV_2D and DEPTHWISE_CONV_2D (int8, per-channel or per-tensor weights): the shared
 * parse / prepare / kernel arguments (TFLM's conv_common.cc) and the reference registrations. With
 * -DSNAPUQ_KERNELS_DSP=1, ops/dsp/op_conv.c defines the registrations instead (DSP kernels, arena
 * scratch).
 */
#include <stdint.h>

#include "op_args.h"
#include "snapuq_op.h"

snapuq_status_t snapuq_conv_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_conv_data_t *d = &o->u.conv;
    const int dw = o->builtin == SNAPUQ_OP_DEPTHWISE_CONV_2D;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    const snapuq_priv_tensor_t *w;
    uint8_t activation = 0;
    int32_t cout;

    if (o->n_in < 2 || o->n_in > 3 || o->in[1] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": conv needs input, filter[, bias]");
    }
    w = snapuq_t(md, o->in[1]);
    d->depth_mult = 1;
    d->kernel = SNAPUQ_KERNEL_REF;
    /* Conv2DOptions: padding, stride_w, stride_h, activation, dilation_w, dilation_h;
     * DepthwiseConv2DOptions: padding, stride_w, stride_h, depth_multiplier, activation, ... */
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 0, 0, &d->win.padding));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 1, 1, &d->win.stride_w));
    SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 2, 1, &d->win.stride_h));
    if (!dw) {
        SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 3, 0, &activation));
        SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 4, 1, &d->win.dil_w));
        SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 5, 1, &d->win.dil_h));
    } else {
        SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 3, 1, &d->depth_mult));
        SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 4, 0, &activation));
        SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 5, 1, &d->win.dil_w));
        SNAPUQ_TRY(snapuq_opt_i16(md, op, opts, 6, 1, &d->win.dil_h));
    }
    if (w->ndim != 4 || in->ndim != 4 || out->ndim != 4) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": conv tensors must be 4-D");
    }
    cout = out->dims[3];
    if (!dw) {
        if (w->dims[0] != cout || w->dims[3] != in->dims[3]) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": filter shape does not match channels");
        }
        if (w->n_scales > 1 && w->dims[0] != (int16_t)w->n_scales) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": per-channel scales not on axis 0");
        }
    } else if (w->dims[0] != 1 || w->dims[3] != cout || d->depth_mult < 1 ||
               (int32_t)in->dims[3] * d->depth_mult != cout) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": depthwise filter shape does not match channels");
    }
    SNAPUQ_TRY(snapuq_check_weights(md, op, o->in[1], o->n_in > 2 ? o->in[2] : -1, cout));
    SNAPUQ_TRY(snapuq_window(md, op, &d->win, in, out, w->dims[1], w->dims[2]));
    SNAPUQ_TRY(snapuq_check_multipliers(md, op, in, w, out));
    d->n_channels = (uint16_t)cout;
    /* one (mult, shift) per output channel for per-channel weights, one pair for per-tensor */
    d->n_quant = w->n_scales > 1 ? d->n_channels : 1u;
    o->persist_bytes = 8u * (uint32_t)d->n_quant;
    return snapuq_act_range(md, op, activation, out, &d->act_min, &d->act_max);
}

snapuq_status_t snapuq_conv_prepare(snapuq_model_t *md, uint16_t op)
{
    return snapuq_prepare_per_channel(md, op, md->ops[op].u.conv.n_quant);
}

#if !SNAPUQ_KERNELS_DSP
static snapuq_status_t eval_conv(snapuq_model_t *md, uint16_t op)
{
    snapuq_conv_args_t a;
    snapuq_conv_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_conv_ref(&a));
}

static snapuq_status_t eval_dwconv(snapuq_model_t *md, uint16_t op)
{
    snapuq_conv_args_t a;
    snapuq_conv_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_dwconv_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_conv_2d = {
    SNAPUQ_OP_CONV_2D, SNAPUQ_OPF_INT8_IO, snapuq_conv_parse, snapuq_conv_prepare, eval_conv, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_depthwise_conv_2d = {
    SNAPUQ_OP_DEPTHWISE_CONV_2D, SNAPUQ_OPF_INT8_IO, snapuq_conv_parse, snapuq_conv_prepare, eval_dwconv, NULL, NULL};
#endif
