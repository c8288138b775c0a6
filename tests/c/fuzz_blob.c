/*
 * fuzz_blob.c - libFuzzer target for the model blob reader (firmware/core/snapuq_blob.c): any byte
 * string either opens or returns an error status; a blob that opens has its tables queried, its
 * .tflite loaded and, when that loads, its SNAP section checked against the model.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I firmware/core <core sources> \
 *         tests/c/fuzz_blob.c -o fuzz_blob
 *   ./fuzz_blob -max_len=262144 CORPUS_DIR     (seeds: `snapuq micropython blob models/digits`)
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_blob.h"
#include "snapuq_runtime.h"
#include "snapuq_snap.h"

#define BLOB_MAX (512u * 1024u)
#define ARENA_BYTES (256u * 1024u)

static uint8_t g_blob[BLOB_MAX] __attribute__((aligned(16)));
static uint8_t g_arena[ARENA_BYTES] __attribute__((aligned(16)));
static snapuq_model_t g_model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    snapuq_blob_t b;
    snapuq_snap_config_t cfg;
    const char *why = NULL;
    const char *name = NULL;
    uint16_t i, idx;
    size_t need = 0;
    if (size > BLOB_MAX) {
        return 0;
    }
    memcpy(g_blob, data, size); /* the reader wants a 4-byte aligned blob */
    if (snapuq_blob_open(&b, g_blob, size, &why) != SNAPUQ_OK) {
        return 0;
    }
    for (i = 0; i < b.n_outputs + 1u; i++) {
        (void)snapuq_blob_output(&b, i, &name, &idx);
    }
    for (i = 0; i < b.n_taps + 1u; i++) {
        (void)snapuq_blob_tap_name(&b, i, &name);
    }
    for (i = 0; i < b.n_class_names + 1u; i++) {
        (void)snapuq_blob_class_name(&b, i, &name);
    }
    (void)snapuq_blob_snap_config(&b, &g_model, &cfg, &why); /* model not loaded: must refuse */
    if (snapuq_model_init(&g_model, b.tflite, b.tflite_len) != SNAPUQ_OK) {
        return 0;
    }
    if (snapuq_model_arena_size(&g_model, &need) != SNAPUQ_OK || need > ARENA_BYTES ||
        snapuq_model_set_arena(&g_model, g_arena, need) != SNAPUQ_OK) {
        return 0;
    }
    (void)snapuq_blob_snap_config(&b, &g_model, &cfg, &why);
    return 0;
}
