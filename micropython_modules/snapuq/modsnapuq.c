/*
 * modsnapuq.c - MicroPython user module `snapuq`: thin glue over firmware/core.
 *
 * Everything numeric happens in firmware/core (snapuq_runtime.c: int8 TFLite interpreter,
 * snapuq_snap.c: integer SNAP score, calibration fit, drift monitor), compiled from the same
 * files as the firmware. This file only converts Python arguments: it parses the manifest with
 * MicroPython's json module, fills the core's structs, owns the memory (GC heap) and turns
 * status codes into exceptions. The API and the results equal the pure-MicroPython twin
 * (micropython_modules/twin/snapuq.py); see snapuq.pyi and docs/MICROPYTHON.md.
 */
#include <string.h>

#include "py/binary.h"
#include "py/obj.h"
#include "py/objarray.h"
#include "py/objstr.h"
#include "py/objtuple.h"
#include "py/runtime.h"

#include "snapuq_runtime.h"
#include "snapuq_snap.h"
#include "snapuq_status.h"

#define SNAPUQ_BLOB_HEADER 32
#define SNAPUQ_BLOB_VERSION 1

/* ------------------------------------------------------------------ helpers */

static MP_NORETURN void raise_value(const char *what, const char *detail)
{
    mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: %s%s%s"), what,
                      detail[0] ? ": " : "", detail);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t crc32_bytes(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
    }
    return c ^ 0xFFFFFFFFu;
}

/* dict[key] for a str key, raising ValueError("snapuq: manifest lacks 'what'") when absent. */
static mp_obj_t mget(mp_obj_t dict, qstr key, const char *what)
{
    if (!mp_obj_is_type(dict, &mp_type_dict)) {
        raise_value("manifest entry is not an object", what);
    }
    mp_map_elem_t *e = mp_map_lookup(mp_obj_dict_get_map(dict), MP_OBJ_NEW_QSTR(key), MP_MAP_LOOKUP);
    if (e == NULL) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest lacks '%s'"), what);
    }
    return e->value;
}

static mp_obj_t mget_opt(mp_obj_t dict, qstr key)
{
    if (!mp_obj_is_type(dict, &mp_type_dict)) {
        return MP_OBJ_NULL;
    }
    mp_map_elem_t *e = mp_map_lookup(mp_obj_dict_get_map(dict), MP_OBJ_NEW_QSTR(key), MP_MAP_LOOKUP);
    return e ? e->value : MP_OBJ_NULL;
}

static int32_t mint(mp_obj_t dict, qstr key, const char *what)
{
    mp_obj_t v = mget(dict, key, what);
    if (!mp_obj_is_int(v)) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest '%s' is not an integer"), what);
    }
    return (int32_t)mp_obj_get_int(v);
}

/* Copy a JSON list of n ints into dst (GC memory owned by the model). */
static void mints(mp_obj_t list, int32_t *dst, size_t n, const char *what)
{
    size_t len;
    mp_obj_t *items;
    if (!mp_obj_is_type(list, &mp_type_list)) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest '%s' is not a list"), what);
    }
    mp_obj_get_array(list, &len, &items);
    if (len != n) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest '%s' has %d entries, expected %d"),
                          what, (int)len, (int)n);
    }
    for (size_t i = 0; i < n; i++) {
        dst[i] = (int32_t)mp_obj_get_int(items[i]);
    }
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

static mp_obj_t json_loads(mp_obj_t text)
{
    mp_obj_t json = mp_import_name(MP_QSTR_json, mp_const_none, MP_OBJ_NEW_SMALL_INT(0));
    nlr_buf_t nlr;
    if (nlr_push(&nlr) == 0) {
        mp_obj_t r = mp_call_function_1(mp_load_attr(json, MP_QSTR_loads), text);
        nlr_pop();
        return r;
    }
    mp_raise_ValueError(MP_ERROR_TEXT("snapuq: manifest is not valid JSON"));
}

/* ------------------------------------------------------------------ Model object */

#define MAX_OUT_NAMES SNAPUQ_MAX_IO

