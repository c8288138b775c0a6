/*
 * snapuq_app_ensemble.c - the runner of an ensemble bench image (SNAP=0 ENSEMBLE=1 TFLITE="a b ..."):
 * every linked member runs in turn on the staged input and the int8 softmax outputs of all members (or
 * all exits of one early-exit model) are summed on the device (`snapuq bench --table`: EE-ens, DEEP).
 * The members share one model struct and one arena (sized for the largest); switching members
 * re-parses the flatbuffer and re-derives its multipliers (the time is counted: switch_ticks).
 */
#include <string.h>

#include "../port/snapuq_port.h"
#include "snapuq_app_internal.h"

#ifndef SNAPUQ_APP_ENS_MAX_CLASSES
#define SNAPUQ_APP_ENS_MAX_CLASSES 32u
#endif

static struct {
    size_t arena_max;
    size_t loaded;          /* member whose flatbuffer the model struct holds now */
    uint16_t classes;       /* elements of every summed softmax output */
    uint16_t terms;         /* softmax outputs summed in the last inference */
    int32_t pred;
    uint64_t switch_ticks;  /* member switches of the timed runs */
    int32_t sum[SNAPUQ_APP_ENS_MAX_CLASSES]; /* sum over members / exits of (q - zero_point) */
} ens;

/* At boot: the arena of the largest member; every member must take the same input. */
void snapuq_app_run_boot(void)
{
    size_t k, need = 0u;
    for (k = 0; k < snapuq_linked_count; k++) {
        snapuq_tensor_info_t info;
        size_t a = 0u;
        snapuq_status_t st =
            snapuq_model_init(&snapuq_app.model, snapuq_linked_members[k], snapuq_linked_member_len[k]);
        if (st == SNAPUQ_OK) {
            st = snapuq_model_input_info(&snapuq_app.model, 0u, &info);
        }
        if (st != SNAPUQ_OK) {
            snapuq_app_status_error(&snapuq_app_proto, "member", st);
            return;
        }
        if (k == 0u) {
            snapuq_app.in_bytes = info.bytes;
        } else if (info.bytes != snapuq_app.in_bytes) {
            snapuq_proto_error(&snapuq_app_proto, "member", "ensemble members take different inputs");
            return;
        }
        (void)snapuq_model_arena_size(&snapuq_app.model, &a);
        if (a > need) {
            need = a;
        }
    }
    ens.arena_max = need;
}

/* Add every int8 output of the current member (softmax probabilities) into ens.sum. */
static snapuq_status_t accumulate(void)
{
    uint16_t i, n = snapuq_model_output_count(&snapuq_app.model);
    for (i = 0; i < n; i++) {
        snapuq_tensor_info_t info;
        uint32_t c;
        if (snapuq_model_output_info(&snapuq_app.model, i, &info) != SNAPUQ_OK ||
            info.type != SNAPUQ_DTYPE_INT8) {
            continue;
        }
        if (ens.classes == 0u) {
            if (info.elements == 0u || info.elements > SNAPUQ_APP_ENS_MAX_CLASSES) {
                return SNAPUQ_ERR_LIMIT;
            }
            ens.classes = (uint16_t)info.elements;
        }
        if (info.elements != ens.classes) {
            return SNAPUQ_ERR_SHAPE;
        }
        for (c = 0; c < info.elements; c++) {
            ens.sum[c] += (int32_t)((const int8_t *)info.data)[c] - info.zero_point;
        }
        ens.terms++;
    }
    return SNAPUQ_OK;
}

/* Every member in turn on the staged input; the prediction is the argmax of the summed
 * probabilities (= of their average; ties go to the lower class index). */
static snapuq_status_t run_members(void)
{
    snapuq_status_t st = SNAPUQ_OK;
    size_t k, n = snapuq_app.model_uploaded ? 1u : snapuq_linked_count;
    uint16_t c;
    memset(ens.sum, 0, sizeof ens.sum);
    ens.classes = 0u;
    ens.terms = 0u;
    for (k = 0; k < n && st == SNAPUQ_OK; k++) {
        if (k != ens.loaded) {
            uint64_t t0 = snapuq_port_counter();
            st = snapuq_model_init(&snapuq_app.model, snapuq_linked_members[k], snapuq_linked_member_len[k]);
            if (st == SNAPUQ_OK) {
                st = snapuq_model_set_arena(&snapuq_app.model, snapuq_app.pool, snapuq_app.arena_need);
            }
            ens.switch_ticks += snapuq_port_counter() - t0;
            if (st != SNAPUQ_OK) {
                snapuq_app.loaded = 0u;
                return st;
            }
            ens.loaded = k;
        }
        st = snapuq_model_set_input(&snapuq_app.model, snapuq_app.in_index, snapuq_app.staging,
                                    snapuq_app.in_bytes);
        if (st == SNAPUQ_OK) {
            st = snapuq_model_invoke(&snapuq_app.model);
        }
        if (st == SNAPUQ_OK) {
            st = accumulate();
        }
    }
    ens.pred = 0;
    for (c = 1; c < ens.classes; c++) {
        if (ens.sum[c] > ens.sum[ens.pred]) {
            ens.pred = (int32_t)c;
        }
    }
    return st;
}

size_t snapuq_app_run_arena(size_t need, uint8_t uploaded)
{
    ens.loaded = 0u;
    return !uploaded && ens.arena_max > need ? ens.arena_max : need;
}

void snapuq_app_run_loaded(void)
{
}

int snapuq_app_run_open(const uint8_t *b, size_t n, size_t lo, size_t hi)
{
    (void)b;
    (void)n;
    (void)lo;
    (void)hi;
    return 0;
}

snapuq_status_t snapuq_app_run_once(uint64_t *model_ticks, uint64_t *snap_ticks)
{
    const uint64_t t0 = snapuq_port_counter();
    const snapuq_status_t st = run_members();
    const uint64_t t1 = snapuq_port_counter();
    *model_ticks = t1 - t0;
    *snap_ticks = snapuq_port_counter() - t1;
    return st;
}

void snapuq_app_run_timed_begin(void)
{
    ens.switch_ticks = 0u;
}

void snapuq_app_run_timed_end(void)
{
}

void snapuq_app_run_infer_kv(snapuq_proto_t *p)
{
    snapuq_proto_kv_u(p, "switch_ticks", ens.switch_ticks);
}

int snapuq_app_run_results(snapuq_proto_t *p)
{
    snapuq_proto_kv_i(p, "pred", ens.pred);
    snapuq_proto_kv_i32v(p, "psum", ens.sum, ens.classes);
    snapuq_proto_kv_u(p, "terms", ens.terms);
    return 1;
}

void snapuq_app_run_profile_image(snapuq_proto_t *p)
{
    snapuq_proto_kv_u(p, "members", snapuq_linked_count);
}

void snapuq_app_run_profile_model(snapuq_proto_t *p)
{
    (void)p;
}

void snapuq_app_run_model_kv(snapuq_proto_t *p)
{
    (void)p;
}
