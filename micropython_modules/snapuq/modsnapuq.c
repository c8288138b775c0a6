/*
 * modsnapuq.c - MicroPython user module `snapuq`: thin glue over firmware/core.
 *
 * Everything numeric and every format happens in firmware/core, compiled from the same files
 * as the firmware (core.mk): snapuq_blob.c reads the model blob (.tflite + binary SNAP section,
 * docs/BLOB.md), snapuq_runtime.c runs the int8 model, snapuq_snap*.c score, fit and monitor.
 * This file converts Python arguments, owns the memory (GC heap) and turns status codes into
 * exceptions. The API and the results equal the pure-MicroPython twin
 * (micropython_modules/twin/snapuq.py); see snapuq.pyi and docs/MICROPYTHON.md.
 */
#include <math.h>
#include <string.h>

#include "py/binary.h"
#include "py/obj.h"
#include "py/objarray.h"
#include "py/objstr.h"
#include "py/objtuple.h"
#include "py/runtime.h"

#include "snapuq_blob.h"
#include "snapuq_input.h"
#include "snapuq_runtime.h"
#include "snapuq_sha256.h" /* firmware/app: the digest the firmware reports as `profile` snap_sha256 */
#include "snapuq_snap.h"
#include "snapuq_status.h"

/* ------------------------------------------------------------------ helpers */

static MP_NORETURN void raise_value(const char *what, const char *detail)
{
    mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: %s%s%s"), what,
                      detail[0] ? ": " : "", detail);
}

/* The bytes of file `path`: the open file itself when it exposes its bytes in place (ROMFS:
 * the model stays in flash, no copy), else open(path, "rb").read(). OSError names the file. */
static mp_obj_t call_read(mp_obj_t path, bool in_place)
{
    nlr_buf_t nlr;
    if (nlr_push(&nlr) == 0) {
        mp_obj_t args[2] = { path, MP_OBJ_NEW_QSTR(MP_QSTR_rb) };
        mp_obj_t f = mp_call_function_n_kw(mp_load_global(MP_QSTR_open), 2, 0, args);
        mp_buffer_info_t bi;
        if (in_place && mp_get_buffer(f, &bi, MP_BUFFER_READ)) {
            nlr_pop();
            return f;
        }
        mp_obj_t data = mp_call_function_0(mp_load_attr(f, MP_QSTR_read));
        mp_call_function_0(mp_load_attr(f, MP_QSTR_close));
        nlr_pop();
        return data;
    }
    mp_obj_t exc = MP_OBJ_FROM_PTR(nlr.ret_val);
    if (mp_obj_is_subclass_fast(MP_OBJ_FROM_PTR(mp_obj_get_type(exc)), MP_OBJ_FROM_PTR(&mp_type_OSError))) {
        mp_obj_t v = mp_obj_exception_get_value(exc);
        mp_raise_OSError_with_filename(mp_obj_is_int(v) ? (int)mp_obj_get_int(v) : 0, mp_obj_str_get_str(path));
    }
    nlr_jump(nlr.ret_val);
}

/* ------------------------------------------------------------------ Model object */

typedef struct {
    mp_obj_base_t base;
    mp_obj_t keep;              /* object whose buffer holds the blob (bytes, ROMFS file) */
    const uint8_t *bytes;       /* the blob: in place when immutable and aligned, else a GC copy */
    snapuq_blob_t blob;         /* tflite, SNAP section, names (pointers into `bytes`) */
    snapuq_model_t *model;      /* GC heap, ~10 KB */
    uint8_t *arena_raw;         /* GC block start (kept so the GC sees it) */
    uint8_t *arena;             /* arena_raw aligned to SNAPUQ_ARENA_ALIGN */
    size_t arena_bytes;
    float in_scale;
    int32_t in_zp;
    uint32_t in_bytes;
    uint8_t have_run;
    snapuq_snap_config_t *cfg;  /* GC heap; LUTs point into the blob */
    snapuq_snap_params_t params;
    int32_t s_in16;             /* input tap of the last input (FIXED_POINT.md step 4b), read before invoke */
    snapuq_input_map_t in_map;  /* raw reading -> int8 code (the core's input path) */
    double *in_norm;            /* GC heap: the blob's normalization, scale[C] then offset[C] */
} model_obj_t;

extern const mp_obj_type_t snapuq_type_Model;

static MP_NORETURN void raise_model(model_obj_t *self, snapuq_status_t st)
{
    const char *msg = snapuq_model_error(self->model);
    mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: %s%s%s"), snapuq_status_str(st),
                      msg[0] ? ": " : "", msg);
}

static void check_model(model_obj_t *self, snapuq_status_t st)
{
    if (st != SNAPUQ_OK) {
        raise_model(self, st);
    }
}

/* Model output index of the blob's output named `name`, or -1. */
static int out_index(const model_obj_t *self, const char *name)
{
    for (uint16_t i = 0; i < self->blob.n_outputs; i++) {
        const char *nm;
        uint16_t idx;
        if (snapuq_blob_output(&self->blob, i, &nm, &idx) == SNAPUQ_OK && strcmp(nm, name) == 0) {
            return idx;
        }
    }
    return -1;
}

static const int8_t *output_ptr(const model_obj_t *self, uint16_t idx, uint32_t *n)
{
    snapuq_tensor_info_t info;
    check_model((model_obj_t *)self, snapuq_model_output_info(self->model, idx, &info));
    if (n) {
        *n = info.elements;
    }
    return (const int8_t *)info.data;
}