typedef struct {
    mp_obj_base_t base;
    mp_obj_t keep;              /* bytes object holding the .tflite (or the blob around it) */
    mp_obj_t manifest;          /* dict */
    snapuq_model_t *model;      /* GC heap, ~10 KB */
    uint8_t *arena_raw;         /* GC block start (kept so the GC sees it) */
    uint8_t *arena;             /* arena_raw aligned to SNAPUQ_ARENA_ALIGN */
    size_t arena_bytes;
    float in_scale;
    int32_t in_zp;
    uint32_t in_bytes;
    uint16_t n_out_names;
    qstr out_names[MAX_OUT_NAMES]; /* manifest output names, by manifest index */
    uint16_t out_index[MAX_OUT_NAMES];
    int16_t logits_out, probs_out;
    uint8_t have_run;
    snapuq_snap_config_t *cfg;  /* GC heap; LUTs point into `luts` */
    int32_t *luts;
    snapuq_snap_params_t params;
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

static int find_out_name(const model_obj_t *self, qstr name)
{
    for (int i = 0; i < self->n_out_names; i++) {
        if (self->out_names[i] == name) {
            return i;
        }
    }
    return -1;
}

/* Model output index of manifest output `name` (ValueError if the manifest lacks it). */
static uint16_t out_by_name(const model_obj_t *self, mp_obj_t name, const char *what)
{
    int k = find_out_name(self, mp_obj_str_get_qstr(name));
    if (k < 0) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest names output '%s' (%s) that 'outputs' lacks"),
                          mp_obj_str_get_str(name), what);
    }
    return self->out_index[k];
}

/* Parse manifest["outputs"]: name -> {"index", "zero_point", "shape"}; checked against the model. */
static void load_outputs(model_obj_t *self)
{
    mp_obj_t outs = mget(self->manifest, MP_QSTR_outputs, "outputs");
    if (!mp_obj_is_type(outs, &mp_type_dict)) {
        raise_value("manifest 'outputs' is not an object", "");
    }
    mp_map_t *map = mp_obj_dict_get_map(outs);
    uint16_t nout = snapuq_model_output_count(self->model);
    self->n_out_names = 0;
    for (size_t i = 0; i < map->alloc; i++) {
        if (!mp_map_slot_is_filled(map, i)) {
            continue;
        }
        if (self->n_out_names >= MAX_OUT_NAMES) {
            raise_value("manifest has too many outputs", "");
        }
        const char *name = mp_obj_str_get_str(map->table[i].key);
        int32_t idx = mint(map->table[i].value, MP_QSTR_index, "outputs.*.index");
        if (idx < 0 || idx >= nout) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest output '%s' has index %d, model has %d outputs"),
                              name, (int)idx, (int)nout);
        }
        snapuq_tensor_info_t info;
        check_model(self, snapuq_model_output_info(self->model, (uint16_t)idx, &info));
        mp_obj_t zp = mget_opt(map->table[i].value, MP_QSTR_zero_point);
        if (zp != MP_OBJ_NULL && mp_obj_get_int(zp) != info.zero_point) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest output '%s' zero point %d != model %d"),
                              name, (int)mp_obj_get_int(zp), (int)info.zero_point);
        }
        if (info.type != SNAPUQ_DTYPE_INT8) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: output '%s' is not int8"), name);
        }
        self->out_names[self->n_out_names] = mp_obj_str_get_qstr(map->table[i].key);
        self->out_index[self->n_out_names] = (uint16_t)idx;
        self->n_out_names++;
    }
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

static void load_snap(model_obj_t *self);   /* SNAP constants from manifest["snap"] (below) */

