/*
 * snapuq_loader.c - snapuq_model_init(): validate a .tflite flatbuffer in place (every offset,
 * table, vector, string and buffer against the file length; every tensor's type, shape and
 * quantization), hand each operator to its registration (the image's op table, snapuq_ops.h) and
 * snapuq_plan the arena.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"
#include "snapuq_ops.h"

const snapuq_op_reg_t *snapuq_op_find(int32_t builtin)
{
    uint16_t i;
    for (i = 0; i < snapuq_op_table_len; i++) {
        if (snapuq_op_table[i]->builtin == builtin) {
            return snapuq_op_table[i];
        }
    }
    return NULL;
}

/* 1 when the core implements `code` (SNAPUQ_OPS_ALL), whether or not this image's table has it */
#define SNAPUQ_OP_CODE_(NAME, name) SNAPUQ_OP_##NAME,
static int core_implements(int32_t code)
{
    static const uint8_t k_codes[] = {SNAPUQ_OPS_ALL(SNAPUQ_OP_CODE_)};
    size_t i;
    for (i = 0; i < sizeof k_codes; i++) {
        if (code == (int32_t)k_codes[i]) {
            return 1;
        }
    }
    return 0;
}
#undef SNAPUQ_OP_CODE_

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

#define CHECK_FB(expr, what)                                                                      \
    do {                                                                                          \
        if ((expr) != 0) {                                                                        \
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: ", SNAPUQ_NO_NUM, what);           \
        }                                                                                         \
    } while (0)

static snapuq_status_t parse_tensor(snapuq_model_t *md, const snapuq_fb_t *fb, uint32_t tensors_vec,
                                    uint32_t idx, uint32_t buffers_vec, uint32_t n_buffers)
{
    snapuq_priv_tensor_t *t = &md->tensors[idx];
    snapuq_fbt_t tt, qt, bt;
    uint32_t shape, n_shape, i, buf_idx, qpos, bdata, blen;
    uint8_t type, is_var;
    uint32_t bytes;

    memset(t, 0, sizeof *t);
    t->offset = -1;
    t->first_use = INT16_MAX;
    t->last_use = -1;
    CHECK_FB(snapuq_fb_vec_table(fb, tensors_vec, idx, &tt), "tensor table");
    CHECK_FB(snapuq_fb_vec(fb, &tt, 0, 4, &shape, &n_shape), "tensor shape");
    CHECK_FB(snapuq_fb_u8(fb, &tt, 1, 0, &type), "tensor type");
    CHECK_FB(snapuq_fb_i32(fb, &tt, 2, 0, (int32_t *)&buf_idx), "tensor buffer");
    CHECK_FB(snapuq_fb_str(fb, &tt, 3, &t->name), "tensor name");
    CHECK_FB(snapuq_fb_u8(fb, &tt, 5, 0, &is_var), "tensor is_variable");
    if (is_var) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " is a variable tensor");
    }
    if (snapuq_fb_field(fb, &tt, 6, 4) != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " is sparse");
    }
    if (n_shape > SNAPUQ_MAX_DIMS) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " has more than 4 dimensions");
    }
    t->ndim = (uint8_t)n_shape;
    bytes = dtype_size(type);
    if (bytes == 0) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx, " has an unsupported type");
    }
    t->type = type;
    for (i = 0; i < n_shape; i++) {
        int32_t d = snapuq_rd_i32(fb->b + shape + 4u * i);
        if (d < 1 || d > 32767) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " has a dimension outside 1..32767");
        }
        t->dims[i] = (int16_t)d;
        if (bytes > (uint32_t)0x7FFFFFFF / (uint32_t)d) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, " is too large");
        }
        bytes *= (uint32_t)d;
    }
    t->bytes = bytes;
    /* buffer */
    if (buf_idx >= n_buffers) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "tensor ", idx, " names a buffer out of range");
    }
    CHECK_FB(snapuq_fb_vec_table(fb, buffers_vec, buf_idx, &bt), "buffer table");
    CHECK_FB(snapuq_fb_vec(fb, &bt, 0, 1, &bdata, &blen), "buffer data");
    {
        uint64_t ext_off = 0, ext_size = 0;
        CHECK_FB(snapuq_fb_u64(fb, &bt, 1, &ext_off) || snapuq_fb_u64(fb, &bt, 2, &ext_size), "buffer offset");
        if (ext_off > 1u || ext_size != 0u) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "tensor ", idx,
                        " keeps its data outside the flatbuffer");
        }
    }
    if (blen != 0) {
        if (blen != bytes) {
            return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "tensor ", idx, ": buffer size differs from its shape");
        }
        t->data = fb->b + bdata;
    }
    /* quantization */
    t->scale = 0.0f;
    t->zero_point = 0;
    CHECK_FB(snapuq_fb_ref(fb, &tt, 4, &qpos), "tensor quantization");
    if (qpos != 0) {
        uint32_t sc, n_sc, zp, n_zp;
        int32_t qdim;
        uint8_t dtype_details;
        CHECK_FB(snapuq_fb_table(fb, qpos, &qt), "quantization table");
        CHECK_FB(snapuq_fb_vec(fb, &qt, 2, 4, &sc, &n_sc), "quantization scale");
        CHECK_FB(snapuq_fb_vec(fb, &qt, 3, 8, &zp, &n_zp), "quantization zero_point");
        CHECK_FB(snapuq_fb_u8(fb, &qt, 4, 0, &dtype_details), "quantization details");
        CHECK_FB(snapuq_fb_i32(fb, &qt, 6, 0, &qdim), "quantized_dimension");
        if (dtype_details != 0) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " uses custom quantization details");
        }
        if (n_sc != n_zp && n_zp != 0) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, ": scale and zero_point counts differ");
        }
        if (n_sc > 32767) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has too many scales");
        }
        if (n_sc > 0) {
            uint32_t mm;
            int32_t ee;
            if (n_sc > 1 && (qdim < 0 || qdim >= (int32_t)n_shape || t->dims[qdim] != (int32_t)n_sc)) {
                return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx,
                            ": per-channel scales do not match quantized_dimension");
            }
            for (i = 0; i < n_sc; i++) {
                if (snapuq_f32_decompose(snapuq_rd_f32(fb->b + sc + 4u * i), &mm, &ee) != 0) {
                    return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has a scale that is not a positive normal float");
                }
            }
            t->scale = snapuq_rd_f32(fb->b + sc);
            t->scales = fb->b + sc;
            t->n_scales = (uint16_t)n_sc;
            if (n_zp > 0) {
                int64_t z = snapuq_rd_i64(fb->b + zp);
                if (z < -32768 || z > 32767) {
                    return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has a zero point out of range");
                }
                t->zero_point = (int32_t)z;
                for (i = 1; i < n_zp; i++) {
                    if (snapuq_rd_i64(fb->b + zp + 8u * i) != z) {
                        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "tensor ", idx, " has per-channel zero points");
                    }
                }
            }
        }
    }
    return SNAPUQ_OK;
}