/* Model(blob): a .snapuq blob as bytes, bytearray, memoryview, a ROMFS file or a path. */
static mp_obj_t model_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args)
{
    mp_arg_check_num(n_args, n_kw, 1, 2, false);
    mp_obj_t src = args[0];
    if (mp_obj_is_str(src)) {
        src = call_read(src, true);
    }
    mp_buffer_info_t bi;
    if (!mp_get_buffer(src, &bi, MP_BUFFER_READ)) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: model must be bytes, bytearray, memoryview, a ROMFS file or a path"));
    }
    if (bi.len < 4 || memcmp(bi.buf, SNAPUQ_BLOB_MAGIC, 4) != 0) {
        raise_value("not a .snapuq blob", n_args > 1 ? "the C module reads blobs only (snapuq micropython blob DIR)"
                                                     : "make one with `snapuq micropython blob DIR`");
    }
    model_obj_t *self = mp_obj_malloc(model_obj_t, type);
    mp_buffer_info_t wi;
    /* The model and its LUTs are read in place for the life of the object: a buffer that can
     * change (bytearray, writable memoryview) or is not 4-aligned is copied, so resizing or
     * editing the caller's bytearray later cannot change results. */
    if (mp_get_buffer(src, &wi, MP_BUFFER_WRITE) || ((uintptr_t)bi.buf & 3u) != 0) {
        uint32_t *copy = m_new(uint32_t, (bi.len + 3) / 4);
        memcpy(copy, bi.buf, bi.len);
        self->bytes = (const uint8_t *)copy;
        self->keep = mp_obj_new_bytearray_by_ref(bi.len, copy);
    } else {
        self->keep = src;
        self->bytes = bi.buf;
    }
    char why[SNAPUQ_ERROR_LEN];
    snapuq_status_t st = snapuq_blob_open(&self->blob, self->bytes, bi.len, why, sizeof why);
    if (st != SNAPUQ_OK) {
        raise_value(why, "");
    }
    self->model = m_new0(snapuq_model_t, 1);
    self->have_run = 0;
    check_model(self, snapuq_model_init(self->model, self->blob.tflite, self->blob.tflite_len));
    size_t need;
    check_model(self, snapuq_model_arena_size(self->model, &need));
    self->arena_raw = m_new(uint8_t, need + SNAPUQ_ARENA_ALIGN);
    self->arena = (uint8_t *)(((uintptr_t)self->arena_raw + SNAPUQ_ARENA_ALIGN - 1)
                              & ~(uintptr_t)(SNAPUQ_ARENA_ALIGN - 1));
    self->arena_bytes = need;
    check_model(self, snapuq_model_set_arena(self->model, self->arena, need));
    if (snapuq_model_input_count(self->model) != 1) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: model has %d inputs, expected 1"),
                          (int)snapuq_model_input_count(self->model));
    }
    snapuq_tensor_info_t in;
    check_model(self, snapuq_model_input_info(self->model, 0, &in));
    if (in.type != SNAPUQ_DTYPE_INT8) {
        raise_value("model input is not int8", "");
    }
    self->in_scale = in.scale;
    self->in_zp = in.zero_point;
    self->in_bytes = in.bytes;
    const uint16_t nc = self->blob.in_channels;
    self->in_norm = nc != 0u ? m_new(double, 2u * (size_t)nc) : NULL;
    for (uint16_t c = 0; c < nc; c++) {
        (void)snapuq_blob_input_normalization(&self->blob, c, &self->in_norm[c], &self->in_norm[nc + c]);
    }
    check_model(self, snapuq_input_map_init(&self->in_map, self->model, nc, self->in_norm,
                                            self->in_norm != NULL ? self->in_norm + nc : NULL));
    self->cfg = m_new0(snapuq_snap_config_t, 1);
    st = snapuq_blob_snap_config(&self->blob, self->model, self->cfg, why, sizeof why);
    if (st != SNAPUQ_OK) {
        raise_value(why, "");
    }
    if (snapuq_snap_params_init(self->cfg, &self->params) != SNAPUQ_OK) {
        raise_value("SNAP parameters are out of range", "");
    }
    return MP_OBJ_FROM_PTR(self);
}

/* ---- input conversion ---- */

/* Element i of a float input as an int8 code: the core's input path (snapuq_input.h: the blob's
 * recorded normalization, then TFLite's quantization; a NaN reading gives the zero point), the rule
 * of the generated snapuq_model_quantize_input and of the twin. */
static int8_t quantize_at(const model_obj_t *self, size_t i, mp_obj_t v)
{
    return snapuq_input_code(&self->in_map, (uint32_t)i, (float)mp_obj_get_float(v));
}

