/*
 * snapuq_input.h - the model's input path: raw readings (or int8 codes) to the model's input tensor,
 * then the SNAP input tap (FIXED_POINT.md step 4b), the one pre-invoke sequence of every consumer (the
 * firmware, the generated snapuq_model_quantize_input, the MicroPython C module, the host library).
 *
 *   snapuq_input_map_t map;
 *   snapuq_input_map_init(&map, &model, C, norm_scale, norm_offset);   // C = 0: no normalization
 *   snapuq_input_from_float(&model, &map, raw, n, cfg, &s_in16);       // or from_int8(codes)
 *   snapuq_model_invoke(&model);
 *   snapuq_snap_score_model(cfg, &params, &model, s_in16, &result);
 *
 * The rule, element i of the input (flat, channels last; c = i % C):
 *   x    = (float)((double)raw * norm_scale[c] + norm_offset[c])   C = 0: x = raw
 *          (the product rounded to double before the add: never fused into one FMA)
 *   q    = x / scale                                               float32 division
 *   code = zero_point                          when q is NaN (a missing reading)
 *          clamp(round(q) + zero_point, -128, 127) otherwise, round = half away from zero;
 *          +-inf and every |q| >= 256 saturate (q is clamped to +-1024 before rounding, which no
 *          code distinguishes)
 * This is TFLite's AffineQuantize with the host's data path in front of it
 * (host/snapuq/export/convert.py quantize_raw and the pure-MicroPython twin compute the same codes).
 */
#ifndef SNAPUQ_INPUT_H
#define SNAPUQ_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_runtime.h"
#include "snapuq_snap.h"
#include "snapuq_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* |q| beyond this is clamped before rounding (every code there saturates) */
#define SNAPUQ_INPUT_Q_LIMIT 1024.0f

/* How a raw reading becomes an int8 code. The arrays are the caller's (the generated model's
 * constants, or a copy of a blob's record) and must outlive the map. */
typedef struct {
    float scale;               /* the input tensor's quantization scale (> 0) */
    int32_t zero_point;        /* -128..127 */
    uint32_t channels;         /* C: normalization channels; 0: none (the readings are the float input) */
    const double *norm_scale;  /* C entries (unused when C = 0) */
    const double *norm_offset; /* C entries */
} snapuq_input_map_t;

/* The map of a loaded model's input 0 (its scale and zero point) with a normalization of C channels
 * (C = 0: none; the arrays may then be NULL). Statuses: OK, ARG (NULL map/model, C > 0 with a NULL
 * array), STATE (model not loaded), UNSUPPORTED_TYPE (input 0 not int8), QUANT (scale not finite and > 0). */
snapuq_status_t snapuq_input_map_init(snapuq_input_map_t *map, const snapuq_model_t *model, uint32_t channels,
                                      const double *norm_scale, const double *norm_offset);

/* The rule's quantization step alone: the code of the float input x (NaN: zero_point). */
int8_t snapuq_input_quantize(float x, float scale, int32_t zero_point);

/* The rule's normalization step alone: x of element i (map->channels = 0: raw). */
float snapuq_input_normalize(const snapuq_input_map_t *map, uint32_t i, float raw);

/* Element i's code: quantize(normalize(i, raw)). */
int8_t snapuq_input_code(const snapuq_input_map_t *map, uint32_t i, float raw);

/* codes[i] = snapuq_input_code(map, i, raw[i]) for i < n. */
void snapuq_input_codes(const snapuq_input_map_t *map, const float *raw, size_t n, int8_t *codes);

/* The model's input 0 from n raw readings (n = its elements), then the input tap: *s_in16 is
 * snapuq_snap_input_tap() of the codes when snap has one, else 0 (snap may be NULL). Call it right
 * before snapuq_model_invoke (the runtime may reuse the input's memory). Statuses: OK, ARG, STATE,
 * SIZE (n differs from the input's elements), and the tap's. */
snapuq_status_t snapuq_input_from_float(snapuq_model_t *model, const snapuq_input_map_t *map, const float *raw,
                                        size_t n, const snapuq_snap_config_t *snap, int32_t *s_in16);

/* The same from n int8 codes (n = the input's bytes); codes = NULL: the codes are in the input tensor
 * already (written there by the caller, e.g. an upload straight into it). Statuses as above. */
snapuq_status_t snapuq_input_from_int8(snapuq_model_t *model, const int8_t *codes, size_t n,
                                       const snapuq_snap_config_t *snap, int32_t *s_in16);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_INPUT_H */
