/*
 * snapuq_runtime.h - int8 TFLite flatbuffer runtime (the subset snapuq models use).
 *
 * Life cycle (no malloc anywhere; the caller owns every byte):
 *
 *   static snapuq_model_t model;                      // ~ sizeof(snapuq_model_t), see SNAPUQ_MAX_*
 *   snapuq_model_init(&model, tflite, tflite_len);     // parse + validate in place, plan memory
 *   size_t need; snapuq_model_arena_size(&model, &need);
 *   static uint8_t arena[NEED] __attribute__((aligned(16)));
 *   snapuq_model_set_arena(&model, arena, sizeof arena);   // requantization multipliers go here
 *   snapuq_model_set_input(&model, 0, x, n);            // int8, NHWC, row-major
 *   snapuq_model_invoke(&model);
 *   snapuq_model_get_output(&model, idx, y, n);         // or snapuq_model_output_info(...).data
 *
 * The flatbuffer is read in place (it may live in flash) and must stay valid and unchanged for
 * the life of the model; it needs no particular alignment (multi-byte fields are read
 * byte-wise, little-endian). snapuq_model_init() checks every offset, vtable, vector, string
 * and buffer against the file length, every tensor shape and type against its operator, and the
 * quantization parameters, before anything is used: any byte string either loads or returns an
 * error status with a one-line message (snapuq_model_error()).
 *
 * Arithmetic is TFLite Micro's reference integer arithmetic (double rounding): results are
 * bit-exact with the tflite-micro interpreter (tests/vectors, every executor). Requantization
 * multipliers are derived at set_arena time from the float32 scales with integer-only code
 * (no float or double operations on the device).
 *
 * Supported operators (int8 activations, int8 symmetric weights, int32 bias; SNAPUQ_OPS_ALL in
 * snapuq_ops.h, tests/host/test_c_optable.py keeps this list equal to it):
 *   CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (per-channel or per-tensor weights),
 *   MAX_POOL_2D, AVERAGE_POOL_2D, MEAN, ADD (same shapes), CONCATENATION (2-3 inputs),
 *   RELU, RELU6 (output quantized like the input), RESHAPE, SQUEEZE, EXPAND_DIMS, SOFTMAX,
 *   LOGISTIC, QUANTIZE (int8 -> int8), DEQUANTIZE (int8 -> float32, e.g. a float model output).
 *   Fused activations NONE, RELU, RELU6, RELU_N1_TO_1.
 * An image may link fewer (its own op table, snapuq_ops.h): a model needing one it lacks is
 * refused at init with UNSUPPORTED_OP, "<NAME>: operator not in this image's op table".
 * Layout of the implementation: one file per operator (family) under ops/ with its own typed
 * data (snapuq_op_data.h) and a registration listed in snapuq_ops.h; the flatbuffer reader
 * (snapuq_flatbuffer.c), the multipliers (snapuq_quant.c), the loader (snapuq_loader.c) and
 * the arena planner (snapuq_planner.c) are separate files. core.mk lists them all.
 * Kernels: portable reference C, one file per operator family (kernels/ref/<op>.c); building with
 * -DSNAPUQ_KERNELS_DSP=1 selects the Cortex-M DSP-extension kernels for CONV_2D /
 * DEPTHWISE_CONV_2D / FULLY_CONNECTED / MEAN (the same-named kernels/dsp/<op>.c), which produce
 * identical results.
 */
#ifndef SNAPUQ_RUNTIME_H
#define SNAPUQ_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_op_data.h"
#include "snapuq_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compile-time capacity of snapuq_model_t; override with -D to trade RAM for model size. */
#ifndef SNAPUQ_MAX_TENSORS
#define SNAPUQ_MAX_TENSORS 96 /* all tensors of subgraph 0, constants included */
#endif
#ifndef SNAPUQ_MAX_OPS
#define SNAPUQ_MAX_OPS 48
#endif
#ifndef SNAPUQ_MAX_IO
#define SNAPUQ_MAX_IO 16 /* model inputs and outputs, each */
#endif
#define SNAPUQ_MAX_DIMS 4
#define SNAPUQ_ARENA_ALIGN 16 /* set_arena wants the arena aligned to this many bytes */

/* Element types (values equal TFLite's TensorType enum). */
typedef enum {
    SNAPUQ_DTYPE_FLOAT32 = 0,
    SNAPUQ_DTYPE_INT32 = 2,
    SNAPUQ_DTYPE_UINT8 = 3,
    SNAPUQ_DTYPE_INT64 = 4,
    SNAPUQ_DTYPE_INT16 = 7,
    SNAPUQ_DTYPE_INT8 = 9
} snapuq_dtype_t;