/* Put input x into the model: int8 bytes-like / array('b'), or floats (list, tuple, array('f'/'d')). */
static void set_input(model_obj_t *self, mp_obj_t x)
{
    size_t n = self->in_bytes;
    int8_t *dst = NULL;
    snapuq_tensor_info_t in;
    check_model(self, snapuq_model_input_info(self->model, 0, &in));
    dst = (int8_t *)in.data;
    mp_buffer_info_t bi;
    if (mp_obj_is_str(x)) { /* str exposes a buffer, but text is not an input (as in the twin) */
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: input must be an int8 bytearray/array('b') or a list of floats"));
    }
    if (mp_obj_is_type(x, &mp_type_list) || mp_obj_is_type(x, &mp_type_tuple)) {
        size_t len;
        mp_obj_t *items;
        mp_obj_get_array(x, &len, &items);
        if (len != n) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: input has %d values, model needs %d"),
                              (int)len, (int)n);
        }
        for (size_t i = 0; i < n; i++) {
            if (!mp_obj_is_int(items[i]) && !mp_obj_is_float(items[i])) {
                mp_raise_TypeError(MP_ERROR_TEXT("snapuq: input values must be numbers"));
            }
            dst[i] = quantize_at(self, i, items[i]);
        }
        return;
    }
    if (!mp_get_buffer(x, &bi, MP_BUFFER_READ)) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: input must be an int8 bytearray/array('b') or a list of floats"));
    }
    char tc = (char)bi.typecode;
    size_t sz = mp_binary_get_size('@', bi.typecode, NULL);
    size_t count = bi.len / (sz ? sz : 1);
    if (tc == 'f' || tc == 'd') {
        if (count != n) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: input has %d values, model needs %d"),
                              (int)count, (int)n);
        }
        for (size_t i = 0; i < n; i++) {
            mp_obj_t v = mp_binary_get_val_array(bi.typecode, bi.buf, i);
            dst[i] = quantize_at(self, i, v);
        }
        return;
    }
    if (sz != 1) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: array input must have typecode 'b' (int8) or 'f'/'d' (float)"));
    }
    if (bi.len != n) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: input has %d bytes, model needs %d"),
                          (int)bi.len, (int)n);
    }
    memcpy(dst, bi.buf, n);
}

static void run_model(model_obj_t *self, mp_obj_t x)
{
    set_input(self, x); /* the codes, in the input tensor */
    /* the input tap, before invoke (the arena may reuse the input) */
    check_model(self, snapuq_input_from_int8(self->model, NULL, self->in_bytes, self->cfg, &self->s_in16));
    check_model(self, snapuq_model_invoke(self->model));
    self->have_run = 1;
}

/* m.run(x) -> {name: bytes} */
static mp_obj_t model_run(mp_obj_t self_in, mp_obj_t x)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    run_model(self, x);
    mp_obj_t d = mp_obj_new_dict(self->blob.n_outputs);
    for (uint16_t i = 0; i < self->blob.n_outputs; i++) {
        const char *nm;
        uint16_t idx;
        uint32_t n;
        (void)snapuq_blob_output(&self->blob, i, &nm, &idx);
        const int8_t *p = output_ptr(self, idx, &n);
        mp_obj_dict_store(d, mp_obj_new_str_from_cstr(nm), mp_obj_new_bytes((const byte *)p, n));
    }
    return d;
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_run_obj, model_run);

/* m.output(name) -> bytes of the last inference */
static mp_obj_t model_output(mp_obj_t self_in, mp_obj_t name)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (!self->have_run) {
        raise_value("no inference yet", "");
    }
    if (!mp_obj_is_str(name)) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: output name must be a str"));
    }
    int k = out_index(self, mp_obj_str_get_str(name));
    if (k < 0) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: no output named '%s'"), mp_obj_str_get_str(name));
    }
    uint32_t n;
    const int8_t *p = output_ptr(self, (uint16_t)k, &n);
    return mp_obj_new_bytes((const byte *)p, n);
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_output_obj, model_output);

/* m.quantize(floats) -> bytearray of int8 codes */
static mp_obj_t model_quantize(mp_obj_t self_in, mp_obj_t x)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    size_t len;
    mp_obj_t *items;
    mp_obj_get_array(x, &len, &items);
    if (len != self->in_bytes) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: input has %d values, model needs %d"),
                          (int)len, (int)self->in_bytes);
    }
    byte *q = m_new(byte, len);
    for (size_t i = 0; i < len; i++) {
        q[i] = (byte)quantize_at(self, i, items[i]);
    }
    return mp_obj_new_bytearray_by_ref(len, q);
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_quantize_obj, model_quantize);

/* ---- results ---- */

static const qstr result_fields[] = {
    MP_QSTR_pred, MP_QSTR_u, MP_QSTR_s, MP_QSTR_ebar, MP_QSTR_flag, MP_QSTR_u_q16, MP_QSTR_z_q16,
    MP_QSTR_s_q16, MP_QSTR_f_q16, MP_QSTR_m_q16, MP_QSTR_ebar_q16, MP_QSTR_tap_q16,
    MP_QSTR_p_err, MP_QSTR_alarm, MP_QSTR_p_q16, MP_QSTR_a_q16,
};
#define N_RESULT_FIELDS (sizeof(result_fields) / sizeof(result_fields[0]))

/* items of a Result (attrtuple from this module, or any tuple / namedtuple of the same fields) */
static mp_obj_t *result_items(mp_obj_t r, const char *what)
{
    if (mp_obj_is_type(r, &mp_type_attrtuple) || mp_obj_is_type(r, &mp_type_tuple)) {
        mp_obj_tuple_t *t = MP_OBJ_TO_PTR(r);
        if (t->len == N_RESULT_FIELDS) {
            return t->items;
        }
    }
    mp_raise_msg_varg(&mp_type_TypeError, MP_ERROR_TEXT("snapuq: %s needs a Result from Model.infer"), what);
}

static mp_obj_t q16_float(int32_t v)
{
    return mp_obj_new_float((mp_float_t)v / (mp_float_t)65536);
}

