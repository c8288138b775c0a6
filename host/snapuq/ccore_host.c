/*
 * ccore_host.c - host-only entry points that snapuq.native.ccore calls through ctypes.
 *
 * Compiled together with the C core (firmware/core, shipped in the package as snapuq/c) into one
 * shared library. It owns the memory the core leaves to its caller (model structs, arena, SNAP
 * config, the blob its LUTs point into) with malloc, which the core itself never uses, and loops
 * over a batch so that Python pays one ctypes call per batch instead of one per tensor.
 *
 * Model: snapuq_host_model_open() copies the .tflite bytes (the core reads them in place), loads
 * them and sets an arena; snapuq_host_model_run() runs N records (all inputs concatenated in
 * model order) and writes every output of every record, concatenated in model order.
 *
 * SNAP: snapuq_host_snap_open() takes a model blob (docs/BLOB.md, written by
 * snapuq.native.blob.write_blob), keeps an aligned copy and reads it with the core's own blob
 * reader, as the firmware's `model` upload does: snapuq_blob_open, snapuq_model_init on the
 * blob's .tflite, snapuq_blob_snap_config (the section checked against that model).
 * snapuq_host_snap_score() scores N records of model outputs (the layout run() writes) given
 * each output's byte offset inside a record; snapuq_host_model_run_snap() runs and scores in one
 * pass through snapuq_snap_score_model(), the device's own path. Result rows are int32, fields
 * named by snapuq_host_snap_fields().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapuq_blob.h"
#include "snapuq_input.h"
#include "snapuq_runtime.h"
#include "snapuq_snap.h"

#define HOST_ERR_LEN 160

typedef struct {
    snapuq_model_t model;
    uint8_t *tflite;
    uint8_t *arena;
    size_t arena_bytes;
    char error[HOST_ERR_LEN];
} host_model_t;

typedef struct {
    uint8_t *blob;         /* malloc'd copy: aligned for the reader; the config's LUTs point into it */
    snapuq_blob_t reader;
    snapuq_model_t model;  /* the blob's .tflite, loaded so the section is checked against it */
    snapuq_snap_config_t cfg;
    snapuq_snap_params_t params;
    double *norm;          /* the blob's input normalization, scale[C] then offset[C] (NULL: none) */
    snapuq_input_map_t in_map; /* raw reading -> the model's int8 input code (the core's input path) */
} host_snap_t;

static void set_err(char *dst, size_t len, const char *what, const char *detail)
{
    if (dst != NULL && len > 0) {
        snprintf(dst, len, "%s%s%s", what, detail[0] ? ": " : "", detail);
    }
}

/* ------------------------------------------------------------------------------- model */

void snapuq_host_model_close(void *handle)
{
    host_model_t *h = (host_model_t *)handle;
    if (h != NULL) {
        free(h->arena);
        free(h->tflite);
        free(h);
    }
}

void *snapuq_host_model_open(const uint8_t *tflite, size_t len, char *err, size_t err_len)
{
    host_model_t *h = (host_model_t *)calloc(1, sizeof(host_model_t));
    snapuq_status_t st;
    size_t need = 0;
    if (h == NULL || (h->tflite = (uint8_t *)malloc(len ? len : 1)) == NULL) {
        set_err(err, err_len, "out of memory", "");
        snapuq_host_model_close(h);
        return NULL;
    }
    memcpy(h->tflite, tflite, len);
    st = snapuq_model_init(&h->model, h->tflite, len);
    if (st != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), snapuq_model_error(&h->model));
        snapuq_host_model_close(h);
        return NULL;
    }
    snapuq_model_arena_size(&h->model, &need);
    h->arena_bytes = need;
    /* aligned_alloc is C11; over-allocate and align by hand */
    h->arena = (uint8_t *)malloc(need + SNAPUQ_ARENA_ALIGN);
    if (h->arena == NULL) {
        set_err(err, err_len, "out of memory", "arena");
        snapuq_host_model_close(h);
        return NULL;
    }
    {
        uintptr_t p = (uintptr_t)h->arena;
        uint8_t *aligned = h->arena + ((SNAPUQ_ARENA_ALIGN - p % SNAPUQ_ARENA_ALIGN) % SNAPUQ_ARENA_ALIGN);
        st = snapuq_model_set_arena(&h->model, aligned, need);
    }
    if (st != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), snapuq_model_error(&h->model));
        snapuq_host_model_close(h);
        return NULL;
    }
    return h;
}

const char *snapuq_host_model_error(const void *handle)
{
    const host_model_t *h = (const host_model_t *)handle;
    return h == NULL ? "no model" : h->error;
}

size_t snapuq_host_model_arena_bytes(const void *handle)
{
    return handle == NULL ? 0 : ((const host_model_t *)handle)->arena_bytes;
}

