/*
 * op_add.c - ADD of two same-shaped int8 activations (TFLM AddFunc arithmetic, no broadcasting).
 */
#include <stdint.h>

#include "snapuq_op.h"

static snapuq_status_t parse_add(snapuq_model_t *md, uint16_t op, const snapuq_opts_t *opts)
{
    snapuq_priv_op_t *o = &md->ops[op];
    snapuq_add_data_t *d = &o->u.add;
    const snapuq_priv_tensor_t *in = snapuq_t(md, o->in[0]);
    const snapuq_priv_tensor_t *out = snapuq_t(md, o->out);
    const snapuq_priv_tensor_t *in2;
    uint8_t activation = 0;
    float mx;
    uint32_t m1, m2;
    int32_t e1, e2;

    if (o->n_in != 2 || o->in[1] < 0) {
        return snapuq_fail(md, SNAPUQ_ERR_FORMAT, "operator ", op, ": ADD needs two inputs");
    }
    in2 = snapuq_t(md, o->in[1]);
    if (in2->data != NULL) {
        return snapuq_fail(md, SNAPUQ_ERR_UNSUPPORTED_TYPE, "operator ", op, ": constant activation input");
    }
    SNAPUQ_TRY(snapuq_need_int8_act(md, op, o->in[1], ": input must be int8"));
    /* AddOptions: fused_activation_function */
    SNAPUQ_TRY(snapuq_opt_u8(md, op, opts, 0, 0, &activation));
    if (!snapuq_same_shape(in, in2) || !snapuq_same_shape(in, out)) {
        return snapuq_fail(md, SNAPUQ_ERR_SHAPE, "operator ", op, ": ADD with broadcasting is not supported");
    }
    /* twice_max = 2 * max(s1, s2); m1 = s1 / twice_max; m2 = s2 / twice_max;
     * m_out = twice_max / (2^20 * s_out) */
    mx = in2->scale;
    (void)snapuq_f32_decompose(in->scale, &m1, &e1);
    (void)snapuq_f32_decompose(in2->scale, &m2, &e2);
    if (e1 > e2 || (e1 == e2 && m1 >= m2)) {
        mx = in->scale;
    }
    d->left_shift = 20;
    if (snapuq_qm_ratio_pot(in->scale, mx, -1, &d->in1_mult, &d->in1_shift) ||
        snapuq_qm_ratio_pot(in2->scale, mx, -1, &d->in2_mult, &d->in2_shift) ||
        snapuq_qm_ratio_pot(mx, out->scale, 1 - 20, &d->out_mult, &d->out_shift)) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": bad ADD scales");
    }
    if (d->in1_shift > 0 || d->in2_shift > 0 || d->out_shift > 0) {
        return snapuq_fail(md, SNAPUQ_ERR_QUANT, "operator ", op, ": ADD multipliers must be below one");
    }
    return snapuq_act_range(md, op, activation, out, &d->act_min, &d->act_max);
}

static snapuq_status_t eval_add(snapuq_model_t *md, uint16_t op)
{
    const snapuq_priv_op_t *o = &md->ops[op];
    const snapuq_add_data_t *d = &o->u.add;
    const snapuq_priv_tensor_t *out = snapuq_tc(md, o->out);
    snapuq_add_args_t a;
    a.in1 = snapuq_tensor_ptr(md, o->in[0]);
    a.in2 = snapuq_tensor_ptr(md, o->in[1]);
    a.out = snapuq_tensor_ptr(md, o->out);
    a.n = (int32_t)snapuq_tensor_elems(out);
    a.in1_offset = -snapuq_tc(md, o->in[0])->zero_point;
    a.in2_offset = -snapuq_tc(md, o->in[1])->zero_point;
    a.out_offset = out->zero_point;
    a.left_shift = d->left_shift;
    a.in1_mult = d->in1_mult;
    a.in1_shift = d->in1_shift;
    a.in2_mult = d->in2_mult;
    a.in2_shift = d->in2_shift;
    a.out_mult = d->out_mult;
    a.out_shift = d->out_shift;
    a.act_min = d->act_min;
    a.act_max = d->act_max;
    return snapuq_kernel_status(md, op, snapuq_add_ref(&a));
}

const snapuq_op_reg_t snapuq_reg_add = {SNAPUQ_OP_ADD, SNAPUQ_OPF_INT8_IO, parse_add, NULL, eval_add, NULL, NULL};
