/*
 * snapuq_runtime.c - .tflite flatbuffer loader (validated, in place), memory planner and
 * interpreter for the int8 operator subset of snapuq models.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_runtime.h"
#include "snapuq_schedule.h"

/* TFLite builtin operator codes used here */
enum {
    OP_ADD = 0,
    OP_AVERAGE_POOL_2D = 1,
    OP_CONV_2D = 3,
    OP_DEPTHWISE_CONV_2D = 4,
    OP_FULLY_CONNECTED = 9,
    OP_LOGISTIC = 14,
    OP_MAX_POOL_2D = 17,
    OP_RESHAPE = 22,
    OP_SOFTMAX = 25,
    OP_CUSTOM = 32,
    OP_MEAN = 40,
    OP_QUANTIZE = 114
};

/* ------------------------------------------------------------------ status strings */

static const char *const k_status[SNAPUQ_STATUS_COUNT] = {
    [SNAPUQ_OK] = "ok",
    [SNAPUQ_ERR_ARG] = "bad argument",
    [SNAPUQ_ERR_FORMAT] = "malformed model",
    [SNAPUQ_ERR_VERSION] = "not a TFLite v3 model",
    [SNAPUQ_ERR_UNSUPPORTED_OP] = "unsupported operator",
    [SNAPUQ_ERR_UNSUPPORTED_TYPE] = "unsupported type or option",
    [SNAPUQ_ERR_SHAPE] = "bad tensor shape",
    [SNAPUQ_ERR_QUANT] = "bad quantization",
    [SNAPUQ_ERR_LIMIT] = "model exceeds a compile-time limit",
    [SNAPUQ_ERR_ARENA] = "arena missing, misaligned or too small",
    [SNAPUQ_ERR_NOT_FOUND] = "not found",
    [SNAPUQ_ERR_STATE] = "call out of order",
    [SNAPUQ_ERR_SIZE] = "buffer size mismatch",
    [SNAPUQ_ERR_NUMERIC] = "numeric failure",
};

const char *snapuq_status_str(snapuq_status_t status)
{
    if ((unsigned)status < (unsigned)SNAPUQ_STATUS_COUNT && k_status[status] != NULL) {
        return k_status[status];
    }
    return "unknown status";
}

const char *snapuq_kernels_name(void)
{
    return SNAPUQ_KERNELS_DSP ? "dsp" : "ref";
}

/* ------------------------------------------------------------------ error messages */

typedef struct {
    char *buf;
    size_t pos;
} msg_t;

static void msg_str(msg_t *m, const char *s)
{
    while (s != NULL && *s != '\0' && m->pos + 1 < SNAPUQ_ERROR_LEN) {
        m->buf[m->pos++] = *s++;
    }
    m->buf[m->pos] = '\0';
}

static void msg_int(msg_t *m, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1u : (uint64_t)v;
    if (v < 0) {
        msg_str(m, "-");
    }
    do {
        tmp[n++] = (char)('0' + (int)(u % 10u));
        u /= 10u;
    } while (u != 0 && n < 23);
    while (n > 0 && m->pos + 1 < SNAPUQ_ERROR_LEN) {
        m->buf[m->pos++] = tmp[--n];
    }
    m->buf[m->pos] = '\0';
}

/* fail(model, status, text, number or INT64_MIN for none, text2) */
#define NO_NUM INT64_MIN
static snapuq_status_t fail(snapuq_model_t *md, snapuq_status_t st, const char *a, int64_t num,
                            const char *b)
{
    msg_t m;
    m.buf = md->error;
    m.pos = 0;
    msg_str(&m, a);
    if (num != NO_NUM) {
        msg_int(&m, num);
    }
    msg_str(&m, b);
    return st;
}

/* ------------------------------------------------------------------ flatbuffer access */

typedef struct {
    const uint8_t *b;
    uint32_t len;
} fb_t;

