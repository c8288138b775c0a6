/*
 * kernels/dsp/fully_connected.c - FULLY_CONNECTED for cores with the Armv7E-M DSP extension: 4
 * output rows per pass over one widened input word (offset folded in by SXTAB16), 2-row and 1-row
 * tails; the same-named kernels/ref/fully_connected.c is the reference.
 */
#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP


snapuq_status_t snapuq_fc_dsp(const snapuq_fc_args_t *a)
{
    const int32_t D = a->filter_dims.c, D4 = D & ~3;
    const uint32_t off2 = snapuq_dup16(a->fc.in_offset);
    const int fast = snapuq_dsp_requant_fast_ok(a->quant.mult, a->quant.shift, a->quant.step != 0 ? a->out_dims.c : 1);
    int32_t acc[CONV_CHUNK];
    int32_t b, oc, d;
    for (b = 0; b < a->in_dims.n; b++) {
        const int8_t *in = a->in + (size_t)b * D;
        int8_t *out = a->out + (size_t)b * a->out_dims.c;
        for (oc = 0; oc + 4 <= a->out_dims.c; oc += 4) {
            const int8_t *f0 = a->filter + (size_t)oc * D;
            const int8_t *f1 = f0 + D, *f2 = f1 + D, *f3 = f2 + D;
            const int8_t *x = in;
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            if (a->bias != NULL) {
                a0 = a->bias[oc];
                a1 = a->bias[oc + 1];
                a2 = a->bias[oc + 2];
                a3 = a->bias[oc + 3];
            }
            for (d = 0; d < D4; d += 4) {
                const uint32_t xv = snapuq_ld4(x + d);
                const uint32_t xe = snapuq_sxtab16(off2, xv), xo = snapuq_sxtab16_ror8(off2, xv);
                uint32_t w = snapuq_ld4(f0 + d);
                a0 = snapuq_smlad(snapuq_sxtb16(w), xe, a0);
                a0 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a0);
                w = snapuq_ld4(f1 + d);
                a1 = snapuq_smlad(snapuq_sxtb16(w), xe, a1);
                a1 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a1);
                w = snapuq_ld4(f2 + d);
                a2 = snapuq_smlad(snapuq_sxtb16(w), xe, a2);
                a2 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a2);
                w = snapuq_ld4(f3 + d);
                a3 = snapuq_smlad(snapuq_sxtb16(w), xe, a3);
                a3 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a3);
            }
            for (; d < D; d++) {
                const int32_t xv = (int32_t)in[d] + a->fc.in_offset;
                a0 = snapuq_add_wrap(a0, f0[d] * xv);
                a1 = snapuq_add_wrap(a1, f1[d] * xv);
                a2 = snapuq_add_wrap(a2, f2[d] * xv);
                a3 = snapuq_add_wrap(a3, f3[d] * xv);
            }
            acc[oc % CONV_CHUNK] = a0;
            acc[oc % CONV_CHUNK + 1] = a1;
            acc[oc % CONV_CHUNK + 2] = a2;
            acc[oc % CONV_CHUNK + 3] = a3;
            if (oc % CONV_CHUNK == CONV_CHUNK - 4) {
                snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->fc.out_offset, a->fc.activation.min, a->fc.activation.max,
                                       fast, acc, out, oc - (CONV_CHUNK - 4), CONV_CHUNK);
            }
        }
        if (oc + 2 <= a->out_dims.c) {
            const int8_t *f0 = a->filter + (size_t)oc * D, *f1 = f0 + D;
            int32_t a0 = 0, a1 = 0;
            if (a->bias != NULL) {
                a0 = a->bias[oc];
                a1 = a->bias[oc + 1];
            }
            for (d = 0; d < D4; d += 4) {
                const uint32_t xv = snapuq_ld4(in + d);
                const uint32_t xe = snapuq_sxtab16(off2, xv), xo = snapuq_sxtab16_ror8(off2, xv);
                uint32_t w = snapuq_ld4(f0 + d);
                a0 = snapuq_smlad(snapuq_sxtb16(w), xe, a0);
                a0 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a0);
                w = snapuq_ld4(f1 + d);
                a1 = snapuq_smlad(snapuq_sxtb16(w), xe, a1);
                a1 = snapuq_smlad(snapuq_sxtb16_ror8(w), xo, a1);
            }
            for (; d < D; d++) {
                const int32_t xv = (int32_t)in[d] + a->fc.in_offset;
                a0 = snapuq_add_wrap(a0, f0[d] * xv);
                a1 = snapuq_add_wrap(a1, f1[d] * xv);
            }
            acc[oc % CONV_CHUNK] = a0;
            acc[oc % CONV_CHUNK + 1] = a1;
            oc += 2;
        }
        for (; oc < a->out_dims.c; oc++) {
            const int8_t *f = a->filter + (size_t)oc * D;
            int32_t s = a->bias != NULL ? a->bias[oc] : 0;
            for (d = 0; d < D4; d += 4) {
                const uint32_t xv = snapuq_ld4(in + d), w = snapuq_ld4(f + d);
                s = snapuq_smlad(snapuq_sxtb16(w), snapuq_sxtab16(off2, xv), s);
                s = snapuq_smlad(snapuq_sxtb16_ror8(w), snapuq_sxtab16_ror8(off2, xv), s);
            }
            for (; d < D; d++) {
                s = snapuq_add_wrap(s, f[d] * ((int32_t)in[d] + a->fc.in_offset));
            }
            acc[oc % CONV_CHUNK] = s;
        }
        if (oc % CONV_CHUNK != 0) {
            const int32_t oc0 = (oc - 1) - (oc - 1) % CONV_CHUNK;
            snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->fc.out_offset, a->fc.activation.min, a->fc.activation.max,
                                   fast, acc, out, oc0, oc - oc0);
        }
    }
    return SNAPUQ_OK;
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_fc_dsp_unused_t;
#endif
