/*
 * ops/dsp/op_mean.c - the MEAN registration of the DSP build (-DSNAPUQ_KERNELS_DSP=1; replaces
 * ops/op_mean.c's reference one): snapuq_mean_dsp for MEAN over H and W with a right-shift
 * requantization (snapuq_mean_dsp_supported), the reference kernel otherwise; the choice is made at
 * load and reported ("dsp" / "ref", snapuq_model_op_kernel).
 */
#include <stdint.h>

#include "../op_args.h"
#include "snapuq_op.h"

#if SNAPUQ_KERNELS_DSP

static snapuq_status_t parse_mean_dsp(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_mean_args_t a;
    SNAPUQ_TRY(snapuq_mean_parse(md, op, opts));
    snapuq_mean_shape(md, o, &a); /* no arena yet */
    o->u.mean.kernel = snapuq_mean_dsp_supported(&a) ? SNAPUQ_KERNEL_DSP : SNAPUQ_KERNEL_REF;
    return SNAPUQ_OK;
}

static snapuq_status_t eval_mean_dsp(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    snapuq_mean_args_t a;
    snapuq_mean_args(md, o, &a);
    return snapuq_kernel_status(md, op, o->u.mean.kernel == SNAPUQ_KERNEL_DSP ? snapuq_mean_dsp(&a)
                                                                             : snapuq_mean_ref(&a));
}

static const char *kernel_mean_dsp(const snapuq_model_t *md, uint16_t op)
{
    return md->ops[op].u.mean.kernel == SNAPUQ_KERNEL_DSP ? "dsp" : "ref";
}

const snapuq_op_reg_t snapuq_reg_mean = {SNAPUQ_OP_MEAN, SNAPUQ_OPF_INT8_IO, parse_mean_dsp, NULL,
                                         eval_mean_dsp, NULL, kernel_mean_dsp};

#else
/* reference build: ops/op_mean.c defines the registration */
typedef int snapuq_op_mean_dsp_unused_t;
#endif