/* outputs: 0 = model inputs, 1 = model outputs, 2 = tensors of subgraph 0 (constants included) */
int snapuq_host_model_count(const void *handle, int outputs)
{
    const host_model_t *h = (const host_model_t *)handle;
    if (h == NULL) {
        return -1;
    }
    if (outputs == 2) {
        return h->model.n_tensors;
    }
    return outputs ? snapuq_model_output_count(&h->model) : snapuq_model_input_count(&h->model);
}

/* desc[0..7] = type, ndim, dims[4], elements, bytes; *scale, *zero_point, *name (in the model) */
int snapuq_host_model_info(const void *handle, int outputs, int index, int32_t *desc, float *scale,
                           int32_t *zero_point, const char **name)
{
    const host_model_t *h = (const host_model_t *)handle;
    snapuq_tensor_info_t ti;
    snapuq_status_t st;
    int k;
    if (h == NULL || index < 0 || index > 0xffff) {
        return SNAPUQ_ERR_ARG;
    }
    st = outputs ? snapuq_model_output_info(&h->model, (uint16_t)index, &ti)
                 : snapuq_model_input_info(&h->model, (uint16_t)index, &ti);
    if (st != SNAPUQ_OK) {
        return (int)st;
    }
    desc[0] = (int32_t)ti.type;
    desc[1] = ti.ndim;
    for (k = 0; k < SNAPUQ_MAX_DIMS; k++) {
        desc[2 + k] = k < ti.ndim ? ti.dims[k] : 0;
    }
    desc[6] = (int32_t)ti.elements;
    desc[7] = (int32_t)ti.bytes;
    *scale = ti.scale;
    *zero_point = ti.zero_point;
    *name = ti.name;
    return SNAPUQ_OK;
}

/* Number of operators; *names receives the builtin name of operator `index` (NULL: count only). */
int snapuq_host_model_op(const void *handle, int index, const char **name)
{
    const host_model_t *h = (const host_model_t *)handle;
    int32_t code = 0;
    if (h == NULL) {
        return -1;
    }
    if (name != NULL) {
        if (index < 0 || index >= snapuq_model_op_count(&h->model) ||
            snapuq_model_op_code(&h->model, (uint16_t)index, &code) != SNAPUQ_OK) {
            return -1;
        }
        *name = snapuq_builtin_name(code);
    }
    return snapuq_model_op_count(&h->model);
}

/* One inference: x holds every input's bytes (NULL: the inputs are set already), y receives every
 * output's (NULL: none). */
static int run_one(host_model_t *h, const uint8_t *x, uint8_t *y)
{
    snapuq_status_t st;
    snapuq_tensor_info_t ti;
    uint16_t i, n_in = snapuq_model_input_count(&h->model), n_out = snapuq_model_output_count(&h->model);
    for (i = 0; i < n_in && x != NULL; i++) {
        snapuq_model_input_info(&h->model, i, &ti);
        if ((st = snapuq_model_set_input(&h->model, i, x, ti.bytes)) != SNAPUQ_OK) {
            return (int)st;
        }
        x += ti.bytes;
    }
    if ((st = snapuq_model_invoke(&h->model)) != SNAPUQ_OK) {
        set_err(h->error, sizeof h->error, snapuq_status_str(st), snapuq_model_error(&h->model));
        return (int)st;
    }
    if (y != NULL) {
        for (i = 0; i < n_out; i++) {
            snapuq_model_output_info(&h->model, i, &ti);
            if ((st = snapuq_model_get_output(&h->model, i, y, ti.bytes)) != SNAPUQ_OK) {
                return (int)st;
            }
            y += ti.bytes;
        }
    }
    return SNAPUQ_OK;
}

static size_t record_bytes(const host_model_t *h, int outputs)
{
    snapuq_tensor_info_t ti;
    size_t total = 0;
    uint16_t i, n = outputs ? snapuq_model_output_count(&h->model) : snapuq_model_input_count(&h->model);
    for (i = 0; i < n; i++) {
        if (outputs) {
            snapuq_model_output_info(&h->model, i, &ti);
        } else {
            snapuq_model_input_info(&h->model, i, &ti);
        }
        total += ti.bytes;
    }
    return total;
}