/* What the caller may know about an input or output tensor. */
typedef struct {
    const char *name;        /* signature name (e.g. "logits") when the model has one, else the
                                tensor name; NUL-terminated, points into the flatbuffer */
    snapuq_dtype_t type;     /* SNAPUQ_DTYPE_INT8 for every input/output of a snapuq model */
    uint8_t ndim;            /* 0..SNAPUQ_MAX_DIMS */
    int32_t dims[SNAPUQ_MAX_DIMS]; /* dims[0..ndim-1], row-major (NHWC for images) */
    uint32_t elements;       /* product of dims (1 for a scalar) */
    uint32_t bytes;          /* elements * element size */
    float scale;             /* real = scale * (q - zero_point) */
    int32_t zero_point;      /* -128..127 for int8 */
    void *data;              /* location in the arena; NULL until set_arena succeeded.
                                Output data stay valid until the next invoke. */
} snapuq_tensor_info_t;

/* Optional per-operator hook for profiling (cycle counters, GPIO); begin = 1 before, 0 after. */
typedef void (*snapuq_profile_fn)(void *ctx, uint16_t op_index, int32_t builtin_code, int begin);

/* ---- private layout (sized here so callers can allocate statically; do not touch) ---- */
typedef struct {
    const uint8_t *data;    /* constant bytes inside the flatbuffer, or NULL for arena tensors */
    const char *name;
    const uint8_t *scales;  /* float32 LE vector of per-channel scales (or NULL) */
    uint32_t bytes;
    int32_t offset;         /* arena offset (activations) or -1 */
    int32_t zero_point;
    float scale;
    uint16_t n_scales;
    int16_t dims[SNAPUQ_MAX_DIMS];
    uint8_t ndim;
    uint8_t type;
    int16_t first_use, last_use; /* op indices; inputs: -1, outputs: n_ops */
} snapuq_priv_tensor_t;

struct snapuq_op_reg; /* operator registration (snapuq_op.h) */

typedef struct {
    int16_t builtin;        /* TFLite BuiltinOperator code (one the op table knows: all fit) */
    int16_t in[3];          /* tensor indices, -1 = absent */
    int16_t out;
    uint8_t n_in;
    const struct snapuq_op_reg *reg; /* parse / prepare / eval of this operator */
    uint32_t persist;       /* offset of this operator's persistent tables in the arena */
    uint32_t persist_bytes; /* their size ((mult, shift) pairs: per channel, or 1 per-tensor), 0 if none */
    uint32_t scratch;       /* offset of its kernel's scratch among the activations, planned for its
                               step only (size: its registration's scratch query), 0 if none */
    snapuq_op_data_t u;     /* typed per-operator data (snapuq_op_data.h) */
} snapuq_priv_op_t;

typedef struct snapuq_model {
    const uint8_t *buf;
    size_t len;
    uint8_t *arena;
    size_t arena_len;
    uint32_t persist_bytes;   /* requantization tables (packed, rounded up to SNAPUQ_ARENA_ALIGN) */
    uint32_t act_bytes;       /* planned activation memory */
    uint32_t act_naive_bytes; /* sum of all activation tensors (no reuse), for reports */
    uint16_t n_tensors, n_ops, n_inputs, n_outputs;
    int16_t inputs[SNAPUQ_MAX_IO];
    int16_t outputs[SNAPUQ_MAX_IO];
    const char *in_names[SNAPUQ_MAX_IO];
    const char *out_names[SNAPUQ_MAX_IO];
    uint8_t state;            /* 0 empty, 1 loaded, 2 arena set */
    snapuq_profile_fn profile;
    void *profile_ctx;
    snapuq_priv_tensor_t tensors[SNAPUQ_MAX_TENSORS];
    snapuq_priv_op_t ops[SNAPUQ_MAX_OPS];
    uint16_t sched[SNAPUQ_MAX_OPS]; /* execution order: flatbuffer operator indices (snapuq_schedule.c) */
    char error[SNAPUQ_ERROR_LEN];
} snapuq_model_t;

/* ---- loading ---- */

/* Parse and validate `len` bytes of a .tflite flatbuffer at `tflite` (read in place, kept by
 * reference), and plan the arena. On failure the model is left empty and snapuq_model_error()
 * names the problem. Statuses: OK, ARG (NULL), FORMAT, VERSION, UNSUPPORTED_OP,
 * UNSUPPORTED_TYPE, SHAPE, QUANT, LIMIT. */
snapuq_status_t snapuq_model_init(snapuq_model_t *model, const void *tflite, size_t len);

