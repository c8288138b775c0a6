/*
 * snapuq_blob.c - model blob reader (format: docs/BLOB.md; API: snapuq_blob.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_blob.h"
#include "snapuq_flatbuffer.h" /* little-endian loads */

/* SNAP section v1 layout (offsets from the section start) */
#define SEC_HEADER_V1 108u
#define SEC_HEADER_V2 112u /* + u32 offset of the input-tap record (0: none) */
#define SEC_HEADER_V3 116u /* + u32 offset of the input-normalization record (0: none) */
#define NORM_MAX_CHANNELS 4096u
#define INTAP_RECORD 40u
#define TAP_RECORD_V1 64u
#define OUT_RECORD_V1 8u
#define SIGMOID_BYTES (4u * SNAPUQ_SIGMOID_LUT_LEN)
#define PERR_BYTES (4u * SNAPUQ_PERR_LUT_LEN)
#define SPEC_PERR_STEP_SHIFT 8
#define INV_SIGMA_BYTES (4u * SNAPUQ_SNAP_LUT_LEN)
#define SPEC_Z_CLAMP 1048575
#define SPEC_LUT_STEP_SHIFT 11

/* CRC-32 four bits at a time: a 64-byte table, 4x fewer steps than bit by bit (a 126 KB blob is
 * checked on every load and on every fuzz execution) */
static const uint32_t crc_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
    0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t snapuq_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    size_t i;
    for (i = 0; i < n; i++) {
        c ^= p[i];
        c = (c >> 4) ^ crc_nibble[c & 15u];
        c = (c >> 4) ^ crc_nibble[c & 15u];
    }
    return c ^ 0xFFFFFFFFu;
}

static snapuq_status_t bad(const char **why, snapuq_status_t st, const char *text)
{
    if (why != NULL) {
        *why = text;
    }
    return st;
}

static uint16_t u16at(const snapuq_blob_t *b, uint32_t off)
{
    return snapuq_rd_u16(b->snap + off);
}
static uint32_t u32at(const snapuq_blob_t *b, uint32_t off)
{
    return snapuq_rd_u32(b->snap + off);
}
static int32_t i32at(const snapuq_blob_t *b, uint32_t off)
{
    return snapuq_rd_i32(b->snap + off);
}

