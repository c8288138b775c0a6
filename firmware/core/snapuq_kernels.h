/*
 * snapuq_kernels.h - internal kernel interface of the runtime (not a public header).
 *
 * Layouts: activations NHWC int8; CONV_2D filters [Cout][KH][KW][Cin]; DEPTHWISE_CONV_2D
 * filters [1][KH][KW][Cout] with Cout = Cin * depth_mult; FULLY_CONNECTED filters [Cout][D];
 * bias int32 [Cout] or NULL; requantization tables mult[], shift[]: per-channel (q_step 1,
 * Cout entries each) or per-tensor (q_step 0, one entry each, used for every channel); channel oc
 * reads mult[oc * q_step], shift[oc * q_step].
 * offsets: in_offset = -input zero point, out_offset = output zero point.
 */
#ifndef SNAPUQ_KERNELS_H
#define SNAPUQ_KERNELS_H

#include <stdint.h>

typedef struct {
    const int8_t *in;
    const int8_t *filter;
    const int32_t *bias;
    int8_t *out;
    const int32_t *mult;
    const int32_t *shift;
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t k_h, k_w, stride_h, stride_w, dil_h, dil_w, pad_h, pad_w, depth_mult;
    int32_t in_offset, out_offset, act_min, act_max;
    int32_t q_step; /* 1: per-channel mult/shift, 0: per-tensor (mult[0], shift[0]) */
} snapuq_conv_args_t;

typedef struct {
    const int8_t *in;
    const int8_t *filter;
    const int32_t *bias;
    int8_t *out;
    const int32_t *mult;
    const int32_t *shift;
    int32_t batches, depth, out_c;
    int32_t in_offset, out_offset, act_min, act_max;
    int32_t q_step; /* 1: per-channel mult/shift, 0: per-tensor (mult[0], shift[0]) */
} snapuq_fc_args_t;

/* reference kernels (kernels/ref/<op>.c), always built */
void snapuq_conv_ref(const snapuq_conv_args_t *a);
void snapuq_dwconv_ref(const snapuq_conv_args_t *a);
void snapuq_fc_ref(const snapuq_fc_args_t *a);

/* DSP kernels (kernels/dsp/<op>.c, same-named alternatives of kernels/ref/<op>.c), built when
 * SNAPUQ_KERNELS_DSP is non-zero; ops without a DSP kernel use the reference one */
void snapuq_conv_dsp(const snapuq_conv_args_t *a);
void snapuq_dwconv_dsp(const snapuq_conv_args_t *a);
void snapuq_fc_dsp(const snapuq_fc_args_t *a);

#ifndef SNAPUQ_KERNELS_DSP
#define SNAPUQ_KERNELS_DSP 0
#endif

#if SNAPUQ_KERNELS_DSP
#define SNAPUQ_CONV snapuq_conv_dsp
#define SNAPUQ_DWCONV snapuq_dwconv_dsp
#define SNAPUQ_FC snapuq_fc_dsp
#define SNAPUQ_MEAN snapuq_mean_dsp
#else
#define SNAPUQ_CONV snapuq_conv_ref
#define SNAPUQ_DWCONV snapuq_dwconv_ref
#define SNAPUQ_FC snapuq_fc_ref
#define SNAPUQ_MEAN snapuq_mean_ref
#endif

/* pooling (same scale/zero point in and out): in/out NHWC */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t batches, in_h, in_w, depth, out_h, out_w;
    int32_t f_h, f_w, stride_h, stride_w, pad_h, pad_w, act_min, act_max;
} snapuq_pool_args_t;

void snapuq_maxpool_ref(const snapuq_pool_args_t *a);
/* returns 0 when a window holds no input element (TFLM fails the invoke then) */
int snapuq_avgpool_ref(const snapuq_pool_args_t *a);

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
void snapuq_add_ref(const snapuq_add_args_t *a);

/* MEAN over a set of axes of an up-to-4-D tensor (dims padded with 1 in front) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t dims[4];
    uint8_t reduce[4]; /* 1 = axis reduced */
    int32_t in_zp, out_zp, mult, shift;
} snapuq_mean_args_t;
void snapuq_mean_ref(const snapuq_mean_args_t *a);
/* DSP: MEAN over H and W of NHWC with SIMD sums (other axes: the reference) */
void snapuq_mean_dsp(const snapuq_mean_args_t *a);
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
void snapuq_softmax_ref(const snapuq_softmax_args_t *a);

/* LOGISTIC int8 -> int8 (output zero point -128, scale 1/256) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t n, in_zp, range_radius, mult, left_shift;
} snapuq_logistic_args_t;
void snapuq_logistic_ref(const snapuq_logistic_args_t *a);

/* QUANTIZE int8 -> int8 (requantize) */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t n, in_zp, out_zp, mult, shift;
} snapuq_requant_args_t;
void snapuq_requant_ref(const snapuq_requant_args_t *a);

#endif /* SNAPUQ_KERNELS_H */