/* One operator: the generic checks, then its registration's parse(). */
static snapuq_status_t parse_op(snapuq_model_t *md, const snapuq_fb_t *fb, uint16_t op, const snapuq_fbt_t *ot,
                                int32_t code, const uint32_t *ins, uint32_t n_ins, int16_t outi)
{
    snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_op_reg_t *reg = snapuq_op_find(code);
    snapuq_opts_t opts;
    uint32_t opt_pos, k;

    if (reg == NULL && core_implements(code)) {
        /* an image built for other models: its op table links only their operators (snapuq_ops.h) */
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, snapuq_builtin_name(code), SNAPUQ_NO_NUM,
                           ": operator not in this image's op table");
    }
    if (reg == NULL) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported operator ", SNAPUQ_NO_NUM, snapuq_builtin_name(code));
    }
    o->builtin = code;
    o->reg = reg;
    o->out = outi;
    o->n_in = (uint8_t)n_ins;
    o->in[0] = o->in[1] = o->in[2] = -1;
    for (k = 0; k < n_ins && k < 3; k++) {
        o->in[k] = (int16_t)(int32_t)ins[k];
    }
    memset(&opts, 0, sizeof opts);
    opts.fb = fb;
    if (snapuq_fb_ref(fb, ot, 4, &opt_pos) != 0 || (opt_pos != 0 && snapuq_fb_table(fb, opt_pos, &opts.t) != 0)) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: options of operator ", op, "");
    }
    opts.present = opt_pos != 0;
    if (o->in[0] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, " has no first input");
    }
    if (md->tensors[o->in[0]].data != NULL) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": constant activation input");
    }
    if ((reg->flags & SNAPUQ_OPF_INT8_IO) != 0) {
        SNAPUQ_TRY(snapuq_need_int8_act(md, op, o->in[0], ": input must be int8"));
        SNAPUQ_TRY(snapuq_need_int8_act(md, op, outi, ": output must be int8"));
    }
    return reg->parse(md, op, &opts);
}

/* ------------------------------------------------------------------ public: init */

