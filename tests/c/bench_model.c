/*
 * bench_model.c - per-operator host timing of the runtime through the profiler hook.
 *
 *   bench_model MODEL.tflite N      prints JSON: per operator index, name, mean ns per invoke
 * (Instruction counts: run it under valgrind --tool=callgrind; kernels are separate functions.)
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "snapuq_runtime.h"

static snapuq_model_t g_model;
static double g_ns[SNAPUQ_MAX_OPS];
static struct timespec g_t0;

static void hook(void *ctx, uint16_t op, int32_t code, int begin)
{
    struct timespec t;
    (void)ctx;
    (void)code;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (begin) {
        g_t0 = t;
    } else {
        g_ns[op] += (double)(t.tv_sec - g_t0.tv_sec) * 1e9 + (double)(t.tv_nsec - g_t0.tv_nsec);
    }
}

int main(int argc, char **argv)
{
    FILE *f;
    long n, len, r;
    unsigned char *buf, *raw;
    size_t need;
    uint16_t i;
    snapuq_tensor_info_t info;
    if (argc != 3 || (f = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: bench_model MODEL N\n");
        return 64;
    }
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc((size_t)len);
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        return 66;
    }
    fclose(f);
    n = strtol(argv[2], NULL, 10);
    if (snapuq_model_init(&g_model, buf, (size_t)len) != SNAPUQ_OK) {
        fprintf(stderr, "error: %s\n", snapuq_model_error(&g_model));
        return 2;
    }
    snapuq_model_arena_size(&g_model, &need);
    raw = (unsigned char *)malloc(need + 16);
    if (snapuq_model_set_arena(&g_model, raw + (16 - (uintptr_t)raw % 16) % 16, need) != SNAPUQ_OK) {
        return 3;
    }
    snapuq_model_input_info(&g_model, 0, &info);
    snapuq_model_set_profiler(&g_model, hook, NULL);
    for (r = 0; r < n; r++) {
        uint32_t k;
        for (k = 0; k < info.bytes; k++) {
            ((int8_t *)info.data)[k] = (int8_t)((k * 31u + (uint32_t)r * 7u) & 0xFF);
        }
        snapuq_model_invoke(&g_model);
    }
    printf("{\"kernels\": \"%s\", \"n\": %ld, \"ops\": [", snapuq_kernels_name(), n);
    for (i = 0; i < snapuq_model_op_count(&g_model); i++) {
        int32_t code;
        snapuq_model_op_code(&g_model, i, &code);
        printf("%s{\"op\": %u, \"name\": \"%s\", \"ns\": %.1f}", i ? ", " : "", (unsigned)i, snapuq_builtin_name(code),
               g_ns[i] / (double)n);
    }
    printf("]}\n");
    free(raw);
    free(buf);
    return 0;
}
