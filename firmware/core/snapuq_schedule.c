/*
 * snapuq_schedule.c - memory-aware execution order for the arena planner.
 *
 * Converters emit operators in an order that is valid but not frugal: a SNAP model's heads (a MEAN
 * over a tap's predecessor feature map, then small FULLY_CONNECTED layers) often come after the whole
 * backbone, which keeps every tapped feature map alive to the end (keywords DS-CNN: 48.8 KB of
 * activations instead of 20.7 KB). Any topological order computes the same numbers (every operator
 * is a pure function of its inputs), so the runtime may run them in another one.
 *
 * snapuq_schedule_ops() builds a greedy list schedule: among the operators whose inputs are ready it
 * runs the one that grows the live set least (output bytes minus the bytes of inputs it is the last
 * reader of; ties: flatbuffer order). It keeps the greedy order only when its peak of live bytes is
 * lower than the flatbuffer order's, then rewrites every activation's first/last use in schedule
 * positions (model inputs -1, model outputs n_ops) for the planner. md->sched[k] is the flatbuffer
 * index of the k-th operator to run; operator indices seen by the profiler stay flatbuffer indices.
 */
#include <string.h>

#include "snapuq_schedule.h"

static int is_act(const snapuq_model_t *md, int16_t t)
{
    return t >= 0 && md->tensors[t].data == NULL;
}

static int is_model_output(const snapuq_model_t *md, int16_t t)
{
    uint16_t i;
    for (i = 0; i < md->n_outputs; i++) {
        if (md->outputs[i] == t) {
            return 1;
        }
    }
    return 0;
}

/* distinct activation inputs of op o (up to 3) */
static uint8_t op_inputs(const snapuq_model_t *md, const snapuq_priv_op_t *o, int16_t *dst)
{
    uint8_t k, j, n = 0;
    for (k = 0; k < 3; k++) {
        int16_t t = o->in[k];
        int dup = 0;
        if (!is_act(md, t)) {
            continue;
        }
        for (j = 0; j < n; j++) {
            dup |= dst[j] == t;
        }
        if (!dup) {
            dst[n++] = t;
        }
    }
    return n;
}

/* Peak of the sum of live activation bytes when the operators run in `order`. */
static uint32_t live_peak(const snapuq_model_t *md, const uint16_t *order, uint8_t *remaining)
{
    uint16_t i, k;
    uint32_t live = 0, peak = 0;
    int16_t ins[3];
    memset(remaining, 0, SNAPUQ_MAX_TENSORS);
    for (i = 0; i < md->n_ops; i++) {
        uint8_t n = op_inputs(md, &md->ops[i], ins);
        for (k = 0; k < n; k++) {
            remaining[ins[k]]++;
        }
    }
    for (i = 0; i < md->n_inputs; i++) {
        live += md->tensors[md->inputs[i]].bytes;
    }
    peak = live;
    for (k = 0; k < md->n_ops; k++) {
        const snapuq_priv_op_t *o = &md->ops[order[k]];
        uint8_t j, n = op_inputs(md, o, ins);
        live += md->tensors[o->out].bytes;
        if (live > peak) {
            peak = live;
        }
        for (j = 0; j < n; j++) {
            if (--remaining[ins[j]] == 0u && !is_model_output(md, ins[j])) {
                live -= md->tensors[ins[j]].bytes;
            }
        }
    }
    return peak;
}

void snapuq_schedule_ops(snapuq_model_t *md)
{
    uint16_t greedy[SNAPUQ_MAX_OPS];
    uint8_t remaining[SNAPUQ_MAX_TENSORS];
    uint8_t produced[SNAPUQ_MAX_TENSORS];
    uint8_t done[SNAPUQ_MAX_OPS];
    int16_t ins[3];
    uint16_t i, k;
    uint32_t peak_fb, peak_greedy;

    for (i = 0; i < md->n_ops; i++) {
        md->sched[i] = i;
    }
    peak_fb = live_peak(md, md->sched, remaining);

    /* greedy list schedule */
    memset(remaining, 0, sizeof remaining);
    for (i = 0; i < md->n_ops; i++) {
        uint8_t n = op_inputs(md, &md->ops[i], ins);
        for (k = 0; k < n; k++) {
            remaining[ins[k]]++;
        }
    }
    memset(produced, 0, sizeof produced);
    memset(done, 0, sizeof done);
    for (i = 0; i < md->n_inputs; i++) {
        produced[md->inputs[i]] = 1u;
    }
    for (k = 0; k < md->n_ops; k++) {
        int32_t best_score = 0;
        int32_t best = -1;
        for (i = 0; i < md->n_ops; i++) {
            const snapuq_priv_op_t *o = &md->ops[i];
            uint8_t j, n, ready = 1u;
            int32_t score;
            if (done[i]) {
                continue;
            }
            n = op_inputs(md, o, ins);
            for (j = 0; j < n; j++) {
                ready &= produced[ins[j]];
            }
            if (!ready) {
                continue;
            }
            score = (int32_t)md->tensors[o->out].bytes;
            for (j = 0; j < n; j++) {
                if (remaining[ins[j]] == 1u && !is_model_output(md, ins[j])) {
                    score -= (int32_t)md->tensors[ins[j]].bytes;
                }
            }
            if (best < 0 || score < best_score) {
                best = (int32_t)i;
                best_score = score;
            }
        }
        if (best < 0) {
            return; /* not a DAG in flatbuffer order: keep that order (init validated it anyway) */
        }
        greedy[k] = (uint16_t)best;
        done[best] = 1u;
        produced[md->ops[best].out] = 1u;
        {
            uint8_t j, n = op_inputs(md, &md->ops[best], ins);
            for (j = 0; j < n; j++) {
                remaining[ins[j]]--;
            }
        }
    }
    peak_greedy = live_peak(md, greedy, remaining);
    if (peak_greedy < peak_fb) {
        memcpy(md->sched, greedy, (size_t)md->n_ops * sizeof greedy[0]);
    }

    /* lifetimes in schedule positions */
    for (i = 0; i < md->n_tensors; i++) {
        if (md->tensors[i].data == NULL && md->tensors[i].last_use >= 0) {
            md->tensors[i].first_use = INT16_MAX;
            md->tensors[i].last_use = -1;
        }
    }
    for (i = 0; i < md->n_inputs; i++) {
        md->tensors[md->inputs[i]].first_use = -1;
        md->tensors[md->inputs[i]].last_use = 0;
    }
    for (k = 0; k < md->n_ops; k++) {
        const snapuq_priv_op_t *o = &md->ops[md->sched[k]];
        uint8_t j, n = op_inputs(md, o, ins);
        for (j = 0; j < n; j++) {
            if (md->tensors[ins[j]].last_use < (int16_t)k) {
                md->tensors[ins[j]].last_use = (int16_t)k;
            }
        }
        md->tensors[o->out].first_use = (int16_t)k;
        if (md->tensors[o->out].last_use < (int16_t)k) {
            md->tensors[o->out].last_use = (int16_t)k;
        }
    }
    for (i = 0; i < md->n_outputs; i++) {
        md->tensors[md->outputs[i]].last_use = (int16_t)md->n_ops;
    }
}
