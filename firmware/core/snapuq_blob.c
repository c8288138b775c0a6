/*
 * snapuq_blob.c - model blob reader (format: docs/BLOB.md; API: snapuq_blob.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_blob.h"
#include "snapuq_flatbuffer.h" /* little-endian loads */
#include "snapuq_snap_section.h"

/* Section layout: snapuq_snap_section.h, the one description the writer and the twin share. Sizes: */
#define X_SIZE_V(n, t, o, since, v) +((since) <= (v) ? SNAPUQ_SNAP_SIZEOF_##t : 0)
#define X_HDR_V1(n, t, o, s) X_SIZE_V(n, t, o, s, 1)
#define X_HDR_V2(n, t, o, s) X_SIZE_V(n, t, o, s, 2)
#define X_HDR_V3(n, t, o, s) X_SIZE_V(n, t, o, s, 3)
#define X_SIZE(n, t, o, s) +SNAPUQ_SNAP_SIZEOF_##t
enum {
    SEC_HEADER_V1 = 0 SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_V1),
    SEC_HEADER_V2 = 0 SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_V2), /* + the input-tap record's offset */
    SEC_HEADER_V3 = 0 SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_V3), /* + the input normalization's offset */
    TAP_RECORD_V1 = 0 SNAPUQ_SNAP_TAP_FIELDS(X_SIZE),
    OUT_RECORD_V1 = 0 SNAPUQ_SNAP_OUTPUT_FIELDS(X_SIZE),
    INTAP_RECORD = 0 SNAPUQ_SNAP_INTAP_FIELDS(X_SIZE)
};
/* the reader knows every header field the table lists (SNAPUQ_SNAP_SECTION_VERSION is its newest since) */
typedef char snap_section_version_known[(SEC_HEADER_V3 == 0 SNAPUQ_SNAP_HEADER_FIELDS(X_SIZE) &&
                                         SNAPUQ_SNAP_SECTION_VERSION == 3) ? 1 : -1];
/* offsets of the normalization record's fields (NORM_<name>) */
#define X_NORM_OFF(n, t, o, s) NORM_##n = (o),
enum { SNAPUQ_SNAP_NORM_FIELDS(X_NORM_OFF) NORM_END_ };
/* since of the header fields (HDR_SINCE_<name>) */
#define X_HDR_SINCE(n, t, o, s) HDR_SINCE_##n = (s),
enum { SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_SINCE) HDR_SINCE_END_ };

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

static snapuq_status_t bad(char *msg, size_t msg_len, snapuq_status_t st, const char *text)
{
    return snapuq_message(msg, msg_len, st, text);
}

/* little-endian loads of the field types (b4: the field's address) */
typedef const uint8_t *snap_b4_t;
typedef uint8_t snap_u8_t;
typedef uint16_t snap_u16_t;
typedef int16_t snap_i16_t;
typedef uint32_t snap_u32_t;
typedef int32_t snap_i32_t;
typedef double snap_f64_t;
static inline snap_b4_t rd_b4(const uint8_t *p)
{
    return p;
}
static inline uint8_t rd_u8(const uint8_t *p)
{
    return p[0];
}
static inline uint16_t rd_u16(const uint8_t *p)
{
    return snapuq_rd_u16(p);
}
static inline int16_t rd_i16(const uint8_t *p)
{
    return (int16_t)snapuq_rd_u16(p);
}
static inline uint32_t rd_u32(const uint8_t *p)
{
    return snapuq_rd_u32(p);
}
static inline int32_t rd_i32(const uint8_t *p)
{
    return snapuq_rd_i32(p);
}
/* its bits (the section keeps doubles 4-aligned, so read as two words) */
static inline uint64_t rd_u64(const uint8_t *p)
{
    return (uint64_t)snapuq_rd_u32(p) | ((uint64_t)snapuq_rd_u32(p + 4) << 32);
}
static inline double rd_f64(const uint8_t *p)
{
    const uint64_t u = rd_u64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* some fields are never read (reserved ones): accessors nobody calls are no warning */
#if defined(__GNUC__)
#define SNAP_ACCESSOR static inline __attribute__((unused))
#else
#define SNAP_ACCESSOR static inline
#endif

/* Field accessors, one per field of snapuq_snap_section.h: hdr_<name>(b) reads the section header,
 * tap_<name>(b, r) / out_<name>(b, r) / intap_<name>(b, r) / norm_<name>(b, r) the record at r. */
#define X_HDR_GET(n, t, o, s)                                                                      \
    SNAP_ACCESSOR snap_##t##_t hdr_##n(const snapuq_blob_t *b)                                   \
    {                                                                                             \
        return rd_##t(b->snap + (o));                                                             \
    }
#define X_REC_GET(rec, n, t, o)                                                                    \
    SNAP_ACCESSOR snap_##t##_t rec##_##n(const snapuq_blob_t *b, uint32_t r)                     \
    {                                                                                             \
        return rd_##t(b->snap + r + (o));                                                         \
    }
#define X_TAP_GET(n, t, o, s) X_REC_GET(tap, n, t, o)
#define X_OUT_GET(n, t, o, s) X_REC_GET(out, n, t, o)
#define X_INTAP_GET(n, t, o, s) X_REC_GET(intap, n, t, o)
#define X_NORM_GET(n, t, o, s) X_REC_GET(norm, n, t, o)
SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_GET)
SNAPUQ_SNAP_TAP_FIELDS(X_TAP_GET)
SNAPUQ_SNAP_OUTPUT_FIELDS(X_OUT_GET)
SNAPUQ_SNAP_INTAP_FIELDS(X_INTAP_GET)
SNAPUQ_SNAP_NORM_FIELDS(X_NORM_GET)