/* Run n records: x holds n * (all input bytes), y receives n * (all output bytes). */
int snapuq_host_model_run(void *handle, const uint8_t *x, size_t n, uint8_t *y)
{
    host_model_t *h = (host_model_t *)handle;
    size_t r, in_b, out_b;
    int st;
    if (h == NULL || x == NULL || y == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    in_b = record_bytes(h, 0);
    out_b = record_bytes(h, 1);
    for (r = 0; r < n; r++) {
        if ((st = run_one(h, x + r * in_b, y + r * out_b)) != SNAPUQ_OK) {
            return st;
        }
    }
    return SNAPUQ_OK;
}

/* -------------------------------------------------------------------------------- SNAP */

/* Names of the int32 fields of one result row; a trailing '*' marks a per-tap field. */
const char *snapuq_host_snap_fields(void)
{
    return "ebar16*,s16*,s_in16,S16,F16,m16,P16,A16,Z16,U16,pred,flag";
}

static int row_len(uint8_t n_taps)
{
    return 2 * n_taps + 10;
}

static void fill_row(const snapuq_snap_result_t *res, uint8_t n_taps, int32_t *row)
{
    uint8_t k;
    int m = 0;
    for (k = 0; k < n_taps; k++) {
        row[m++] = res->ebar16[k];
    }
    for (k = 0; k < n_taps; k++) {
        row[m++] = res->s16[k];
    }
    row[m++] = res->s_in16;
    row[m++] = res->S16;
    row[m++] = res->F16;
    row[m++] = res->m16;
    row[m++] = res->P16;
    row[m++] = res->A16;
    row[m++] = res->Z16;
    row[m++] = res->U16;
    row[m++] = res->pred;
    row[m++] = res->flag;
}

void snapuq_host_snap_close(void *handle)
{
    host_snap_t *s = (host_snap_t *)handle;
    if (s != NULL) {
        free(s->blob);
        free(s->norm);
        free(s);
    }
}

/* A model blob (docs/BLOB.md) -> SNAP config, through the core's reader. */
void *snapuq_host_snap_open(const uint8_t *blob, size_t len, char *err, size_t err_len)
{
    host_snap_t *s = (host_snap_t *)calloc(1, sizeof(host_snap_t));
    char why[SNAPUQ_ERROR_LEN];
    snapuq_status_t st;
    if (s == NULL || (s->blob = (uint8_t *)malloc(len ? len : 1)) == NULL) {
        set_err(err, err_len, "out of memory", "");
        snapuq_host_snap_close(s);
        return NULL;
    }
    if (blob != NULL) {
        memcpy(s->blob, blob, len); /* malloc's alignment satisfies the reader's 4 bytes */
    }
    if ((st = snapuq_blob_open(&s->reader, s->blob, len, why, sizeof why)) != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), why);
        snapuq_host_snap_close(s);
        return NULL;
    }
    if ((st = snapuq_model_init(&s->model, s->reader.tflite, s->reader.tflite_len)) != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), snapuq_model_error(&s->model));
        snapuq_host_snap_close(s);
        return NULL;
    }
    if ((st = snapuq_blob_snap_config(&s->reader, &s->model, &s->cfg, why, sizeof why)) != SNAPUQ_OK ||
        (st = snapuq_snap_params_init(&s->cfg, &s->params)) != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), why);
        snapuq_host_snap_close(s);
        return NULL;
    }
    if (s->reader.in_channels != 0u) {
        uint16_t c, nc = s->reader.in_channels;
        if ((s->norm = (double *)malloc(2u * sizeof(double) * nc)) == NULL) {
            set_err(err, err_len, "out of memory", "");
            snapuq_host_snap_close(s);
            return NULL;
        }
        for (c = 0; c < nc; c++) {
            (void)snapuq_blob_input_normalization(&s->reader, c, &s->norm[c], &s->norm[nc + c]);
        }
    }
    if ((st = snapuq_input_map_init(&s->in_map, &s->model, s->reader.in_channels, s->norm,
                                    s->norm != NULL ? s->norm + s->reader.in_channels : NULL)) != SNAPUQ_OK) {
        set_err(err, err_len, snapuq_status_str(st), "the model's input is not an int8 tensor with a scale");
        snapuq_host_snap_close(s);
        return NULL;
    }
    return s;
}

/* The blob's recorded input normalization on n raw readings (flat element i of the input at raw[i]):
 * x[i] = snapuq_blob_normalize_input(i, raw[i]). Returns the channel count (0: none, x = raw). */
int snapuq_host_snap_normalize(const void *handle, const float *raw, size_t n, float *x)
{
    const host_snap_t *s = (const host_snap_t *)handle;
    size_t i;
    if (s == NULL || (n != 0 && (raw == NULL || x == NULL))) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        x[i] = snapuq_blob_normalize_input(&s->reader, (uint32_t)i, raw[i]);
    }
    return (int)s->reader.in_channels;
}

/* n raw readings (records of the model's input elements, back to back) -> int8 codes through the core's
 * input path (snapuq_input_codes: the blob's normalization, then the quantization of the model's input).
 * Returns 0, or -1 for a NULL argument. */
int snapuq_host_snap_quantize(const void *handle, const float *raw, size_t n, int8_t *codes)
{
    const host_snap_t *s = (const host_snap_t *)handle;
    if (s == NULL || (n != 0 && (raw == NULL || codes == NULL))) {
        return -1;
    }
    snapuq_input_codes(&s->in_map, raw, n, codes);
    return 0;
}