static mp_obj_t make_result(const snapuq_snap_result_t *r)
{
    mp_obj_t eb[SNAPUQ_MAX_TAPS], ebq[SNAPUQ_MAX_TAPS], tq[SNAPUQ_MAX_TAPS];
    for (int l = 0; l < r->n_taps; l++) {
        eb[l] = q16_float(r->ebar16[l]);
        ebq[l] = mp_obj_new_int(r->ebar16[l]);
        tq[l] = mp_obj_new_int(r->s16[l]);
    }
    mp_obj_t items[N_RESULT_FIELDS] = {
        MP_OBJ_NEW_SMALL_INT(r->pred),
        q16_float(r->U16),
        q16_float(r->S16),
        mp_obj_new_tuple(r->n_taps, eb),
        mp_obj_new_bool(r->flag),
        mp_obj_new_int(r->U16),
        mp_obj_new_int(r->Z16),
        mp_obj_new_int(r->S16),
        mp_obj_new_int(r->F16),
        mp_obj_new_int(r->m16),
        mp_obj_new_tuple(r->n_taps, ebq),
        mp_obj_new_tuple(r->n_taps, tq),
        q16_float(r->P16),
        q16_float(r->A16),
        mp_obj_new_int(r->P16),
        mp_obj_new_int(r->A16),
    };
    return mp_obj_new_attrtuple(result_fields, N_RESULT_FIELDS, items);
}

static void score(model_obj_t *self, snapuq_snap_result_t *r)
{
    snapuq_status_t st = snapuq_snap_score_model(self->cfg, &self->params, self->model, self->s_in16, r);
    if (st != SNAPUQ_OK) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: SNAP scoring failed: %s"), snapuq_status_str(st));
    }
}

/* m.infer(x) -> Result */
static mp_obj_t model_infer(mp_obj_t self_in, mp_obj_t x)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    snapuq_snap_result_t r;
    run_model(self, x);
    score(self, &r);
    return make_result(&r);
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_infer_obj, model_infer);

/* ---- beta ---- */

static mp_obj_t mn_float(int32_t m, int32_t n)
{
    mp_float_t v = (mp_float_t)m;
    for (int32_t i = 0; i < n; i++) {
        v /= 2;
    }
    return mp_obj_new_float(v);
}

static mp_obj_t beta_tuple(const snapuq_snap_params_t *p)
{
    mp_obj_t b[3] = { q16_float(p->b0_q16), mn_float(p->b1_m, p->b1_n), mn_float(p->b2_m, p->b2_n) };
    return mp_obj_new_tuple(3, b);
}

static mp_obj_t model_set_beta(mp_obj_t self_in, mp_obj_t beta_in)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    size_t len;
    mp_obj_t *items;
    mp_obj_get_array(beta_in, &len, &items);
    if (len != 3) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: beta needs 3 values"));
    }
    float b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = (float)mp_obj_get_float(items[i]);
    }
    if (snapuq_snap_set_beta(&self->params, b) != SNAPUQ_OK) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: beta values must be finite and |b| < 16384"));
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_set_beta_obj, model_set_beta);

/* ------------------------------------------------------------------ Calibrator */

typedef struct {
    mp_obj_base_t base;
    snapuq_fit_t fit;
    void *buf;
    snapuq_fit_options_t opt;
} calib_obj_t;

extern const mp_obj_type_t snapuq_type_Calibrator;

enum { ARG_capacity, ARG_nonneg, ARG_l2, ARG_max_iter, ARG_tol };
static const mp_arg_t calib_args[] = {
    { MP_QSTR_capacity, MP_ARG_INT, {.u_int = 256} },
    { MP_QSTR_nonneg, MP_ARG_KW_ONLY | MP_ARG_BOOL, {.u_bool = true} },
    { MP_QSTR_l2, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
    { MP_QSTR_max_iter, MP_ARG_KW_ONLY | MP_ARG_INT, {.u_int = 25} },
    { MP_QSTR_tol, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
};
#define N_CALIB_ARGS MP_ARRAY_SIZE(calib_args)

static mp_obj_t calib_new_from(const mp_arg_val_t *a)
{
    mp_int_t cap = a[ARG_capacity].u_int;
    float l2 = a[ARG_l2].u_obj == mp_const_none ? 1e-3f : (float)mp_obj_get_float(a[ARG_l2].u_obj);
    float tol = a[ARG_tol].u_obj == mp_const_none ? 1e-5f : (float)mp_obj_get_float(a[ARG_tol].u_obj);
    if (cap < 1 || cap > 100000 || a[ARG_max_iter].u_int < 1 || a[ARG_max_iter].u_int > 1000 || !(l2 >= 0.0f)
        || !(tol > 0.0f)) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: bad calibrator options"));
    }
    calib_obj_t *self = mp_obj_malloc(calib_obj_t, &snapuq_type_Calibrator);
    size_t bytes = snapuq_fit_buffer_size((uint32_t)cap);
    self->buf = m_new(uint32_t, (bytes + 3) / 4);
    if (snapuq_fit_init(&self->fit, self->buf, bytes) != SNAPUQ_OK) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: calibrator init failed"));
    }
    self->opt.max_iter = (uint16_t)a[ARG_max_iter].u_int;
    self->opt.l2 = l2;
    self->opt.tol = tol;
    self->opt.nonneg = a[ARG_nonneg].u_bool ? 1 : 0;
    return MP_OBJ_FROM_PTR(self);
}

static mp_obj_t calib_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args)
{
    (void)type;
    mp_arg_val_t a[N_CALIB_ARGS];
    mp_arg_parse_all_kw_array(n_args, n_kw, args, N_CALIB_ARGS, calib_args, a);
    return calib_new_from(a);
}

