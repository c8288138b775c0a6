/*
 * snapuq_op.h - internal interface between the runtime and its operators (not public).
 *
 * One operator (or one family sharing its arithmetic) lives in one file under ops/ and
 * exports one registration (TFLM style):
 *   parse    at snapuq_model_init(): read the builtin options, check tensor types, shapes and
 *            quantization, precompute the operator's constants into its own member of
 *            op->u (snapuq_op_data.h) and declare persistent arena bytes (op->persist_bytes);
 *   prepare  at snapuq_model_set_arena() (optional): fill the persistent region
 *            (md->arena + op->persist), e.g. per-channel multipliers;
 *   eval     at snapuq_model_invoke(): run the kernel.
 * An optimized kernel set replaces the whole registration (TFLM's kernels/cmsis_nn/conv.cc over the
 * shared kernels/conv_common.cc): ops/op_<op>.c holds the shared parse / prepare / argument building
 * (snapuq_conv_parse, snapuq_conv_args, ...) and the reference registration; ops/dsp/op_<op>.c,
 * built with -DSNAPUQ_KERNELS_DSP=1 instead of it, defines the same registration symbol. Its parse
 * picks the kernel for the operator's shape (reported by `kernel`, snapuq_model_op_kernel); its
 * `scratch` query (the kernel's snapuq_<op>_dsp_scratch_size()) sizes arena scratch, which the
 * planner places among the activations for that operator's step only (op->scratch), so the model's
 * arena size includes it; eval hands it to the kernel as a snapuq_context_t. Kernels return a status.
 * snapuq_ops.h lists the registrations (SNAPUQ_OPS_ALL; ops/op_table.c is the stock table of all
 * of them); adding an operator = one new file + one SNAPUQ_OPS_ALL line + its code below (+ its
 * name in core.mk).
 */
#ifndef SNAPUQ_OP_H
#define SNAPUQ_OP_H

#include <stdint.h>

#include "snapuq_flatbuffer.h"
#include "snapuq_kernels.h"
#include "snapuq_quant.h"
#include "snapuq_runtime.h"

/* TFLite BuiltinOperator codes the core knows */
enum {
    SNAPUQ_OP_ADD = 0,
    SNAPUQ_OP_AVERAGE_POOL_2D = 1,
    SNAPUQ_OP_CONCATENATION = 2,
    SNAPUQ_OP_CONV_2D = 3,
    SNAPUQ_OP_DEPTHWISE_CONV_2D = 4,
    SNAPUQ_OP_DEQUANTIZE = 6,
    SNAPUQ_OP_FULLY_CONNECTED = 9,
    SNAPUQ_OP_LOGISTIC = 14,
    SNAPUQ_OP_MAX_POOL_2D = 17,
    SNAPUQ_OP_RELU = 19,
    SNAPUQ_OP_RELU6 = 21,
    SNAPUQ_OP_RESHAPE = 22,
    SNAPUQ_OP_SOFTMAX = 25,
    SNAPUQ_OP_CUSTOM = 32,
    SNAPUQ_OP_MEAN = 40,
    SNAPUQ_OP_SQUEEZE = 43,
    SNAPUQ_OP_EXPAND_DIMS = 70,
    SNAPUQ_OP_QUANTIZE = 114
};

/* The operator's builtin options table (absent: every field takes its schema default). */
typedef struct {
    const snapuq_fb_t *fb;
    snapuq_fbt_t t;
    int present;
} snapuq_opts_t;

/* registration flags */
#define SNAPUQ_OPF_INT8_IO 1u /* input 0 and the output must be int8 activations (checked first) */
#define SNAPUQ_OPF_ALIAS 2u   /* the output may share input 0's memory (planner) */

typedef struct snapuq_op_reg {
    int32_t builtin;
    uint8_t flags;
    snapuq_status_t (*parse)(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts);
    snapuq_status_t (*prepare)(snapuq_model_t *md, uint16_t op); /* NULL: nothing to prepare */
    snapuq_status_t (*eval)(snapuq_model_t *md, uint16_t op);
    /* arena scratch bytes its kernel needs during eval (NULL or 0: none); asked by the planner after
     * parse, from the operator's shapes (the kernel's snapuq_<op>_dsp_scratch_size()) */
    uint32_t (*scratch)(const snapuq_model_t *md, uint16_t op);
    /* the kernel eval runs for this operator (NULL: "ref") */
    const char *(*kernel)(const snapuq_model_t *md, uint16_t op);
} snapuq_op_reg_t;

