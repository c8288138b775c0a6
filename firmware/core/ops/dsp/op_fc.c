/*
 * ops/dsp/op_fc.c - the FULLY_CONNECTED registration of the DSP build (-DSNAPUQ_KERNELS_DSP=1;
 * replaces ops/op_fc.c's reference one): snapuq_fc_dsp for every shape, with the arena scratch its
 * size query asks for (the widened input row), planned for this operator's step.
 */
#include <stdint.h>

#include "../op_args.h"
#include "snapuq_op.h"

#if SNAPUQ_KERNELS_DSP

/* the planner's scratch query */
static uint32_t scratch_fc_dsp(const snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_tensor_t *w = snapuq_tc(md, md->ops[op].in[1]);
    snapuq_dims_t f;
    f.n = w->dims[0]; /* [units][depth], as snapuq_fc_args reads it */
    f.h = f.w = 1;
    f.c = w->dims[1];
    return snapuq_fc_dsp_scratch_size(&f);
}

static snapuq_status_t eval_fc_dsp(snapuq_model_t *md, uint16_t op)
{
    snapuq_fc_args_t a;
    snapuq_fc_args(md, &md->ops[op], &a);
    a.ctx = snapuq_op_context(md, &md->ops[op], snapuq_fc_dsp_scratch_size(&a.filter_dims));
    return snapuq_kernel_status(md, op, snapuq_fc_dsp(&a));
}

static const char *kernel_fc_dsp(const snapuq_model_t *md, uint16_t op)
{
    (void)md;
    (void)op;
    return "dsp";
}

const snapuq_op_reg_t snapuq_reg_fully_connected = {SNAPUQ_OP_FULLY_CONNECTED, SNAPUQ_OPF_INT8_IO,
                                                    snapuq_fc_parse, snapuq_fc_prepare, eval_fc_dsp,
                                                    scratch_fc_dsp, kernel_fc_dsp};

#else
/* reference build: ops/op_fc.c defines the registration */
typedef int snapuq_op_fc_dsp_unused_t;
#endif