static mp_obj_t calib_push(size_t n_args, const mp_obj_t *args)
{
    calib_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    (void)n_args;
    if (snapuq_fit_push(&self->fit, (float)mp_obj_get_float(args[1]), (float)mp_obj_get_float(args[2]),
                        mp_obj_is_true(args[3])) != SNAPUQ_OK) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: calibration features must be finite"));
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(calib_push_obj, 4, 4, calib_push);

/* cal.add(result, label): features from a Result, positive when the prediction is wrong. */
static mp_obj_t calib_add(mp_obj_t self_in, mp_obj_t result, mp_obj_t label)
{
    calib_obj_t *self = MP_OBJ_TO_PTR(self_in);
    mp_obj_t *it = result_items(result, "add()");
    float s = (float)mp_obj_get_int(it[8]) / 65536.0f, m = (float)mp_obj_get_int(it[9]) / 65536.0f;
    int wrong = mp_obj_get_int(it[0]) != mp_obj_get_int(label);
    if (snapuq_fit_push(&self->fit, s, m, wrong) != SNAPUQ_OK) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: calibration features must be finite"));
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_3(calib_add_obj, calib_add);

/* cal.solve() -> ((b0, b1, b2), iterations) */
static mp_obj_t calib_solve(mp_obj_t self_in)
{
    calib_obj_t *self = MP_OBJ_TO_PTR(self_in);
    float beta[3];
    uint16_t iters = 0;
    snapuq_status_t st = snapuq_fit_solve(&self->fit, &self->opt, beta, &iters);
    if (st != SNAPUQ_OK) {
        (void)st; /* NUMERIC: too few samples of a label or no convergence (messages < 80 chars) */
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: calibration needs >= 2 correct and >= 2 wrong samples"));
    }
    mp_obj_t b[3] = { mp_obj_new_float(beta[0]), mp_obj_new_float(beta[1]), mp_obj_new_float(beta[2]) };
    mp_obj_t r[2] = { mp_obj_new_tuple(3, b), MP_OBJ_NEW_SMALL_INT(iters) };
    return mp_obj_new_tuple(2, r);
}
static MP_DEFINE_CONST_FUN_OBJ_1(calib_solve_obj, calib_solve);

static void calib_attr(mp_obj_t self_in, qstr attr, mp_obj_t *dest)
{
    calib_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (dest[0] == MP_OBJ_NULL && attr == MP_QSTR_count) {
        dest[0] = mp_obj_new_int_from_uint(self->fit.count);
        return;
    }
    if (dest[0] == MP_OBJ_NULL && attr == MP_QSTR_capacity) {
        dest[0] = mp_obj_new_int_from_uint(self->fit.capacity);
        return;
    }
    dest[1] = MP_OBJ_SENTINEL;
}

static const mp_rom_map_elem_t calib_locals_table[] = {
    { MP_ROM_QSTR(MP_QSTR_push), MP_ROM_PTR(&calib_push_obj) },
    { MP_ROM_QSTR(MP_QSTR_add), MP_ROM_PTR(&calib_add_obj) },
    { MP_ROM_QSTR(MP_QSTR_solve), MP_ROM_PTR(&calib_solve_obj) },
};
static MP_DEFINE_CONST_DICT(calib_locals, calib_locals_table);

MP_DEFINE_CONST_OBJ_TYPE(
    snapuq_type_Calibrator, MP_QSTR_Calibrator, MP_TYPE_FLAG_NONE,
    make_new, calib_make_new,
    attr, calib_attr,
    locals_dict, &calib_locals
    );

/* m.calibrator(capacity=256, *, nonneg=True, l2=1e-3, max_iter=25, tol=1e-5) */
static mp_obj_t model_calibrator(size_t n_args, const mp_obj_t *pos, mp_map_t *kw)
{
    mp_arg_val_t a[N_CALIB_ARGS];
    mp_arg_parse_all(n_args - 1, pos + 1, kw, N_CALIB_ARGS, calib_args, a);
    return calib_new_from(a);
}
static MP_DEFINE_CONST_FUN_OBJ_KW(model_calibrator_obj, 1, model_calibrator);

/* m.calibrate(xs, labels, capacity=256, *, nonneg, l2, max_iter, tol, apply=True) -> (beta, iters) */
static mp_obj_t model_calibrate(size_t n_args, const mp_obj_t *pos, mp_map_t *kw)
{
    model_obj_t *self = MP_OBJ_TO_PTR(pos[0]);
    if (n_args < 3) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: calibrate(xs, labels, ...)"));
    }
    bool apply = true;
    mp_map_elem_t *e = mp_map_lookup(kw, MP_OBJ_NEW_QSTR(MP_QSTR_apply), MP_MAP_LOOKUP_REMOVE_IF_FOUND);
    if (e != NULL) {
        apply = mp_obj_is_true(e->value);
    }
    mp_arg_val_t a[N_CALIB_ARGS];
    mp_arg_parse_all(n_args - 3, pos + 3, kw, N_CALIB_ARGS, calib_args, a);
    mp_obj_t cal_obj = calib_new_from(a);
    calib_obj_t *cal = MP_OBJ_TO_PTR(cal_obj);
    mp_obj_t ix = mp_getiter(pos[1], NULL), iy = mp_getiter(pos[2], NULL), x, y;
    while ((x = mp_iternext(ix)) != MP_OBJ_STOP_ITERATION) {
        if ((y = mp_iternext(iy)) == MP_OBJ_STOP_ITERATION) {
            break;
        }
        snapuq_snap_result_t r;
        float s, m;
        run_model(self, x);
        score(self, &r);
        (void)snapuq_snap_features(&r, &s, &m);
        if (snapuq_fit_push(&cal->fit, s, m, r.pred != mp_obj_get_int(y)) != SNAPUQ_OK) {
            mp_raise_ValueError(MP_ERROR_TEXT("snapuq: calibration features must be finite"));
        }
    }
    mp_obj_t res = calib_solve(cal_obj);
    if (apply) {
        mp_obj_t *ri;
        size_t rl;
        mp_obj_get_array(res, &rl, &ri);
        model_set_beta(pos[0], ri[0]);
    }
    return res;
}
static MP_DEFINE_CONST_FUN_OBJ_KW(model_calibrate_obj, 1, model_calibrate);

/* ------------------------------------------------------------------ Monitor */

typedef struct {
    mp_obj_base_t base;
    snapuq_monitor_t mon;
    int32_t *ring;
} monitor_obj_t;

extern const mp_obj_type_t snapuq_type_Monitor;

static mp_obj_t monitor_new(mp_int_t window, mp_int_t thr, mp_int_t ref, mp_int_t h)
{
    if (window < 1 || window > 100000 || h <= 0) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: monitor needs window >= 1 and cusum_h > 0"));
    }
    monitor_obj_t *self = mp_obj_malloc(monitor_obj_t, &snapuq_type_Monitor);
    self->ring = m_new(int32_t, (size_t)window);
    if (snapuq_monitor_init(&self->mon, self->ring, (uint32_t)window, (int32_t)thr, (int32_t)ref, (int64_t)h)
        != SNAPUQ_OK) {
        mp_raise_ValueError(MP_ERROR_TEXT("snapuq: monitor init failed"));
    }
    return MP_OBJ_FROM_PTR(self);
}

