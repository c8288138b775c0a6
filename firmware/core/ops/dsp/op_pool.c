/*
 * ops/dsp/op_pool.c - the AVERAGE_POOL_2D registration of the DSP build (-DSNAPUQ_KERNELS_DSP=1;
 * replaces ops/op_pool.c's reference one): snapuq_avgpool_dsp for in_c % 4 == 0 and windows of up to
 * 256 elements (snapuq_avgpool_dsp_supported), the reference kernel otherwise; reported as "dsp" /
 * "ref" (snapuq_model_op_kernel). MAX_POOL_2D keeps ops/op_pool.c's registration.
 */
#include <stdint.h>

#include "../op_args.h"
#include "snapuq_op.h"

#if SNAPUQ_KERNELS_DSP

static snapuq_status_t eval_avg_dsp(snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    snapuq_status_t st;
    snapuq_pool_args(md, &md->ops[op], &a);
    st = snapuq_avgpool_dsp_supported(&a) ? snapuq_avgpool_dsp(&a) : snapuq_avgpool_ref(&a);
    if (st != SNAPUQ_OK) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": average pool window outside the input");
    }
    return SNAPUQ_OK;
}

static const char *kernel_avg_dsp(const snapuq_model_t *md, uint16_t op)
{
    snapuq_pool_args_t a;
    snapuq_pool_args(md, &md->ops[op], &a);
    return snapuq_avgpool_dsp_supported(&a) ? "dsp" : "ref";
}

const snapuq_op_reg_t snapuq_reg_average_pool_2d = {SNAPUQ_OP_AVERAGE_POOL_2D, SNAPUQ_OPF_INT8_IO,
                                                    snapuq_pool_parse, NULL, eval_avg_dsp, NULL, kernel_avg_dsp};

#else
/* reference build: ops/op_pool.c defines the registration */
typedef int snapuq_op_pool_dsp_unused_t;
#endif
