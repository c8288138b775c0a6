/*
 * op_mean.c - MEAN of an int8 tensor over a constant set of axes (TFLM reference arithmetic).
 * Shared parse / kernel arguments and the reference registration; with -DSNAPUQ_KERNELS_DSP=1
 * ops/dsp/op_mean.c defines the registration instead.
 */
#include <stdint.h>

#include "op_args.h"
#include "snapuq_op.h"

snapuq_status_t snapuq_mean_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_mean_data_t *d = &o->u.mean;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    const snapuq_priv_tensor_t *ax;
    uint32_t n, i, expect = 1;

    /* ReducerOptions: keep_dims (the output shape in the file decides the layout) */
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 0, 0, &d->keep_dims));
    if (o->n_in != 2 || o->in[1] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": MEAN needs input and axis");
    }
    ax = snapuq_t(md, o->in[1]);
    if (ax->data == NULL || ax->type != SNAPUQ_DTYPE_INT32 || ax->ndim > 1) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": MEAN axis must be a constant int32 vector");
    }
    n = snapuq_tensor_elems(ax);
    if (n < 1 || in->ndim < 1) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN over no axis");
    }
    d->reduce_mask = 0;
    d->kernel = SNAPUQ_KERNEL_REF;
    for (i = 0; i < n; i++) {
        int32_t a = snapuq_rd_i32(ax->data + 4u * i);
        if (a < 0) {
            a += in->ndim;
        }
        if (a < 0 || a >= (int32_t)in->ndim) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN axis out of range");
        }
        d->reduce_mask = (uint8_t)(d->reduce_mask | (1u << a));
    }
    for (i = 0; i < in->ndim; i++) {
        if (((d->reduce_mask >> i) & 1u) == 0) {
            expect *= (uint32_t)in->dims[i];
        }
    }
    if (snapuq_tensor_elems(out) != expect) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN output shape does not match");
    }
    if (snapuq_qm_ratio_pot(in->scale, out->scale, 0, &d->mult, &d->shift)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad MEAN scales");
    }
    for (i = 0; i < 4; i++) { /* the kernel's 4-D view: dims padded with 1 in front */
        const uint32_t pad = 4u - in->ndim;
        d->dims[i] = i < pad ? 1 : in->dims[i - pad];
        d->reduce[i] = (uint8_t)(i < pad ? 0 : ((d->reduce_mask >> (i - pad)) & 1u));
    }
    return SNAPUQ_OK;
}

#if !SNAPUQ_KERNELS_DSP
static snapuq_status_t eval_mean(snapuq_model_t *md, uint16_t op)
{
    snapuq_mean_args_t a;
    snapuq_mean_args(md, &md->ops[op], &a);
    return snapuq_kernel_status(md, op, snapuq_mean_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_mean = {
    SNAPUQ_OP_MEAN, SNAPUQ_OPF_INT8_IO, snapuq_mean_parse, NULL, eval_mean, NULL, NULL};
#endif