int snapuq_host_snap_row_len(const void *handle)
{
    return handle == NULL ? -1 : row_len(((const host_snap_t *)handle)->cfg.n_taps);
}

/* Score n records of int8 model outputs. Each record is rec_bytes long; output j starts at
 * offsets[j] (j < n_offsets) inside it; with an input tap, offsets[n_outputs] is where the record's
 * int8 input codes start (n_offsets = n_outputs + 1). rows receives n * row_len int32. */
int snapuq_host_snap_score(const void *handle, const int8_t *records, size_t rec_bytes, size_t n,
                           const uint32_t *offsets, size_t n_offsets, int32_t *rows)
{
    const host_snap_t *s = (const host_snap_t *)handle;
    const snapuq_snap_config_t *c;
    size_t r;
    uint16_t n_out;
    uint8_t k;
    if (s == NULL || records == NULL || offsets == NULL || rows == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    c = &s->cfg;
    if (c->out_logits < 0 || (size_t)c->out_logits >= n_offsets || c->out_probs < 0 ||
        (size_t)c->out_probs >= n_offsets) {
        return SNAPUQ_ERR_ARG;
    }
    for (k = 0; k < c->n_taps; k++) {
        const snapuq_snap_tap_t *t = &c->taps[k];
        if (t->out_a < 0 || (size_t)t->out_a >= n_offsets || t->out_mu < 0 ||
            (size_t)t->out_mu >= n_offsets || t->out_logvar < 0 || (size_t)t->out_logvar >= n_offsets) {
            return SNAPUQ_ERR_ARG;
        }
    }
    n_out = snapuq_model_output_count(&s->model);
    if (c->has_intap && n_offsets != (size_t)n_out + 1) {
        return SNAPUQ_ERR_ARG;
    }
    for (r = 0; r < n; r++) {
        const int8_t *rec = records + r * rec_bytes;
        snapuq_snap_inputs_t in;
        snapuq_snap_result_t res;
        snapuq_status_t st;
        memset(&in, 0, sizeof in);
        if (c->has_intap &&
            (st = snapuq_snap_input_tap(c, rec + offsets[n_out], (size_t)c->intap.rows * c->intap.cols,
                                        &in.s_in16)) != SNAPUQ_OK) {
            return (int)st;
        }
        in.logits = rec + offsets[c->out_logits];
        in.probs = rec + offsets[c->out_probs];
        for (k = 0; k < c->n_taps; k++) {
            in.a[k] = rec + offsets[c->taps[k].out_a];
            in.mu[k] = rec + offsets[c->taps[k].out_mu];
            in.logvar[k] = rec + offsets[c->taps[k].out_logvar];
        }
        if ((st = snapuq_snap_score(c, &s->params, &in, &res)) != SNAPUQ_OK) {
            return (int)st;
        }
        fill_row(&res, c->n_taps, rows + r * (size_t)row_len(c->n_taps));
    }
    return SNAPUQ_OK;
}

/* Run n records through the model and score each with snapuq_snap_score_model() (the device's
 * path); y (may be NULL) receives the outputs as in snapuq_host_model_run(). */
int snapuq_host_model_run_snap(void *model, const void *snap, const uint8_t *x, size_t n, uint8_t *y,
                               int32_t *rows)
{
    host_model_t *h = (host_model_t *)model;
    const host_snap_t *s = (const host_snap_t *)snap;
    size_t r, in_b, out_b;
    int st;
    if (h == NULL || s == NULL || x == NULL || rows == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    in_b = record_bytes(h, 0);
    out_b = record_bytes(h, 1);
    for (r = 0; r < n; r++) {
        snapuq_snap_result_t res;
        int32_t s_in16 = 0;
        /* the core's input path: the codes into the input, then the input tap, before the inference
           (the arena may reuse the input's memory) */
        if ((st = (int)snapuq_input_from_int8(&h->model, (const int8_t *)(x + r * in_b), in_b, &s->cfg,
                                              &s_in16)) != SNAPUQ_OK) {
            return st;
        }
        if ((st = run_one(h, NULL, y == NULL ? NULL : y + r * out_b)) != SNAPUQ_OK) {
            return st;
        }
        if ((st = (int)snapuq_snap_score_model(&s->cfg, &s->params, &h->model, s_in16, &res)) != SNAPUQ_OK) {
            return st;
        }
        fill_row(&res, s->cfg.n_taps, rows + r * (size_t)row_len(s->cfg.n_taps));
    }
    return SNAPUQ_OK;
}

const char *snapuq_host_status_str(int status)
{
    return snapuq_status_str((snapuq_status_t)status);
}