/* Model(model, manifest=None) */
static mp_obj_t model_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args)
{
    mp_arg_check_num(n_args, n_kw, 1, 2, false);
    mp_obj_t src = args[0];
    mp_obj_t man = n_args > 1 ? args[1] : mp_const_none;
    mp_obj_t path = MP_OBJ_NULL;
    if (mp_obj_is_str(src)) {
        path = src;
        src = call_read(src, true);
    }
    mp_buffer_info_t bi;
    if (!mp_get_buffer(src, &bi, MP_BUFFER_READ)) {
        mp_raise_TypeError(MP_ERROR_TEXT("snapuq: model must be bytes, bytearray, memoryview, a ROMFS file or a path"));
    }
    const uint8_t *buf = bi.buf;
    size_t len = bi.len;
    const uint8_t *tfl = buf;
    size_t tfl_len = len;
    if (len >= 4 && memcmp(buf, "SNUQ", 4) == 0) {
        if (len < SNAPUQ_BLOB_HEADER) {
            raise_value("corrupt blob", "truncated header");
        }
        uint32_t ver = (uint32_t)buf[4] | ((uint32_t)buf[5] << 8);
        uint32_t hsize = (uint32_t)buf[6] | ((uint32_t)buf[7] << 8);
        uint32_t toff = rd32(buf + 8), tlen = rd32(buf + 12), moff = rd32(buf + 16), mlen = rd32(buf + 20);
        if (ver != SNAPUQ_BLOB_VERSION) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: unsupported blob version %d"), (int)ver);
        }
        if (hsize != SNAPUQ_BLOB_HEADER || toff < hsize || (uint64_t)toff + tlen > moff
            || (uint64_t)moff + mlen != len) {
            mp_raise_msg_varg(&mp_type_ValueError,
                              MP_ERROR_TEXT("snapuq: corrupt blob: section offsets do not fit a %d-byte blob"), (int)len);
        }
        if (crc32_bytes(buf + SNAPUQ_BLOB_HEADER, len - SNAPUQ_BLOB_HEADER) != rd32(buf + 24)) {
            raise_value("corrupt blob", "CRC mismatch");
        }
        tfl = buf + toff;
        tfl_len = tlen;
        man = mp_obj_new_str((const char *)buf + moff, mlen);
    } else if (man == mp_const_none) {
        if (path == MP_OBJ_NULL) {
            raise_value("a .tflite needs its manifest (snapuq.json)", "");
        }
        /* snapuq.json beside the .tflite */
        size_t plen;
        const char *p = mp_obj_str_get_data(path, &plen);
        size_t dir = 0;   /* length up to and including the last '/' (no strrchr on every port) */
        for (size_t i = 0; i < plen; i++) {
            if (p[i] == '/') {
                dir = i + 1;
            }
        }
        vstr_t v;
        vstr_init(&v, 64);
        vstr_add_strn(&v, p, dir);
        vstr_add_str(&v, "snapuq.json");
        man = call_read(mp_obj_new_str_from_vstr(&v), false);
    }
    if (mp_obj_is_str(man)) {
        const char *s = mp_obj_str_get_str(man);
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') {
            s++;
        }
        if (*s != '{') {
            man = call_read(man, false);   /* a path */
        }
    }
    if (mp_obj_is_str_or_bytes(man)) {
        man = json_loads(man);
    }
    if (!mp_obj_is_type(man, &mp_type_dict)) {
        raise_value("manifest must be a JSON object", "");
    }

    model_obj_t *self = mp_obj_malloc(model_obj_t, type);
    self->keep = src;
    self->manifest = man;
    self->model = m_new0(snapuq_model_t, 1);
    self->have_run = 0;
    check_model(self, snapuq_model_init(self->model, tfl, tfl_len));
    size_t need;
    check_model(self, snapuq_model_arena_size(self->model, &need));
    self->arena_raw = m_new(uint8_t, need + SNAPUQ_ARENA_ALIGN);
    self->arena = (uint8_t *)(((uintptr_t)self->arena_raw + SNAPUQ_ARENA_ALIGN - 1)
                              & ~(uintptr_t)(SNAPUQ_ARENA_ALIGN - 1));
    self->arena_bytes = need;
    check_model(self, snapuq_model_set_arena(self->model, self->arena, need));
    if (snapuq_model_input_count(self->model) != 1) {
        raise_value("model must have exactly one input", "");
    }
    snapuq_tensor_info_t in;
    check_model(self, snapuq_model_input_info(self->model, 0, &in));
    if (in.type != SNAPUQ_DTYPE_INT8) {
        raise_value("model input is not int8", "");
    }
    self->in_scale = in.scale;
    self->in_zp = in.zero_point;
    self->in_bytes = in.bytes;
    load_outputs(self);
    self->logits_out = (int16_t)out_by_name(self, MP_OBJ_NEW_QSTR(MP_QSTR_logits), "logits");
    load_snap(self);
    return MP_OBJ_FROM_PTR(self);
}

/* ---- input conversion ---- */

