/*
 * run_model.c - host test driver for the snapuq runtime (built by tests/host/test_c_*.py).
 *
 *   run_model MODEL.tflite INPUTS.bin OUTPUTS.bin N    run N inputs, write all outputs
 *   run_model MODEL.tflite                             load only, print the model description
 *
 * INPUTS.bin holds N records, each the concatenation of every model input (model order);
 * OUTPUTS.bin receives N records, each the concatenation of every output (model order).
 * stdout: one JSON object describing the model and the arena; errors: "error: <status>: <msg>".
 * The driver may use stdio and malloc; the core it links never does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapuq_runtime.h"

static snapuq_model_t g_model;

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void print_info(const char *key, const snapuq_tensor_info_t *t, int last)
{
    int d;
    printf("{\"name\": \"%s\", \"%s\": [", t->name, key);
    for (d = 0; d < t->ndim; d++) {
        printf("%s%d", d ? ", " : "", (int)t->dims[d]);
    }
    printf("], \"type\": %d, \"bytes\": %u, \"scale\": %.9g, \"zero_point\": %d}%s", (int)t->type,
           (unsigned)t->bytes, (double)t->scale, (int)t->zero_point, last ? "" : ", ");
}

int main(int argc, char **argv)
{
    size_t len = 0, arena_len = 0, pers = 0, act = 0, naive = 0, in_rec = 0, out_rec = 0;
    unsigned char *model, *raw_arena, *arena;
    snapuq_status_t st;
    uint16_t i, n_in, n_out;
    snapuq_tensor_info_t info;
    long n = 0, r;

    if (argc != 2 && argc != 5) {
        fprintf(stderr, "usage: run_model MODEL [INPUTS OUTPUTS N]\n");
        return 64;
    }
    model = read_file(argv[1], &len);
    if (model == NULL) {
        fprintf(stderr, "error: cannot read %s\n", argv[1]);
        return 66;
    }
    st = snapuq_model_init(&g_model, model, len);
    if (st != SNAPUQ_OK) {
        printf("{\"status\": \"%s\", \"message\": \"%s\"}\n", snapuq_status_str(st), snapuq_model_error(&g_model));
        fprintf(stderr, "error: %s: %s\n", snapuq_status_str(st), snapuq_model_error(&g_model));
        free(model);
        return 2;
    }
    snapuq_model_arena_size(&g_model, &arena_len);
    snapuq_model_arena_breakdown(&g_model, &pers, &act, &naive);
    raw_arena = (unsigned char *)malloc(arena_len + SNAPUQ_ARENA_ALIGN);
    arena = raw_arena + (SNAPUQ_ARENA_ALIGN - ((uintptr_t)raw_arena % SNAPUQ_ARENA_ALIGN)) % SNAPUQ_ARENA_ALIGN;
    st = snapuq_model_set_arena(&g_model, arena, arena_len);
    if (st != SNAPUQ_OK) {
        fprintf(stderr, "error: %s: %s\n", snapuq_status_str(st), snapuq_model_error(&g_model));
        return 3;
    }
    n_in = snapuq_model_input_count(&g_model);
    n_out = snapuq_model_output_count(&g_model);
    printf("{\"status\": \"ok\", \"kernels\": \"%s\", \"arena\": %u, \"persistent\": %u, \"activations\": %u, "
           "\"activations_no_reuse\": %u, \"model_struct\": %u, \"ops\": [",
           snapuq_kernels_name(), (unsigned)arena_len, (unsigned)pers, (unsigned)act, (unsigned)naive,
           (unsigned)sizeof(snapuq_model_t));
    for (i = 0; i < snapuq_model_op_count(&g_model); i++) {
        int32_t code;
        snapuq_model_op_code(&g_model, i, &code);
        printf("%s\"%s\"", i ? ", " : "", snapuq_builtin_name(code));
    }
    printf("], \"inputs\": [");
    for (i = 0; i < n_in; i++) {
        snapuq_model_input_info(&g_model, i, &info);
        in_rec += info.bytes;
        print_info("shape", &info, i + 1 == n_in);
    }
    printf("], \"outputs\": [");
    for (i = 0; i < n_out; i++) {
        snapuq_model_output_info(&g_model, i, &info);
        out_rec += info.bytes;
        print_info("shape", &info, i + 1 == n_out);
    }
    printf("]}\n");
    if (argc == 5) {
        size_t in_len = 0;
        unsigned char *inputs = read_file(argv[2], &in_len);
        FILE *fo = fopen(argv[3], "wb");
        n = strtol(argv[4], NULL, 10);
        if (inputs == NULL || fo == NULL || in_len != (size_t)n * in_rec) {
            fprintf(stderr, "error: inputs file size %u != %ld x %u\n", (unsigned)in_len, n, (unsigned)in_rec);
            return 65;
        }
        for (r = 0; r < n; r++) {
            const unsigned char *p = inputs + (size_t)r * in_rec;
            for (i = 0; i < n_in; i++) {
                snapuq_model_input_info(&g_model, i, &info);
                if (snapuq_model_set_input(&g_model, i, p, info.bytes) != SNAPUQ_OK) {
                    return 4;
                }
                p += info.bytes;
            }
            st = snapuq_model_invoke(&g_model);
            if (st != SNAPUQ_OK) {
                fprintf(stderr, "error: invoke: %s: %s\n", snapuq_status_str(st), snapuq_model_error(&g_model));
                return 5;
            }
            for (i = 0; i < n_out; i++) {
                snapuq_model_output_info(&g_model, i, &info);
                fwrite(info.data, 1, info.bytes, fo);
            }
        }
        fclose(fo);
        free(inputs);
    }
    free(raw_arena);
    free(model);
    return 0;
}
