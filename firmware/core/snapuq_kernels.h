/*
 * snapuq_kernels.h - internal kernel interface of the runtime (not a public header).
 *
 * CMSIS-NN's shape (arm_nnfunctions.h / arm_nn_types.h): kernels take shared structs (dims, conv /
 * fc / pool parameters, per-channel quantization, a scratch context), return a snapuq_status_t,
 * and a kernel that needs scratch has a size query (snapuq_conv_dsp_scratch_size, CMSIS-NN's
 * *_get_buffer_size) that its registration hands to the arena planner (snapuq_op.h).
 *
 * Layouts: activations NHWC int8; CONV_2D filters [Cout][KH][KW][Cin]; DEPTHWISE_CONV_2D
 * filters [1][KH][KW][Cout] with Cout = Cin * depth_mult; FULLY_CONNECTED filters [Cout][D];
 * bias int32 [Cout] or NULL; requantization tables quant.mult[], quant.shift[]: per-channel
 * (quant.step 1, Cout entries each) or per-tensor (step 0, one entry each, used for every channel);
 * channel oc reads mult[oc * step], shift[oc * step].
 * offsets: in_offset = -input zero point, out_offset = output zero point.
 */
#ifndef SNAPUQ_KERNELS_H
#define SNAPUQ_KERNELS_H

#include <stdint.h>

#include "snapuq_status.h"

/* ---- shared argument structs (CMSIS-NN's cmsis_nn_dims / *_params / per-channel quant params) */

/* a 4-D NHWC shape; FULLY_CONNECTED: n = batches (rows), c = depth (input) or units (output) */
typedef struct {
    int32_t n, h, w, c;
} snapuq_dims_t;

/* a height / width pair (stride, padding, dilation) */
typedef struct {
    int32_t h, w;
} snapuq_hw_t;

/* the clamp of a fused activation */
typedef struct {
    int32_t min, max;
} snapuq_range_t;

/* CONV_2D, DEPTHWISE_CONV_2D: in_offset = -input zero point, out_offset = output zero point;
 * padding = top / left (SAME puts the odd extra at bottom / right) */
typedef struct {
    int32_t in_offset, out_offset;
    snapuq_hw_t stride, padding, dilation;
    int32_t depth_mult; /* depthwise only; 1 for CONV_2D */
    snapuq_range_t activation;
} snapuq_conv_params_t;

/* FULLY_CONNECTED */
typedef struct {
    int32_t in_offset, out_offset;
    snapuq_range_t activation;
} snapuq_fc_params_t;

/* MAX_POOL_2D, AVERAGE_POOL_2D (same scale / zero point in and out) */
typedef struct {
    snapuq_hw_t stride, padding;
    snapuq_range_t activation;
} snapuq_pool_params_t;

/* requantization tables: channel oc uses mult[oc * step], shift[oc * step] (step 1 per-channel,
 * 0 per-tensor: one pair for every channel) */
typedef struct {
    const int32_t *mult;
    const int32_t *shift;
    int32_t step;
} snapuq_quant_params_t;

/* scratch memory of one kernel call (CMSIS-NN's cmsis_nn_context): `size` bytes at `buf`, 4-byte
 * aligned, from the arena (planned by snapuq_planner.c for the operator's step only); a kernel whose
 * *_scratch_size() is 0 ignores it */
typedef struct {
    void *buf;
    uint32_t size;
} snapuq_context_t;

/* CONV_2D / DEPTHWISE_CONV_2D call: in_dims [n][h][w][c]; filter_dims [out_c][k_h][k_w][in_c]
 * (CONV_2D) or [1][k_h][k_w][out_c] (depthwise); out_dims [n][out_h][out_w][out_c] */
typedef struct {
    snapuq_context_t ctx;
    snapuq_conv_params_t conv;
    snapuq_quant_params_t quant;
    snapuq_dims_t in_dims, filter_dims, out_dims;
    const int8_t *in;
    const int8_t *filter;
    const int32_t *bias;
    int8_t *out;
} snapuq_conv_args_t;

/* FULLY_CONNECTED call: in_dims n = rows (batches), c = depth; filter_dims n = units, c = depth;
 * out_dims n = rows, c = units */
typedef struct {
    snapuq_context_t ctx;
    snapuq_fc_params_t fc;
    snapuq_quant_params_t quant;
    snapuq_dims_t in_dims, filter_dims, out_dims;
    const int8_t *in;
    const int8_t *filter;
    const int32_t *bias;
    int8_t *out;
} snapuq_fc_args_t;

/* pooling call: filter_dims h, w = the window */
typedef struct {
    snapuq_pool_params_t pool;
    snapuq_dims_t in_dims, filter_dims, out_dims;
    const int8_t *in;
    int8_t *out;
} snapuq_pool_args_t;

/* Every kernel returns SNAPUQ_OK, or an error status when its arguments are outside what it
 * implements (it then writes nothing): a registration picks its kernel at load (snapuq_op.h), so
 * an error here is a bug in that choice, never a silent change of kernel. */

/* reference kernels (kernels/ref/<op>.c), always built; no scratch */
snapuq_status_t snapuq_conv_ref(const snapuq_conv_args_t *a);
snapuq_status_t snapuq_dwconv_ref(const snapuq_conv_args_t *a);
snapuq_status_t snapuq_fc_ref(const snapuq_fc_args_t *a);

/* DSP kernels (kernels/dsp/<op>.c), built when SNAPUQ_KERNELS_DSP is non-zero; their operators'
 * registrations (ops/dsp/op_<op>.c) replace the reference ones in that build. */