/* Arena bytes the model needs (requantization tables: one (mult, shift) per output channel of a
 * per-channel CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, one for a per-tensor one; + planned
 * activations), valid after init.
 * Statuses: OK, ARG, STATE. */
snapuq_status_t snapuq_model_arena_size(const snapuq_model_t *model, size_t *bytes);

/* Detailed split of the arena: persistent tables, planned activations (with lifetime reuse)
 * and the no-reuse sum of activations. Any pointer may be NULL. Statuses: OK, ARG, STATE. */
snapuq_status_t snapuq_model_arena_breakdown(const snapuq_model_t *model, size_t *persistent,
                                             size_t *activations, size_t *activations_no_reuse);

/* Give the model its working memory: `arena` aligned to SNAPUQ_ARENA_ALIGN, at least
 * arena_size() bytes (more is fine). Computes the requantization multipliers into it. May be
 * called again to move the model to another arena. Statuses: OK, ARG, STATE, ARENA, QUANT. */
snapuq_status_t snapuq_model_set_arena(snapuq_model_t *model, void *arena, size_t bytes);

/* One-line description of the last error of this model ("" when none); never NULL. */
const char *snapuq_model_error(const snapuq_model_t *model);

/* ---- inputs / outputs ---- */

/* Number of model inputs / outputs (0 unless loaded). */
uint16_t snapuq_model_input_count(const snapuq_model_t *model);
uint16_t snapuq_model_output_count(const snapuq_model_t *model);

/* Describe input / output `index` (0-based, model order). Statuses: OK, ARG, STATE. */
snapuq_status_t snapuq_model_input_info(const snapuq_model_t *model, uint16_t index,
                                        snapuq_tensor_info_t *info);
snapuq_status_t snapuq_model_output_info(const snapuq_model_t *model, uint16_t index,
                                         snapuq_tensor_info_t *info);

/* Index of the input / output named `name` (signature name first, then tensor name).
 * Statuses: OK, ARG, STATE, NOT_FOUND. */
snapuq_status_t snapuq_model_find_input(const snapuq_model_t *model, const char *name,
                                        uint16_t *index);
snapuq_status_t snapuq_model_find_output(const snapuq_model_t *model, const char *name,
                                         uint16_t *index);

/* Copy `bytes` bytes (must equal the tensor's bytes) into input `index`.
 * Statuses: OK, ARG, STATE (no arena), SIZE. */
snapuq_status_t snapuq_model_set_input(snapuq_model_t *model, uint16_t index, const void *data,
                                       size_t bytes);

/* Run every operator once. Statuses: OK, STATE (no arena). */
snapuq_status_t snapuq_model_invoke(snapuq_model_t *model);

/* Copy output `index` (exactly its bytes) to `dst`. Statuses: OK, ARG, STATE, SIZE. */
snapuq_status_t snapuq_model_get_output(const snapuq_model_t *model, uint16_t index, void *dst,
                                        size_t bytes);

/* By-name conveniences: find + set / get. Statuses as above plus NOT_FOUND. */
snapuq_status_t snapuq_model_set_input_by_name(snapuq_model_t *model, const char *name,
                                               const void *data, size_t bytes);
snapuq_status_t snapuq_model_get_output_by_name(const snapuq_model_t *model, const char *name,
                                                void *dst, size_t bytes);

/* ---- introspection / profiling ---- */

/* Number of operators and the TFLite builtin code of operator `op` (e.g. 3 = CONV_2D). */
uint16_t snapuq_model_op_count(const snapuq_model_t *model);
snapuq_status_t snapuq_model_op_code(const snapuq_model_t *model, uint16_t op, int32_t *builtin);
/* Which kernel operator `op` runs in this build ("ref", "dsp-1x1", "dsp-gemm", "dsp-direct", "dsp-patch", "dsp", or "ref"
 * where the DSP set has no kernel for its shape): chosen at snapuq_model_init; NULL when op is out of
 * range or no model is loaded. */
const char *snapuq_model_op_kernel(const snapuq_model_t *model, uint16_t op);

/* Name of a TFLite builtin operator code ("CONV_2D", ...; "UNKNOWN" otherwise); never NULL. */
const char *snapuq_builtin_name(int32_t builtin_code);

/* Install (or remove, fn = NULL) a hook called around every operator in invoke(). */
snapuq_status_t snapuq_model_set_profiler(snapuq_model_t *model, snapuq_profile_fn fn, void *ctx);

/* Which kernel set this build uses: "ref" or "dsp". */
const char *snapuq_kernels_name(void);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_RUNTIME_H */
