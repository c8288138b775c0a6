/*
 * ops/op_args.h - the kernel arguments of an operator, built at eval from its typed data and tensors
 * (internal): shared by the reference registrations (ops/op_<op>.c) and the DSP ones
 * (ops/dsp/op_<op>.c); static inline so each eval builds them in place, as before the split.
 */
#ifndef SNAPUQ_OP_ARGS_H
#define SNAPUQ_OP_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

/* CONV_2D / DEPTHWISE_CONV_2D (no scratch: a registration that asks for some sets a->ctx) */
static SNAPUQ_ALWAYS_INLINE void snapuq_conv_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_conv_args_t *a)
{
    const snapuq_conv_data_t *d = &o->u.conv;
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_tc(md, o->out);
    a->ctx = snapuq_op_context(md, o, 0); /* a registration that asks for scratch sets its size */
    a->conv.in_offset = -in->zero_point;
    a->conv.out_offset = out->zero_point;
    a->conv.stride.h = d->win.stride_h;
    a->conv.stride.w = d->win.stride_w;
    a->conv.padding.h = d->win.pad_h;
    a->conv.padding.w = d->win.pad_w;
    a->conv.dilation.h = d->win.dil_h;
    a->conv.dilation.w = d->win.dil_w;
    a->conv.depth_mult = d->depth_mult;
    a->conv.activation.min = d->act_min;
    a->conv.activation.max = d->act_max;
    a->quant = snapuq_op_quant(md, o, d->n_quant);
    a->in_dims = snapuq_dims_of(in);
    a->filter_dims = snapuq_dims_of(snapuq_tc(md, o->in[1]));
    a->out_dims = snapuq_dims_of(out);
    a->in = snapuq_tensor_ptr(md, o->in[0]);
    a->filter = (const int8_t *)snapuq_tc(md, o->in[1])->data;
    a->bias = (o->n_in > 2 && o->in[2] >= 0) ? (const int32_t *)(const void *)snapuq_tc(md, o->in[2])->data : NULL;
    a->out = snapuq_tensor_ptr(md, o->out);
}

/* FULLY_CONNECTED: rows = input elements / depth */
static SNAPUQ_ALWAYS_INLINE void snapuq_fc_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_fc_args_t *a)
{
    const snapuq_fc_data_t *d = &o->u.fc;
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    const snapuq_priv_tensor_t *w = snapuq_tc(md, o->in[1]);
    const int32_t depth = w->dims[1], units = w->dims[0];
    const int32_t rows = (int32_t)d->rows;
    a->ctx = snapuq_op_context(md, o, 0); /* a registration that asks for scratch sets its size */
    a->fc.in_offset = -in->zero_point;
    a->fc.out_offset = snapuq_tc(md, o->out)->zero_point;
    a->fc.activation.min = d->act_min;
    a->fc.activation.max = d->act_max;
    a->quant = snapuq_op_quant(md, o, d->n_quant);
    a->in_dims.n = rows;
    a->in_dims.h = a->in_dims.w = 1;
    a->in_dims.c = depth;
    a->filter_dims.n = units;
    a->filter_dims.h = a->filter_dims.w = 1;
    a->filter_dims.c = depth;
    a->out_dims.n = rows;
    a->out_dims.h = a->out_dims.w = 1;
    a->out_dims.c = units;
    a->in = snapuq_tensor_ptr(md, o->in[0]);
    a->filter = (const int8_t *)w->data;
    a->bias = (o->n_in > 2 && o->in[2] >= 0) ? (const int32_t *)(const void *)snapuq_tc(md, o->in[2])->data : NULL;
    a->out = snapuq_tensor_ptr(md, o->out);
}

/* MAX_POOL_2D / AVERAGE_POOL_2D */
static SNAPUQ_ALWAYS_INLINE void snapuq_pool_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_pool_args_t *a)
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

/* MEAN */
/* the kernel arguments; with_data 0: no data pointers (NULL), usable before the arena */
static SNAPUQ_ALWAYS_INLINE void snapuq_mean_fill_(const snapuq_model_t *md, const snapuq_priv_op_t *o,
                                     snapuq_mean_args_t *a, int with_data)
{
    const snapuq_mean_data_t *d = &o->u.mean;
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    a->in = with_data ? snapuq_tensor_ptr(md, o->in[0]) : NULL;
    a->out = with_data ? snapuq_tensor_ptr(md, o->out) : NULL;
    a->dims[0] = d->dims[0];
    a->dims[1] = d->dims[1];
    a->dims[2] = d->dims[2];
    a->dims[3] = d->dims[3];
    memcpy(a->reduce, d->reduce, 4);
    a->in_zp = in->zero_point;
    a->out_zp = snapuq_tc(md, o->out)->zero_point;
    a->mult = d->mult;
    a->shift = d->shift;
}

static inline void snapuq_mean_shape(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_mean_args_t *a)
{
    snapuq_mean_fill_(md, o, a, 0);
}

static inline void snapuq_mean_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_mean_args_t *a)
{
    snapuq_mean_fill_(md, o, a, 1);
}

#endif /* SNAPUQ_OP_ARGS_H */
