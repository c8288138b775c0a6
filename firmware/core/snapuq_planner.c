/*
 * snapuq_planner.c - arena plan of a loaded model: execution order (snapuq_schedule.c), then
 * persistent per-operator tables first, then
 * activations placed greedily (largest first, lowest non-overlapping offset among buffers with
 * overlapping lifetimes: TFLM's greedy planner order). Outputs of operators flagged
 * SNAPUQ_OPF_ALIAS (RESHAPE, SQUEEZE) share their input's memory. A kernel's scratch
 * (its registration's scratch query; offset in op->scratch) is one more buffer, live during its
 * operator's step only (TFLM's RequestScratchBufferInArena): it goes in the same greedy plan, so the
 * arena size the model reports includes it.
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_op.h"
#include "snapuq_schedule.h"

#define ALIGN_UP(x) (((x) + (SNAPUQ_ARENA_ALIGN - 1u)) & ~(uint32_t)(SNAPUQ_ARENA_ALIGN - 1u))

/* a buffer of the plan: tensor id (< SNAPUQ_MAX_TENSORS) or SNAPUQ_MAX_TENSORS + operator index
 * (that operator's scratch, live at its step) */
typedef struct {
    snapuq_model_t *md;
    const int16_t *step_of;  /* operator index -> execution step */
    const uint32_t *scratch; /* operator index -> its registration's scratch bytes */
} plan_t;

static uint32_t buf_bytes(const plan_t *p, int16_t id)
{
    return id < SNAPUQ_MAX_TENSORS ? p->md->tensors[id].bytes : p->scratch[id - SNAPUQ_MAX_TENSORS];
}

static int16_t buf_first(const plan_t *p, int16_t id)
{
    return id < SNAPUQ_MAX_TENSORS ? p->md->tensors[id].first_use : p->step_of[id - SNAPUQ_MAX_TENSORS];
}

static int16_t buf_last(const plan_t *p, int16_t id)
{
    return id < SNAPUQ_MAX_TENSORS ? p->md->tensors[id].last_use : p->step_of[id - SNAPUQ_MAX_TENSORS];
}

static uint32_t buf_offset(const plan_t *p, int16_t id)
{
    return id < SNAPUQ_MAX_TENSORS ? (uint32_t)p->md->tensors[id].offset : p->md->ops[id - SNAPUQ_MAX_TENSORS].scratch;
}

static void buf_place(const plan_t *p, int16_t id, uint32_t off)
{
    if (id < SNAPUQ_MAX_TENSORS) {
        p->md->tensors[id].offset = (int32_t)off;
    } else {
        p->md->ops[id - SNAPUQ_MAX_TENSORS].scratch = off;
    }
}

static int16_t root_of(int16_t t, const int16_t *alias)
{
    int guard = 0;
    while (alias[t] >= 0 && guard++ < SNAPUQ_MAX_TENSORS) {
        t = alias[t];
    }
    return t;
}

snapuq_status_t snapuq_plan(snapuq_model_t *md)
{
    int16_t alias[SNAPUQ_MAX_TENSORS];
    int16_t order[SNAPUQ_MAX_TENSORS + SNAPUQ_MAX_OPS];
    int16_t step_of[SNAPUQ_MAX_OPS];
    uint32_t scratch[SNAPUQ_MAX_OPS];
    plan_t pl;
    uint16_t i, j, n = 0, k;
    uint32_t persist = 0, top = 0, naive = 0;

    /* execution order and lifetimes in that order (snapuq_schedule.c) */
    snapuq_schedule_ops(md);
    pl.md = md;
    pl.step_of = step_of;
    pl.scratch = scratch;
    for (i = 0; i < md->n_ops; i++) {
        step_of[md->sched[i]] = (int16_t)i;
    }
    for (i = 0; i < md->n_tensors; i++) {
        alias[i] = -1;
    }
    for (i = 0; i < md->n_ops; i++) {
        const snapuq_priv_op_t *o = &md->ops[i];
        if ((o->reg->flags & SNAPUQ_OPF_ALIAS) != 0 && md->tensors[o->in[0]].data == NULL) {
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
        r = root_of((int16_t)i, alias);
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
    /* roots sorted by size (descending), ties by index */
    for (i = 0; i < md->n_tensors; i++) {
        const snapuq_priv_tensor_t *t = &md->tensors[i];
        if (t->data == NULL && t->last_use >= 0 && alias[i] < 0) {
            if (t->bytes > 0x00FFFFFFu) {
                return snapuq_fail(md, SNAPUQ_ERR_LIMIT, "tensor ", i, " is larger than 16 MiB");
            }
            order[n++] = (int16_t)i;
            naive += ALIGN_UP(t->bytes);
        }
    }
    for (i = 0; i < md->n_ops; i++) {
        snapuq_priv_op_t *o = &md->ops[i];
        o->scratch = 0;
        scratch[i] = o->reg->scratch != NULL ? o->reg->scratch(md, i) : 0u;
        if (scratch[i] > 0) {
            if (scratch[i] > 0x00FFFFFFu) {
                return snapuq_fail(md, SNAPUQ_ERR_LIMIT, "operator ", i, ": kernel scratch larger than 16 MiB");
            }
            order[n++] = (int16_t)(SNAPUQ_MAX_TENSORS + i);
            naive += ALIGN_UP(scratch[i]);
        }
    }
    for (i = 1; i < n; i++) {
        int16_t v = order[i];
        j = i;
        while (j > 0 && buf_bytes(&pl, order[j - 1]) < buf_bytes(&pl, v)) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    for (i = 0; i < n; i++) {
        const int16_t t = order[i];
        const uint32_t tb = ALIGN_UP(buf_bytes(&pl, t));
        const int16_t tf = buf_first(&pl, t), tl = buf_last(&pl, t);
        uint32_t off = 0;
        int moved = 1;
        /* lowest offset not overlapping any placed buffer with an overlapping lifetime */
        while (moved) {
            moved = 0;
            for (k = 0; k < i; k++) {
                const int16_t q = order[k];
                const uint32_t po = buf_offset(&pl, q), pe = po + ALIGN_UP(buf_bytes(&pl, q));
                if (buf_last(&pl, q) < tf || tl < buf_first(&pl, q)) {
                    continue;
                }
                if (off < pe && po < off + tb) {
                    off = pe;
                    moved = 1;
                }
            }
        }
        buf_place(&pl, t, off);
        if (off + tb > top) {
            top = off + tb;
        }
    }
    for (i = 0; i < md->n_tensors; i++) {
        if (alias[i] >= 0 && md->tensors[i].last_use >= 0) {
            md->tensors[i].offset = md->tensors[root_of((int16_t)i, alias)].offset;
        }
    }
    /* persistent per-operator tables first in the arena, packed (int32 tables: 4-byte aligned), the
     * activations after them at the next SNAPUQ_ARENA_ALIGN boundary */
    for (i = 0; i < md->n_ops; i++) {
        snapuq_priv_op_t *o = &md->ops[i];
        if (o->persist_bytes > 0) {
            o->persist = persist;
            persist += (o->persist_bytes + 3u) & ~3u;
        }
    }
    md->persist_bytes = ALIGN_UP(persist);
    md->act_bytes = top;
    md->act_naive_bytes = naive;
    return SNAPUQ_OK;
}
