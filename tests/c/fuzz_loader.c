/*
 * fuzz_loader.c - libFuzzer target for the model loader (and, for models that load, set_arena,
 * invoke and the output queries).
 *
 *   make -C firmware/core fuzz      (sources from firmware/core/core.mk)
 *   ./fuzz_loader -max_total_time=30 CORPUS_DIR
 *
 * Built without -fsanitize=fuzzer and with -DSNAPUQ_FUZZ_MAIN it is a plain program that
 * replays files and runs a deterministic mutation loop (for compilers without libFuzzer):
 *   fuzz_loader_main ITERATIONS SEED_FILE...
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_runtime.h"

#define ARENA_BYTES (128u * 1024u)
#define MAX_WORK 4000000u /* skip invoke for models whose MAC count would slow the fuzzer down */

static snapuq_model_t g_model;
static uint8_t g_arena[ARENA_BYTES] __attribute__((aligned(16)));
static uint8_t g_out[ARENA_BYTES];

/* rough multiply-accumulate count of one invoke (private fields: this is a test) */
static uint64_t work_estimate(const snapuq_model_t *m)
{
    uint64_t w = 0;
    uint16_t i;
    for (i = 0; i < m->n_ops; i++) {
        const snapuq_priv_op_t *o = &m->ops[i];
        const uint64_t out = m->tensors[o->out].bytes;
        const uint64_t in = m->tensors[o->in[0]].bytes;
        uint64_t per = 1;
        if (o->n_in > 1 && o->in[1] >= 0) {
            const snapuq_priv_tensor_t *f = &m->tensors[o->in[1]];
            const snapuq_priv_tensor_t *y = &m->tensors[o->out];
            const uint64_t oc = y->ndim > 0 ? (uint64_t)y->dims[y->ndim - 1] : 1u;
            per = f->bytes / (oc ? oc : 1u) + 1u;
        }
        if (o->builtin == 1 || o->builtin == 17) { /* AVERAGE_POOL_2D, MAX_POOL_2D */
            per += (uint64_t)o->u.pool.win.filter_h * (uint64_t)o->u.pool.win.filter_w;
        }
        w += out * per + in;
    }
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t need = 0;
    uint16_t i;
    snapuq_tensor_info_t info;
    if (snapuq_model_init(&g_model, data, size) != SNAPUQ_OK) {
        /* the message must be a terminated string */
        return (int)(strlen(snapuq_model_error(&g_model)) >= SNAPUQ_ERROR_LEN);
    }
    if (snapuq_model_arena_size(&g_model, &need) != SNAPUQ_OK || need > ARENA_BYTES ||
        work_estimate(&g_model) > MAX_WORK) {
        return 0;
    }
    if (snapuq_model_set_arena(&g_model, g_arena, need) != SNAPUQ_OK) {
        return 0;
    }
    for (i = 0; i < snapuq_model_input_count(&g_model); i++) {
        snapuq_model_input_info(&g_model, i, &info);
        memset(info.data, (int)(i * 37u + size), info.bytes);
    }
    (void)snapuq_model_invoke(&g_model);
    for (i = 0; i < snapuq_model_output_count(&g_model); i++) {
        snapuq_model_output_info(&g_model, i, &info);
        if (info.bytes <= sizeof g_out) {
            (void)snapuq_model_get_output(&g_model, i, g_out, info.bytes);
        }
        {
            uint16_t found = 0;
            if (snapuq_model_find_output(&g_model, info.name, &found) != SNAPUQ_OK || found > i) {
                return 1; /* a listed output must be found under its own name, at or before i */
            }
        }
    }
    return 0;
}

#ifdef SNAPUQ_FUZZ_MAIN
#include <stdio.h>
#include <stdlib.h>

static uint32_t g_rng = 0x12345678u;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return g_rng;
}

int main(int argc, char **argv)
{
    long iters, it;
    int f;
    static uint8_t buf[1 << 20];
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_loader_main ITERATIONS SEED_FILE...\n");
        return 64;
    }
    iters = strtol(argv[1], NULL, 10);
    for (f = 2; f < argc; f++) {
        FILE *fp = fopen(argv[f], "rb");
        size_t n, len;
        static uint8_t seed[1 << 20];
        if (fp == NULL) {
            return 66;
        }
        len = fread(seed, 1, sizeof seed, fp);
        fclose(fp);
        LLVMFuzzerTestOneInput(seed, len);
        for (it = 0; it < iters; it++) {
            uint32_t k, nmut = 1u + rnd() % 8u;
            n = len;
            memcpy(buf, seed, len);
            for (k = 0; k < nmut; k++) {
                const uint32_t pos = n ? rnd() % (uint32_t)n : 0u;
                switch (rnd() % 5u) {
                case 0: buf[pos] ^= (uint8_t)(1u << (rnd() % 8u)); break;
                case 1: buf[pos] = (uint8_t)rnd(); break;
                case 2: n = pos; break;                                 /* truncate */
                case 3: if (pos + 4u <= n) { uint32_t v = rnd() % 64u; memcpy(buf + pos, &v, 4); } break;
                default: if (pos + 4u <= n) { uint32_t v = 0xFFFFFFFFu - rnd() % 16u; memcpy(buf + pos, &v, 4); } break;
                }
            }
            LLVMFuzzerTestOneInput(buf, n);
        }
    }
    printf("ok %ld mutations per seed, %d seeds\n", iters, argc - 2);
    return 0;
}
#endif