/* snapuq_loader.c: registration of a builtin code in the image's op table (snapuq_ops.h), NULL when
 * the table has none */
const snapuq_op_reg_t *snapuq_op_find(int32_t builtin);

/* the registrations (one per ops/op_*.c) */
extern const snapuq_op_reg_t snapuq_reg_conv_2d, snapuq_reg_depthwise_conv_2d;
extern const snapuq_op_reg_t snapuq_reg_fully_connected;
extern const snapuq_op_reg_t snapuq_reg_max_pool_2d, snapuq_reg_average_pool_2d;
extern const snapuq_op_reg_t snapuq_reg_add, snapuq_reg_mean, snapuq_reg_concatenation;
extern const snapuq_op_reg_t snapuq_reg_reshape, snapuq_reg_squeeze, snapuq_reg_expand_dims;
extern const snapuq_op_reg_t snapuq_reg_relu, snapuq_reg_relu6;
extern const snapuq_op_reg_t snapuq_reg_softmax, snapuq_reg_logistic;
extern const snapuq_op_reg_t snapuq_reg_quantize, snapuq_reg_dequantize;

/* ---- errors (snapuq_runtime.c) ---- */
#define SNAPUQ_NO_NUM INT64_MIN
/* Write "<a><num><b>" (num omitted when SNAPUQ_NO_NUM) as the model's error; returns st. */
snapuq_status_t snapuq_fail(snapuq_model_t *md, snapuq_status_t st, const char *a, int64_t num,
                            const char *b);

/* ---- arena plan of a parsed model (snapuq_planner.c) ---- */
snapuq_status_t snapuq_plan(snapuq_model_t *md);

/* inlined into every caller (the per-eval argument builders: no call on the invoke path) */
#if defined(__GNUC__)
#define SNAPUQ_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SNAPUQ_ALWAYS_INLINE inline
#endif

/* ---- helpers for operators (ops/op_common.c) ---- */
static inline snapuq_priv_tensor_t *snapuq_t(snapuq_model_t *md, int16_t i)
{
    return &md->tensors[i];
}
static inline const snapuq_priv_tensor_t *snapuq_tc(const snapuq_model_t *md, int16_t i)
{
    return &md->tensors[i];
}
/* Arena address of activation tensor ti (valid after set_arena). */
static inline int8_t *snapuq_tensor_ptr(const snapuq_model_t *md, int16_t ti)
{
    return (int8_t *)(void *)(md->arena + md->persist_bytes + (uint32_t)md->tensors[ti].offset);
}
/* The operator's persistent region (valid after set_arena). */
static inline int32_t *snapuq_op_persist(const snapuq_model_t *md, const snapuq_priv_op_t *o)
{
    return (int32_t *)(void *)(md->arena + o->persist);
}

/* The operator's kernel scratch of `bytes` (its registration's scratch query; valid after set_arena). */
static inline snapuq_context_t snapuq_op_context(const snapuq_model_t *md, const snapuq_priv_op_t *o,
                                                 uint32_t bytes)
{
    snapuq_context_t c;
    c.buf = bytes > 0 ? (void *)(md->arena + md->persist_bytes + o->scratch) : NULL;
    c.size = bytes;
    return c;
}
/* The (mult, shift) tables of the persistent region as kernel quantization parameters. */
static inline snapuq_quant_params_t snapuq_op_quant(const snapuq_model_t *md, const snapuq_priv_op_t *o,
                                                    uint16_t n_quant)
{
    snapuq_quant_params_t q;
    q.mult = snapuq_op_persist(md, o);
    q.shift = q.mult + n_quant;
    q.step = n_quant > 1 ? 1 : 0;
    return q;
}
/* A 4-D tensor's shape (NHWC; its operator's parse checked the rank) as kernel dims. */
static inline snapuq_dims_t snapuq_dims_of(const snapuq_priv_tensor_t *t)
{
    snapuq_dims_t r;
    r.n = t->dims[0];
    r.h = t->dims[1];
    r.w = t->dims[2];
    r.c = t->dims[3];
    return r;
}