/* a header field appended by a later version is there when the version has it and it lies inside H */
#define X_HDR_END(n, t, o, s) HDR_END_##n = (o) + SNAPUQ_SNAP_SIZEOF_##t,
enum { SNAPUQ_SNAP_HEADER_FIELDS(X_HDR_END) HDR_END_END_ };
#define HDR_HAS(b, n) ((b)->snap_version >= HDR_SINCE_##n && hdr_header_len(b) >= (uint32_t)HDR_END_##n)

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
    const uint32_t s = hdr_strings_off(b), n = hdr_strings_len(b);
    const uint8_t *p = b->snap + s + off, *nul;
    if (off >= n || (nul = (const uint8_t *)memchr(p, 0, n - off)) == NULL || !utf8_ok(p, nul)) {
        return NULL;
    }
    return (const char *)p;
}

/* string offset of class name c (the class-name table: u32 string offsets) */
static uint32_t class_ref(const snapuq_blob_t *b, uint16_t c)
{
    return rd_u32(b->snap + hdr_class_table_off(b) + 4u * c);
}

/* an int32 LUT where it lies in the section (its offset checked by lut_ok) */
static const int32_t *lut_at(const snapuq_blob_t *b, uint32_t off)
{
    return (const int32_t *)(const void *)(b->snap + off);
}

static uint32_t tap_rec(const snapuq_blob_t *b, uint16_t l)
{
    return hdr_tap_table_off(b) + (uint32_t)l * hdr_tap_rec_len(b);
}

static uint32_t out_rec(const snapuq_blob_t *b, uint16_t i)
{
    return hdr_out_table_off(b) + (uint32_t)i * hdr_out_rec_len(b);
}

