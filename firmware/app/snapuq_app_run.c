/*
 * snapuq_app_run.c - the runner of a backbone-only image (SNAP=0: no SNAP core linked; `snapuq bench`
 * measures what SNAP adds against it): one model, its input set, one invoke.
 */
#include "../port/snapuq_port.h"
#include "snapuq_app_internal.h"

void snapuq_app_run_boot(void)
{
}

size_t snapuq_app_run_arena(size_t need, uint8_t uploaded)
{
    (void)uploaded;
    return need;
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
    snapuq_app_t *a = &snapuq_app;
    const uint64_t t0 = snapuq_port_counter();
    snapuq_status_t st = a->direct_input ? SNAPUQ_OK
                                         : snapuq_model_set_input(&a->model, a->in_index, a->staging, a->in_bytes);
    uint64_t t1;
    if (st == SNAPUQ_OK) {
        st = snapuq_model_invoke(&a->model);
    }
    t1 = snapuq_port_counter();
    *model_ticks = t1 - t0;
    *snap_ticks = snapuq_port_counter() - t1;
    return st;
}

void snapuq_app_run_timed_begin(void)
{
}

void snapuq_app_run_timed_end(void)
{
}

void snapuq_app_run_infer_kv(snapuq_proto_t *p)
{
    (void)p;
}

int snapuq_app_run_results(snapuq_proto_t *p)
{
    (void)p;
    return 0;
}

void snapuq_app_run_profile_image(snapuq_proto_t *p)
{
    (void)p;
}

void snapuq_app_run_profile_model(snapuq_proto_t *p)
{
    (void)p;
}

void snapuq_app_run_model_kv(snapuq_proto_t *p)
{
    (void)p;
}
