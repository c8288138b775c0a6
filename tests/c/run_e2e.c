/*
 * run_e2e.c - runtime + SNAP core on a generated snapuq_model.{c,h} (compiled together with it).
 *
 *   run_e2e INPUTS.bin N OUT.bin
 * INPUTS.bin: N int8 input records; OUT.bin: per record int32: pred, U16, S16, F16, m16, Z16, flag,
 * P16, A16, ebar16[n_taps], s16[n_taps]. stdout: JSON with the arena size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "snapuq_input.h"
#include "snapuq_model.h"
#include "snapuq_runtime.h"
#include "snapuq_snap.h"

static snapuq_model_t g_model;
static uint8_t g_arena[1 << 20] __attribute__((aligned(16)));

int main(int argc, char **argv)
{
    snapuq_status_t st;
    snapuq_snap_params_t params;
    snapuq_tensor_info_t info;
    size_t need = 0;
    long n, r;
    FILE *fi, *fo;
    int8_t *buf;
    if (argc != 4) {
        fprintf(stderr, "usage: run_e2e INPUTS N OUT\n");
        return 64;
    }
    st = snapuq_model_init(&g_model, snapuq_model_tflite, snapuq_model_tflite_len);
    if (st == SNAPUQ_OK) {
        st = snapuq_model_arena_size(&g_model, &need);
    }
    if (st == SNAPUQ_OK) {
        st = snapuq_model_set_arena(&g_model, g_arena, sizeof g_arena);
    }
    if (st != SNAPUQ_OK || snapuq_snap_check(&snapuq_model_snap_config, NULL, 0) != SNAPUQ_OK ||
        snapuq_snap_params_init(&snapuq_model_snap_config, &params) != SNAPUQ_OK) {
        fprintf(stderr, "error: %s: %s\n", snapuq_status_str(st), snapuq_model_error(&g_model));
        return 2;
    }
    snapuq_model_input_info(&g_model, 0, &info);
    printf("{\"arena\": %u, \"input_bytes\": %u, \"name\": \"%s\"}\n", (unsigned)need, (unsigned)info.bytes,
           SNAPUQ_MODEL_NAME);
    n = strtol(argv[2], NULL, 10);
    fi = fopen(argv[1], "rb");
    fo = fopen(argv[3], "wb");
    buf = (int8_t *)malloc(info.bytes);
    if (fi == NULL || fo == NULL || buf == NULL) {
        return 66;
    }
    for (r = 0; r < n; r++) {
        snapuq_snap_result_t res;
        int32_t s_in16;
        int32_t row[9 + 2 * SNAPUQ_MAX_TAPS];
        int m = 0, k;
        if (fread(buf, 1, info.bytes, fi) != info.bytes) {
            return 65;
        }
        /* the core's input path: the codes into the input, the input tap before the inference */
        if (snapuq_input_from_int8(&g_model, buf, info.bytes, &snapuq_model_snap_config, &s_in16) != SNAPUQ_OK) {
            return 5;
        }
        if (snapuq_model_invoke(&g_model) != SNAPUQ_OK) {
            return 3;
        }
        st = snapuq_snap_score_model(&snapuq_model_snap_config, &params, &g_model, s_in16, &res);
        if (st != SNAPUQ_OK) {
            fprintf(stderr, "error: score: %s\n", snapuq_status_str(st));
            return 4;
        }
        row[m++] = res.pred;
        row[m++] = res.U16;
        row[m++] = res.S16;
        row[m++] = res.F16;
        row[m++] = res.m16;
        row[m++] = res.Z16;
        row[m++] = res.flag;
        row[m++] = res.P16;
        row[m++] = res.A16;
        for (k = 0; k < res.n_taps; k++) {
            row[m++] = res.ebar16[k];
        }
        for (k = 0; k < res.n_taps; k++) {
            row[m++] = res.s16[k];
        }
        fwrite(row, sizeof(int32_t), (size_t)m, fo);
    }
    fclose(fo);
    fclose(fi);
    free(buf);
    return 0;
}