static snapuq_status_t check_section(snapuq_blob_t *b, char *msg, size_t msg_len)
{
    const uint32_t len = b->snap_len;
    uint32_t hl, tr, orec, strings, strings_len;
    uint16_t i;
    if (len < (uint32_t)HDR_END_header_len || memcmp(hdr_magic(b), SNAPUQ_SNAP_MAGIC, 4) != 0) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: bad magic");
    }
    b->snap_version = hdr_version(b);
    hl = hdr_header_len(b);
    if (b->snap_version < 1u) {
        return bad(msg, msg_len, SNAPUQ_ERR_VERSION, "SNAP section: version 0");
    }
    if (hl < SEC_HEADER_V1 || hl > len) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: header length out of range");
    }
    tr = hdr_tap_rec_len(b);
    orec = hdr_out_rec_len(b);
    if (tr < TAP_RECORD_V1 || orec < OUT_RECORD_V1 || (tr & 3u) != 0 || (orec & 3u) != 0) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: record sizes too small or unaligned");
    }
    b->n_taps = hdr_n_taps(b);
    b->n_outputs = hdr_n_outputs(b);
    b->n_class_names = hdr_n_class_names(b);
    strings = hdr_strings_off(b);
    strings_len = hdr_strings_len(b);
    if (!table_ok(len, hdr_tap_table_off(b), b->n_taps, tr) ||
        !table_ok(len, hdr_out_table_off(b), b->n_outputs, orec) ||
        !table_ok(len, hdr_class_table_off(b), b->n_class_names, 4u) || !table_ok(len, strings, strings_len, 1u)) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: a table lies outside the section");
    }
    if (!lut_ok(len, hdr_sigmoid_lut_off(b), SIGMOID_BYTES)) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: sigmoid LUT outside the section or unaligned");
    }
    if (hdr_combine(b) > SNAPUQ_COMBINE_PERR_ALARM) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: unknown combine");
    }
    if (hdr_combine(b) == SNAPUQ_COMBINE_PERR_ALARM && !lut_ok(len, hdr_perr_lut_off(b), PERR_BYTES)) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: p_err LUT outside the section or unaligned");
    }
    if (HDR_HAS(b, intap_off) && hdr_intap_off(b) != 0u) {
        const uint32_t r = hdr_intap_off(b);
        uint32_t nf;
        if (!lut_ok(len, r, INTAP_RECORD)) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT,
                       "SNAP section: input-tap record outside the section or unaligned");
        }
        nf = intap_n_feat(b, r);
        if (!lut_ok(len, intap_g_m_off(b, r), 4u * nf) || !lut_ok(len, intap_g_n_off(b, r), 4u * nf) ||
            !lut_ok(len, intap_h_q12_off(b, r), 4u * nf)) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT,
                       "SNAP section: input-tap tables outside the section or unaligned");
        }
    }
    if (HDR_HAS(b, in_norm_off) && hdr_in_norm_off(b) != 0u) {
        /* channels C, then C double scales and C double offsets from the `scale` field on */
        const uint32_t r = hdr_in_norm_off(b);
        uint32_t c, k;
        if (!lut_ok(len, r, NORM_scale) || (c = norm_channels(b, r)) == 0u || c > SNAPUQ_SNAP_NORM_MAX_CHANNELS ||
            !lut_ok(len, r, NORM_scale + 16u * c)) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: input-normalization record outside the section");
        }
        for (k = 0; k < 2u * c; k++) {
            const uint64_t u = rd_u64(b->snap + r + NORM_scale + 8u * k);
            if (((u >> 52) & 0x7FFu) == 0x7FFu || (k < c && (u << 1) == 0u)) {
                return bad(msg, msg_len, SNAPUQ_ERR_FORMAT,
                           "SNAP section: input normalization is not finite or has scale 0");
            }
        }
        b->in_channels = (uint16_t)c;
        b->in_norm = r;
    }
    for (i = 0; i < b->n_taps; i++) {
        if (!lut_ok(len, tap_inv_sigma_lut_off(b, tap_rec(b, i)), INV_SIGMA_BYTES)) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: tap LUT outside the section or unaligned");
        }
        if (string_at(b, tap_name(b, tap_rec(b, i))) == NULL) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: bad tap name");
        }
    }
    for (i = 0; i < b->n_outputs; i++) {
        if (string_at(b, out_name(b, out_rec(b, i))) == NULL) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: bad output name");
        }
    }
    for (i = 0; i < b->n_class_names; i++) {
        if (string_at(b, class_ref(b, i)) == NULL) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: bad class name");
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_open(snapuq_blob_t *b, const void *bytes, size_t len, char *msg, size_t msg_len)
{
    const uint8_t *p = (const uint8_t *)bytes;
    uint32_t ver, hsize, toff, tlen, soff, slen;
    (void)snapuq_message(msg, msg_len, SNAPUQ_OK, "");
    if (b == NULL || p == NULL) {
        return bad(msg, msg_len, SNAPUQ_ERR_ARG, "blob is NULL");
    }
    memset(b, 0, sizeof *b);
    if (((uintptr_t)p & 3u) != 0) {
        return bad(msg, msg_len, SNAPUQ_ERR_ARG, "blob is not 4-byte aligned");
    }
    if (len < SNAPUQ_BLOB_HEADER || memcmp(p, SNAPUQ_BLOB_MAGIC, 4) != 0) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "not a snapuq blob (bad magic or truncated header)");
    }
    if (len > 0x7FFFFFF0u) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "blob too large");
    }
    ver = snapuq_rd_u16(p + 4);
    hsize = snapuq_rd_u16(p + 6);
    toff = snapuq_rd_u32(p + 8);
    tlen = snapuq_rd_u32(p + 12);
    soff = snapuq_rd_u32(p + 16);
    slen = snapuq_rd_u32(p + 20);
    if (ver != SNAPUQ_BLOB_VERSION) {
        return bad(msg, msg_len, SNAPUQ_ERR_VERSION,
                   ver == 1u ? "blob version 1 (JSON manifest): rebuild it with `snapuq micropython blob`"
                             : "unsupported blob version");
    }
    if (hsize != SNAPUQ_BLOB_HEADER || toff < hsize || (toff & 15u) != 0 || (soff & 3u) != 0 ||
        (uint64_t)toff + tlen > soff || (uint64_t)soff + slen != len) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "corrupt blob: section offsets do not fit the blob");
    }
    if (snapuq_crc32(p + SNAPUQ_BLOB_HEADER, len - SNAPUQ_BLOB_HEADER) != snapuq_rd_u32(p + 24)) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "corrupt blob: CRC mismatch");
    }
    b->tflite = p + toff;
    b->tflite_len = tlen;
    b->snap = p + soff;
    b->snap_len = slen;
    return check_section(b, msg, msg_len);
}