/* roundf(float32(x) / float32(scale)) + zp, saturated to int8: TFLite AffineQuantize. */
static int8_t quantize_one(float x, float scale, int32_t zp)
{
    float q = x / scale;
    if (!(q > -1.0e6f && q < 1.0e6f)) { /* also catches NaN */
        q = (q > 0.0f) ? 1.0e6f : -1.0e6f;
    }
    float a = q < 0.0f ? -q : q;
    int32_t r = (int32_t)a;     /* floor for a >= 0 */
    if (a - (float)r >= 0.5f) {
        r++;
    }
    int32_t v = (q < 0.0f ? -r : r) + zp;
    return (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
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
            dst[i] = quantize_one((float)mp_obj_get_float(items[i]), self->in_scale, self->in_zp);
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
            dst[i] = quantize_one((float)mp_obj_get_float(v), self->in_scale, self->in_zp);
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
    set_input(self, x);
    check_model(self, snapuq_model_invoke(self->model));
    self->have_run = 1;
}

/* m.run(x) -> {name: bytes} */
static mp_obj_t model_run(mp_obj_t self_in, mp_obj_t x)
{
    model_obj_t *self = MP_OBJ_TO_PTR(self_in);
    run_model(self, x);
    mp_obj_t d = mp_obj_new_dict(self->n_out_names);
    for (int i = 0; i < self->n_out_names; i++) {
        uint32_t n;
        const int8_t *p = output_ptr(self, self->out_index[i], &n);
        mp_obj_dict_store(d, MP_OBJ_NEW_QSTR(self->out_names[i]), mp_obj_new_bytes((const byte *)p, n));
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
    int k = find_out_name(self, mp_obj_str_get_qstr(name));
    if (k < 0) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: no output named '%s'"), mp_obj_str_get_str(name));
    }
    uint32_t n;
    const int8_t *p = output_ptr(self, self->out_index[k], &n);
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
        q[i] = (byte)quantize_one((float)mp_obj_get_float(items[i]), self->in_scale, self->in_zp);
    }
    return mp_obj_new_bytearray_by_ref(len, q);
}
static MP_DEFINE_CONST_FUN_OBJ_2(model_quantize_obj, model_quantize);

/* ---- SNAP constants from manifest["snap"] (docs/FIXED_POINT.md, "Manifest") ---- */