/* little-endian IEEE double at `off` (4-aligned, so read as two words), as its bits */
static uint64_t u64at(const snapuq_blob_t *b, uint32_t off)
{
    return (uint64_t)u32at(b, off) | ((uint64_t)u32at(b, off + 4u) << 32);
}
static double f64at(const snapuq_blob_t *b, uint32_t off)
{
    const uint64_t u = u64at(b, off);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* table of n records of `rec` bytes at `off` inside the section */
static int table_ok(uint32_t len, uint32_t off, uint32_t n, uint32_t rec)
{
    return off <= len && (uint64_t)n * rec <= (uint64_t)(len - off);
}

/* 4-aligned int32 LUT of `bytes` at `off` inside the section */
static int lut_ok(uint32_t len, uint32_t off, uint32_t bytes)
{
    return (off & 3u) == 0 && off <= len && bytes <= len - off;
}

/* UTF-8 by structure: lead bytes and their continuation bytes (MicroPython's own check, utf8_check in
 * py/unicode.c, so that every name decodes there: the C module and the twin make str of them) */
static int utf8_ok(const uint8_t *p, const uint8_t *end)
{
    unsigned need = 0u;
    for (; p < end; p++) {
        const uint8_t c = *p;
        if (need != 0u) {
            if ((c & 0xC0u) != 0x80u) {
                return 0;
            }
            need--;
        } else if (c >= 0xC0u) {
            if (c >= 0xF8u) {
                return 0;
            }
            need = c < 0xE0u ? 1u : (c < 0xF0u ? 2u : 3u);
        } else if (c >= 0x80u) {
            return 0;
        }
    }
    return need == 0u;
}

/* string at `off` of the string table: NUL-terminated inside it, UTF-8 */
static const char *string_at(const snapuq_blob_t *b, uint32_t off)
{
    const uint32_t s = u32at(b, 92), n = u32at(b, 96);
    const uint8_t *p = b->snap + s + off, *nul;
    if (off >= n || (nul = (const uint8_t *)memchr(p, 0, n - off)) == NULL || !utf8_ok(p, nul)) {
        return NULL;
    }
    return (const char *)p;
}

static uint32_t tap_rec(const snapuq_blob_t *b, uint16_t l)
{
    return u32at(b, 80) + (uint32_t)l * u16at(b, 8);
}

static uint32_t out_rec(const snapuq_blob_t *b, uint16_t i)
{
    return u32at(b, 84) + (uint32_t)i * u16at(b, 10);
}

static snapuq_status_t check_section(snapuq_blob_t *b, const char **why)
{
    const uint32_t len = b->snap_len;
    uint32_t hl, tr, orec, strings, strings_len;
    uint16_t i;
    if (len < 8u || memcmp(b->snap, "SNAP", 4) != 0) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: bad magic");
    }
    b->snap_version = snapuq_rd_u16(b->snap + 4);
    hl = snapuq_rd_u16(b->snap + 6);
    if (b->snap_version < 1u) {
        return bad(why, SNAPUQ_ERR_VERSION, "SNAP section: version 0");
    }
    if (hl < SEC_HEADER_V1 || hl > len) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: header length out of range");
    }
    tr = u16at(b, 8);
    orec = u16at(b, 10);
    if (tr < TAP_RECORD_V1 || orec < OUT_RECORD_V1 || (tr & 3u) != 0 || (orec & 3u) != 0) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: record sizes too small or unaligned");
    }
    b->n_taps = b->snap[15];
    b->n_outputs = u16at(b, 18);
    b->n_class_names = u16at(b, 24);
    strings = u32at(b, 92);
    strings_len = u32at(b, 96);
    if (!table_ok(len, u32at(b, 80), b->n_taps, tr) || !table_ok(len, u32at(b, 84), b->n_outputs, orec) ||
        !table_ok(len, u32at(b, 88), b->n_class_names, 4u) || !table_ok(len, strings, strings_len, 1u)) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: a table lies outside the section");
    }
    if (!lut_ok(len, u32at(b, 76), SIGMOID_BYTES)) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: sigmoid LUT outside the section or unaligned");
    }
    if (b->snap[26] > SNAPUQ_COMBINE_PERR_ALARM) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: unknown combine");
    }
    if (b->snap[26] == SNAPUQ_COMBINE_PERR_ALARM && !lut_ok(len, u32at(b, 104), PERR_BYTES)) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: p_err LUT outside the section or unaligned");
    }
    if (b->snap_version >= 2u && hl >= SEC_HEADER_V2 && u32at(b, 108) != 0u) {
        const uint32_t r = u32at(b, 108);
        uint32_t nf;
        if (!lut_ok(len, r, INTAP_RECORD)) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: input-tap record outside the section or unaligned");
        }
        nf = u16at(b, r + 4u);
        if (!lut_ok(len, u32at(b, r + 28u), 4u * nf) || !lut_ok(len, u32at(b, r + 32u), 4u * nf) ||
            !lut_ok(len, u32at(b, r + 36u), 4u * nf)) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: input-tap tables outside the section or unaligned");
        }
    }
    if (b->snap_version >= 3u && hl >= SEC_HEADER_V3 && u32at(b, 112) != 0u) {
        /* u16 channels C, u16 0, C double scales, C double offsets */
        const uint32_t r = u32at(b, 112);
        uint32_t c, k;
        if (!lut_ok(len, r, 4u) || (c = u16at(b, r)) == 0u || c > NORM_MAX_CHANNELS ||
            !lut_ok(len, r, 4u + 16u * c)) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: input-normalization record outside the section");
        }
        for (k = 0; k < 2u * c; k++) {
            const uint64_t u = u64at(b, r + 4u + 8u * k);
            if (((u >> 52) & 0x7FFu) == 0x7FFu || (k < c && (u << 1) == 0u)) {
                return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: input normalization is not finite or has scale 0");
            }
        }
        b->in_channels = (uint16_t)c;
        b->in_norm = r;
    }
    for (i = 0; i < b->n_taps; i++) {
        if (!lut_ok(len, u32at(b, tap_rec(b, i) + 56u), INV_SIGMA_BYTES)) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: tap LUT outside the section or unaligned");
        }
        if (string_at(b, u32at(b, tap_rec(b, i) + 60u)) == NULL) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: bad tap name");
        }
    }
    for (i = 0; i < b->n_outputs; i++) {
        if (string_at(b, u32at(b, out_rec(b, i) + 4u)) == NULL) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: bad output name");
        }
    }
    for (i = 0; i < b->n_class_names; i++) {
        if (string_at(b, u32at(b, u32at(b, 88) + 4u * i)) == NULL) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: bad class name");
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_open(snapuq_blob_t *b, const void *bytes, size_t len, const char **why)
{
    const uint8_t *p = (const uint8_t *)bytes;
    uint32_t ver, hsize, toff, tlen, soff, slen;
    if (b == NULL || p == NULL) {
        return bad(why, SNAPUQ_ERR_ARG, "blob is NULL");
    }
    memset(b, 0, sizeof *b);
    if (((uintptr_t)p & 3u) != 0) {
        return bad(why, SNAPUQ_ERR_ARG, "blob is not 4-byte aligned");
    }
    if (len < SNAPUQ_BLOB_HEADER || memcmp(p, SNAPUQ_BLOB_MAGIC, 4) != 0) {
        return bad(why, SNAPUQ_ERR_FORMAT, "not a snapuq blob (bad magic or truncated header)");
    }
    if (len > 0x7FFFFFF0u) {
        return bad(why, SNAPUQ_ERR_FORMAT, "blob too large");
    }
    ver = snapuq_rd_u16(p + 4);
    hsize = snapuq_rd_u16(p + 6);
    toff = snapuq_rd_u32(p + 8);
    tlen = snapuq_rd_u32(p + 12);
    soff = snapuq_rd_u32(p + 16);
    slen = snapuq_rd_u32(p + 20);
    if (ver != SNAPUQ_BLOB_VERSION) {
        return bad(why, SNAPUQ_ERR_VERSION,
                   ver == 1u ? "blob version 1 (JSON manifest): rebuild it with `snapuq micropython blob`"
                             : "unsupported blob version");
    }
    if (hsize != SNAPUQ_BLOB_HEADER || toff < hsize || (toff & 15u) != 0 || (soff & 3u) != 0 ||
        (uint64_t)toff + tlen > soff || (uint64_t)soff + slen != len) {
        return bad(why, SNAPUQ_ERR_FORMAT, "corrupt blob: section offsets do not fit the blob");
    }
    if (snapuq_crc32(p + SNAPUQ_BLOB_HEADER, len - SNAPUQ_BLOB_HEADER) != snapuq_rd_u32(p + 24)) {
        return bad(why, SNAPUQ_ERR_FORMAT, "corrupt blob: CRC mismatch");
    }
    b->tflite = p + toff;
    b->tflite_len = tlen;
    b->snap = p + soff;
    b->snap_len = slen;
    return check_section(b, why);
}

/* the output record of model output `idx` (its name in *name); 0 when the table has none */
static int named_output(const snapuq_blob_t *b, uint16_t idx, const char **name)
{
    uint16_t i;
    for (i = 0; i < b->n_outputs; i++) {
        if (u16at(b, out_rec(b, i)) == idx) {
            *name = string_at(b, u32at(b, out_rec(b, i) + 4u));
            return 1;
        }
    }
    return 0;
}

static snapuq_status_t model_output(const snapuq_model_t *model, uint16_t idx, uint32_t n, const char **why)
{
    snapuq_tensor_info_t info;
    if (snapuq_model_output_info(model, idx, &info) != SNAPUQ_OK) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section names a model output that does not exist");
    }
    if (info.type != SNAPUQ_DTYPE_INT8 || info.elements != n) {
        return bad(why, SNAPUQ_ERR_SIZE, "SNAP section: output size or type differs from the model");
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_snap_config(const snapuq_blob_t *b, const snapuq_model_t *model,
                                        snapuq_snap_config_t *c, const char **why)
{
    snapuq_status_t st;
    uint16_t l, i;
    if (b == NULL || b->snap == NULL || model == NULL || c == NULL) {
        return bad(why, SNAPUQ_ERR_ARG, "NULL argument");
    }
    if (snapuq_model_output_count(model) == 0) {
        return bad(why, SNAPUQ_ERR_STATE, "model not loaded");
    }
    if (b->n_taps < 1 || b->n_taps > SNAPUQ_MAX_TAPS) {
        return bad(why, SNAPUQ_ERR_LIMIT, "SNAP section: tap count outside 1..SNAPUQ_MAX_TAPS");
    }
    if (i32at(b, 68) != SPEC_Z_CLAMP || i32at(b, 72) != SPEC_LUT_STEP_SHIFT) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: logistic clamp or LUT step differ from the spec");
    }
    if (b->snap[12] < 1u || b->snap[12] > SNAPUQ_SNAP_SPEC_VERSION) {
        return bad(why, SNAPUQ_ERR_VERSION, "SNAP section: fixed-point spec version not supported");
    }
    if (b->snap[26] == SNAPUQ_COMBINE_PERR_ALARM && b->snap[27] != SPEC_PERR_STEP_SHIFT) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: p_err step differs from the spec");
    }
    memset(c, 0, sizeof *c);
    c->spec_version = SNAPUQ_SNAP_SPEC_VERSION; /* spec v1 sections run as combine logistic */
    c->variant = b->snap[13];
    c->hinge = b->snap[14];
    c->n_taps = (uint8_t)b->n_taps;
    c->n_classes = u16at(b, 16);
    c->out_logits = (int16_t)u16at(b, 20);
    c->out_probs = (int16_t)u16at(b, 22);
    c->conf_a_q16 = i32at(b, 28);
    c->defaults.b0_q16 = i32at(b, 32);
    c->defaults.b1_m = i32at(b, 36);
    c->defaults.b1_n = i32at(b, 40);
    c->defaults.b2_m = i32at(b, 44);
    c->defaults.b2_n = i32at(b, 48);
    c->defaults.hinge_q_q16 = i32at(b, 52);
    c->defaults.hinge_m = i32at(b, 56);
    c->defaults.hinge_n = i32at(b, 60);
    c->defaults.u_threshold_q16 = i32at(b, 64);
    c->sigmoid_lut = (const int32_t *)(const void *)(b->snap + u32at(b, 76));
    c->combine = b->snap[26];
    if (c->combine == SNAPUQ_COMBINE_PERR_ALARM) {
        c->perr_lut = (const int32_t *)(const void *)(b->snap + u32at(b, 104));
        c->defaults.alarm_k_q16 = i32at(b, 100);
    }
    if ((st = model_output(model, u16at(b, 20), c->n_classes, why)) != SNAPUQ_OK ||
        (st = model_output(model, u16at(b, 22), c->n_classes, why)) != SNAPUQ_OK) {
        return st;
    }
    for (l = 0; l < b->n_taps; l++) {
        const uint32_t r = tap_rec(b, l);
        snapuq_snap_tap_t *t = &c->taps[l];
        t->d = u16at(b, r);
        t->out_a = (int16_t)u16at(b, r + 2u);
        t->out_mu = (int16_t)u16at(b, r + 4u);
        t->out_logvar = (int16_t)u16at(b, r + 6u);
        t->z_a = i32at(b, r + 8u);
        t->z_mu = i32at(b, r + 12u);
        t->z_v = i32at(b, r + 16u);
        t->k_a = i32at(b, r + 20u);
        t->k_mu = i32at(b, r + 24u);
        t->lut_shift = i32at(b, r + 28u);
        t->p_m = i32at(b, r + 32u);
        t->p_n = i32at(b, r + 36u);
        t->q_m = i32at(b, r + 40u);
        t->q_n = i32at(b, r + 44u);
        t->r_q16 = i32at(b, r + 48u);
        c->defaults.w_q16[l] = i32at(b, r + 52u);
        t->inv_sigma_lut = (const int32_t *)(const void *)(b->snap + u32at(b, r + 56u));
        if ((st = model_output(model, u16at(b, r + 2u), t->d, why)) != SNAPUQ_OK ||
            (st = model_output(model, u16at(b, r + 4u), t->d, why)) != SNAPUQ_OK ||
            (st = model_output(model, u16at(b, r + 6u), t->d, why)) != SNAPUQ_OK) {
            return st;
        }
    }
    if (b->snap_version >= 2u && u16at(b, 6) >= SEC_HEADER_V2 && u32at(b, 108) != 0u) {
        const uint32_t r = u32at(b, 108);
        snapuq_snap_intap_t *it = &c->intap;
        snapuq_tensor_info_t info;
        c->has_intap = 1u;
        it->rows = u16at(b, r);
        it->cols = u16at(b, r + 2u);
        it->n_feat = u16at(b, r + 4u);
        it->z_x = i32at(b, r + 8u);
        it->p_m = i32at(b, r + 12u);
        it->p_n = i32at(b, r + 16u);
        it->r_q16 = i32at(b, r + 20u);
        it->w_q16 = i32at(b, r + 24u);
        it->g_m = (const int32_t *)(const void *)(b->snap + u32at(b, r + 28u));
        it->g_n = (const int32_t *)(const void *)(b->snap + u32at(b, r + 32u));
        it->h_q12 = (const int32_t *)(const void *)(b->snap + u32at(b, r + 36u));
        if (snapuq_model_input_info(model, 0, &info) != SNAPUQ_OK || info.type != SNAPUQ_DTYPE_INT8 ||
            info.elements != (uint32_t)it->rows * it->cols) {
            return bad(why, SNAPUQ_ERR_SIZE, "SNAP section: input tap size or type differs from the model input");
        }
        if (info.zero_point != it->z_x) {
            return bad(why, SNAPUQ_ERR_QUANT, "SNAP section: input tap zero point differs from the model input");
        }
    }
    if (b->in_channels != 0u) {
        snapuq_tensor_info_t info;
        if (snapuq_model_input_info(model, 0, &info) != SNAPUQ_OK || info.elements % b->in_channels != 0u) {
            return bad(why, SNAPUQ_ERR_SIZE, "SNAP section: input normalization channels do not divide the model input");
        }
    }
    if (b->n_outputs > snapuq_model_output_count(model)) { /* bounds the pairwise checks below */
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: more output records than the model has outputs");
    }
    for (i = 0; i < b->n_outputs; i++) {
        snapuq_tensor_info_t info;
        const uint32_t r = out_rec(b, i);
        uint16_t j;
        if (snapuq_model_output_info(model, u16at(b, r), &info) != SNAPUQ_OK) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section names a model output that does not exist");
        }
        if ((int32_t)(int16_t)u16at(b, r + 2u) != info.zero_point) {
            return bad(why, SNAPUQ_ERR_QUANT, "SNAP section: output zero point differs from the model");
        }
        /* names address outputs (the C module's output(name), the twin): one record per output and
         * one output per name */
        for (j = 0; j < i; j++) {
            if (u16at(b, out_rec(b, j)) == u16at(b, r)) {
                return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: two records for one output");
            }
        }
        for (j = 0; j < i; j++) {
            if (strcmp(string_at(b, u32at(b, out_rec(b, j) + 4u)), string_at(b, u32at(b, r + 4u))) == 0) {
                return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: two outputs share a name");
            }
        }
    }
    /* every output the score reads is in the output table (its zero point checked above), the logits
     * under their name */
    {
        const char *nm = NULL;
        if (!named_output(b, u16at(b, 20), &nm) || strcmp(nm, "logits") != 0) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: the logits output is not named 'logits'");
        }
        if (!named_output(b, u16at(b, 22), &nm)) {
            return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: an output it uses is not in its output table");
        }
        for (l = 0; l < b->n_taps; l++) {
            const uint32_t r = tap_rec(b, l);
            if (!named_output(b, u16at(b, r + 2u), &nm) || !named_output(b, u16at(b, r + 4u), &nm) ||
                !named_output(b, u16at(b, r + 6u), &nm)) {
                return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: an output it uses is not in its output table");
            }
        }
    }
    if (snapuq_snap_params_check(c, &c->defaults) != SNAPUQ_OK) {
        return bad(why, SNAPUQ_ERR_FORMAT,
                   "SNAP section: default calibration out of range (weights, shifts, hinge, alarm k)");
    }
    if (snapuq_snap_check(c) != SNAPUQ_OK) {
        return bad(why, SNAPUQ_ERR_FORMAT, "SNAP section: constants out of range (snapuq_snap_check)");
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_output(const snapuq_blob_t *b, uint16_t i, const char **name, uint16_t *index)
{
    if (b == NULL || b->snap == NULL || i >= b->n_outputs) {
        return SNAPUQ_ERR_ARG;
    }
    if (name != NULL) {
        *name = string_at(b, u32at(b, out_rec(b, i) + 4u));
    }
    if (index != NULL) {
        *index = u16at(b, out_rec(b, i));
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_tap_name(const snapuq_blob_t *b, uint16_t l, const char **name)
{
    if (b == NULL || b->snap == NULL || l >= b->n_taps || name == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *name = string_at(b, u32at(b, tap_rec(b, l) + 60u));
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_class_name(const snapuq_blob_t *b, uint16_t c, const char **name)
{
    if (b == NULL || b->snap == NULL || c >= b->n_class_names || name == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *name = string_at(b, u32at(b, u32at(b, 88) + 4u * c));
    return SNAPUQ_OK;
}

float snapuq_blob_normalize_input(const snapuq_blob_t *b, uint32_t i, float raw)
{
    volatile double prod;
    uint32_t c;
    if (b == NULL || b->in_channels == 0u) {
        return raw;
    }
    c = i % b->in_channels;
    /* the product is rounded to double before the add, as on the host: a volatile keeps a compiler that
     * contracts a * b + c (GCC's default outside ISO C mode, on FPUs with FMA) from fusing the two */
    prod = (double)raw * f64at(b, b->in_norm + 4u + 8u * c);
    return (float)(prod + f64at(b, b->in_norm + 4u + 8u * (b->in_channels + c)));
}

snapuq_status_t snapuq_blob_input_normalization(const snapuq_blob_t *b, uint16_t c, double *scale,
                                                double *offset)
{
    if (b == NULL || c >= b->in_channels || scale == NULL || offset == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *scale = f64at(b, b->in_norm + 4u + 8u * c);
    *offset = f64at(b, b->in_norm + 4u + 8u * ((uint32_t)b->in_channels + c));
    return SNAPUQ_OK;
}
