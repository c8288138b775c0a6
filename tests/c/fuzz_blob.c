/*
 * fuzz_blob.c - libFuzzer target for the model blob reader (firmware/core/snapuq_blob.c): any byte
 * string either opens or returns an error status; a blob that opens has its tables queried, its
 * .tflite loaded and, when that loads, its SNAP section checked against the model; a section the
 * reader accepts is scored (score_or_trap: no error status, no undefined arithmetic).
 *
 * The blob carries a CRC-32 of everything after its header, so a plain byte mutation is refused at
 * the CRC check and never reaches the SNAP-section or model checks. LLVMFuzzerCustomMutator below
 * therefore mutates one region at a time (the SNAP section, which may grow or shrink, with the header's
 * length following it; the .tflite in place; or the whole blob) and then writes the CRC that makes the
 * blob consistent again, except for one mutation in eight (so the CRC check itself stays fuzzed).
 * Build with -DFUZZ_BLOB_NO_CRC_FIX for the plain libFuzzer mutator.
 *
 *   echo fun:snapuq_crc32 > ignore.txt   # optional: no comparison hooks in the CRC loop (3x faster)
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fsanitize-coverage-ignorelist=ignore.txt \
 *         -I firmware/core -I firmware/core/ops <core sources> tests/c/fuzz_blob.c -o fuzz_blob
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
static snapuq_model_t g_unloaded;
/* the .tflite the current g_model was loaded from (bytes and place in g_blob) */
static uint8_t g_loaded[BLOB_MAX];
static size_t g_loaded_off = (size_t)-1;
static size_t g_loaded_len;
static int g_loaded_ok;

/* snapuq_model_init + arena on the blob's .tflite. The same bytes at the same place give the same
 * model, so a mutation that changed only the SNAP section reuses the previous execution's model:
 * loading dominates an execution, and half the mutations touch only the section. */
static int load_model(const snapuq_blob_t *b)
{
    size_t need = 0;
    const size_t off = (size_t)(b->tflite - g_blob);
    if (off == g_loaded_off && b->tflite_len == g_loaded_len && memcmp(g_loaded, b->tflite, b->tflite_len) == 0) {
        return g_loaded_ok;
    }
    g_loaded_off = off;
    g_loaded_len = b->tflite_len;
    memcpy(g_loaded, b->tflite, b->tflite_len);
    g_loaded_ok = snapuq_model_init(&g_model, b->tflite, b->tflite_len) == SNAPUQ_OK &&
                  snapuq_model_arena_size(&g_model, &need) == SNAPUQ_OK && need <= ARENA_BYTES &&
                  snapuq_model_set_arena(&g_model, g_arena, need) == SNAPUQ_OK;
    return g_loaded_ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A config the reader accepts scores every inference (the reader refuses at load what the score would
 * refuse later): with its defaults, on outputs at both rails and on bytes of the input, without an error
 * status and (under UBSan) without undefined arithmetic; anything else is a crash for the fuzzer. */
static int8_t g_codes[65536 + 64];
static void score_or_trap(const snapuq_snap_config_t *cfg, const uint8_t *data, size_t size)
{
    snapuq_snap_params_t params;
    snapuq_snap_inputs_t in;
    snapuq_snap_result_t res;
    unsigned pass, l;
    size_t i;
    if (snapuq_snap_params_init(cfg, &params) != SNAPUQ_OK) {
        __builtin_trap();
    }
    for (pass = 0; pass < 3u; pass++) {
        for (i = 0; i < sizeof g_codes; i++) {
            g_codes[i] = (int8_t)(pass == 0u ? -128 : pass == 1u ? 127 : (int)data[i % size] - 128);
        }
        memset(&in, 0, sizeof in);
        in.logits = g_codes;
        in.probs = g_codes + 1;
        for (l = 0; l < cfg->n_taps; l++) {
            in.a[l] = g_codes + l;
            in.mu[l] = g_codes + 2u * l + 3u;
            in.logvar[l] = g_codes + 3u * l + 5u;
        }
        if (cfg->has_intap && (size_t)cfg->intap.rows * cfg->intap.cols <= sizeof g_codes - 64u &&
            snapuq_snap_input_tap(cfg, g_codes + 64, (size_t)cfg->intap.rows * cfg->intap.cols, &in.s_in16) !=
                SNAPUQ_OK) {
            __builtin_trap();
        }
        if (snapuq_snap_score(cfg, &params, &in, &res) != SNAPUQ_OK) {
            __builtin_trap();
        }
    }
}

#ifndef FUZZ_BLOB_NO_CRC_FIX
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    const unsigned mode = seed % 8u; /* 0-3 SNAP section, 4-5 .tflite, 6 whole + CRC, 7 whole as is */
    int framed = 0;
    uint32_t toff = 0, tlen = 0, soff = 0, slen = 0;
    if (size >= SNAPUQ_BLOB_HEADER && max_size >= SNAPUQ_BLOB_HEADER) {
        toff = rd32(data + 8);
        tlen = rd32(data + 12);
        soff = rd32(data + 16);
        slen = rd32(data + 20);
        framed = (uint64_t)soff + slen == size && (uint64_t)toff + tlen <= soff && toff >= SNAPUQ_BLOB_HEADER;
    }
    if (framed && mode < 4u && soff < max_size) {
        const size_t n = LLVMFuzzerMutate(data + soff, slen, max_size - soff);
        wr32(data + 20, (uint32_t)n);
        size = soff + n;
    } else if (framed && mode < 6u && tlen > 0u) {
        (void)LLVMFuzzerMutate(data + toff, tlen, tlen); /* same length: the offsets stay right */
    } else {
        size = LLVMFuzzerMutate(data, size, max_size);
    }
    if (mode != 7u && size >= SNAPUQ_BLOB_HEADER) {
        wr32(data + 24, snapuq_crc32(data + SNAPUQ_BLOB_HEADER, size - SNAPUQ_BLOB_HEADER));
    }
    return size;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    snapuq_blob_t b;
    snapuq_snap_config_t cfg;
    char why[SNAPUQ_ERROR_LEN];
    const char *name = NULL;
    uint16_t i, idx;
    if (size > BLOB_MAX) {
        return 0;
    }
    memcpy(g_blob, data, size); /* the reader wants a 4-byte aligned blob */
    if (snapuq_blob_open(&b, g_blob, size, why, sizeof why) != SNAPUQ_OK) {
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
    for (i = 0; i < b.in_channels + 1u; i++) { /* the input-normalization record (section v3) */
        double sc, of;
        (void)snapuq_blob_input_normalization(&b, i, &sc, &of);
        (void)snapuq_blob_normalize_input(&b, (uint32_t)i * 7u, 1.5f);
    }
    memset(&g_unloaded, 0, sizeof g_unloaded);
    (void)snapuq_blob_snap_config(&b, &g_unloaded, &cfg, NULL, 0); /* model not loaded: must refuse */
    if (!load_model(&b)) {
        return 0;
    }
    if (snapuq_blob_snap_config(&b, &g_model, &cfg, why, sizeof why) == SNAPUQ_OK) {
        score_or_trap(&cfg, data, size);
    }
    return 0;
}
