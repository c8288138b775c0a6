/*
 * snapuq_op_data.h - the typed, per-operator data a loaded model keeps for each operator.
 *
 * Private layout (included by snapuq_runtime.h only so that callers can allocate
 * snapuq_model_t statically): each operator file under ops/ fills and reads its own member
 * of snapuq_op_data_t and no other; no field is reused with another meaning.
 */
#ifndef SNAPUQ_OP_DATA_H
#define SNAPUQ_OP_DATA_H

#include <stdint.h>

/* which kernel a registration runs for one operator (snapuq_model_op_kernel names it) */
enum { SNAPUQ_KERNEL_REF = 0, SNAPUQ_KERNEL_DSP = 1 };

/* Sliding window of CONV_2D / DEPTHWISE_CONV_2D / pooling (ops/op_common.c validates it). */
typedef struct {
    int16_t filter_h, filter_w;
    int16_t stride_h, stride_w;
    int16_t dil_h, dil_w;
    int16_t pad_h, pad_w; /* top / left padding; SAME puts the odd extra at bottom / right */
    uint8_t padding;      /* TFLite Padding: 0 SAME, 1 VALID */
} snapuq_window_t;

/* CONV_2D, DEPTHWISE_CONV_2D (ops/op_conv.c); the (mult[n_quant], shift[n_quant]) tables in the
 * op's persistent arena region: one pair per output channel for per-channel weights, a single
 * pair for per-tensor weights. */
typedef struct {
    snapuq_window_t win;
    int16_t depth_mult; /* DEPTHWISE_CONV_2D only; 1 for CONV_2D */
    uint16_t n_channels;
    uint16_t n_quant; /* n_channels (per-channel weights) or 1 (per-tensor) */
    uint8_t kernel;   /* SNAPUQ_KERNEL_*: chosen by the registration's parse */
    int32_t act_min, act_max;
} snapuq_conv_data_t;

/* FULLY_CONNECTED (ops/op_fc.c); requantization tables as for conv. */
typedef struct {
    uint16_t n_channels;
    uint16_t n_quant; /* n_channels (per-channel weights) or 1 (per-tensor) */
    int32_t act_min, act_max;
    uint32_t rows; /* input elements / depth (the kernel's batches) */
} snapuq_fc_data_t;

/* MAX_POOL_2D, AVERAGE_POOL_2D (ops/op_pool.c). */
typedef struct {
    snapuq_window_t win;
    int32_t act_min, act_max;
} snapuq_pool_data_t;

/* ADD (ops/op_add.c): TFLM's AddFunc parameters. */
typedef struct {
    int32_t left_shift;
    int32_t in1_mult, in1_shift, in2_mult, in2_shift, out_mult, out_shift;
    int32_t act_min, act_max;
} snapuq_add_data_t;

/* MEAN (ops/op_mean.c). */
typedef struct {
    int32_t mult, shift;
    int32_t dims[4];   /* the input's dims padded with 1 in front to 4-D (the kernel's) */
    uint8_t reduce[4]; /* per axis of dims: 1 = reduced */
    uint8_t reduce_mask; /* bit i set: input axis i is reduced */
    uint8_t keep_dims;
    uint8_t kernel; /* SNAPUQ_KERNEL_*: chosen by the registration's parse */
} snapuq_mean_data_t;

/* SOFTMAX (ops/op_softmax.c). */
typedef struct {
    int32_t mult, left_shift, diff_min;
} snapuq_softmax_data_t;

/* LOGISTIC (ops/op_logistic.c). */
typedef struct {
    int32_t mult, left_shift;
    int32_t input_radius; /* |q - zp| above this saturates the output */
} snapuq_logistic_data_t;

/* QUANTIZE int8 -> int8 (ops/op_quantize.c). */
typedef struct {
    int32_t mult, shift;
} snapuq_quantize_data_t;

/* SQUEEZE (ops/op_reshape.c). */
typedef struct {
    uint8_t squeeze_mask; /* bit i set: input axis i is dropped (all size-1 axes when none given) */
} snapuq_squeeze_data_t;

/* CONCATENATION (ops/op_concat.c). */
typedef struct {
    uint8_t axis; /* the concatenated axis, 0..ndim-1 */
} snapuq_concat_data_t;

/* RELU, RELU6 (ops/op_relu.c). */
typedef struct {
    int32_t mult, shift; /* RELU: requantization s_in / s_out */
    int32_t lo, hi;      /* output clamp */
    uint8_t requant;     /* 1: RELU (requantize), 0: RELU6 (clamp the input codes) */
} snapuq_relu_data_t;

typedef union {
    snapuq_conv_data_t conv;
    snapuq_fc_data_t fc;
    snapuq_pool_data_t pool;
    snapuq_add_data_t add;
    snapuq_mean_data_t mean;
    snapuq_softmax_data_t softmax;
    snapuq_logistic_data_t logistic;
    snapuq_quantize_data_t quantize;
    snapuq_squeeze_data_t squeeze;
    snapuq_concat_data_t concat;
    snapuq_relu_data_t relu;
} snapuq_op_data_t;

#endif /* SNAPUQ_OP_DATA_H */
