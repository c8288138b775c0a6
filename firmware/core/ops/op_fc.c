/*
 * op_fc.c - FULLY_CONNECTED (int8, per-channel or per-tensor weights, any batch count).
 * Shared parse / prepare / kernel arguments and the reference registration; with
 * -DSNAPUQ_KERNELS_DSP=1 ops/dsp/op_fc.c defines the registration instead.
 */
#include <stdint.h>

#include "op_args.h"
#include "snapuq_op.h"

snapuq_status_t snapuq_fc_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_fc_data_t *d = &o->u.fc;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    const snapuq_priv_tensor_t *w;
    uint8_t activation = 0, wfmt = 0, keep_num_dims = 0;
    uint32_t in_el, depth, batches;

    if (o->n_in < 2 || o->n_in > 3 || o->in[1] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": fully connected needs input, weights[, bias]");
    }
    w = snapuq_t(md, o->in[1]);
    /* FullyConnectedOptions: fused_activation_function, weights_format, keep_num_dims */
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 0, 0, &activation));
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 1, 0, &wfmt));
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 2, 0, &keep_num_dims)); /* checked, shape decides */
    if (wfmt != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": shuffled weights format");
    }
    if (w->ndim != 2) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": weights must be 2-D");
    }
    depth = (uint32_t)w->dims[1];
    in_el = snapuq_tensor_elems(in);
    if (depth == 0 || in_el % depth != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": input size is not a multiple of the weight depth");
    }
    batches = in_el / depth;
    d->rows = batches;
    if (out->ndim < 1 || out->dims[out->ndim - 1] != w->dims[0] ||
        snapuq_tensor_elems(out) != batches * (uint32_t)w->dims[0]) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": output shape does not match the weights");
    }
    SNAPUQ_TRY(snapuq_check_weights(md, op, o->in[1], o->n_in > 2 ? o->in[2] : -1, w->dims[0]));
    SNAPUQ_TRY(snapuq_check_multipliers(md, op, in, w, out));
    d->n_channels = (uint16_t)w->dims[0];
    /* one (mult, shift) per output channel for per-channel weights, one pair for per-tensor */
    d->n_quant = w->n_scales > 1 ? d->n_channels : 1u;
    o->persist_bytes = 8u * d->n_quant;
    return snapuq_act_range(md, op, activation, out, &d->act_min, &d->act_max);
}

snapuq_status_t snapuq_fc_prepare(snapuq_model_t *md, uint16_t op)
{
    return snapuq_prepare_per_channel(md, op, md->ops[op].u.fc.n_quant);
}

#if !SNAPUQ_KERNELS_DSP
static snapuq_status_t eval_fc(snapuq_model_t *md, uint16_t op)
{
    snapuq_fc_args_t a;
    snapuq_fc_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_fc_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_fully_connected = {
    SNAPUQ_OP_FULLY_CONNECTED, SNAPUQ_OPF_INT8_IO, snapuq_fc_parse, snapuq_fc_prepare, eval_fc, NULL, NULL};
#endif
