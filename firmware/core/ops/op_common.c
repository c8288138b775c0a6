/*
 * op_common.c - checks and option readers shared by the operators (see snapuq_op.h).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

snapuq_status_t snapuq_kernel_fail(snapuq_model_t *md, uint16_t op, snapuq_status_t st)
{
    return snapuq_fail(md, st, "operator ", op, ": its kernel refused the arguments");
}

const char *snapuq_model_op_kernel(const snapuq_model_t *md, uint16_t op)
{
    const snapuq_op_reg_t *reg;
    if (md == NULL || md->state == 0 || op >= md->n_ops) {
        return NULL;
    }
    reg = md->ops[op].reg;
    return reg->kernel != NULL ? reg->kernel(md, op) : "ref";
}

uint32_t snapuq_tensor_elems(const snapuq_priv_tensor_t *t)
{
    uint32_t n = 1;
    uint8_t i;
    for (i = 0; i < t->ndim; i++) {
        n *= (uint32_t)t->dims[i];
    }
    return n;
}

int snapuq_same_shape(const snapuq_priv_tensor_t *a, const snapuq_priv_tensor_t *b)
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

snapuq_status_t snapuq_need_int8_act(snapuq_model_t *md, uint16_t op, int16_t ti, const char *role)
{
    const snapuq_priv_tensor_t *t = snapuq_t(md, ti);
    if (t->type != SNAPUQ_DTYPE_INT8) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, role);
    }
    if (t->n_scales != 1) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": activation without one scale");
    }
    if (t->zero_point < -128 || t->zero_point > 127) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": zero point outside int8");
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_act_range(snapuq_model_t *md, uint16_t op, uint8_t activation,
                                 const snapuq_priv_tensor_t *out, int32_t *act_min, int32_t *act_max)
{
    int32_t lo = -128, hi = 127;
    switch (activation) {
    case 0:
        break;
    case 1: /* RELU */
        lo = out->zero_point;
        break;
    case 2: /* RELU_N1_TO_1 */
        lo = snapuq_quantize_int(-1, out->scale, out->zero_point);
        hi = snapuq_quantize_int(1, out->scale, out->zero_point);
        break;
    case 3: /* RELU6 */
        lo = out->zero_point;
        hi = snapuq_quantize_int(6, out->scale, out->zero_point);
        break;
    default:
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": unsupported fused activation");
    }
    *act_min = lo > -128 ? lo : -128;
    *act_max = hi < 127 ? hi : 127;
    if (*act_min > *act_max) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": empty activation range");
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

snapuq_status_t snapuq_window(snapuq_model_t *md, uint16_t op, snapuq_window_t *w,
                              const snapuq_priv_tensor_t *in, const snapuq_priv_tensor_t *out,
                              int32_t kh, int32_t kw)
{
    int32_t oh, ow;
    if (w->stride_h < 1 || w->stride_w < 1 || w->dil_h < 1 || w->dil_w < 1 || kh < 1 || kw < 1 ||
        w->padding > 1) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": bad stride, dilation or padding");
    }
    if (in->ndim != 4 || out->ndim != 4 || in->dims[0] != out->dims[0]) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": needs 4-D NHWC input and output");
    }
    oh = out_size(w->padding, in->dims[1], kh, w->stride_h, w->dil_h);
    ow = out_size(w->padding, in->dims[2], kw, w->stride_w, w->dil_w);
    if (oh < 1 || ow < 1 || oh != out->dims[1] || ow != out->dims[2]) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": output height/width do not match");
    }
    w->pad_h = (int16_t)pad_amount(w->stride_h, w->dil_h, in->dims[1], kh, oh);
    w->pad_w = (int16_t)pad_amount(w->stride_w, w->dil_w, in->dims[2], kw, ow);
    w->filter_h = (int16_t)kh;
    w->filter_w = (int16_t)kw;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_check_weights(snapuq_model_t *md, uint16_t op, int16_t wi, int16_t bi,
                                     int32_t out_c)
{
    const snapuq_priv_tensor_t *w = snapuq_t(md, wi);
    if (w->data == NULL || w->type != SNAPUQ_DTYPE_INT8) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": weights must be constant int8");
    }
    if (w->n_scales != 1 && w->n_scales != (uint16_t)out_c) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": weight scales neither per-tensor nor per-channel");
    }
    if (w->zero_point != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": weights must be symmetric (zero point 0)");
    }
    if (bi >= 0) {
        const snapuq_priv_tensor_t *b = snapuq_t(md, bi);
        if (b->data == NULL || b->type != SNAPUQ_DTYPE_INT32 || b->ndim != 1 || b->dims[0] != out_c) {
            return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": bias must be constant int32 [Cout]");
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_check_multipliers(snapuq_model_t *md, uint16_t op,
                                         const snapuq_priv_tensor_t *in,
                                         const snapuq_priv_tensor_t *w,
                                         const snapuq_priv_tensor_t *out)
{
    uint16_t c;
    int32_t m, sh;
    for (c = 0; c < w->n_scales; c++) {
        if (snapuq_qm_product_ratio(in->scale, snapuq_rd_f32(w->scales + 4u * c), out->scale, &m, &sh) != 0) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": requantization scale out of range");
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_prepare_per_channel(snapuq_model_t *md, uint16_t op, uint16_t n)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    const snapuq_priv_tensor_t *w = snapuq_tc(md, o->in[1]);
    const snapuq_priv_tensor_t *out = snapuq_tc(md, o->out);
    int32_t *mult = snapuq_op_persist(md, o);
    int32_t *shift = mult + n;
    uint16_t c;
    for (c = 0; c < n; c++) {
        const float ws = snapuq_rd_f32(w->scales + 4u * (w->n_scales > 1 ? c : 0));
        if (snapuq_qm_product_ratio(in->scale, ws, out->scale, &mult[c], &shift[c]) != 0) {
            return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad scales");
        }
    }
    return SNAPUQ_OK;
}

static snapuq_status_t bad_options(snapuq_model_t *md, uint16_t op)
{
    return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "malformed flatbuffer: options of operator ", op, "");
}

snapuq_status_t snapuq_opt_i16(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                               int32_t def, int16_t *dst)
{
    int32_t v = def;
    if (o->present && snapuq_fb_i32(o->fb, &o->t, id, def, &v) != 0) {
        return bad_options(md, op);
    }
    if (v < -32768 || v > 32767) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": option out of range");
    }
    *dst = (int16_t)v;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_opt_u8(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                              uint8_t def, uint8_t *dst)
{
    uint8_t v = def;
    if (o->present && snapuq_fb_u8(o->fb, &o->t, id, def, &v) != 0) {
        return bad_options(md, op);
    }
    *dst = v;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_opt_f32(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *o, unsigned id,
                               float def, float *dst)
{
    float v = def;
    if (o->present && snapuq_fb_f32(o->fb, &o->t, id, def, &v) != 0) {
        return bad_options(md, op);
    }
    *dst = v;
    return SNAPUQ_OK;
}
