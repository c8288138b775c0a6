/*
 * run_quantize.c - the generated snapuq_model_quantize_input on N raw inputs (compiled with a
 * generated snapuq_model.{c,h}).
 *
 *   run_quantize RAW.bin N CODES.bin
 * RAW.bin: N x SNAPUQ_MODEL_INPUT_BYTES float32 (little-endian host order); CODES.bin: N x
 * SNAPUQ_MODEL_INPUT_BYTES int8.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "snapuq_model.h"

int main(int argc, char **argv)
{
    static float raw[SNAPUQ_MODEL_INPUT_BYTES];
    static int8_t codes[SNAPUQ_MODEL_INPUT_BYTES];
    long n, r;
    FILE *fi, *fo;
    if (argc != 4) {
        fprintf(stderr, "usage: run_quantize RAW N CODES\n");
        return 64;
    }
    n = strtol(argv[2], NULL, 10);
    fi = fopen(argv[1], "rb");
    fo = fopen(argv[3], "wb");
    if (fi == NULL || fo == NULL || n < 1) {
        fprintf(stderr, "run_quantize: cannot open the files\n");
        return 66;
    }
    for (r = 0; r < n; r++) {
        if (fread(raw, sizeof raw[0], SNAPUQ_MODEL_INPUT_BYTES, fi) != SNAPUQ_MODEL_INPUT_BYTES) {
            fprintf(stderr, "run_quantize: short input file\n");
            return 65;
        }
        snapuq_model_quantize_input(raw, codes);
        if (fwrite(codes, 1, sizeof codes, fo) != sizeof codes) {
            return 74;
        }
    }
    fclose(fi);
    fclose(fo);
    return 0;
}
