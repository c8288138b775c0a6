/*
 * op_table.c - the operators this core runs: one registration per builtin code.
 */
#include <stddef.h>
#include <stdint.h>

#include "snapuq_op.h"

static const snapuq_op_reg_t *const k_ops[] = {
    &snapuq_reg_add,
    &snapuq_reg_average_pool_2d,
    &snapuq_reg_concatenation,
    &snapuq_reg_conv_2d,
    &snapuq_reg_depthwise_conv_2d,
    &snapuq_reg_dequantize,
    &snapuq_reg_expand_dims,
    &snapuq_reg_fully_connected,
    &snapuq_reg_logistic,
    &snapuq_reg_max_pool_2d,
    &snapuq_reg_mean,
    &snapuq_reg_quantize,
    &snapuq_reg_relu,
    &snapuq_reg_relu6,
    &snapuq_reg_reshape,
    &snapuq_reg_softmax,
    &snapuq_reg_squeeze,
};

const snapuq_op_reg_t *snapuq_op_find(int32_t builtin)
{
    size_t i;
    for (i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++) {
        if (k_ops[i]->builtin == builtin) {
            return k_ops[i];
        }
    }
    return NULL;
}
