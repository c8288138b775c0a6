/*
 * snapuq_input.c - the model's input path (API and the rule: snapuq_input.h).
 */
#include "snapuq_input.h"

#include <float.h>

snapuq_status_t snapuq_input_map_init(snapuq_input_map_t *map, const snapuq_model_t *model, uint32_t channels,
                                      const double *norm_scale, const double *norm_offset)
{
    snapuq_tensor_info_t in;
    snapuq_status_t st;
    if (map == NULL || model == NULL || (channels != 0u && (norm_scale == NULL || norm_offset == NULL))) {
        return SNAPUQ_ERR_ARG;
    }
    if ((st = snapuq_model_input_info(model, 0u, &in)) != SNAPUQ_OK) {
        return st;
    }
    if (in.type != SNAPUQ_DTYPE_INT8) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE;
    }
    if (!(in.scale > 0.0f && in.scale <= FLT_MAX) || in.zero_point < -128 || in.zero_point > 127) {
        return SNAPUQ_ERR_QUANT;
    }
    map->scale = in.scale;
    map->zero_point = in.zero_point;
    map->channels = channels;
    map->norm_scale = channels != 0u ? norm_scale : NULL;
    map->norm_offset = channels != 0u ? norm_offset : NULL;
    return SNAPUQ_OK;
}

int8_t snapuq_input_quantize(float x, float scale, int32_t zero_point)
{
    float q = x / scale, t;
    int32_t v;
    if (!(q == q)) {
        return (int8_t)zero_point; /* a missing reading (NaN) */
    }
    q = q > SNAPUQ_INPUT_Q_LIMIT ? SNAPUQ_INPUT_Q_LIMIT : (q < -SNAPUQ_INPUT_Q_LIMIT ? -SNAPUQ_INPUT_Q_LIMIT : q);
    t = (float)(int32_t)q; /* truncation, exact below 2^23; then half away from zero */
    if (q - t >= 0.5f) {
        t += 1.0f;
    } else if (t - q >= 0.5f) {
        t -= 1.0f;
    }
    v = (int32_t)t + zero_point;
    return (int8_t)(v > 127 ? 127 : (v < -128 ? -128 : v));
}

float snapuq_input_normalize(const snapuq_input_map_t *map, uint32_t i, float raw)
{
    volatile double prod; /* rounded to double before the add: no fused multiply-add, whatever the flags */
    uint32_t c;
    if (map == NULL || map->channels == 0u) {
        return raw;
    }
    c = i % map->channels;
    prod = (double)raw * map->norm_scale[c];
    return (float)(prod + map->norm_offset[c]);
}

int8_t snapuq_input_code(const snapuq_input_map_t *map, uint32_t i, float raw)
{
    return snapuq_input_quantize(snapuq_input_normalize(map, i, raw), map->scale, map->zero_point);
}

void snapuq_input_codes(const snapuq_input_map_t *map, const float *raw, size_t n, int8_t *codes)
{
    size_t i;
    for (i = 0; i < n; i++) {
        codes[i] = snapuq_input_code(map, (uint32_t)i, raw[i]);
    }
}

/* input 0 of a loaded model with an arena, n elements of int8 */
static snapuq_status_t input_tensor(snapuq_model_t *model, size_t n, snapuq_tensor_info_t *in)
{
    snapuq_status_t st = snapuq_model_input_info(model, 0u, in);
    if (st != SNAPUQ_OK) {
        return st;
    }
    if (in->type != SNAPUQ_DTYPE_INT8) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE;
    }
    if (in->data == NULL) {
        return SNAPUQ_ERR_STATE;
    }
    return n == in->elements ? SNAPUQ_OK : SNAPUQ_ERR_SIZE;
}

static snapuq_status_t tap(const snapuq_snap_config_t *snap, const snapuq_tensor_info_t *in, int32_t *s_in16)
{
    *s_in16 = 0;
    if (snap == NULL || !snap->has_intap) {
        return SNAPUQ_OK;
    }
    return snapuq_snap_input_tap(snap, (const int8_t *)in->data, in->elements, s_in16);
}

snapuq_status_t snapuq_input_from_float(snapuq_model_t *model, const snapuq_input_map_t *map, const float *raw,
                                        size_t n, const snapuq_snap_config_t *snap, int32_t *s_in16)
{
    snapuq_tensor_info_t in;
    snapuq_status_t st;
    if (model == NULL || map == NULL || raw == NULL || s_in16 == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if ((st = input_tensor(model, n, &in)) != SNAPUQ_OK) {
        return st;
    }
    snapuq_input_codes(map, raw, n, (int8_t *)in.data);
    return tap(snap, &in, s_in16);
}

snapuq_status_t snapuq_input_from_int8(snapuq_model_t *model, const int8_t *codes, size_t n,
                                       const snapuq_snap_config_t *snap, int32_t *s_in16)
{
    snapuq_tensor_info_t in;
    snapuq_status_t st;
    if (model == NULL || s_in16 == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if ((st = input_tensor(model, n, &in)) != SNAPUQ_OK) {
        return st;
    }
    if (codes != NULL && (const void *)codes != in.data &&
        (st = snapuq_model_set_input(model, 0u, codes, n)) != SNAPUQ_OK) {
        return st;
    }
    return tap(snap, &in, s_in16);
}
