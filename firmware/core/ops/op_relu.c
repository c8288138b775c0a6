/*
 * op_relu.c - standalone RELU and RELU6 on int8 tensors (TFLM's reference arithmetic).
 *
 * The converter emits them for a Keras ReLU / Activation that no producer can fuse (e.g. after a
 * Concatenate or on the model input).
 *
 * RELU requantizes, as TFLM's ReluQuantized does:
 *     y = clamp(zp_out + MultiplyByQuantizedMultiplier(x - zp_in, M, s), max(-128, zp_out), 127)
 * with (M, s) = QuantizeMultiplier(double(s_in) / double(s_out)).
 *
 * RELU6 in TFLM clamps the input codes to [zp_in, q(6)] (q(6) = zp_in + round(6 / s_in), int8
 * clamped) and ignores the output tensor's quantization. That is the true ReLU6 only when the
 * output is quantized like the input, so any other RELU6 is refused here (TFLM would compute
 * something else than TFLite). The converter gives a standalone RELU6 its own output range
 * (at most [0, 6]); snapuq's export writes such an operator as RELU, which is the same function
 * on that output (snapuq.export.convert).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_fixed.h"
#include "snapuq_op.h"

static snapuq_status_t check_relu_io(snapuq_model_t *md, uint16_t op, const char *what)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    if (o->n_in != 1) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, what);
    }
    if (!snapuq_same_shape(snapuq_t(md, o->in[0]), snapuq_t(md, o->out))) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": RELU/RELU6 changes the shape");
    }
    return SNAPUQ_OK;
}

static snapuq_status_t parse_relu(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_relu_data_t *d = &o->u.relu;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    (void)opts;
    SNAPUQ_TRY(check_relu_io(md, op, ": RELU needs 1 input"));
    if (snapuq_qm_ratio_pot(in->scale, out->scale, 0, &d->mult, &d->shift)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad RELU scales");
    }
    d->requant = 1;
    d->lo = out->zero_point > -128 ? out->zero_point : -128; /* zp_out + round(0 / s_out) */
    d->hi = 127;
    return SNAPUQ_OK;
}

static snapuq_status_t parse_relu6(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_relu_data_t *d = &o->u.relu;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    int32_t six;
    uint32_t a, b;
    (void)opts;
    SNAPUQ_TRY(check_relu_io(md, op, ": RELU6 needs 1 input"));
    memcpy(&a, &in->scale, sizeof a);
    memcpy(&b, &out->scale, sizeof b);
    if (a != b || in->zero_point != out->zero_point) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op,
                           ": RELU6 with output quantized unlike its input");
    }
    six = snapuq_quantize_int(6, in->scale, in->zero_point);
    d->requant = 0;
    d->mult = 0;
    d->shift = 0;
    d->lo = in->zero_point;
    d->hi = six < -128 ? -128 : (six > 127 ? 127 : six);
    return SNAPUQ_OK;
}

static snapuq_status_t eval_relu(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_relu_data_t *d = &o->u.relu;
    const snapuq_priv_tensor_t *in = snapuq_tc(md, o->in[0]);
    const int8_t *x = snapuq_tensor_ptr(md, o->in[0]);
    int8_t *y = snapuq_tensor_ptr(md, o->out);
    const uint32_t n = snapuq_tensor_elems(in);
    uint32_t i;
    if (d->requant) {
        const int32_t zin = in->zero_point, zout = snapuq_tc(md, o->out)->zero_point;
        for (i = 0; i < n; i++) {
            const int32_t v = zout + snapuq_mbqm((int32_t)x[i] - zin, d->mult, d->shift);
            y[i] = (int8_t)snapuq_clamp_i32(v, d->lo, d->hi);
        }
    } else {
        for (i = 0; i < n; i++) {
            y[i] = (int8_t)snapuq_clamp_i32((int32_t)x[i], d->lo, d->hi);
        }
    }
    return SNAPUQ_OK;
}

const snapuq_op_reg_t snapuq_reg_relu = {SNAPUQ_OP_RELU, SNAPUQ_OPF_INT8_IO, parse_relu, NULL, eval_relu, NULL, NULL};
const snapuq_op_reg_t snapuq_reg_relu6 = {SNAPUQ_OP_RELU6, SNAPUQ_OPF_INT8_IO, parse_relu6, NULL, eval_relu, NULL, NULL};