/* Monitor(window=100, threshold=32768, cusum_ref=16384, cusum_h=327680): Q16 integers */
static mp_obj_t monitor_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args)
{
    (void)type;
    enum { A_window, A_thr, A_ref, A_h };
    static const mp_arg_t allowed[] = {
        { MP_QSTR_window, MP_ARG_INT, {.u_int = 100} },
        { MP_QSTR_threshold, MP_ARG_INT, {.u_int = 32768} },
        { MP_QSTR_cusum_ref, MP_ARG_INT, {.u_int = 16384} },
        { MP_QSTR_cusum_h, MP_ARG_INT, {.u_int = 327680} },
    };
    mp_arg_val_t a[4];
    mp_arg_parse_all_kw_array(n_args, n_kw, args, 4, allowed, a);
    return monitor_new(a[A_window].u_int, a[A_thr].u_int, a[A_ref].u_int, a[A_h].u_int);
}

static mp_int_t result_u16(mp_obj_t u)
{
    if (mp_obj_is_int(u)) {
        return mp_obj_get_int(u);
    }
    return mp_obj_get_int(result_items(u, "push()")[5]);
}

static mp_obj_t monitor_push(mp_obj_t self_in, mp_obj_t u)
{
    monitor_obj_t *self = MP_OBJ_TO_PTR(self_in);
    uint8_t alarm = 0;
    (void)snapuq_monitor_push(&self->mon, (int32_t)result_u16(u), &alarm);
    return MP_OBJ_NEW_SMALL_INT(alarm);
}
static MP_DEFINE_CONST_FUN_OBJ_2(monitor_push_obj, monitor_push);