typedef struct {
    uint32_t pos;    /* absolute table position */
    uint32_t vt;     /* absolute vtable position */
    uint16_t vt_len; /* vtable bytes */
    uint16_t obj_len;
} fbt_t;

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint16_t rd_u16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] | ((uint16_t)p[1] << 8));
}
static int32_t rd_i32(const uint8_t *p)
{
    return (int32_t)rd_u32(p);
}
static int64_t rd_i64(const uint8_t *p)
{
    return (int64_t)((uint64_t)rd_u32(p) | ((uint64_t)rd_u32(p + 4) << 32));
}
static float rd_f32(const uint8_t *p)
{
    uint32_t u = rd_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Table at absolute position pos; 0 = ok */
static int fb_table(const fb_t *fb, uint32_t pos, fbt_t *t)
{
    int64_t vt;
    if (pos > fb->len || fb->len - pos < 4u || (pos & 3u) != 0) {
        return -1;
    }
    vt = (int64_t)pos - (int64_t)rd_i32(fb->b + pos);
    if (vt < 0 || vt > (int64_t)fb->len - 4 || (vt & 1) != 0) {
        return -1;
    }
    t->pos = pos;
    t->vt = (uint32_t)vt;
    t->vt_len = rd_u16(fb->b + t->vt);
    t->obj_len = rd_u16(fb->b + t->vt + 2);
    if (t->vt_len < 4 || (t->vt_len & 1u) != 0 || (uint32_t)t->vt_len > fb->len - t->vt ||
        t->obj_len < 4 || (uint32_t)t->obj_len > fb->len - pos) {
        return -1;
    }
    return 0;
}

/* Offset of field `id` inside the table (0 if absent); -1 if it overruns the table. */
static int32_t fb_field(const fb_t *fb, const fbt_t *t, unsigned id, unsigned size)
{
    uint32_t at = 4u + 2u * id;
    uint16_t off;
    if (at + 2u > t->vt_len) {
        return 0;
    }
    off = rd_u16(fb->b + t->vt + at);
    if (off == 0) {
        return 0;
    }
    if (off < 4u || (uint32_t)off + size > t->obj_len) {
        return -1;
    }
    return off;
}

static int fb_u8(const fb_t *fb, const fbt_t *t, unsigned id, uint8_t def, uint8_t *v)
{
    int32_t o = fb_field(fb, t, id, 1);
    if (o < 0) {
        return -1;
    }
    *v = o ? fb->b[t->pos + (uint32_t)o] : def;
    return 0;
}

static int fb_i32(const fb_t *fb, const fbt_t *t, unsigned id, int32_t def, int32_t *v)
{
    int32_t o = fb_field(fb, t, id, 4);
    if (o < 0) {
        return -1;
    }
    *v = o ? rd_i32(fb->b + t->pos + (uint32_t)o) : def;
    return 0;
}

static int fb_f32(const fb_t *fb, const fbt_t *t, unsigned id, float def, float *v)
{
    int32_t o = fb_field(fb, t, id, 4);
    if (o < 0) {
        return -1;
    }
    *v = o ? rd_f32(fb->b + t->pos + (uint32_t)o) : def;
    return 0;
}

static int fb_u64(const fb_t *fb, const fbt_t *t, unsigned id, uint64_t *v)
{
    int32_t o = fb_field(fb, t, id, 8);
    if (o < 0) {
        return -1;
    }
    *v = o ? (uint64_t)rd_i64(fb->b + t->pos + (uint32_t)o) : 0u;
    return 0;
}

/* Follow the uoffset in field id. *abs = 0 when the field is absent. */
static int fb_ref(const fb_t *fb, const fbt_t *t, unsigned id, uint32_t *abs)
{
    int32_t o = fb_field(fb, t, id, 4);
    uint32_t at, rel;
    if (o < 0) {
        return -1;
    }
    if (o == 0) {
        *abs = 0;
        return 0;
    }
    at = t->pos + (uint32_t)o;
    rel = rd_u32(fb->b + at);
    if (rel == 0 || rel > fb->len - at) {
        return -1;
    }
    *abs = at + rel;
    return 0;
}

/* Vector in field id with elements of `esize` bytes: *data = first element, *n = count.
 * Absent vector: n = 0, data = NULL. */
static int fb_vec(const fb_t *fb, const fbt_t *t, unsigned id, uint32_t esize, uint32_t *data,
                  uint32_t *n)
{
    uint32_t abs;
    uint32_t cnt;
    if (fb_ref(fb, t, id, &abs) != 0) {
        return -1;
    }
    *n = 0;
    *data = 0;
    if (abs == 0) {
        return 0;
    }
    if (fb->len - abs < 4u) {
        return -1;
    }
    cnt = rd_u32(fb->b + abs);
    if (esize != 0 && cnt > (fb->len - abs - 4u) / esize) {
        return -1;
    }
    *n = cnt;
    *data = abs + 4u;
    return 0;
}

/* String field: NUL-terminated inside the file (flatbuffers guarantee the terminator). */
static int fb_str(const fb_t *fb, const fbt_t *t, unsigned id, const char **s)
{
    uint32_t data, n;
    if (fb_vec(fb, t, id, 1, &data, &n) != 0) {
        return -1;
    }
    if (data == 0) {
        *s = "";
        return 0;
    }
    if (n >= fb->len - data || fb->b[data + n] != 0 || memchr(fb->b + data, 0, n) != NULL) {
        return -1;
    }
    *s = (const char *)(fb->b + data);
    return 0;
}

/* Table element i of a vector of tables starting at data. */
static int fb_vec_table(const fb_t *fb, uint32_t data, uint32_t i, fbt_t *t)
{
    const uint32_t at = data + 4u * i;
    const uint32_t rel = rd_u32(fb->b + at);
    if (rel == 0 || rel > fb->len - at) {
        return -1;
    }
    return fb_table(fb, at + rel, t);
}

/* ------------------------------------------------------------------ integer multipliers */

/* Decompose a positive normal float32: value = mant * 2^exp, mant in [2^23, 2^24). */
static int f32_decompose(float f, uint32_t *mant, int32_t *exp)
{
    uint32_t u;
    uint32_t e;
    memcpy(&u, &f, sizeof u);
    e = (u >> 23) & 0xFFu;
    if ((u & 0x80000000u) != 0 || e == 0 || e == 0xFFu) {
        return -1; /* negative, zero, denormal, inf, nan */
    }
    *mant = (u & 0x7FFFFFu) | 0x800000u;
    *exp = (int32_t)e - 127 - 23;
    return 0;
}

static int bitlen64(uint64_t x)
{
    int n = 0;
    while (x != 0) {
        n++;
        x >>= 1;
    }
    return n;
}

/* Correctly rounded (round-to-nearest-even) quotient num/den with `bits` significant bits:
 * result = *q * 2^*e, *q in [2^(bits-1), 2^bits). num < 2^50, den < 2^25, bits <= 60. */
static void div_round(uint64_t num, uint64_t den, int bits, uint64_t *q, int32_t *e)
{
    uint64_t quo = num / den;
    uint64_t rem = num % den;
    int32_t k = 0;
    int guard;
    int len = bitlen64(quo); /* tracked incrementally: one bit per step */
    while (len < bits + 1) {
        rem <<= 1;
        quo = (quo << 1) | (rem >= den ? 1u : 0u);
        if (rem >= den) {
            rem -= den;
        }
        len = quo == 0 ? 0 : (len == 0 ? 1 : len + 1);
        k++;
    }
    while (bitlen64(quo) > bits + 1) { /* only when num/den is already large */
        rem |= quo & 1u;
        quo >>= 1;
        k--;
    }
    guard = (int)(quo & 1u);
    quo >>= 1;
    k--;
    if (guard && (rem != 0 || (quo & 1u))) {
        quo++;
        if ((quo >> bits) != 0) {
            quo >>= 1;
            k--;
        }
    }
    *q = quo;
    *e = -k;
}

/* TFLite QuantizeMultiplier of the double value (num_mant * 2^num_exp) / (den_mant * 2^den_exp)
 * where the double is the correctly rounded quotient (53 bits), then frexp + round(q * 2^31).
 * clamp_max: cap the double at 2^31 - 1 first (softmax). */
static void quantize_ratio(uint64_t num_mant, int32_t num_exp, uint64_t den_mant, int32_t den_exp,
                           int clamp_max, int32_t *mult, int32_t *shift)
{
    uint64_t q53, q31;
    int32_t e, s;
    div_round(num_mant, den_mant, 53, &q53, &e);
    e += num_exp - den_exp;
    s = e + 53; /* value = (q53 / 2^53) * 2^s, q53 / 2^53 in [0.5, 1) */
    if (clamp_max && (s > 31 || (s == 31 && q53 > (((uint64_t)1 << 31) - 1u) << 22))) {
        *mult = INT32_MAX;
        *shift = 31;
        return;
    }
    q31 = (q53 + ((uint64_t)1 << 21)) >> 22;
    if (q31 == ((uint64_t)1 << 31)) {
        q31 >>= 1;
        s++;
    }
    if (s < -31) {
        q31 = 0;
        s = 0;
    }
    *mult = (int32_t)q31;
    *shift = s;
}

/* TFLite's effective scale for conv / fc: double(a) * double(b) / double(c). */
static int qm_product_ratio(float a, float b, float c, int32_t *mult, int32_t *shift)
{
    uint32_t ma, mb, mc;
    int32_t ea, eb, ec;
    if (f32_decompose(a, &ma, &ea) || f32_decompose(b, &mb, &eb) || f32_decompose(c, &mc, &ec)) {
        return -1;
    }
    quantize_ratio((uint64_t)ma * mb, ea + eb, mc, ec, 0, mult, shift);
    return *shift > 30 ? -1 : 0; /* x * 2^shift must stay an int32 shift */
}

/* QuantizeMultiplier(double(a) / double(c) * 2^p). */
static int qm_ratio_pot(float a, float c, int32_t p, int32_t *mult, int32_t *shift)
{
    uint32_t ma, mc;
    int32_t ea, ec;
    if (f32_decompose(a, &ma, &ea) || f32_decompose(c, &mc, &ec)) {
        return -1;
    }
    quantize_ratio(ma, ea + p, mc, ec, 0, mult, shift);
    return *shift > 30 ? -1 : 0;
}

/* zero_point + round_half_away(float32(f / scale)) for small integer f (activation ranges). */
static int32_t quantize_int(int32_t f, float scale, int32_t zero_point)
{
    uint32_t ms;
    int32_t es, e;
    uint64_t q;
    int64_t r;
    uint32_t af = (uint32_t)(f < 0 ? -f : f);
    if (f == 0) {
        return zero_point;
    }
    if (f32_decompose(scale, &ms, &es)) {
        return zero_point;
    }
    div_round(af, ms, 24, &q, &e); /* float32 quotient = q * 2^(e - es) */
    e -= es;
    if (e >= 0) {
        r = e > 20 ? ((int64_t)1 << 40) : (int64_t)(q << e);
    } else if (e < -60) {
        r = 0;
    } else {
        r = (int64_t)((q + ((uint64_t)1 << (-e - 1))) >> (-e));
    }
    if (r > ((int64_t)1 << 40)) {
        r = (int64_t)1 << 40;
    }
    r = f < 0 ? -r : r;
    r += zero_point;
    if (r > INT32_MAX) {
        r = INT32_MAX;
    }
    if (r < INT32_MIN) {
        r = INT32_MIN;
    }
    return (int32_t)r;
}

/* ------------------------------------------------------------------ model parsing */

static uint32_t dtype_size(uint8_t t)
{
    switch (t) {
    case SNAPUQ_DTYPE_INT8:
    case SNAPUQ_DTYPE_UINT8:
        return 1;
    case SNAPUQ_DTYPE_INT16:
        return 2;
    case SNAPUQ_DTYPE_INT32:
    case SNAPUQ_DTYPE_FLOAT32:
        return 4;
    case SNAPUQ_DTYPE_INT64:
        return 8;
    default:
        return 0;
    }
}

static uint32_t tensor_elems(const snapuq_priv_tensor_t *t)
{
    uint32_t n = 1;
    uint8_t i;
    for (i = 0; i < t->ndim; i++) {
        n *= (uint32_t)t->dims[i];
    }
    return n;
}

#define CHECK_FB(expr, what)                                                                      \
    do {                                                                                          \
        if ((expr) != 0) {                                                                        \
            return fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: ", NO_NUM, what);           \
        }                                                                                         \
    } while (0)

static snapuq_status_t parse_tensor(snapuq_model_t *md, const fb_t *fb, uint32_t tensors_vec,
                                    uint32_t idx, uint32_t buffers_vec, uint32_t n_buffers)
{
    snapuq_priv_tensor_t *t = &md->tensors[idx];
    fbt_t tt, qt, bt;
    uint32_t shape, n_shape, i, buf_idx, qpos, bdata, blen;
    uint8_t type, is_var;
    uint32_t bytes;

    memset(t, 0, sizeof *t);
    t->offset = -1;
    t->first_use = INT16_MAX;
    t->last_use = -1;
    CHECK_FB(fb_vec_table(fb, tensors_vec, idx, &tt), "tensor table");
    CHECK_FB(fb_vec(fb, &tt, 0, 4, &shape, &n_shape), "tensor shape");
    CHECK_FB(fb_u8(fb, &tt, 1, 0, &type), "tensor type");
    CHECK_FB(fb_i32(fb, &tt, 2, 0, (int32_t *)&buf_idx), "tensor buffer");
    CHECK_FB(fb_str(fb, &tt, 3, &t->name), "tensor name");
    CHECK_FB(fb_u8(fb, &tt, 5, 0, &is_var), "tensor is_variable");
    if (is_var) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " is a variable tensor");
    }
    if (fb_field(fb, &tt, 6, 4) != 0) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " is sparse");
    }
    if (n_shape > SNAPUQ_MAX_DIMS) {
        return fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " has more than 4 dimensions");
    }
    t->ndim = (uint8_t)n_shape;
    bytes = dtype_size(type);
    if (bytes == 0) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " has an unsupported type");
    }
    t->type = type;
    for (i = 0; i < n_shape; i++) {
        int32_t d = rd_i32(fb->b + shape + 4u * i);
        if (d < 1 || d > 32767) {
            return fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " has a dimension outside 1..32767");
        }
        t->dims[i] = (int16_t)d;
        if (bytes > (uint32_t)0x7FFFFFFF / (uint32_t)d) {
            return fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " is too large");
        }
        bytes *= (uint32_t)d;
    }
    t->bytes = bytes;
    /* buffer */
    if (buf_idx >= n_buffers) {
        return fail(md, SNAPUQ_ERR_FORMAT, "tensor ", idx, " names a buffer out of range");
    }
    CHECK_FB(fb_vec_table(fb, buffers_vec, buf_idx, &bt), "buffer table");
    CHECK_FB(fb_vec(fb, &bt, 0, 1, &bdata, &blen), "buffer data");
    {
        uint64_t ext_off = 0, ext_size = 0;
        CHECK_FB(fb_u64(fb, &bt, 1, &ext_off) || fb_u64(fb, &bt, 2, &ext_size), "buffer offset");
        if (ext_off > 1u || ext_size != 0u) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx,
                        " keeps its data outside the flatbuffer");
        }
    }
    if (blen != 0) {
        if (blen != bytes) {
            return fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, ": buffer size differs from its shape");
        }
        t->data = fb->b + bdata;
    }
    /* quantization */
    t->scale = 0.0f;
    t->zero_point = 0;
    CHECK_FB(fb_ref(fb, &tt, 4, &qpos), "tensor quantization");
    if (qpos != 0) {
        uint32_t sc, n_sc, zp, n_zp;
        int32_t qdim;
        uint8_t dtype_details;
        CHECK_FB(fb_table(fb, qpos, &qt), "quantization table");
        CHECK_FB(fb_vec(fb, &qt, 2, 4, &sc, &n_sc), "quantization scale");
        CHECK_FB(fb_vec(fb, &qt, 3, 8, &zp, &n_zp), "quantization zero_point");
        CHECK_FB(fb_u8(fb, &qt, 4, 0, &dtype_details), "quantization details");
        CHECK_FB(fb_i32(fb, &qt, 6, 0, &qdim), "quantized_dimension");
        if (dtype_details != 0) {
            return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " uses custom quantization details");
        }
        if (n_sc != n_zp && n_zp != 0) {
            return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, ": scale and zero_point counts differ");
        }
        if (n_sc > 32767) {
            return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has too many scales");
        }
        if (n_sc > 0) {
            uint32_t mm;
            int32_t ee;
            if (n_sc > 1 && (qdim < 0 || qdim >= (int32_t)n_shape || t->dims[qdim] != (int32_t)n_sc)) {
                return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx,
                            ": per-channel scales do not match quantized_dimension");
            }
            for (i = 0; i < n_sc; i++) {
                if (f32_decompose(rd_f32(fb->b + sc + 4u * i), &mm, &ee) != 0) {
                    return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has a scale that is not a positive normal float");
                }
            }
            t->scale = rd_f32(fb->b + sc);
            t->scales = fb->b + sc;
            t->n_scales = (uint16_t)n_sc;
            if (n_zp > 0) {
                int64_t z = rd_i64(fb->b + zp);
                if (z < -32768 || z > 32767) {
                    return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has a zero point out of range");
                }
                t->zero_point = (int32_t)z;
                for (i = 1; i < n_zp; i++) {
                    if (rd_i64(fb->b + zp + 8u * i) != z) {
                        return fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has per-channel zero points");
                    }
                }
            }
        }
    }
    return SNAPUQ_OK;
}