/* shared parts of the CONV_2D / DEPTHWISE_CONV_2D registrations (ops/op_conv.c; the DSP ones in
 * ops/dsp/op_conv.c use them too; the kernel arguments: ops/op_args.h) */
snapuq_status_t snapuq_conv_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts);
snapuq_status_t snapuq_conv_prepare(snapuq_model_t *md, uint16_t op);
/* FULLY_CONNECTED (ops/op_fc.c) */
snapuq_status_t snapuq_fc_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts);
snapuq_status_t snapuq_fc_prepare(snapuq_model_t *md, uint16_t op);
/* MAX_POOL_2D / AVERAGE_POOL_2D (ops/op_pool.c; the DSP average pool in ops/dsp/op_pool.c) */
snapuq_status_t snapuq_pool_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts);
/* MEAN (ops/op_mean.c) */
snapuq_status_t snapuq_mean_parse(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts);
/* A kernel's error status as the model's one-line message naming the operator (st != SNAPUQ_OK);
 * snapuq_kernel_status passes SNAPUQ_OK through without a call. */
snapuq_status_t snapuq_kernel_fail(snapuq_model_t *md, uint16_t op, snapuq_status_t st);
static inline snapuq_status_t snapuq_kernel_status(snapuq_model_t *md, uint16_t op, snapuq_status_t st)
{
    return st == SNAPUQ_OK ? SNAPUQ_OK : snapuq_kernel_fail(md, op, st);
}

uint32_t snapuq_tensor_elems(const snapuq_priv_tensor_t *t);
int snapuq_same_shape(const snapuq_priv_tensor_t *a, const snapuq_priv_tensor_t *b);
/* int8 activation with one scale and an int8 zero point; `role` ends the message. */
snapuq_status_t snapuq_need_int8_act(snapuq_model_t *md, uint16_t op, int16_t ti, const char *role);
/* [act_min, act_max] of a fused activation (TFLite ActivationFunctionType) on `out`. */
snapuq_status_t snapuq_act_range(snapuq_model_t *md, uint16_t op, uint8_t activation,
                                 const snapuq_priv_tensor_t *out, int32_t *act_min, int32_t *act_max);
/* Validate a window (stride, dilation, padding already in *w) over 4-D NHWC in/out with a
 * kh x kw filter; sets filter and padding amounts. */
snapuq_status_t snapuq_window(snapuq_model_t *md, uint16_t op, snapuq_window_t *w,
                              const snapuq_priv_tensor_t *in, const snapuq_priv_tensor_t *out,
                              int32_t kh, int32_t kw);
/* Constant int8 symmetric weights (per-tensor or per-channel over out_c) and optional int32
 * bias [out_c] (bi < 0: none). */
snapuq_status_t snapuq_check_weights(snapuq_model_t *md, uint16_t op, int16_t wi, int16_t bi,
                                     int32_t out_c);
/* every per-channel requantization multiplier in*w/out must be representable (shift <= 30) */
snapuq_status_t snapuq_check_multipliers(snapuq_model_t *md, uint16_t op,
                                         const snapuq_priv_tensor_t *in,
                                         const snapuq_priv_tensor_t *w,
                                         const snapuq_priv_tensor_t *out);
/* prepare(): (mult[n], shift[n]) of in[0] * in[1] / out into the persistent region: n = the output
 * channels for per-channel weights, 1 for per-tensor ones (entry c uses weight scale c, or 0) */
snapuq_status_t snapuq_prepare_per_channel(snapuq_model_t *md, uint16_t op, uint16_t n);

/* Builtin options: read field `id` (default `def`); a malformed table or a value outside
 * int16 is an error naming the operator. */
snapuq_status_t snapuq_opt_i16(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                               int32_t def, int16_t *dst);
snapuq_status_t snapuq_opt_u8(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                              uint8_t def, uint8_t *dst);
snapuq_status_t snapuq_opt_f32(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                               float def, float *dst);

/* Evaluate `expr` (a snapuq_status_t) and return it from the caller unless it is SNAPUQ_OK. */
#define SNAPUQ_TRY(expr)                                                                          \
    do {                                                                                          \
        const snapuq_status_t snapuq_try_st_ = (expr);                                            \
        if (snapuq_try_st_ != SNAPUQ_OK) {                                                        \
            return snapuq_try_st_;                                                                \
        }                                                                                         \
    } while (0)

#endif /* SNAPUQ_OP_H */