static mp_obj_t monitor_reset(mp_obj_t self_in)
{
    monitor_obj_t *self = MP_OBJ_TO_PTR(self_in);
    (void)snapuq_monitor_reset(&self->mon);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(monitor_reset_obj, monitor_reset);

static void monitor_attr(mp_obj_t self_in, qstr attr, mp_obj_t *dest)
{
    monitor_obj_t *self = MP_OBJ_TO_PTR(self_in);
    const snapuq_monitor_t *m = &self->mon;
    if (dest[0] != MP_OBJ_NULL) {
        return;
    }
    switch (attr) {
        case MP_QSTR_window: dest[0] = mp_obj_new_int_from_uint(m->window); return;
        case MP_QSTR_threshold: dest[0] = mp_obj_new_int(m->window_threshold); return;
        case MP_QSTR_cusum_ref: dest[0] = mp_obj_new_int(m->cusum_ref); return;
        case MP_QSTR_cusum_h: dest[0] = mp_obj_new_int_from_ll(m->cusum_h); return;
        case MP_QSTR_cusum: dest[0] = mp_obj_new_int_from_ll(m->cusum); return;
        case MP_QSTR_count: dest[0] = mp_obj_new_int_from_uint(m->count); return;
        case MP_QSTR_n_seen: dest[0] = mp_obj_new_int_from_uint(m->n_seen); return;
        case MP_QSTR_first_alarm: dest[0] = mp_obj_new_int_from_uint(m->first_alarm); return;
        case MP_QSTR_mean:
            dest[0] = mp_obj_new_float(m->count ? (mp_float_t)m->sum / (mp_float_t)m->count / (mp_float_t)65536
                                                : (mp_float_t)0);
            return;
        default:
            dest[1] = MP_OBJ_SENTINEL;
    }
}

static const mp_rom_map_elem_t monitor_locals_table[] = {
    { MP_ROM_QSTR(MP_QSTR_push), MP_ROM_PTR(&monitor_push_obj) },
    { MP_ROM_QSTR(MP_QSTR_reset), MP_ROM_PTR(&monitor_reset_obj) },
};
static MP_DEFINE_CONST_DICT(monitor_locals, monitor_locals_table);

MP_DEFINE_CONST_OBJ_TYPE(
    snapuq_type_Monitor, MP_QSTR_Monitor, MP_TYPE_FLAG_NONE,
    make_new, monitor_make_new,
    attr, monitor_attr,
    locals_dict, &monitor_locals
    );

static mp_int_t q16_of(mp_obj_t v)
{
    mp_float_t f = mp_obj_get_float(v) * 65536;
    float x = (float)f;
    return (mp_int_t)(x >= 0.0f ? x + 0.5f : x - 0.5f);
}

/* m.monitor(window=100, threshold=None, cusum_ref=None, cusum_h=None): U floats */
static mp_obj_t model_monitor(size_t n_args, const mp_obj_t *pos, mp_map_t *kw)
{
    model_obj_t *self = MP_OBJ_TO_PTR(pos[0]);
    enum { A_window, A_thr, A_ref, A_h };
    static const mp_arg_t allowed[] = {
        { MP_QSTR_window, MP_ARG_INT, {.u_int = 100} },
        { MP_QSTR_threshold, MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_cusum_ref, MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_cusum_h, MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
    };
    mp_arg_val_t a[4];
    mp_arg_parse_all(n_args - 1, pos + 1, kw, 4, allowed, a);
    mp_int_t thr = self->params.u_threshold_q16;
    return monitor_new(a[A_window].u_int,
                       a[A_thr].u_obj == mp_const_none ? thr : q16_of(a[A_thr].u_obj),
                       a[A_ref].u_obj == mp_const_none ? thr / 2 : q16_of(a[A_ref].u_obj),
                       a[A_h].u_obj == mp_const_none ? 10 * thr : q16_of(a[A_h].u_obj));
}
static MP_DEFINE_CONST_FUN_OBJ_KW(model_monitor_obj, 1, model_monitor);

/* ------------------------------------------------------------------ stream */

typedef struct {
    mp_obj_base_t base;
    mp_obj_t model, iter, monitor;
} stream_obj_t;

static mp_obj_t stream_iternext(mp_obj_t self_in)
{
    stream_obj_t *self = MP_OBJ_TO_PTR(self_in);
    mp_obj_t x = mp_iternext(self->iter);
    if (x == MP_OBJ_STOP_ITERATION) {
        return MP_OBJ_STOP_ITERATION;
    }
    mp_obj_t r = model_infer(self->model, x);
    mp_obj_t pair[2] = { r, monitor_push(self->monitor, r) };
    return mp_obj_new_tuple(2, pair);
}

MP_DEFINE_CONST_OBJ_TYPE(
    snapuq_type_stream, MP_QSTR_stream, MP_TYPE_FLAG_ITER_IS_ITERNEXT,
    iter, stream_iternext
    );

/* m.stream(xs, monitor=None) -> iterator of (Result, alarm bits) */
static mp_obj_t model_stream(size_t n_args, const mp_obj_t *args)
{
    stream_obj_t *st = mp_obj_malloc(stream_obj_t, &snapuq_type_stream);
    st->model = args[0];
    st->iter = mp_getiter(args[1], NULL);
    if (n_args > 2 && args[2] != mp_const_none) {
        if (!mp_obj_is_type(args[2], &snapuq_type_Monitor)) {
            mp_raise_TypeError(MP_ERROR_TEXT("snapuq: monitor must be a snapuq.Monitor"));
        }
        st->monitor = args[2];
    } else {
        st->monitor = model_monitor(1, args, (mp_map_t *)&mp_const_empty_map);
    }
    return MP_OBJ_FROM_PTR(st);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(model_stream_obj, 2, 3, model_stream);

/* ------------------------------------------------------------------ Model type */

static mp_obj_t input_shape(model_obj_t *self)
{
    snapuq_tensor_info_t in;
    check_model(self, snapuq_model_input_info(self->model, 0, &in));
    mp_obj_t d[SNAPUQ_MAX_DIMS];
    for (int i = 0; i < in.ndim; i++) {
        d[i] = MP_OBJ_NEW_SMALL_INT(in.dims[i]);
    }
    return mp_obj_new_tuple(in.ndim, d);
}

static void model_attr(mp_obj_t self_in, qstr attr, mp_obj_t *dest)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (dest[0] != MP_OBJ_NULL) {
        if (attr == MP_QSTR_beta && dest[1] != MP_OBJ_NULL) {   /* m.beta = (b0, b1, b2) */
            model_set_beta(self_in, dest[1]);
            dest[0] = MP_OBJ_NULL;
        }
        return;
    }
    switch (attr) {
        case MP_QSTR_input_shape: dest[0] = input_shape(self); return;
        case MP_QSTR_input_scale: dest[0] = mp_obj_new_float(self->in_scale); return;
        case MP_QSTR_input_zero_point: dest[0] = MP_OBJ_NEW_SMALL_INT(self->in_zp); return;
        case MP_QSTR_input_size: dest[0] = mp_obj_new_int_from_uint(self->in_bytes); return;
        case MP_QSTR_input_normalization: {
            const uint16_t nc = self->blob.in_channels;
            if (nc == 0u) {
                dest[0] = mp_const_none;
                return;
            }
            mp_obj_t sc = mp_obj_new_tuple(nc, NULL), of = mp_obj_new_tuple(nc, NULL);
            for (uint16_t c = 0; c < nc; c++) {
                double a, b;
                (void)snapuq_blob_input_normalization(&self->blob, c, &a, &b);
                ((mp_obj_tuple_t *)MP_OBJ_TO_PTR(sc))->items[c] = mp_obj_new_float((mp_float_t)a);
                ((mp_obj_tuple_t *)MP_OBJ_TO_PTR(of))->items[c] = mp_obj_new_float((mp_float_t)b);
            }
            mp_obj_t pair[2] = {sc, of};
            dest[0] = mp_obj_new_tuple(2, pair);
            return;
        }
        case MP_QSTR_arena_bytes: dest[0] = mp_obj_new_int_from_uint(self->arena_bytes); return;
        case MP_QSTR_n_classes: dest[0] = MP_OBJ_NEW_SMALL_INT(self->cfg->n_classes); return;
        case MP_QSTR_beta: dest[0] = beta_tuple(&self->params); return;
        case MP_QSTR_u_threshold: dest[0] = q16_float(self->params.u_threshold_q16); return;
        case MP_QSTR_kernels: dest[0] = mp_obj_new_str_from_cstr(snapuq_kernels_name()); return;
        case MP_QSTR_snap_sha256: { /* of the blob's SNAP section, as the firmware reports it */
            char hex[65];
            snapuq_sha256_hex(self->blob.snap, self->blob.snap_len, hex);
            dest[0] = mp_obj_new_str(hex, 64);
            return;
        }
        case MP_QSTR_class_names: {
            mp_obj_t t = mp_obj_new_tuple(self->blob.n_class_names, NULL);
            for (uint16_t c = 0; c < self->blob.n_class_names; c++) {
                const char *nm = "";
                (void)snapuq_blob_class_name(&self->blob, c, &nm);
                ((mp_obj_tuple_t *)MP_OBJ_TO_PTR(t))->items[c] = mp_obj_new_str_from_cstr(nm);
            }
            dest[0] = t;
            return;
        }
        case MP_QSTR_taps: {
            mp_obj_t t = mp_obj_new_tuple(self->cfg->n_taps, NULL);
            for (uint16_t l = 0; l < self->cfg->n_taps; l++) {
                const char *nm = "";
                (void)snapuq_blob_tap_name(&self->blob, l, &nm);
                mp_obj_t pair[2] = { mp_obj_new_str_from_cstr(nm), MP_OBJ_NEW_SMALL_INT(self->cfg->taps[l].d) };
                ((mp_obj_tuple_t *)MP_OBJ_TO_PTR(t))->items[l] = mp_obj_new_tuple(2, pair);
            }
            dest[0] = t;
            return;
        }
        case MP_QSTR_outputs: {
            /* names ordered by model output index */
            mp_obj_t t = mp_obj_new_tuple(self->blob.n_outputs, NULL);
            mp_obj_tuple_t *tt = MP_OBJ_TO_PTR(t);
            size_t k = 0;
            for (uint16_t idx = 0; idx < snapuq_model_output_count(self->model); idx++) {
                for (uint16_t i = 0; i < self->blob.n_outputs; i++) {
                    const char *nm;
                    uint16_t oi;
                    (void)snapuq_blob_output(&self->blob, i, &nm, &oi);
                    if (oi == idx && k < tt->len) {
                        tt->items[k++] = mp_obj_new_str_from_cstr(nm);
                    }
                }
            }
            tt->len = k;
            dest[0] = t;
            return;
        }
        default:
            dest[1] = MP_OBJ_SENTINEL;   /* methods: continue in locals_dict */
    }
}

static const mp_rom_map_elem_t model_locals_table[] = {
    { MP_ROM_QSTR(MP_QSTR_infer), MP_ROM_PTR(&model_infer_obj) },
    { MP_ROM_QSTR(MP_QSTR_run), MP_ROM_PTR(&model_run_obj) },
    { MP_ROM_QSTR(MP_QSTR_output), MP_ROM_PTR(&model_output_obj) },
    { MP_ROM_QSTR(MP_QSTR_quantize), MP_ROM_PTR(&model_quantize_obj) },
    { MP_ROM_QSTR(MP_QSTR_set_beta), MP_ROM_PTR(&model_set_beta_obj) },
    { MP_ROM_QSTR(MP_QSTR_calibrate), MP_ROM_PTR(&model_calibrate_obj) },
    { MP_ROM_QSTR(MP_QSTR_calibrator), MP_ROM_PTR(&model_calibrator_obj) },
    { MP_ROM_QSTR(MP_QSTR_monitor), MP_ROM_PTR(&model_monitor_obj) },
    { MP_ROM_QSTR(MP_QSTR_stream), MP_ROM_PTR(&model_stream_obj) },
};
static MP_DEFINE_CONST_DICT(model_locals, model_locals_table);

MP_DEFINE_CONST_OBJ_TYPE(
    snapuq_type_Model, MP_QSTR_Model, MP_TYPE_FLAG_NONE,
    make_new, model_make_new,
    attr, model_attr,
    locals_dict, &model_locals
    );

/* ------------------------------------------------------------------ module */

static const mp_rom_map_elem_t snapuq_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_snapuq) },
    { MP_ROM_QSTR(MP_QSTR_Model), MP_ROM_PTR(&snapuq_type_Model) },
    { MP_ROM_QSTR(MP_QSTR_Calibrator), MP_ROM_PTR(&snapuq_type_Calibrator) },
    { MP_ROM_QSTR(MP_QSTR_Monitor), MP_ROM_PTR(&snapuq_type_Monitor) },
    { MP_ROM_QSTR(MP_QSTR_IMPLEMENTATION), MP_ROM_QSTR(MP_QSTR_c) },
    { MP_ROM_QSTR(MP_QSTR_SPEC_VERSION), MP_ROM_INT(SNAPUQ_SNAP_SPEC_VERSION) },
};
static MP_DEFINE_CONST_DICT(snapuq_globals, snapuq_globals_table);

const mp_obj_module_t snapuq_user_cmodule = {
    .base = { &mp_type_module },
    .globals = (mp_obj_dict_t *)&snapuq_globals,
};

MP_REGISTER_MODULE(MP_QSTR_snapuq, snapuq_user_cmodule);