snapuq_status_t snapuq_model_init(snapuq_model_t *md, const void *tflite, size_t len)
{
    snapuq_fb_t fbs;
    const snapuq_fb_t *fb = &fbs;
    snapuq_fbt_t root, sg, ot;
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
        return snapuq_fail(md, SNAPUQ_ERR_ARG, "model bytes are NULL", SNAPUQ_NO_NUM, "");
    }
    if (len < 16 || len > 0x7FFFFFF0u) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model is too short or too long (", (int64_t)len, " bytes)");
    }
    fbs.b = (const uint8_t *)tflite;
    fbs.len = (uint32_t)len;
    if (memcmp(fbs.b + 4, "TFL3", 4) != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_VERSION, "file identifier is not TFL3", SNAPUQ_NO_NUM, "");
    }
    root_pos = snapuq_rd_u32(fbs.b);
    CHECK_FB(snapuq_fb_table(fb, root_pos, &root), "root table");
    CHECK_FB(snapuq_fb_i32(fb, &root, 0, 0, &version), "version");
    if (version != 3) {
        return snapuq_fail(md, SNAPUQ_ERR_VERSION, "schema version ", version, " (expected 3)");
    }
    CHECK_FB(snapuq_fb_vec(fb, &root, 1, 4, &codes, &n_codes), "operator_codes");
    CHECK_FB(snapuq_fb_vec(fb, &root, 2, 4, &subs, &n_subs), "subgraphs");
    CHECK_FB(snapuq_fb_vec(fb, &root, 4, 4, &bufs, &n_bufs), "buffers");
    CHECK_FB(snapuq_fb_vec(fb, &root, 7, 4, &sigs, &n_sigs), "signature_defs");
    if (n_subs < 1) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model has no subgraph", SNAPUQ_NO_NUM, "");
    }
    CHECK_FB(snapuq_fb_vec_table(fb, subs, 0, &sg), "subgraph 0");
    CHECK_FB(snapuq_fb_vec(fb, &sg, 0, 4, &tens, &n_tens), "tensors");
    CHECK_FB(snapuq_fb_vec(fb, &sg, 1, 4, &ins, &n_ins), "subgraph inputs");
    CHECK_FB(snapuq_fb_vec(fb, &sg, 2, 4, &outs, &n_outs), "subgraph outputs");
    CHECK_FB(snapuq_fb_vec(fb, &sg, 3, 4, &opsv, &n_ops_fb), "operators");
    if (n_tens > SNAPUQ_MAX_TENSORS) {
        return snapuq_fail(md, SNAPUQ_ERR_LIMIT, "model has ", n_tens, " tensors (SNAPUQ_MAX_TENSORS too small)");
    }
    if (n_ops_fb > SNAPUQ_MAX_OPS) {
        return snapuq_fail(md, SNAPUQ_ERR_LIMIT, "model has ", n_ops_fb, " operators (SNAPUQ_MAX_OPS too small)");
    }
    if (n_ins > SNAPUQ_MAX_IO || n_outs > SNAPUQ_MAX_IO) {
        return snapuq_fail(md, SNAPUQ_ERR_LIMIT, "model has too many inputs or outputs (", SNAPUQ_MAX_IO, " max)");
    }
    if (n_ins < 1 || n_outs < 1 || n_ops_fb < 1) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model has no input, output or operator", SNAPUQ_NO_NUM, "");
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
        int32_t t = snapuq_rd_i32(fbs.b + ins + 4u * i);
        if (t < 0 || (uint32_t)t >= n_tens) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model input ", i, " names a tensor out of range");
        }
        if (md->tensors[t].data != NULL || md->tensors[t].type != SNAPUQ_DTYPE_INT8 ||
            md->tensors[t].n_scales != 1) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "model input ", i, " is not a quantized int8 tensor");
        }
        for (k = 0; k < i; k++) {
            if (md->inputs[k] == t) {
                return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model input ", i, " repeats a tensor");
            }
        }
        md->inputs[i] = (int16_t)t;
        md->in_names[i] = md->tensors[t].name;
        md->tensors[t].first_use = -1;
        md->tensors[t].last_use = 0;
    }
    /* operators in execution order */
    for (i = 0; i < n_ops_fb; i++) {
        snapuq_fbt_t ct;
        uint32_t oins, n_oins, oouts, n_oouts, op_idx, custom_data, custom_n;
        uint32_t in_idx[3];
        int32_t code, outt;
        uint8_t dep;
        int32_t bcode;
        CHECK_FB(snapuq_fb_vec_table(fb, opsv, i, &ot), "operator table");
        CHECK_FB(snapuq_fb_i32(fb, &ot, 0, 0, (int32_t *)&op_idx), "opcode_index");
        CHECK_FB(snapuq_fb_vec(fb, &ot, 1, 4, &oins, &n_oins), "operator inputs");
        CHECK_FB(snapuq_fb_vec(fb, &ot, 2, 4, &oouts, &n_oouts), "operator outputs");
        CHECK_FB(snapuq_fb_vec(fb, &ot, 5, 1, &custom_data, &custom_n), "custom options");
        if (op_idx >= n_codes) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " names an operator code out of range");
        }
        CHECK_FB(snapuq_fb_vec_table(fb, codes, op_idx, &ct), "operator code");
        CHECK_FB(snapuq_fb_u8(fb, &ct, 0, 0, &dep), "deprecated_builtin_code");
        CHECK_FB(snapuq_fb_i32(fb, &ct, 3, 0, &bcode), "builtin_code");
        /* files written before schema 3a carry the code only in the deprecated byte */
        code = (int32_t)(int8_t)dep > bcode ? (int32_t)(int8_t)dep : bcode;
        if (code == SNAPUQ_OP_CUSTOM) {
            const char *cname = "";
            CHECK_FB(snapuq_fb_str(fb, &ct, 1, &cname), "custom_code");
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported custom operator ", SNAPUQ_NO_NUM, cname);
        }
        if (n_oouts != 1) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "operator ", i, " does not have exactly one output");
        }
        if (n_oins > 3) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_OP, "unsupported operator ", SNAPUQ_NO_NUM, snapuq_builtin_name(code));
        }
        outt = snapuq_rd_i32(fbs.b + oouts);
        if (outt < 0 || (uint32_t)outt >= n_tens) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " output names a tensor out of range");
        }
        if (md->tensors[outt].data != NULL || md->tensors[outt].last_use >= 0 ||
            md->tensors[outt].first_use == -1) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " writes a constant, input or already written tensor");
        }
        for (k = 0; k < n_oins; k++) {
            int32_t t = snapuq_rd_i32(fbs.b + oins + 4u * k);
            if (t < -1 || t >= (int32_t)n_tens) {
                return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " input names a tensor out of range");
            }
            if (t >= 0 && md->tensors[t].data == NULL && md->tensors[t].last_use < 0) {
                return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " reads a tensor no earlier operator wrote");
            }
            if (t == outt) {
                return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", i, " reads its own output");
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
        int32_t t = snapuq_rd_i32(fbs.b + outs + 4u * i);
        if (t < 0 || (uint32_t)t >= n_tens) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model output ", i, " names a tensor out of range");
        }
        if (md->tensors[t].data != NULL || md->tensors[t].last_use < 0 ||
            (md->tensors[t].type != SNAPUQ_DTYPE_INT8 && md->tensors[t].type != SNAPUQ_DTYPE_FLOAT32)) {
            return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "model output ", i,
                               " is not an int8 or float32 tensor written by the model");
        }
        md->outputs[i] = (int16_t)t;
        md->out_names[i] = md->tensors[t].name;
        md->tensors[t].last_use = (int16_t)n_ops_fb;
    }
    /* signature names (first signature of subgraph 0), if any */
    for (i = 0; i < n_sigs; i++) {
        snapuq_fbt_t st_t;
        uint32_t sub = 0, v[2], nv[2], side, e;
        CHECK_FB(snapuq_fb_vec_table(fb, sigs, i, &st_t), "signature_def");
        CHECK_FB(snapuq_fb_i32(fb, &st_t, 4, 0, (int32_t *)&sub), "signature subgraph_index");
        if (sub != 0) {
            continue;
        }
        CHECK_FB(snapuq_fb_vec(fb, &st_t, 0, 4, &v[0], &nv[0]), "signature inputs");
        CHECK_FB(snapuq_fb_vec(fb, &st_t, 1, 4, &v[1], &nv[1]), "signature outputs");
        for (side = 0; side < 2; side++) {
            for (e = 0; e < nv[side]; e++) {
                snapuq_fbt_t tm;
                const char *nm;
                int32_t ti;
                uint16_t io, n_io = side ? md->n_outputs : md->n_inputs;
                const int16_t *list = side ? md->outputs : md->inputs;
                const char **names = side ? md->out_names : md->in_names;
                CHECK_FB(snapuq_fb_vec_table(fb, v[side], e, &tm), "signature tensor map");
                CHECK_FB(snapuq_fb_str(fb, &tm, 0, &nm), "signature name");
                CHECK_FB(snapuq_fb_i32(fb, &tm, 1, 0, &ti), "signature tensor_index");
                for (io = 0; io < n_io; io++) {
                    if (list[io] == ti && nm[0] != '\0') {
                        names[io] = nm;
                    }
                }
            }
        }
        break;
    }
    if ((st = snapuq_plan(md)) != SNAPUQ_OK) {
        return st;
    }
    md->state = 1;
    md->error[0] = '\0';
    return SNAPUQ_OK;
}