static void load_snap(model_obj_t *self)
{
    mp_obj_t snap = mget(self->manifest, MP_QSTR_snap, "snap");
    mp_obj_t sv = mget_opt(snap, MP_QSTR_spec_version);
    if (sv != MP_OBJ_NULL && mp_obj_get_int(sv) != 1 && mp_obj_get_int(sv) != SNAPUQ_SNAP_SPEC_VERSION) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: manifest SNAP spec version %d is not supported (%d)"),
                          (int)mp_obj_get_int(sv), SNAPUQ_SNAP_SPEC_VERSION);
    }
    mp_obj_t taps = mget(snap, MP_QSTR_taps, "snap.taps");
    size_t n_taps;
    mp_obj_t *tap_items;
    if (!mp_obj_is_type(taps, &mp_type_list)) {
        raise_value("manifest 'snap.taps' is not a list", "");
    }
    mp_obj_get_array(taps, &n_taps, &tap_items);
    if (n_taps < 1 || n_taps > SNAPUQ_MAX_TAPS) {
        mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: %d taps, this build supports 1..%d"),
                          (int)n_taps, SNAPUQ_MAX_TAPS);
    }
    snapuq_snap_config_t *c = m_new0(snapuq_snap_config_t, 1);
    self->cfg = c;
    self->luts = m_new(int32_t, n_taps * SNAPUQ_SNAP_LUT_LEN + SNAPUQ_SIGMOID_LUT_LEN + SNAPUQ_PERR_LUT_LEN);
    c->spec_version = SNAPUQ_SNAP_SPEC_VERSION;
    mp_obj_t variant = mget_opt(snap, MP_QSTR_variant);
    c->variant = (variant != MP_OBJ_NULL && mp_obj_is_str(variant)
                  && strcmp(mp_obj_str_get_str(variant), "literal") == 0) ? SNAPUQ_SNAP_LITERAL : SNAPUQ_SNAP_BEST;
    c->n_taps = (uint8_t)n_taps;
    uint32_t n;
    (void)output_ptr(self, (uint16_t)self->logits_out, &n);
    c->n_classes = (uint16_t)n;
    c->out_logits = self->logits_out;
    mp_obj_t conf = mget(snap, MP_QSTR_conf, "snap.conf");
    mp_obj_t probs_name = mget_opt(conf, MP_QSTR_probs);
    c->out_probs = (int16_t)out_by_name(self, probs_name != MP_OBJ_NULL ? probs_name : MP_OBJ_NEW_QSTR(MP_QSTR_probs),
                                        "snap.conf.probs");
    self->probs_out = c->out_probs;
    c->conf_a_q16 = mint(conf, MP_QSTR_a_q16, "snap.conf.a_q16");
    for (size_t l = 0; l < n_taps; l++) {
        mp_obj_t t = tap_items[l];
        snapuq_snap_tap_t *tp = &c->taps[l];
        int32_t d = mint(t, MP_QSTR_d, "snap.taps.d");
        if (d < 1 || d > 16384) {
            raise_value("manifest tap dimension out of 1..16384", "");
        }
        tp->d = (uint16_t)d;
        tp->out_a = (int16_t)out_by_name(self, mget(t, MP_QSTR_a, "snap.taps.a"), "tap a");
        tp->out_mu = (int16_t)out_by_name(self, mget(t, MP_QSTR_mu, "snap.taps.mu"), "tap mu");
        tp->out_logvar = (int16_t)out_by_name(self, mget(t, MP_QSTR_logvar, "snap.taps.logvar"), "tap logvar");
        const int16_t outs[3] = { tp->out_a, tp->out_mu, tp->out_logvar };
        for (int k = 0; k < 3; k++) {
            (void)output_ptr(self, (uint16_t)outs[k], &n);
            if (n != (uint32_t)d) {
                mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("snapuq: tap %d output has %d values, d = %d"),
                                  (int)l, (int)n, (int)d);
            }
        }
        tp->z_a = mint(t, MP_QSTR_z_a, "snap.taps.z_a");
        tp->z_mu = mint(t, MP_QSTR_z_mu, "snap.taps.z_mu");
        tp->z_v = mint(t, MP_QSTR_z_v, "snap.taps.z_v");
        tp->k_a = mint(t, MP_QSTR_k_a, "snap.taps.k_a");
        tp->k_mu = mint(t, MP_QSTR_k_mu, "snap.taps.k_mu");
        tp->lut_shift = mint(t, MP_QSTR_lut_shift, "snap.taps.lut_shift");
        int32_t *lut = self->luts + l * SNAPUQ_SNAP_LUT_LEN;
        mints(mget(t, MP_QSTR_inv_sigma_lut, "snap.taps.inv_sigma_lut"), lut, SNAPUQ_SNAP_LUT_LEN,
              "snap.taps.inv_sigma_lut");
        tp->inv_sigma_lut = lut;
        tp->p_m = mint(t, MP_QSTR_p_m, "snap.taps.p_m");
        tp->p_n = mint(t, MP_QSTR_p_n, "snap.taps.p_n");
        tp->q_m = mint(t, MP_QSTR_q_m, "snap.taps.q_m");
        tp->q_n = mint(t, MP_QSTR_q_n, "snap.taps.q_n");
        tp->r_q16 = mint(t, MP_QSTR_r_q16, "snap.taps.r_q16");
        c->defaults.w_q16[l] = mint(t, MP_QSTR_w_q16, "snap.taps.w_q16");
    }
    mp_obj_t hinge = mget_opt(snap, MP_QSTR_hinge);
    if (hinge != MP_OBJ_NULL && hinge != mp_const_none) {
        c->hinge = 1;
        c->defaults.hinge_q_q16 = mint(hinge, MP_QSTR_q_q16, "snap.hinge.q_q16");
        c->defaults.hinge_m = mint(hinge, MP_QSTR_m, "snap.hinge.m");
        c->defaults.hinge_n = mint(hinge, MP_QSTR_n, "snap.hinge.n");
    }
    mp_obj_t lg = mget(snap, MP_QSTR_logistic, "snap.logistic");
    c->defaults.b0_q16 = mint(lg, MP_QSTR_b0_q16, "snap.logistic.b0_q16");
    c->defaults.b1_m = mint(lg, MP_QSTR_b1_m, "snap.logistic.b1_m");
    c->defaults.b1_n = mint(lg, MP_QSTR_b1_n, "snap.logistic.b1_n");
    c->defaults.b2_m = mint(lg, MP_QSTR_b2_m, "snap.logistic.b2_m");
    c->defaults.b2_n = mint(lg, MP_QSTR_b2_n, "snap.logistic.b2_n");
    int32_t *sig = self->luts + n_taps * SNAPUQ_SNAP_LUT_LEN;
    mints(mget(lg, MP_QSTR_sigmoid_lut, "snap.logistic.sigmoid_lut"), sig, SNAPUQ_SIGMOID_LUT_LEN,
          "snap.logistic.sigmoid_lut");
    c->sigmoid_lut = sig;
    /* v2: p_err table + alarm (combine "perr_alarm"); v1 manifests and the literal variant: logistic */
    mp_obj_t comb = mget_opt(snap, MP_QSTR_combine);
    if (comb != MP_OBJ_NULL && comb != mp_const_none && strcmp(mp_obj_str_get_str(comb), "perr_alarm") == 0) {
        int32_t *pl = sig + SNAPUQ_SIGMOID_LUT_LEN;
        mints(mget(mget(snap, MP_QSTR_perr, "snap.perr"), MP_QSTR_lut, "snap.perr.lut"), pl, SNAPUQ_PERR_LUT_LEN,
              "snap.perr.lut");
        c->combine = SNAPUQ_COMBINE_PERR_ALARM;
        c->perr_lut = pl;
        c->defaults.alarm_k_q16 = mint(mget(snap, MP_QSTR_alarm, "snap.alarm"), MP_QSTR_k_q16, "snap.alarm.k_q16");
    }
    c->defaults.u_threshold_q16 = mint(snap, MP_QSTR_u_threshold_q16, "snap.u_threshold_q16");
    if (snapuq_snap_check(c) != SNAPUQ_OK) {
        raise_value("manifest SNAP constants are out of range", "snapuq_snap_check failed");
    }
    if (snapuq_snap_params_init(c, &self->params) != SNAPUQ_OK) {
        raise_value("manifest SNAP parameters are out of range", "");
    }
}

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
    snapuq_status_t st = snapuq_snap_score_model(self->cfg, &self->params, self->model, r);
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
        mp_raise_msg_varg(&mp_type_ValueError,
                          MP_ERROR_TEXT("snapuq: calibration failed (%s): needs >= 2 correct and >= 2 wrong samples and a convergent fit"),
                          snapuq_status_str(st));
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
        case MP_QSTR_arena_bytes: dest[0] = mp_obj_new_int_from_uint(self->arena_bytes); return;
        case MP_QSTR_n_classes: dest[0] = MP_OBJ_NEW_SMALL_INT(self->cfg->n_classes); return;
        case MP_QSTR_manifest: dest[0] = self->manifest; return;
        case MP_QSTR_beta: dest[0] = beta_tuple(&self->params); return;
        case MP_QSTR_u_threshold: dest[0] = q16_float(self->params.u_threshold_q16); return;
        case MP_QSTR_kernels: dest[0] = mp_obj_new_str_from_cstr(snapuq_kernels_name()); return;
        case MP_QSTR_class_names: {
            mp_obj_t cn = mget_opt(self->manifest, MP_QSTR_class_names);
            dest[0] = cn == MP_OBJ_NULL ? mp_const_empty_tuple : mp_obj_new_tuple(0, NULL);
            if (cn != MP_OBJ_NULL) {
                size_t len;
                mp_obj_t *it;
                mp_obj_get_array(cn, &len, &it);
                dest[0] = mp_obj_new_tuple(len, it);
            }
            return;
        }
        case MP_QSTR_taps: {
            mp_obj_t taps = mget(mget(self->manifest, MP_QSTR_snap, "snap"), MP_QSTR_taps, "snap.taps");
            size_t len;
            mp_obj_t *it;
            mp_obj_get_array(taps, &len, &it);
            mp_obj_t t = mp_obj_new_tuple(len, NULL);
            for (size_t l = 0; l < len; l++) {
                mp_obj_t name = mget_opt(it[l], MP_QSTR_name);
                mp_obj_t pair[2] = { name != MP_OBJ_NULL ? name : mp_obj_new_int((mp_int_t)l),
                                     MP_OBJ_NEW_SMALL_INT(self->cfg->taps[l].d) };
                ((mp_obj_tuple_t *)MP_OBJ_TO_PTR(t))->items[l] = mp_obj_new_tuple(2, pair);
            }
            dest[0] = t;
            return;
        }
        case MP_QSTR_outputs: {
            mp_obj_t t = mp_obj_new_tuple(self->n_out_names, NULL);
            mp_obj_tuple_t *tt = MP_OBJ_TO_PTR(t);
            /* ordered by model output index */
            size_t k = 0;
            for (uint16_t idx = 0; idx < snapuq_model_output_count(self->model); idx++) {
                for (int i = 0; i < self->n_out_names; i++) {
                    if (self->out_index[i] == idx) {
                        tt->items[k++] = MP_OBJ_NEW_QSTR(self->out_names[i]);
                    }
                }
            }
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