/* the output record of model output `idx` (its name in *name); 0 when the table has none */
static int named_output(const snapuq_blob_t *b, uint16_t idx, const char **name)
{
    uint16_t i;
    for (i = 0; i < b->n_outputs; i++) {
        if (out_index(b, out_rec(b, i)) == idx) {
            *name = string_at(b, out_name(b, out_rec(b, i)));
            return 1;
        }
    }
    return 0;
}

static snapuq_status_t model_output(const snapuq_model_t *model, uint16_t idx, uint32_t n, char *msg,
                                    size_t msg_len)
{
    snapuq_tensor_info_t info;
    if (snapuq_model_output_info(model, idx, &info) != SNAPUQ_OK) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section names a model output that does not exist");
    }
    if (info.type != SNAPUQ_DTYPE_INT8 || info.elements != n) {
        return bad(msg, msg_len, SNAPUQ_ERR_SIZE, "SNAP section: output size or type differs from the model");
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_snap_config(const snapuq_blob_t *b, const snapuq_model_t *model,
                                        snapuq_snap_config_t *c, char *msg, size_t msg_len)
{
    snapuq_status_t st;
    uint16_t l, i;
    (void)snapuq_message(msg, msg_len, SNAPUQ_OK, "");
    if (b == NULL || b->snap == NULL || model == NULL || c == NULL) {
        return bad(msg, msg_len, SNAPUQ_ERR_ARG, "NULL argument");
    }
    if (snapuq_model_output_count(model) == 0) {
        return bad(msg, msg_len, SNAPUQ_ERR_STATE, "model not loaded");
    }
    if (b->n_taps < 1 || b->n_taps > SNAPUQ_MAX_TAPS) {
        return bad(msg, msg_len, SNAPUQ_ERR_LIMIT, "SNAP section: tap count outside 1..SNAPUQ_MAX_TAPS");
    }
    if (hdr_z_clamp_q16(b) != SPEC_Z_CLAMP || hdr_lut_step_shift(b) != SPEC_LUT_STEP_SHIFT) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: logistic clamp or LUT step differ from the spec");
    }
    if (hdr_spec_version(b) < 1u || hdr_spec_version(b) > SNAPUQ_SNAP_SPEC_VERSION) {
        return bad(msg, msg_len, SNAPUQ_ERR_VERSION, "SNAP section: fixed-point spec version not supported");
    }
    if (hdr_combine(b) == SNAPUQ_COMBINE_PERR_ALARM && hdr_perr_step_shift(b) != SPEC_PERR_STEP_SHIFT) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: p_err step differs from the spec");
    }
    memset(c, 0, sizeof *c);
    c->spec_version = SNAPUQ_SNAP_SPEC_VERSION; /* spec v1 sections run as combine logistic */
    c->variant = hdr_variant(b);
    c->hinge = hdr_hinge(b);
    c->n_taps = (uint8_t)b->n_taps;
    c->n_classes = hdr_n_classes(b);
    c->out_logits = (int16_t)hdr_out_logits(b);
    c->out_probs = (int16_t)hdr_out_probs(b);
    c->conf_a_q16 = hdr_conf_a_q16(b);
    c->defaults.b0_q16 = hdr_b0_q16(b);
    c->defaults.b1_m = hdr_b1_m(b);
    c->defaults.b1_n = hdr_b1_n(b);
    c->defaults.b2_m = hdr_b2_m(b);
    c->defaults.b2_n = hdr_b2_n(b);
    c->defaults.hinge_q_q16 = hdr_hinge_q_q16(b);
    c->defaults.hinge_m = hdr_hinge_m(b);
    c->defaults.hinge_n = hdr_hinge_n(b);
    c->defaults.u_threshold_q16 = hdr_u_threshold_q16(b);
    c->sigmoid_lut = lut_at(b, hdr_sigmoid_lut_off(b));
    c->combine = hdr_combine(b);
    if (c->combine == SNAPUQ_COMBINE_PERR_ALARM) {
        c->perr_lut = lut_at(b, hdr_perr_lut_off(b));
        c->defaults.alarm_k_q16 = hdr_alarm_k_q16(b);
    }
    if ((st = model_output(model, hdr_out_logits(b), c->n_classes, msg, msg_len)) != SNAPUQ_OK ||
        (st = model_output(model, hdr_out_probs(b), c->n_classes, msg, msg_len)) != SNAPUQ_OK) {
        return st;
    }
    for (l = 0; l < b->n_taps; l++) {
        const uint32_t r = tap_rec(b, l);
        snapuq_snap_tap_t *t = &c->taps[l];
        t->d = tap_d(b, r);
        t->out_a = (int16_t)tap_out_a(b, r);
        t->out_mu = (int16_t)tap_out_mu(b, r);
        t->out_logvar = (int16_t)tap_out_logvar(b, r);
        t->z_a = tap_z_a(b, r);
        t->z_mu = tap_z_mu(b, r);
        t->z_v = tap_z_v(b, r);
        t->k_a = tap_k_a(b, r);
        t->k_mu = tap_k_mu(b, r);
        t->lut_shift = tap_lut_shift(b, r);
        t->p_m = tap_p_m(b, r);
        t->p_n = tap_p_n(b, r);
        t->q_m = tap_q_m(b, r);
        t->q_n = tap_q_n(b, r);
        t->r_q16 = tap_r_q16(b, r);
        c->defaults.w_q16[l] = tap_w_q16(b, r);
        t->inv_sigma_lut = lut_at(b, tap_inv_sigma_lut_off(b, r));
        if ((st = model_output(model, tap_out_a(b, r), t->d, msg, msg_len)) != SNAPUQ_OK ||
            (st = model_output(model, tap_out_mu(b, r), t->d, msg, msg_len)) != SNAPUQ_OK ||
            (st = model_output(model, tap_out_logvar(b, r), t->d, msg, msg_len)) != SNAPUQ_OK) {
            return st;
        }
    }
    if (HDR_HAS(b, intap_off) && hdr_intap_off(b) != 0u) {
        const uint32_t r = hdr_intap_off(b);
        snapuq_snap_intap_t *it = &c->intap;
        snapuq_tensor_info_t info;
        c->has_intap = 1u;
        it->rows = intap_rows(b, r);
        it->cols = intap_cols(b, r);
        it->n_feat = intap_n_feat(b, r);
        it->z_x = intap_z_x(b, r);
        it->p_m = intap_p_m(b, r);
        it->p_n = intap_p_n(b, r);
        it->r_q16 = intap_r_q16(b, r);
        it->w_q16 = intap_w_q16(b, r);
        it->g_m = lut_at(b, intap_g_m_off(b, r));
        it->g_n = lut_at(b, intap_g_n_off(b, r));
        it->h_q12 = lut_at(b, intap_h_q12_off(b, r));
        if (snapuq_model_input_info(model, 0, &info) != SNAPUQ_OK || info.type != SNAPUQ_DTYPE_INT8 ||
            info.elements != (uint32_t)it->rows * it->cols) {
            return bad(msg, msg_len, SNAPUQ_ERR_SIZE,
                       "SNAP section: input tap size or type differs from the model input");
        }
        if (info.zero_point != it->z_x) {
            return bad(msg, msg_len, SNAPUQ_ERR_QUANT,
                       "SNAP section: input tap zero point differs from the model input");
        }
    }
    if (b->in_channels != 0u) {
        snapuq_tensor_info_t info;
        if (snapuq_model_input_info(model, 0, &info) != SNAPUQ_OK || info.elements % b->in_channels != 0u) {
            return bad(msg, msg_len, SNAPUQ_ERR_SIZE,
                       "SNAP section: input normalization channels do not divide the model input");
        }
    }
    if (b->n_outputs > snapuq_model_output_count(model)) { /* bounds the pairwise checks below */
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: more output records than the model has outputs");
    }
    for (i = 0; i < b->n_outputs; i++) {
        snapuq_tensor_info_t info;
        const uint32_t r = out_rec(b, i);
        uint16_t j;
        if (snapuq_model_output_info(model, out_index(b, r), &info) != SNAPUQ_OK) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section names a model output that does not exist");
        }
        if ((int32_t)out_zero_point(b, r) != info.zero_point) {
            return bad(msg, msg_len, SNAPUQ_ERR_QUANT, "SNAP section: output zero point differs from the model");
        }
        /* names address outputs (the C module's output(name), the twin): one record per output and
         * one output per name */
        for (j = 0; j < i; j++) {
            if (out_index(b, out_rec(b, j)) == out_index(b, r)) {
                return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: two records for one output");
            }
        }
        for (j = 0; j < i; j++) {
            if (strcmp(string_at(b, out_name(b, out_rec(b, j))), string_at(b, out_name(b, r))) == 0) {
                return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: two outputs share a name");
            }
        }
    }
    /* every output the score reads is in the output table (its zero point checked above), the logits
     * under their name */
    {
        const char *nm = NULL;
        if (!named_output(b, hdr_out_logits(b), &nm) || strcmp(nm, "logits") != 0) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: the logits output is not named 'logits'");
        }
        if (!named_output(b, hdr_out_probs(b), &nm)) {
            return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: an output it uses is not in its output table");
        }
        for (l = 0; l < b->n_taps; l++) {
            const uint32_t r = tap_rec(b, l);
            if (!named_output(b, tap_out_a(b, r), &nm) || !named_output(b, tap_out_mu(b, r), &nm) ||
                !named_output(b, tap_out_logvar(b, r), &nm)) {
                return bad(msg, msg_len, SNAPUQ_ERR_FORMAT,
                           "SNAP section: an output it uses is not in its output table");
            }
        }
    }
    if (snapuq_snap_params_check(c, &c->defaults, NULL, 0) != SNAPUQ_OK) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT,
                   "SNAP section: default calibration out of range (weights, shifts, hinge, alarm k)");
    }
    if (snapuq_snap_check(c, NULL, 0) != SNAPUQ_OK) {
        return bad(msg, msg_len, SNAPUQ_ERR_FORMAT, "SNAP section: constants out of range (snapuq_snap_check)");
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_output(const snapuq_blob_t *b, uint16_t i, const char **name, uint16_t *index)
{
    if (b == NULL || b->snap == NULL || i >= b->n_outputs) {
        return SNAPUQ_ERR_ARG;
    }
    if (name != NULL) {
        *name = string_at(b, out_name(b, out_rec(b, i)));
    }
    if (index != NULL) {
        *index = out_index(b, out_rec(b, i));
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_tap_name(const snapuq_blob_t *b, uint16_t l, const char **name)
{
    if (b == NULL || b->snap == NULL || l >= b->n_taps || name == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *name = string_at(b, tap_name(b, tap_rec(b, l)));
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_blob_class_name(const snapuq_blob_t *b, uint16_t c, const char **name)
{
    if (b == NULL || b->snap == NULL || c >= b->n_class_names || name == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *name = string_at(b, class_ref(b, c));
    return SNAPUQ_OK;
}

/* scale (k < C) or offset (k - C) k of the input-normalization record */
static double norm_value(const snapuq_blob_t *b, uint32_t k)
{
    return rd_f64(b->snap + b->in_norm + NORM_scale + 8u * k);
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
    prod = (double)raw * norm_value(b, c);
    return (float)(prod + norm_value(b, (uint32_t)b->in_channels + c));
}

snapuq_status_t snapuq_blob_input_normalization(const snapuq_blob_t *b, uint16_t c, double *scale,
                                                double *offset)
{
    if (b == NULL || c >= b->in_channels || scale == NULL || offset == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    *scale = norm_value(b, c);
    *offset = norm_value(b, (uint32_t)b->in_channels + c);
    return SNAPUQ_OK;
}
