/*
 * snapuq_runtime.c - the public model API around the loader (snapuq_loader.c), the planner
 * (snapuq_planner.c) and the operators (ops/): status strings and error messages, arena set-up
 * (each operator's prepare), inputs/outputs, introspection and invoke (each operator's eval).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"

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

snapuq_status_t snapuq_message(char *msg, size_t msg_len, snapuq_status_t st, const char *text)
{
    size_t n = 0;
    if (msg == NULL || msg_len == 0) {
        return st;
    }
    while (text != NULL && text[n] != '\0' && n + 1 < msg_len) {
        msg[n] = text[n];
        n++;
    }
    msg[n] = '\0';
    return st;
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

snapuq_status_t snapuq_fail(snapuq_model_t *md, snapuq_status_t st, const char *a, int64_t num,
                            const char *b)
{
    msg_t m;
    m.buf = md->error;
    m.pos = 0;
    msg_str(&m, a);
    if (num != SNAPUQ_NO_NUM) {
        msg_int(&m, num);
    }
    msg_str(&m, b);
    return st;
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
    uint16_t i;
    if (md == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (md->state == 0) {
        return SNAPUQ_ERR_STATE;
    }
    if (arena == NULL || ((uintptr_t)arena % SNAPUQ_ARENA_ALIGN) != 0) {
        return snapuq_fail(md, SNAPUQ_ERR_ARENA, "arena is NULL or not aligned to ", SNAPUQ_ARENA_ALIGN, " bytes");
    }
    if (bytes < (size_t)md->persist_bytes + md->act_bytes) {
        return snapuq_fail(md, SNAPUQ_ERR_ARENA, "arena too small: need ",
                    (int64_t)md->persist_bytes + md->act_bytes, " bytes");
    }
    md->arena = (uint8_t *)arena;
    md->arena_len = bytes;
    for (i = 0; i < md->n_ops; i++) {
        const snapuq_op_reg_t *reg = md->ops[i].reg;
        snapuq_status_t st;
        if (reg->prepare != NULL && (st = reg->prepare(md, i)) != SNAPUQ_OK) {
            md->state = 1;
            return st;
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
    info->elements = snapuq_tensor_elems(t);
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
    memcpy(snapuq_tensor_ptr(md, md->inputs[index]), data, bytes);
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
    memcpy(dst, snapuq_tensor_ptr(md, md->outputs[index]), bytes);
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
        const uint16_t i = md->sched[step]; /* execution order (snapuq_schedule.c) */
        const snapuq_priv_op_t *o = &md->ops[i];
        snapuq_status_t st;
        if (md->profile != NULL) {
            md->profile(md->profile_ctx, i, o->builtin, 1);
        }
        if ((st = o->reg->eval(md, i)) != SNAPUQ_OK) {
            return st;
        }
        if (md->profile != NULL) {
            md->profile(md->profile_ctx, i, o->builtin, 0);
        }
    }
    return SNAPUQ_OK;
}
