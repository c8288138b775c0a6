/*
 * ops/dsp/op_conv.c - the CONV_2D and DEPTHWISE_CONV_2D registrations of the DSP build
 * (-DSNAPUQ_KERNELS_DSP=1; they replace ops/op_conv.c's reference ones, TFLM's cmsis_nn/conv.cc
 * style): the shared parse, then the kernel choice and its arena scratch.
 *  - CONV_2D: snapuq_conv_dsp for every shape; its patch path (in_c % 4 != 0) and its 1x1 path
 *    (4 B per input channel) get snapuq_conv_dsp_scratch_size() bytes of arena scratch, planned
 *    for this operator's step.
 *  - DEPTHWISE_CONV_2D: snapuq_dwconv_dsp for depth multiplier 1, with its filter copy in arena
 *    scratch (snapuq_dwconv_dsp_scratch_size()), the reference kernel otherwise (reported as "ref" by
 *    snapuq_model_op_kernel; no scratch).
 */
#include <stdint.h>

#include "../op_args.h"
#include "snapuq_op.h"

#if SNAPUQ_KERNELS_DSP

static snapuq_status_t parse_conv_dsp(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    SNAPUQ_TRY(snapuq_conv_parse(md, op, opts));
    md->ops[op].u.conv.kernel = SNAPUQ_KERNEL_DSP;
    return SNAPUQ_OK;
}

/* the planner's scratch query: the patch path's buffer (0 for in_c % 4 == 0) */
static uint32_t scratch_conv_dsp(const snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_dims_t in = snapuq_dims_of(snapuq_tc(md, o->in[0]));
    const snapuq_dims_t f = snapuq_dims_of(snapuq_tc(md, o->in[1]));
    return snapuq_conv_dsp_scratch_size(&in, &f);
}

static snapuq_status_t parse_dwconv_dsp(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    SNAPUQ_TRY(snapuq_conv_parse(md, op, opts));
    o->u.conv.kernel = o->u.conv.depth_mult == 1 ? SNAPUQ_KERNEL_DSP : SNAPUQ_KERNEL_REF;
    return SNAPUQ_OK;
}

static snapuq_status_t eval_conv_dsp(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    snapuq_conv_args_t a;
    snapuq_conv_args(md, o, &a);
    a.ctx = snapuq_op_context(md, o, snapuq_conv_dsp_scratch_size(&a.in_dims, &a.filter_dims));
    return snapuq_kernel_status(md, op, snapuq_conv_dsp(&a));
}

/* the planner's scratch query: the filter copy of the DSP kernel */
static uint32_t scratch_dwconv_dsp(const snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_dims_t f = snapuq_dims_of(snapuq_tc(md, o->in[1]));
    return o->u.conv.kernel == SNAPUQ_KERNEL_DSP ? snapuq_dwconv_dsp_scratch_size(&f) : 0u;
}

static snapuq_status_t eval_dwconv_dsp(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    snapuq_conv_args_t a;
    snapuq_conv_args(md, o, &a);
    if (o->u.conv.kernel == SNAPUQ_KERNEL_DSP) {
        a.ctx = snapuq_op_context(md, o, snapuq_dwconv_dsp_scratch_size(&a.filter_dims));
    }
    return snapuq_kernel_status(md, op, o->u.conv.kernel == SNAPUQ_KERNEL_DSP ? snapuq_dwconv_dsp(&a)
                                                                             : snapuq_dwconv_ref(&a));
}

static const char *kernel_conv_dsp(const snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_dims_t in = snapuq_dims_of(snapuq_tc(md, o->in[0]));
    const snapuq_dims_t f = snapuq_dims_of(snapuq_tc(md, o->in[1]));
    return snapuq_conv_dsp_kernel(&in, &f);
}

static const char *kernel_dwconv_dsp(const snapuq_model_t *md, uint16_t op)
{
    return md->ops[op].u.conv.kernel == SNAPUQ_KERNEL_DSP ? "dsp" : "ref";
}

const snapuq_op_reg_t snapuq_reg_conv_2d = {SNAPUQ_OP_CONV_2D, SNAPUQ_OPF_INT8_IO, parse_conv_dsp,
                                            snapuq_conv_prepare, eval_conv_dsp, scratch_conv_dsp,
                                            kernel_conv_dsp};
const snapuq_op_reg_t snapuq_reg_depthwise_conv_2d = {SNAPUQ_OP_DEPTHWISE_CONV_2D, SNAPUQ_OPF_INT8_IO,
                                                      parse_dwconv_dsp, snapuq_conv_prepare, eval_dwconv_dsp,
                                                      scratch_dwconv_dsp, kernel_dwconv_dsp};

#else
/* reference build: ops/op_conv.c defines the registrations */
typedef int snapuq_op_conv_dsp_unused_t;
#endif