/* ---- operator validation helpers ---- */

static snapuq_priv_tensor_t *T(snapuq_model_t *md, int16_t i)
{
    return &md->tensors[i];
}

static snapuq_status_t need_int8_act(snapuq_model_t *md, uint16_t op, int16_t ti, const char *role)
{
    const snapuq_priv_tensor_t *t = T(md, ti);
    if (t->type != SNAPUQ_DTYPE_INT8) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, role);
    }
    if (t->n_scales != 1) {
        return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": activation without one scale");
    }
    if (t->zero_point < -128 || t->zero_point > 127) {
        return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": zero point outside int8");
    }
    return SNAPUQ_OK;
}

static int same_shape(const snapuq_priv_tensor_t *a, const snapuq_priv_tensor_t *b)
{
    uint8_t i;
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (i = 0; i < a->ndim; i++) {
        if (a->dims[i] != b->dims[i]) {
            return 0;
        }
    }
    return 1;
}

static snapuq_status_t act_range(snapuq_model_t *md, uint16_t op, snapuq_priv_op_t *o,
                                 const snapuq_priv_tensor_t *out)
{
    int32_t lo = -128, hi = 127;
    switch (o->activation) {
    case 0:
        break;
    case 1: /* RELU */
        lo = out->zero_point;
        break;
    case 2: /* RELU_N1_TO_1 */
        lo = quantize_int(-1, out->scale, out->zero_point);
        hi = quantize_int(1, out->scale, out->zero_point);
        break;
    case 3: /* RELU6 */
        lo = out->zero_point;
        hi = quantize_int(6, out->scale, out->zero_point);
        break;
    default:
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": unsupported fused activation");
    }
    o->act_min = lo > -128 ? lo : -128;
    o->act_max = hi < 127 ? hi : 127;
    if (o->act_min > o->act_max) {
        return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": empty activation range");
    }
    return SNAPUQ_OK;
}

static int32_t out_size(int padding, int32_t in, int32_t filter, int32_t stride, int32_t dil)
{
    const int32_t eff = (filter - 1) * dil + 1;
    if (padding == 0) {
        return (in + stride - 1) / stride;
    }
    return (in + stride - eff) / stride;
}

static int32_t pad_amount(int32_t stride, int32_t dil, int32_t in, int32_t filter, int32_t out)
{
    const int32_t eff = (filter - 1) * dil + 1;
    int32_t total = (out - 1) * stride + eff - in;
    return total > 0 ? total / 2 : 0;
}

/* validates spatial parameters and output shape of conv / depthwise / pool */
static snapuq_status_t spatial(snapuq_model_t *md, uint16_t op, snapuq_priv_op_t *o,
                               const snapuq_priv_tensor_t *in, const snapuq_priv_tensor_t *out,
                               int32_t kh, int32_t kw)
{
    int32_t oh, ow;
    if (o->stride_h < 1 || o->stride_w < 1 || o->dil_h < 1 || o->dil_w < 1 || kh < 1 || kw < 1 ||
        o->padding > 1) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": bad stride, dilation or padding");
    }
    if (in->ndim != 4 || out->ndim != 4 || in->dims[0] != out->dims[0]) {
        return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": needs 4-D NHWC input and output");
    }
    oh = out_size(o->padding, in->dims[1], kh, o->stride_h, o->dil_h);
    ow = out_size(o->padding, in->dims[2], kw, o->stride_w, o->dil_w);
    if (oh < 1 || ow < 1 || oh != out->dims[1] || ow != out->dims[2]) {
        return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": output height/width do not match");
    }
    o->pad_h = (int16_t)pad_amount(o->stride_h, o->dil_h, in->dims[1], kh, oh);
    o->pad_w = (int16_t)pad_amount(o->stride_w, o->dil_w, in->dims[2], kw, ow);
    o->filter_h = (int16_t)kh;
    o->filter_w = (int16_t)kw;
    return SNAPUQ_OK;
}

static snapuq_status_t check_weights(snapuq_model_t *md, uint16_t op, int16_t wi, int16_t bi,
                                     int32_t out_c)
{
    const snapuq_priv_tensor_t *w = T(md, wi);
    uint32_t i;
    if (w->data == NULL || w->type != SNAPUQ_DTYPE_INT8) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": weights must be constant int8");
    }
    if (w->n_scales != 1 && w->n_scales != (uint16_t)out_c) {
        return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": weight scales neither per-tensor nor per-channel");
    }
    if (w->zero_point != 0) {
        return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": weights must be symmetric (zero point 0)");
    }
    (void)i;
    if (bi >= 0) {
        const snapuq_priv_tensor_t *b = T(md, bi);
        if (b->data == NULL || b->type != SNAPUQ_DTYPE_INT32 || b->ndim != 1 || b->dims[0] != out_c) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": bias must be constant int32 [Cout]");
        }
    }
    return SNAPUQ_OK;
}

/* every per-channel requantization multiplier must be representable (shift <= 30) */
static snapuq_status_t check_multipliers(snapuq_model_t *md, uint16_t op, const snapuq_priv_tensor_t *in,
                                         const snapuq_priv_tensor_t *w, const snapuq_priv_tensor_t *out)
{
    uint16_t c;
    int32_t m, sh;
    for (c = 0; c < w->n_scales; c++) {
        if (qm_product_ratio(in->scale, rd_f32(w->scales + 4u * c), out->scale, &m, &sh) != 0) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": requantization scale out of range");
        }
    }
    return SNAPUQ_OK;
}

