/*
 * snapuq_ops.h - the operators of the core and the op table an image links (TFLite Micro's
 * MicroMutableOpResolver, chosen at link time).
 *
 * snapuq_model_init() looks every operator of a model up in one table, `snapuq_op_table`, which
 * each image defines exactly once:
 *   - ops/op_table.c (in core.mk): SNAPUQ_OP_TABLE(SNAPUQ_OPS_ALL), every operator below. Any
 *     model the core runs loads: the stock firmware that takes model uploads, the host library,
 *     MicroPython, PlatformIO.
 *   - or an application's own table, in one .c file linked *instead of* ops/op_table.c, that names
 *     only the operators its model(s) use:
 *         #include "snapuq_ops.h"
 *         #include "snapuq_model.h"               (snapuq export: SNAPUQ_MODEL_OPS(X))
 *         SNAPUQ_OP_TABLE(SNAPUQ_MODEL_OPS);
 *     or with a list of your own: #define MY_OPS(X) X(CONV_2D, conv_2d) X(MEAN, mean) ...
 *     With -ffunction-sections -fdata-sections -Wl,--gc-sections the other operators' code and
 *     kernels drop out at link. firmware/Makefile does this with OPS=fit (firmware/tools/caps.py
 *     --op-table writes the table of the models it links).
 * A model that needs an operator the table lacks is refused by snapuq_model_init with
 * SNAPUQ_ERR_UNSUPPORTED_OP and one line: "MAX_POOL_2D: operator not in this image's op table";
 * an operator the core does not implement at all stays "unsupported operator TANH".
 */
#ifndef SNAPUQ_OPS_H
#define SNAPUQ_OPS_H

#include <stdint.h>

/* Every operator the core implements, X(NAME, name): NAME is the TFLite BuiltinOperator
 * (SNAPUQ_OP_<NAME> in snapuq_op.h, snapuq_builtin_name()), name its registration
 * snapuq_reg_<name> (ops/op_*.c). snapuq_runtime.h and docs/C_CORE.md list the same set
 * (tests/host/test_c_optable.py). */
#define SNAPUQ_OPS_ALL(X)                                                                         \
    X(ADD, add)                                                                                   \
    X(AVERAGE_POOL_2D, average_pool_2d)                                                           \
    X(CONCATENATION, concatenation)                                                               \
    X(CONV_2D, conv_2d)                                                                           \
    X(DEPTHWISE_CONV_2D, depthwise_conv_2d)                                                       \
    X(DEQUANTIZE, dequantize)                                                                     \
    X(EXPAND_DIMS, expand_dims)                                                                   \
    X(FULLY_CONNECTED, fully_connected)                                                           \
    X(LOGISTIC, logistic)                                                                         \
    X(MAX_POOL_2D, max_pool_2d)                                                                   \
    X(MEAN, mean)                                                                                 \
    X(QUANTIZE, quantize)                                                                         \
    X(RELU, relu)                                                                                 \
    X(RELU6, relu6)                                                                               \
    X(RESHAPE, reshape)                                                                           \
    X(SOFTMAX, softmax)                                                                           \
    X(SQUEEZE, squeeze)

struct snapuq_op_reg; /* a registration: parse / prepare / eval (snapuq_op.h) */

/* The image's op table (defined once per image by SNAPUQ_OP_TABLE) */
extern const struct snapuq_op_reg *const snapuq_op_table[];
extern const uint16_t snapuq_op_table_len;

#define SNAPUQ_OP_TABLE_DECL_(NAME, name) extern const struct snapuq_op_reg snapuq_reg_##name;
#define SNAPUQ_OP_TABLE_ENTRY_(NAME, name) &snapuq_reg_##name,
/* Define the image's op table from an X(NAME, name) list (at file scope, followed by ';'; the
 * list must name at least one operator). */
#define SNAPUQ_OP_TABLE(LIST)                                                                     \
    LIST(SNAPUQ_OP_TABLE_DECL_)                                                                   \
    const struct snapuq_op_reg *const snapuq_op_table[] = {LIST(SNAPUQ_OP_TABLE_ENTRY_)};         \
    const uint16_t snapuq_op_table_len =                                                          \
        (uint16_t)(sizeof snapuq_op_table / sizeof snapuq_op_table[0])

#endif /* SNAPUQ_OPS_H */
