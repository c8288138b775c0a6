/*
 * snapuq_snap_monitor.c - drift monitor on U (sliding-window mean + one-sided CUSUM, integer
 * only) and the nearest-rank quantile used to set its thresholds (API in snapuq_snap.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_snap.h"

snapuq_status_t snapuq_monitor_init(snapuq_monitor_t *mon, int32_t *ring, uint32_t window, int32_t window_threshold,
                                    int32_t cusum_ref, int64_t cusum_h)
{
    if (mon == NULL || ring == NULL || window == 0 || cusum_h <= 0) {
        return SNAPUQ_ERR_ARG;
    }
    memset(mon, 0, sizeof *mon);
    mon->ring = ring;
    mon->window = window;
    mon->window_threshold = window_threshold;
    mon->cusum_ref = cusum_ref;
    mon->cusum_h = cusum_h;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_monitor_reset(snapuq_monitor_t *mon)
{
    if (mon == NULL || mon->ring == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    mon->count = 0;
    mon->head = 0;
    mon->sum = 0;
    mon->cusum = 0;
    mon->n_seen = 0;
    mon->first_alarm = 0;
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_monitor_push(snapuq_monitor_t *mon, int32_t u, uint8_t *alarm)
{
    uint8_t al = 0;
    int64_t c;
    if (mon == NULL || mon->ring == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (mon->count == mon->window) {
        mon->sum -= mon->ring[mon->head];
    } else {
        mon->count++;
    }
    mon->ring[mon->head] = u;
    mon->sum += u;
    mon->head = (mon->head + 1u) % mon->window;
    /* window mean >= threshold  <=>  sum >= threshold * window (exact in integers) */
    if (mon->count == mon->window && mon->sum >= (int64_t)mon->window_threshold * (int64_t)mon->window) {
        al |= 1u;
    }
    c = mon->cusum + (int64_t)u - mon->cusum_ref;
    mon->cusum = c > 0 ? c : 0;
    if (mon->cusum >= mon->cusum_h) {
        al |= 2u;
    }
    mon->n_seen++;
    if (al != 0 && mon->first_alarm == 0) {
        mon->first_alarm = mon->n_seen;
    }
    if (alarm != NULL) {
        *alarm = al;
    }
    return SNAPUQ_OK;
}

static void sift_down(int32_t *v, uint32_t start, uint32_t n)
{
    uint32_t root = start;
    while (2u * root + 1u < n) {
        uint32_t child = 2u * root + 1u, sw = root;
        if (v[sw] < v[child]) {
            sw = child;
        }
        if (child + 1u < n && v[sw] < v[child + 1u]) {
            sw = child + 1u;
        }
        if (sw == root) {
            return;
        }
        {
            const int32_t t = v[root];
            v[root] = v[sw];
            v[sw] = t;
        }
        root = sw;
    }
}

snapuq_status_t snapuq_quantile_i32(int32_t *values, uint32_t n, uint16_t q_permille, int32_t *out)
{
    uint32_t i, rank;
    if (values == NULL || out == NULL || n == 0 || q_permille > 1000) {
        return SNAPUQ_ERR_ARG;
    }
    for (i = n / 2u; i-- > 0;) { /* heap sort, O(n log n), in place */
        sift_down(values, i, n);
    }
    for (i = n - 1u; i > 0; i--) {
        const int32_t t = values[0];
        values[0] = values[i];
        values[i] = t;
        sift_down(values, 0, i);
    }
    rank = (uint32_t)(((uint64_t)q_permille * n + 999u) / 1000u); /* nearest rank, 1-based */
    *out = values[rank == 0 ? 0 : rank - 1u];
    return SNAPUQ_OK;
}