#define OPT(expr)                                                                                 \
    do {                                                                                          \
        if ((expr) != 0) {                                                                        \
            return fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: options of operator ", op, ""); \
        }                                                                                         \
    } while (0)

static snapuq_status_t parse_op(snapuq_model_t *md, const fb_t *fb, uint16_t op, const fbt_t *ot,
                                int32_t code, const uint32_t *ins, uint32_t n_ins, int16_t outi)
{
    snapuq_priv_op_t *o = &md->ops[op];
    fbt_t opt;
    uint32_t opt_pos;
    int has_opt;
    snapuq_status_t st;
    const snapuq_priv_tensor_t *in, *out;
    int32_t tmp;
    uint8_t b8;
    uint32_t k;

    o->builtin = code;
    o->out = outi;
    o->n_in = (uint8_t)n_ins;
    o->in[0] = o->in[1] = o->in[2] = -1;
    for (k = 0; k < n_ins && k < 3; k++) {
        o->in[k] = (int16_t)(int32_t)ins[k];
    }
    o->stride_w = o->stride_h = o->dil_w = o->dil_h = 1;
    o->depth_mult = 1;
    OPT(fb_ref(fb, ot, 4, &opt_pos));
    has_opt = opt_pos != 0;
    if (has_opt) {
        OPT(fb_table(fb, opt_pos, &opt));
    } else {
        /* absent options table: every field takes its schema default */
        memset(&opt, 0, sizeof opt);
    }
#define OPT_I32(id, def, dst)                                                                     \
    do {                                                                                          \
        tmp = (def);                                                                              \
        if (has_opt) {                                                                            \
            OPT(fb_i32(fb, &opt, (id), (def), &tmp));                                             \
        }                                                                                         \
        if (tmp < -32768 || tmp > 32767) {                                                        \
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": option out of range"); \
        }                                                                                         \
        (dst) = (int16_t)tmp;                                                                     \
    } while (0)
#define OPT_U8(id, def, dst)                                                                      \
    do {                                                                                          \
        b8 = (def);                                                                               \
        if (has_opt) {                                                                            \
            OPT(fb_u8(fb, &opt, (id), (def), &b8));                                               \
        }                                                                                         \
        (dst) = b8;                                                                               \
    } while (0)

    if (o->in[0] < 0) {
        return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, " has no first input");
    }
    in = T(md, o->in[0]);
    out = T(md, outi);
    if (in->data != NULL || (code == OP_ADD && n_ins > 1 && o->in[1] >= 0 && T(md, o->in[1])->data != NULL)) {
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": constant activation input");
    }
    if (code != OP_RESHAPE) {
        if ((st = need_int8_act(md, op, o->in[0], ": input must be int8")) != SNAPUQ_OK ||
            (st = need_int8_act(md, op, outi, ": output must be int8")) != SNAPUQ_OK) {
            return st;
        }
    }

    switch (code) {
    case OP_CONV_2D:
    case OP_DEPTHWISE_CONV_2D: {
        const snapuq_priv_tensor_t *w;
        int32_t cout;
        if (n_ins < 2 || n_ins > 3 || o->in[1] < 0) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": conv needs input, filter[, bias]");
        }
        w = T(md, o->in[1]);
        OPT_U8(0, 0, o->padding);
        OPT_I32(1, 1, o->stride_w);
        OPT_I32(2, 1, o->stride_h);
        if (code == OP_CONV_2D) {
            OPT_U8(3, 0, o->activation);
            OPT_I32(4, 1, o->dil_w);
            OPT_I32(5, 1, o->dil_h);
        } else {
            OPT_I32(3, 1, o->depth_mult);
            OPT_U8(4, 0, o->activation);
            OPT_I32(5, 1, o->dil_w);
            OPT_I32(6, 1, o->dil_h);
        }
        if (w->ndim != 4 || in->ndim != 4 || out->ndim != 4) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": conv tensors must be 4-D");
        }
        cout = out->dims[3];
        if (code == OP_CONV_2D) {
            if (w->dims[0] != cout || w->dims[3] != in->dims[3]) {
                return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": filter shape does not match channels");
            }
            if (w->n_scales > 1 && w->dims[0] != (int16_t)w->n_scales) {
                return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": per-channel scales not on axis 0");
            }
        } else {
            if (w->dims[0] != 1 || w->dims[3] != cout || o->depth_mult < 1 ||
                (int32_t)in->dims[3] * o->depth_mult != cout) {
                return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": depthwise filter shape does not match channels");
            }
        }
        if ((st = check_weights(md, op, o->in[1], n_ins > 2 ? o->in[2] : -1, cout)) != SNAPUQ_OK) {
            return st;
        }
        if ((st = spatial(md, op, o, in, out, w->dims[1], w->dims[2])) != SNAPUQ_OK) {
            return st;
        }
        if ((st = check_multipliers(md, op, in, w, out)) != SNAPUQ_OK) {
            return st;
        }
        o->n_channels = (uint16_t)cout;
        break;
    }
    case OP_FULLY_CONNECTED: {
        const snapuq_priv_tensor_t *w;
        uint8_t wfmt, keep;
        uint32_t in_el, depth, batches;
        if (n_ins < 2 || n_ins > 3 || o->in[1] < 0) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": fully connected needs input, weights[, bias]");
        }
        w = T(md, o->in[1]);
        OPT_U8(0, 0, o->activation);
        OPT_U8(1, 0, wfmt);
        OPT_U8(2, 0, keep);
        (void)keep;
        if (wfmt != 0) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": shuffled weights format");
        }
        if (w->ndim != 2) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": weights must be 2-D");
        }
        depth = (uint32_t)w->dims[1];
        in_el = tensor_elems(in);
        if (depth == 0 || in_el % depth != 0) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": input size is not a multiple of the weight depth");
        }
        batches = in_el / depth;
        if (out->ndim < 1 || out->dims[out->ndim - 1] != w->dims[0] ||
            tensor_elems(out) != batches * (uint32_t)w->dims[0]) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": output shape does not match the weights");
        }
        if ((st = check_weights(md, op, o->in[1], n_ins > 2 ? o->in[2] : -1, w->dims[0])) != SNAPUQ_OK ||
            (st = check_multipliers(md, op, in, w, out)) != SNAPUQ_OK) {
            return st;
        }
        o->n_channels = (uint16_t)w->dims[0];
        break;
    }
    case OP_MAX_POOL_2D:
    case OP_AVERAGE_POOL_2D: {
        int16_t fw, fh;
        OPT_U8(0, 0, o->padding);
        OPT_I32(1, 1, o->stride_w);
        OPT_I32(2, 1, o->stride_h);
        OPT_I32(3, 1, fw);
        OPT_I32(4, 1, fh);
        OPT_U8(5, 0, o->activation);
        if ((st = spatial(md, op, o, in, out, fh, fw)) != SNAPUQ_OK) {
            return st;
        }
        if (in->dims[3] != out->dims[3]) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": pooling changes the channel count");
        }
        if (in->zero_point != out->zero_point || memcmp(&in->scale, &out->scale, sizeof(float)) != 0) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": pooling input and output quantization differ");
        }
        break;
    }
    case OP_ADD: {
        const snapuq_priv_tensor_t *in2;
        float mx;
        if (n_ins != 2 || o->in[1] < 0) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": ADD needs two inputs");
        }
        if ((st = need_int8_act(md, op, o->in[1], ": input must be int8")) != SNAPUQ_OK) {
            return st;
        }
        in2 = T(md, o->in[1]);
        OPT_U8(0, 0, o->activation);
        if (!same_shape(in, in2) || !same_shape(in, out)) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": ADD with broadcasting is not supported");
        }
        /* twice_max = 2 * max(s1, s2); m1 = s1 / twice_max; m2 = s2 / twice_max;
         * m_out = twice_max / (2^20 * s_out) */
        mx = in2->scale;
        {
            uint32_t m1, m2;
            int32_t e1, e2;
            (void)f32_decompose(in->scale, &m1, &e1);
            (void)f32_decompose(in2->scale, &m2, &e2);
            if (e1 > e2 || (e1 == e2 && m1 >= m2)) {
                mx = in->scale;
            }
        }
        o->left_shift = 20;
        if (qm_ratio_pot(in->scale, mx, -1, &o->mult, &o->shift) ||
            qm_ratio_pot(in2->scale, mx, -1, &o->mult2, &o->shift2) ||
            qm_ratio_pot(mx, out->scale, 1 - 20, &o->mult3, &o->shift3)) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad ADD scales");
        }
        if (o->shift > 0 || o->shift2 > 0 || o->shift3 > 0) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": ADD multipliers must be below one");
        }
        break;
    }
    case OP_MEAN: {
        const snapuq_priv_tensor_t *ax;
        uint32_t n, i;
        uint8_t red[4] = {0, 0, 0, 0};
        uint32_t expect = 1;
        OPT_U8(0, 0, o->keep_dims);
        if (n_ins != 2 || o->in[1] < 0) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": MEAN needs input and axis");
        }
        ax = T(md, o->in[1]);
        if (ax->data == NULL || ax->type != SNAPUQ_DTYPE_INT32 || ax->ndim > 1) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": MEAN axis must be a constant int32 vector");
        }
        n = tensor_elems(ax);
        if (n < 1 || in->ndim < 1) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN over no axis");
        }
        for (i = 0; i < n; i++) {
            int32_t a = rd_i32(ax->data + 4u * i);
            if (a < 0) {
                a += in->ndim;
            }
            if (a < 0 || a >= (int32_t)in->ndim) {
                return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN axis out of range");
            }
            red[a] = 1;
        }
        o->n_channels = 0;
        o->pad_h = 0;
        for (i = 0; i < in->ndim; i++) {
            if (red[i]) {
                o->pad_h = (int16_t)(o->pad_h | (1 << i)); /* reduce mask */
            } else {
                expect *= (uint32_t)in->dims[i];
            }
        }
        if (tensor_elems(out) != expect) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": MEAN output shape does not match");
        }
        if (qm_ratio_pot(in->scale, out->scale, 0, &o->mult, &o->shift)) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad MEAN scales");
        }
        break;
    }
    case OP_RESHAPE:
        if (n_ins < 1 || n_ins > 2) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": RESHAPE needs 1 or 2 inputs");
        }
        if (in->type != out->type || in->bytes != out->bytes) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": RESHAPE changes the size or type");
        }
        if (in->type != SNAPUQ_DTYPE_INT8) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": RESHAPE of non-int8 data");
        }
        break;
    case OP_SOFTMAX: {
        float beta = 1.0f;
        uint32_t mb, mi, bits;
        int32_t eb, ei;
        if (has_opt) {
            OPT(fb_f32(fb, &opt, 0, 1.0f, &beta));
        }
        if (!same_shape(in, out) || in->ndim < 1) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": SOFTMAX changes the shape");
        }
        memcpy(&bits, &out->scale, sizeof bits);
        if (out->zero_point != -128 || bits != 0x3B800000u) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": SOFTMAX output must have scale 1/256, zero point -128");
        }
        if (f32_decompose(beta, &mb, &eb) || f32_decompose(in->scale, &mi, &ei)) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad SOFTMAX beta or scale");
        }
        /* QuantizeMultiplierGreaterThanOne(min(beta * s_in * 2^26, 2^31 - 1)) */
        quantize_ratio((uint64_t)mb * mi, eb + ei + 26, 1, 0, 1, &o->mult, &o->left_shift);
        if (o->left_shift < 1 || o->left_shift > 30) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": SOFTMAX input scale too small");
        }
        o->diff_min = -(int32_t)((((int64_t)31) << 26) >> o->left_shift);
        break;
    }
    case OP_LOGISTIC: {
        uint32_t mi;
        int32_t ei;
        if (!same_shape(in, out)) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": LOGISTIC changes the shape");
        }
        {
            uint32_t bits;
            memcpy(&bits, &out->scale, sizeof bits);
            if (out->zero_point != -128 || bits != 0x3B800000u) {
                return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": LOGISTIC output must have scale 1/256, zero point -128");
            }
        }
        if (f32_decompose(in->scale, &mi, &ei)) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad LOGISTIC scale");
        }
        /* frexp(s_in * 2^27): exact, then round(q * 2^31) without the 2^31 carry fix-up */
        {
            uint64_t q = ((uint64_t)mi << 8); /* mantissa as Q32 fraction (24 bits -> 31) */
            int32_t s = ei + 27 + 24;         /* value = (mi / 2^24) * 2^s */
            o->mult = (int32_t)(q >> 1);      /* mi * 2^7: exact 31-bit rounding */
            o->left_shift = s;
            if (s > 30 || s < -31) {
                return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": LOGISTIC input scale out of range");
            }
            /* input radius: floor(15 * 2^27 / 2^s) */
            o->diff_min = s >= 1 ? (int32_t)((((int64_t)15) << 27) >> s) : INT32_MAX;
        }
        break;
    }
    case OP_QUANTIZE:
        if (!same_shape(in, out)) {
            return fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": QUANTIZE changes the shape");
        }
        if (qm_ratio_pot(in->scale, out->scale, 0, &o->mult, &o->shift)) {
            return fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad QUANTIZE scales");
        }
        break;
    default:
        return fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported operator ", NO_NUM, snapuq_builtin_name(code));
    }
    if (code == OP_CONV_2D || code == OP_DEPTHWISE_CONV_2D || code == OP_FULLY_CONNECTED ||
        code == OP_MAX_POOL_2D || code == OP_AVERAGE_POOL_2D || code == OP_ADD) {
        if ((st = act_range(md, op, o, out)) != SNAPUQ_OK) {
            return st;
        }
    }
    return SNAPUQ_OK;
}