/* CONV_2D, any shape: in_c % 4 == 0 runs the GEMM path (output-pixel pairs x output channels over
 * the pair's widened patches, 4 k_h k_w in_c bytes in a->ctx) for a 1x1 filter or patches of at most
 * SNAPUQ_CONV_GEMM_MAX bytes (default 4096; the Small-MCU builds set 0), the direct path otherwise (no
 * scratch); any other in_c runs the gathered-patch path, whose patch (k_h * k_w * in_c int16, padded
 * to a multiple of 4) lives in a->ctx. a->ctx holds at least snapuq_conv_dsp_scratch_size() bytes
 * (SNAPUQ_ERR_ARENA otherwise). */
snapuq_status_t snapuq_conv_dsp(const snapuq_conv_args_t *a);
uint32_t snapuq_conv_dsp_scratch_size(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims);
/* which path snapuq_conv_dsp takes for these shapes ("dsp-1x1", "dsp-gemm", "dsp-direct" or "dsp-patch") */
const char *snapuq_conv_dsp_kernel(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims);
/* 1 for a 1x1 filter with in_c % 4 == 0 ("dsp-1x1"): the GEMM path, reading its input pixels directly
 * when there is no padding (any stride) */
int snapuq_conv_dsp_is_1x1(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims,
                           const snapuq_dims_t *out_dims);
/* DEPTHWISE_CONV_2D with depth multiplier 1 (SNAPUQ_ERR_UNSUPPORTED_TYPE otherwise); its filter is
 * copied into a->ctx, which holds at least snapuq_dwconv_dsp_scratch_size() bytes (SNAPUQ_ERR_ARENA
 * otherwise) */
snapuq_status_t snapuq_dwconv_dsp(const snapuq_conv_args_t *a);
uint32_t snapuq_dwconv_dsp_scratch_size(const snapuq_dims_t *filter_dims);
/* FULLY_CONNECTED, any shape: with 4 or more output units the input row is widened into a->ctx,
 * which holds at least snapuq_fc_dsp_scratch_size() bytes (SNAPUQ_ERR_ARENA otherwise; 2 B per input
 * element in groups of 4, 0 for fewer units) */
snapuq_status_t snapuq_fc_dsp(const snapuq_fc_args_t *a);
uint32_t snapuq_fc_dsp_scratch_size(const snapuq_dims_t *filter_dims);
/* AVERAGE_POOL_2D for in_c % 4 == 0 and windows of up to 256 elements (snapuq_avgpool_dsp_supported;
 * SNAPUQ_ERR_UNSUPPORTED_TYPE otherwise, nothing written) */
snapuq_status_t snapuq_avgpool_dsp(const snapuq_pool_args_t *a);
int snapuq_avgpool_dsp_supported(const snapuq_pool_args_t *a);

#ifndef SNAPUQ_KERNELS_DSP
#define SNAPUQ_KERNELS_DSP 0
#endif

snapuq_status_t snapuq_maxpool_ref(const snapuq_pool_args_t *a);
/* SNAPUQ_ERR_SHAPE when a window holds no input element (TFLM fails the invoke then) */
snapuq_status_t snapuq_avgpool_ref(const snapuq_pool_args_t *a);

/* element-wise ADD of two same-shaped int8 tensors (TFLM AddFunc arithmetic) */
typedef struct {
    const int8_t *in1;
    const int8_t *in2;
    int8_t *out;
    int32_t n;
    int32_t in1_offset, in2_offset, out_offset, left_shift;
    int32_t in1_mult, in1_shift, in2_mult, in2_shift, out_mult, out_shift;
    int32_t act_min, act_max;
} snapuq_add_args_t;
snapuq_status_t snapuq_add_ref(const snapuq_add_args_t *a);

/* MEAN over a set of axes of an up-to-4-D tensor (dims padded with 1 in front) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t dims[4];
    uint8_t reduce[4]; /* 1 = axis reduced */
    int32_t in_zp, out_zp, mult, shift;
} snapuq_mean_args_t;
snapuq_status_t snapuq_mean_ref(const snapuq_mean_args_t *a);
/* DSP: MEAN over H and W of NHWC with SIMD sums, when snapuq_mean_dsp_supported() (those axes and a
 * right-shift requantization; SNAPUQ_ERR_UNSUPPORTED_TYPE otherwise) */
snapuq_status_t snapuq_mean_dsp(const snapuq_mean_args_t *a);
int snapuq_mean_dsp_supported(const snapuq_mean_args_t *a);
/* TFLM's folding of 1/n_red into the requantization: mult * 2^sh / n_red, shift - sh with
 * sh = floor(log2 n_red) capped at 31 + shift */
void snapuq_mean_fold(int32_t mult, int32_t shift, int32_t n_red, int32_t *mult_n, int32_t *shift_n);

/* SOFTMAX over the last axis, int8 in, int8 out (zero point -128, scale 1/256) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t outer, depth;
    int32_t mult, left_shift, diff_min;
} snapuq_softmax_args_t;
snapuq_status_t snapuq_softmax_ref(const snapuq_softmax_args_t *a);

/* LOGISTIC int8 -> int8 (output zero point -128, scale 1/256) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t n, in_zp, range_radius, mult, left_shift;
} snapuq_logistic_args_t;
snapuq_status_t snapuq_logistic_ref(const snapuq_logistic_args_t *a);

/* QUANTIZE int8 -> int8 (requantize) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t n, in_zp, out_zp, mult, shift;
} snapuq_requant_args_t;
snapuq_status_t snapuq_requant_ref(const snapuq_requant_args_t *a);

#endif /* SNAPUQ_KERNELS_H */