/* ------------------------------------------------------------------ memory planning */

/* alias root for RESHAPE outputs that share their input's memory */
static int16_t root_of(const snapuq_model_t *md, int16_t t, const int16_t *alias)
{
    int guard = 0;
    (void)md;
    while (alias[t] >= 0 && guard++ < SNAPUQ_MAX_TENSORS) {
        t = alias[t];
    }
    return t;
}

#define ALIGN_UP(x) (((x) + (SNAPUQ_ARENA_ALIGN - 1u)) & ~(uint32_t)(SNAPUQ_ARENA_ALIGN - 1u))

static snapuq_status_t plan(snapuq_model_t *md)
{
    int16_t alias[SNAPUQ_MAX_TENSORS];
    int16_t order[SNAPUQ_MAX_TENSORS];
    uint8_t placed[SNAPUQ_MAX_TENSORS];
    uint16_t i, j, n = 0, k;
    uint32_t persist = 0, top = 0, naive = 0;

    /* execution order and lifetimes in that order (snapuq_schedule.c) */
    snapuq_schedule_ops(md);
    for (i = 0; i < md->n_tensors; i++) {
        alias[i] = -1;
    }
    /* RESHAPE output aliases its (activation) input */
    for (i = 0; i < md->n_ops; i++) {
        const snapuq_priv_op_t *o = &md->ops[i];
        if (o->builtin == OP_RESHAPE && md->tensors[o->in[0]].data == NULL) {
            alias[o->out] = o->in[0];
        }
    }
    /* merge lifetimes into roots */
    for (i = 0; i < md->n_tensors; i++) {
        snapuq_priv_tensor_t *t = &md->tensors[i];
        int16_t r;
        if (t->data != NULL || t->last_use < 0) {
            continue;
        }
        r = root_of(md, (int16_t)i, alias);
        if (r != (int16_t)i) {
            snapuq_priv_tensor_t *rt = &md->tensors[r];
            if (t->first_use < rt->first_use) {
                rt->first_use = t->first_use;
            }
            if (t->last_use > rt->last_use) {
                rt->last_use = t->last_use;
            }
        }
    }
    /* roots sorted by size (descending), ties by index: TFLM's greedy order */
    for (i = 0; i < md->n_tensors; i++) {
        const snapuq_priv_tensor_t *t = &md->tensors[i];
        if (t->data == NULL && t->last_use >= 0 && alias[i] < 0) {
            if (t->bytes > 0x00FFFFFFu) {
                return fail(md, SNAPUQ_ERR_LIMIT, "tensor ", i, " is larger than 16 MiB");
            }
            order[n++] = (int16_t)i;
            naive += ALIGN_UP(t->bytes);
        }
    }
    for (i = 1; i < n; i++) {
        int16_t v = order[i];
        j = i;
        while (j > 0 && md->tensors[order[j - 1]].bytes < md->tensors[v].bytes) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    memset(placed, 0, sizeof placed);
    for (i = 0; i < n; i++) {
        snapuq_priv_tensor_t *t = &md->tensors[order[i]];
        uint32_t off = 0;
        int moved = 1;
        /* lowest offset not overlapping any placed buffer with an overlapping lifetime */
        while (moved) {
            moved = 0;
            for (k = 0; k < i; k++) {
                const snapuq_priv_tensor_t *p = &md->tensors[order[k]];
                const uint32_t po = (uint32_t)p->offset, pe = po + ALIGN_UP(p->bytes);
                if (p->last_use < t->first_use || t->last_use < p->first_use) {
                    continue;
                }
                if (off < pe && po < off + ALIGN_UP(t->bytes)) {
                    off = pe;
                    moved = 1;
                }
            }
        }
        t->offset = (int32_t)off;
        placed[order[i]] = 1;
        if (off + ALIGN_UP(t->bytes) > top) {
            top = off + ALIGN_UP(t->bytes);
        }
    }
    for (i = 0; i < md->n_tensors; i++) {
        if (alias[i] >= 0 && md->tensors[i].last_use >= 0) {
            md->tensors[i].offset = md->tensors[root_of(md, (int16_t)i, alias)].offset;
        }
    }
    /* persistent per-channel tables first in the arena */
    for (i = 0; i < md->n_ops; i++) {
        snapuq_priv_op_t *o = &md->ops[i];
        if (o->n_channels > 0 && o->builtin != OP_MEAN) {
            o->persist = persist;
            persist += ALIGN_UP(8u * o->n_channels);
        }
    }
    md->persist_bytes = persist;
    md->act_bytes = top;
    md->act_naive_bytes = naive;
    return SNAPUQ_OK;
}

/* ------------------------------------------------------------------ public: init */

snapuq_status_t snapuq_model_init(snapuq_model_t *md, const void *tflite, size_t len)
{
    fb_t fbs;
    const fb_t *fb = &fbs;
    fbt_t root, sg, ot;
    uint32_t root_pos, codes, n_codes, subs, n_subs, bufs, n_bufs;
    uint32_t tens, n_tens, ins, n_ins, outs, n_outs, opsv, n_ops_fb, sigs, n_sigs;
    int32_t version;
    uint32_t i, k;
    snapuq_status_t st;

    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    memset(md, 0, sizeof *md);
    if (tflite == NULL) {
        return fail(md, SNAPUQ_ERR_ARG, "model bytes are NULL", NO_NUM, "");
    }
    if (len < 16 || len > 0x7FFFFFF0u) {
        return fail(md, SNAPUQ_ERR_FORMAT, "model is too short or too long (", (int64_t)len, " bytes)");
    }
    fbs.b = (const uint8_t *)tflite;
    fbs.len = (uint32_t)len;
    if (memcmp(fbs.b + 4, "TFL3", 4) != 0) {
        return fail(md, SNAPUQ_ERR_VERSION, "file identifier is not TFL3", NO_NUM, "");
    }
    root_pos = rd_u32(fbs.b);
    CHECK_FB(fb_table(fb, root_pos, &root), "root table");
    CHECK_FB(fb_i32(fb, &root, 0, 0, &version), "version");
    if (version != 3) {
        return fail(md, SNAPUQ_ERR_VERSION, "schema version ", version, " (expected 3)");
    }
    CHECK_FB(fb_vec(fb, &root, 1, 4, &codes, &n_codes), "operator_codes");
    CHECK_FB(fb_vec(fb, &root, 2, 4, &subs, &n_subs), "subgraphs");
    CHECK_FB(fb_vec(fb, &root, 4, 4, &bufs, &n_bufs), "buffers");
    CHECK_FB(fb_vec(fb, &root, 7, 4, &sigs, &n_sigs), "signature_defs");
    if (n_subs < 1) {
        return fail(md, SNAPUQ_ERR_FORMAT, "model has no subgraph", NO_NUM, "");
    }
    CHECK_FB(fb_vec_table(fb, subs, 0, &sg), "subgraph 0");
    CHECK_FB(fb_vec(fb, &sg, 0, 4, &tens, &n_tens), "tensors");
    CHECK_FB(fb_vec(fb, &sg, 1, 4, &ins, &n_ins), "subgraph inputs");
    CHECK_FB(fb_vec(fb, &sg, 2, 4, &outs, &n_outs), "subgraph outputs");
    CHECK_FB(fb_vec(fb, &sg, 3, 4, &opsv, &n_ops_fb), "operators");
    if (n_tens > SNAPUQ_MAX_TENSORS) {
        return fail(md, SNAPUQ_ERR_LIMIT, "model has ", n_tens, " tensors (SNAPUQ_MAX_TENSORS too small)");
    }
    if (n_ops_fb > SNAPUQ_MAX_OPS) {
        return fail(md, SNAPUQ_ERR_LIMIT, "model has ", n_ops_fb, " operators (SNAPUQ_MAX_OPS too small)");
    }
    if (n_ins > SNAPUQ_MAX_IO || n_outs > SNAPUQ_MAX_IO) {
        return fail(md, SNAPUQ_ERR_LIMIT, "model has too many inputs or outputs (", SNAPUQ_MAX_IO, " max)");
    }
    if (n_ins < 1 || n_outs < 1 || n_ops_fb < 1) {
        return fail(md, SNAPUQ_ERR_FORMAT, "model has no input, output or operator", NO_NUM, "");
    }
    md->buf = fbs.b;
    md->len = len;
    md->n_tensors = (uint16_t)n_tens;
    md->n_ops = (uint16_t)n_ops_fb;
    md->n_inputs = (uint16_t)n_ins;
    md->n_outputs = (uint16_t)n_outs;
    for (i = 0; i < n_tens; i++) {
        if ((st = parse_tensor(md, fb, tens, i, bufs, n_bufs)) != SNAPUQ_OK) {
            md->n_tensors = 0;
            return st;
        }
    }
    for (i = 0; i < n_ins; i++) {
        int32_t t = rd_i32(fbs.b + ins + 4u * i);
        if (t < 0 || (uint32_t)t >= n_tens) {
            return fail(md, SNAPUQ_ERR_FORMAT, "model input ", i, " names a tensor out of range");
        }
        if (md->tensors[t].data != NULL || md->tensors[t].type != SNAPUQ_DTYPE_INT8 ||
            md->tensors[t].n_scales != 1) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "model input ", i, " is not a quantized int8 tensor");
        }
        for (k = 0; k < i; k++) {
            if (md->inputs[k] == t) {
                return fail(md, SNAPUQ_ERR_FORMAT, "model input ", i, " repeats a tensor");
            }
        }
        md->inputs[i] = (int16_t)t;
        md->in_names[i] = md->tensors[t].name;
        md->tensors[t].first_use = -1;
        md->tensors[t].last_use = 0;
    }
    /* operators in execution order */
    for (i = 0; i < n_ops_fb; i++) {
        fbt_t ct;
        uint32_t oins, n_oins, oouts, n_oouts, op_idx, custom_data, custom_n;
        uint32_t in_idx[3];
        int32_t code, outt;
        uint8_t dep;
        int32_t bcode;
        CHECK_FB(fb_vec_table(fb, opsv, i, &ot), "operator table");
        CHECK_FB(fb_i32(fb, &ot, 0, 0, (int32_t *)&op_idx), "opcode_index");
        CHECK_FB(fb_vec(fb, &ot, 1, 4, &oins, &n_oins), "operator inputs");
        CHECK_FB(fb_vec(fb, &ot, 2, 4, &oouts, &n_oouts), "operator outputs");
        CHECK_FB(fb_vec(fb, &ot, 5, 1, &custom_data, &custom_n), "custom options");
        if (op_idx >= n_codes) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " names an operator code out of range");
        }
        CHECK_FB(fb_vec_table(fb, codes, op_idx, &ct), "operator code");
        CHECK_FB(fb_u8(fb, &ct, 0, 0, &dep), "deprecated_builtin_code");
        CHECK_FB(fb_i32(fb, &ct, 3, 0, &bcode), "builtin_code");
        /* files written before schema 3a carry the code only in the deprecated byte */
        code = (int32_t)(int8_t)dep > bcode ? (int32_t)(int8_t)dep : bcode;
        if (code == OP_CUSTOM) {
            const char *cname = "";
            CHECK_FB(fb_str(fb, &ct, 1, &cname), "custom_code");
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported custom operator ", NO_NUM, cname);
        }
        if (n_oouts != 1) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "operator ", i, " does not have exactly one output");
        }
        if (n_oins > 3) {
            return fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported operator ", NO_NUM, snapuq_builtin_name(code));
        }
        outt = rd_i32(fbs.b + oouts);
        if (outt < 0 || (uint32_t)outt >= n_tens) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " output names a tensor out of range");
        }
        if (md->tensors[outt].data != NULL || md->tensors[outt].last_use >= 0 ||
            md->tensors[outt].first_use == -1) {
            return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " writes a constant, input or already written tensor");
        }
        for (k = 0; k < n_oins; k++) {
            int32_t t = rd_i32(fbs.b + oins + 4u * k);
            if (t < -1 || t >= (int32_t)n_tens) {
                return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " input names a tensor out of range");
            }
            if (t >= 0 && md->tensors[t].data == NULL && md->tensors[t].last_use < 0) {
                return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " reads a tensor no earlier operator wrote");
            }
            if (t == outt) {
                return fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " reads its own output");
            }
            in_idx[k] = (uint32_t)t;
        }
        if ((st = parse_op(md, fb, (uint16_t)i, &ot, code, in_idx, n_oins, (int16_t)outt)) != SNAPUQ_OK) {
            return st;
        }
        for (k = 0; k < n_oins; k++) {
            int32_t t = (int32_t)in_idx[k];
            if (t >= 0 && md->tensors[t].data == NULL) {
                md->tensors[t].last_use = (int16_t)i;
            }
        }
        md->tensors[outt].first_use = (int16_t)i;
        md->tensors[outt].last_use = (int16_t)i;
    }
    for (i = 0; i < n_outs; i++) {
        int32_t t = rd_i32(fbs.b + outs + 4u * i);
        if (t < 0 || (uint32_t)t >= n_tens) {
            return fail(md, SNAPUQ_ERR_FORMAT, "model output ", i, " names a tensor out of range");
        }
        if (md->tensors[t].data != NULL || md->tensors[t].last_use < 0 ||
            md->tensors[t].type != SNAPUQ_DTYPE_INT8) {
            return fail(md, SNAPUQ_ERR_FORMAT, "model output ", i, " is not an int8 tensor written by the model");
        }
        md->outputs[i] = (int16_t)t;
        md->out_names[i] = md->tensors[t].name;
        md->tensors[t].last_use = (int16_t)n_ops_fb;
    }
    /* signature names (first signature of subgraph 0), if any */
    for (i = 0; i < n_sigs; i++) {
        fbt_t st_t;
        uint32_t sub = 0, v[2], nv[2], side, e;
        CHECK_FB(fb_vec_table(fb, sigs, i, &st_t), "signature_def");
        CHECK_FB(fb_i32(fb, &st_t, 4, 0, (int32_t *)&sub), "signature subgraph_index");
        if (sub != 0) {
            continue;
        }
        CHECK_FB(fb_vec(fb, &st_t, 0, 4, &v[0], &nv[0]), "signature inputs");
        CHECK_FB(fb_vec(fb, &st_t, 1, 4, &v[1], &nv[1]), "signature outputs");
        for (side = 0; side < 2; side++) {
            for (e = 0; e < nv[side]; e++) {
                fbt_t tm;
                const char *nm;
                int32_t ti;
                uint16_t io, n_io = side ? md->n_outputs : md->n_inputs;
                const int16_t *list = side ? md->outputs : md->inputs;
                const char **names = side ? md->out_names : md->in_names;
                CHECK_FB(fb_vec_table(fb, v[side], e, &tm), "signature tensor map");
                CHECK_FB(fb_str(fb, &tm, 0, &nm), "signature name");
                CHECK_FB(fb_i32(fb, &tm, 1, 0, &ti), "signature tensor_index");
                for (io = 0; io < n_io; io++) {
                    if (list[io] == ti && nm[0] != '\0') {
                        names[io] = nm;
                    }
                }
            }
        }
        break;
    }
    if ((st = plan(md)) != SNAPUQ_OK) {
        return st;
    }
    md->state = 1;
    md->error[0] = '\0';
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_arena_size(const snapuq_model_t *md, size_t *bytes)
{
    if (md == NULL || bytes == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    *bytes = (size_t)md->persist_bytes + md->act_bytes;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_arena_breakdown(const snapuq_model_t *md, size_t *persistent,
                                             size_t *activations, size_t *activations_no_reuse)
{
    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (persistent != NULL) {
        *persistent = md->persist_bytes;
    }
    if (activations != NULL) {
        *activations = md->act_bytes;
    }
    if (activations_no_reuse != NULL) {
        *activations_no_reuse = md->act_naive_bytes;
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_set_arena(snapuq_model_t *md, void *arena, size_t bytes)
{
    uint16_t i, c;
    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (arena == NULL || ((uintptr_t)arena % SNAPUQ_ARENA_ALIGN) != 0) {
        return fail(md, SNAPUQ_ERR_ARENA, "arena is NULL or not aligned to ", SNAPUQ_ARENA_ALIGN, " bytes");
    }
    if (bytes < (size_t)md->persist_bytes + md->act_bytes) {
        return fail(md, SNAPUQ_ERR_ARENA, "arena too small: need ",
                    (int64_t)md->persist_bytes + md->act_bytes, " bytes");
    }
    md->arena = (uint8_t *)arena;
    md->arena_len = bytes;
    for (i = 0; i < md->n_ops; i++) {
        const snapuq_priv_op_t *o = &md->ops[i];
        int32_t *mult, *shift;
        const snapuq_priv_tensor_t *in, *w, *out;
        if (o->n_channels == 0 || o->builtin == OP_MEAN) {
            continue;
        }
        mult = (int32_t *)(void *)(md->arena + o->persist);
        shift = mult + o->n_channels;
        in = &md->tensors[o->in[0]];
        w = &md->tensors[o->in[1]];
        out = &md->tensors[o->out];
        for (c = 0; c < o->n_channels; c++) {
            const float ws = rd_f32(w->scales + 4u * (w->n_scales > 1 ? c : 0));
            if (qm_product_ratio(in->scale, ws, out->scale, &mult[c], &shift[c]) != 0) {
                md->state = 1;
                return fail(md, SNAPUQ_ERR_QUANT, "operator ", i, ": bad scales");
            }
        }
    }
    md->state = 2;
    md->error[0] = '\0';
    return SNAPUQ_OK;
}

const char *snapuq_model_error(const snapuq_model_t *md)
{
    return md == NULL ? "model is NULL" : md->error;
}

/* ------------------------------------------------------------------ public: I/O */

uint16_t snapuq_model_input_count(const snapuq_model_t *md)
{
    return (md == NULL || md->state == 0) ? 0 : md->n_inputs;
}

uint16_t snapuq_model_output_count(const snapuq_model_t *md)
{
    return (md == NULL || md->state == 0) ? 0 : md->n_outputs;
}

static void fill_info(const snapuq_model_t *md, int16_t ti, const char *name, snapuq_tensor_info_t *info)
{
    const snapuq_priv_tensor_t *t = &md->tensors[ti];
    uint8_t i;
    memset(info, 0, sizeof *info);
    info->name = name;
    info->type = (snapuq_dtype_t)t->type;
    info->ndim = t->ndim;
    for (i = 0; i < t->ndim; i++) {
        info->dims[i] = t->dims[i];
    }
    info->elements = tensor_elems(t);
    info->bytes = t->bytes;
    info->scale = t->scale;
    info->zero_point = t->zero_point;
    info->data = md->state == 2 ? (void *)(md->arena + md->persist_bytes + (uint32_t)t->offset) : NULL;
}

snapuq_status_t snapuq_model_input_info(const snapuq_model_t *md, uint16_t index, snapuq_tensor_info_t *info)
{
    if (md == NULL || info == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (index >= md->n_inputs) {
        return SNAPUQ_ERR_ARG;
    }
    fill_info(md, md->inputs[index], md->in_names[index], info);
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_output_info(const snapuq_model_t *md, uint16_t index, snapuq_tensor_info_t *info)
{
    if (md == NULL || info == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (index >= md->n_outputs) {
        return SNAPUQ_ERR_ARG;
    }
    fill_info(md, md->outputs[index], md->out_names[index], info);
    return SNAPUQ_OK;
}

static snapuq_status_t find_io(const snapuq_model_t *md, const char *name, uint16_t *index, int outputs)
{
    uint16_t i, n;
    const int16_t *list;
    const char *const *names;
    if (md == NULL || name == NULL || index == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    n = outputs ? md->n_outputs : md->n_inputs;
    list = outputs ? md->outputs : md->inputs;
    names = outputs ? md->out_names : md->in_names;
    for (i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) {
            *index = i;
            return SNAPUQ_OK;
        }
    }
    for (i = 0; i < n; i++) {
        if (strcmp(md->tensors[list[i]].name, name) == 0) {
            *index = i;
            return SNAPUQ_OK;
        }
    }
    return SNAPUQ_ERR_NOT_FOUND;
}

snapuq_status_t snapuq_model_find_input(const snapuq_model_t *md, const char *name, uint16_t *index)
{
    return find_io(md, name, index, 0);
}

snapuq_status_t snapuq_model_find_output(const snapuq_model_t *md, const char *name, uint16_t *index)
{
    return find_io(md, name, index, 1);
}

static int8_t *tensor_ptr(const snapuq_model_t *md, int16_t ti)
{
    return (int8_t *)(void *)(md->arena + md->persist_bytes + (uint32_t)md->tensors[ti].offset);
}

snapuq_status_t snapuq_model_set_input(snapuq_model_t *md, uint16_t index, const void *data, size_t bytes)
{
    if (md == NULL || data == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state != 2) {
        return SNAPUQ_ERR_STATE;
    }
    if (index >= md->n_inputs) {
        return SNAPUQ_ERR_ARG;
    }
    if (bytes != md->tensors[md->inputs[index]].bytes) {
        return SNAPUQ_ERR_SIZE;
    }
    memcpy(tensor_ptr(md, md->inputs[index]), data, bytes);
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_get_output(const snapuq_model_t *md, uint16_t index, void *dst, size_t bytes)
{
    if (md == NULL || dst == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state != 2) {
        return SNAPUQ_ERR_STATE;
    }
    if (index >= md->n_outputs) {
        return SNAPUQ_ERR_ARG;
    }
    if (bytes != md->tensors[md->outputs[index]].bytes) {
        return SNAPUQ_ERR_SIZE;
    }
    memcpy(dst, tensor_ptr(md, md->outputs[index]), bytes);
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_set_input_by_name(snapuq_model_t *md, const char *name, const void *data,
                                               size_t bytes)
{
    uint16_t i;
    snapuq_status_t st = snapuq_model_find_input(md, name, &i);
    return st != SNAPUQ_OK ? st : snapuq_model_set_input(md, i, data, bytes);
}

snapuq_status_t snapuq_model_get_output_by_name(const snapuq_model_t *md, const char *name, void *dst,
                                                size_t bytes)
{
    uint16_t i;
    snapuq_status_t st = snapuq_model_find_output(md, name, &i);
    return st != SNAPUQ_OK ? st : snapuq_model_get_output(md, i, dst, bytes);
}

uint16_t snapuq_model_op_count(const snapuq_model_t *md)
{
    return (md == NULL || md->state == 0) ? 0 : md->n_ops;
}

snapuq_status_t snapuq_model_op_code(const snapuq_model_t *md, uint16_t op, int32_t *builtin)
{
    if (md == NULL || builtin == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (op >= md->n_ops) {
        return SNAPUQ_ERR_ARG;
    }
    *builtin = md->ops[op].builtin;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_model_set_profiler(snapuq_model_t *md, snapuq_profile_fn fn, void *ctx)
{
    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    md->profile = fn;
    md->profile_ctx = ctx;
    return SNAPUQ_OK;
}

/* ------------------------------------------------------------------ invoke */

static void conv_args(const snapuq_model_t *md, const snapuq_priv_op_t *o, snapuq_conv_args_t *a)
{
    const snapuq_priv_tensor_t *in = &md->tensors[o->in[0]];
    const snapuq_priv_tensor_t *w = &md->tensors[o->in[1]];
    const snapuq_priv_tensor_t *out = &md->tensors[o->out];
    a->in = tensor_ptr(md, o->in[0]);
    a->filter = (const int8_t *)w->data;
    a->bias = (o->n_in > 2 && o->in[2] >= 0) ? (const int32_t *)(const void *)md->tensors[o->in[2]].data : NULL;
    a->out = tensor_ptr(md, o->out);
    a->mult = (const int32_t *)(const void *)(md->arena + o->persist);
    a->shift = a->mult + o->n_channels;
    a->batches = in->dims[0];
    a->in_h = in->dims[1];
    a->in_w = in->dims[2];
    a->in_c = in->dims[3];
    a->out_h = out->dims[1];
    a->out_w = out->dims[2];
    a->out_c = out->dims[3];
    a->k_h = o->filter_h;
    a->k_w = o->filter_w;
    a->stride_h = o->stride_h;
    a->stride_w = o->stride_w;
    a->dil_h = o->dil_h;
    a->dil_w = o->dil_w;
    a->pad_h = o->pad_h;
    a->pad_w = o->pad_w;
    a->depth_mult = o->depth_mult;
    a->in_offset = -in->zero_point;
    a->out_offset = out->zero_point;
    a->act_min = o->act_min;
    a->act_max = o->act_max;
}

snapuq_status_t snapuq_model_invoke(snapuq_model_t *md)
{
    uint16_t step;
    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state != 2) {
        return SNAPUQ_ERR_STATE;
    }
    for (step = 0; step < md->n_ops; step++) {
        const uint16_t i = md->sched[step];
        const snapuq_priv_op_t *o = &md->ops[i];
        const snapuq_priv_tensor_t *in = &md->tensors[o->in[0]];
        const snapuq_priv_tensor_t *out = &md->tensors[o->out];
        if (md->profile != NULL) {
            md->profile(md->profile_ctx, i, o->builtin, 1);
        }
        switch (o->builtin) {
        case OP_CONV_2D:
        case OP_DEPTHWISE_CONV_2D: {
            snapuq_conv_args_t a;
            conv_args(md, o, &a);
            if (o->builtin == OP_CONV_2D) {
                SNAPUQ_CONV(&a);
            } else {
                SNAPUQ_DWCONV(&a);
            }
            break;
        }
        case OP_FULLY_CONNECTED: {
            snapuq_fc_args_t a;
            const snapuq_priv_tensor_t *w = &md->tensors[o->in[1]];
            a.in = tensor_ptr(md, o->in[0]);
            a.filter = (const int8_t *)w->data;
            a.bias = (o->n_in > 2 && o->in[2] >= 0) ? (const int32_t *)(const void *)md->tensors[o->in[2]].data : NULL;
            a.out = tensor_ptr(md, o->out);
            a.mult = (const int32_t *)(const void *)(md->arena + o->persist);
            a.shift = a.mult + o->n_channels;
            a.depth = w->dims[1];
            a.out_c = w->dims[0];
            a.batches = (int32_t)(tensor_elems(in) / (uint32_t)a.depth);
            a.in_offset = -in->zero_point;
            a.out_offset = out->zero_point;
            a.act_min = o->act_min;
            a.act_max = o->act_max;
            SNAPUQ_FC(&a);
            break;
        }
        case OP_MAX_POOL_2D:
        case OP_AVERAGE_POOL_2D: {
            snapuq_pool_args_t a;
            a.in = tensor_ptr(md, o->in[0]);
            a.out = tensor_ptr(md, o->out);
            a.batches = in->dims[0];
            a.in_h = in->dims[1];
            a.in_w = in->dims[2];
            a.depth = in->dims[3];
            a.out_h = out->dims[1];
            a.out_w = out->dims[2];
            a.f_h = o->filter_h;
            a.f_w = o->filter_w;
            a.stride_h = o->stride_h;
            a.stride_w = o->stride_w;
            a.pad_h = o->pad_h;
            a.pad_w = o->pad_w;
            a.act_min = o->act_min;
            a.act_max = o->act_max;
            if (o->builtin == OP_MAX_POOL_2D) {
                snapuq_maxpool_ref(&a);
            } else if (!snapuq_avgpool_ref(&a)) {
                return fail(md, SNAPUQ_ERR_SHAPE, "operator ", i, ": average pool window outside the input");
            }
            break;
        }
        case OP_ADD: {
            snapuq_add_args_t a;
            a.in1 = tensor_ptr(md, o->in[0]);
            a.in2 = tensor_ptr(md, o->in[1]);
            if (md->tensors[o->in[1]].data != NULL) {
                a.in2 = (const int8_t *)md->tensors[o->in[1]].data;
            }
            if (in->data != NULL) {
                a.in1 = (const int8_t *)in->data;
            }
            a.out = tensor_ptr(md, o->out);
            a.n = (int32_t)tensor_elems(out);
            a.in1_offset = -in->zero_point;
            a.in2_offset = -md->tensors[o->in[1]].zero_point;
            a.out_offset = out->zero_point;
            a.left_shift = o->left_shift;
            a.in1_mult = o->mult;
            a.in1_shift = o->shift;
            a.in2_mult = o->mult2;
            a.in2_shift = o->shift2;
            a.out_mult = o->mult3;
            a.out_shift = o->shift3;
            a.act_min = o->act_min;
            a.act_max = o->act_max;
            snapuq_add_ref(&a);
            break;
        }
        case OP_MEAN: {
            snapuq_mean_args_t a;
            uint8_t k, pad = (uint8_t)(4 - in->ndim);
            a.in = tensor_ptr(md, o->in[0]);
            a.out = tensor_ptr(md, o->out);
            for (k = 0; k < 4; k++) {
                a.dims[k] = k < pad ? 1 : in->dims[k - pad];
                a.reduce[k] = (uint8_t)(k < pad ? 0 : ((o->pad_h >> (k - pad)) & 1));
            }
            a.in_zp = in->zero_point;
            a.out_zp = out->zero_point;
            a.mult = o->mult;
            a.shift = o->shift;
            snapuq_mean_ref(&a);
            break;
        }
        case OP_RESHAPE:
            if (in->data != NULL) {
                memcpy(tensor_ptr(md, o->out), in->data, out->bytes);
            } else if (tensor_ptr(md, o->in[0]) != tensor_ptr(md, o->out)) {
                memmove(tensor_ptr(md, o->out), tensor_ptr(md, o->in[0]), out->bytes);
            }
            break;
        case OP_SOFTMAX: {
            snapuq_softmax_args_t a;
            a.in = tensor_ptr(md, o->in[0]);
            a.out = tensor_ptr(md, o->out);
            a.depth = in->dims[in->ndim - 1];
            a.outer = (int32_t)(tensor_elems(in) / (uint32_t)a.depth);
            a.mult = o->mult;
            a.left_shift = o->left_shift;
            a.diff_min = o->diff_min;
            snapuq_softmax_ref(&a);
            break;
        }
        case OP_LOGISTIC: {
            snapuq_logistic_args_t a;
            a.in = tensor_ptr(md, o->in[0]);
            a.out = tensor_ptr(md, o->out);
            a.n = (int32_t)tensor_elems(in);
            a.in_zp = in->zero_point;
            a.range_radius = o->diff_min;
            a.mult = o->mult;
            a.left_shift = o->left_shift;
            snapuq_logistic_ref(&a);
            break;
        }
        case OP_QUANTIZE: {
            snapuq_requant_args_t a;
            a.in = in->data != NULL ? (const int8_t *)in->data : tensor_ptr(md, o->in[0]);
            a.out = tensor_ptr(md, o->out);
            a.n = (int32_t)tensor_elems(in);
            a.in_zp = in->zero_point;
            a.out_zp = out->zero_point;
            a.mult = o->mult;
            a.shift = o->shift;
            snapuq_requant_ref(&a);
            break;
        }
        default:
            return SNAPUQ_ERR_STATE; /* unreachable: init rejects other operators */
        }
        if (md->profile != NULL) {
            md->profile(md->profile_ctx, i, o->builtin, 0);
        }
    }
    return SNAPUQ_OK;
}
