/*
 * kernels/dsp/fully_connected.c - FULLY_CONNECTED for cores with the Armv7E-M DSP extension. With 4
 * or more output units, each input row is widened once into the arena scratch (offset added, SMLAD
 * lane order: snapuq_fc_dsp_scratch_size() bytes), then 4 output rows run per pass over those words
 * (21 instructions per 16 MACs: one LDRD of the input, per row one weight word and 2 SXTB16 + 2 SMLAD;
 * rows 2 and 3 read by register offset from rows 0 and 1; 4 such groups per loop pass); 2-row and
 * 1-row tails. Fewer than 4 units
 * widen on the fly (offset folded in by SXTAB16), with no scratch. The same-named
 * kernels/ref/fully_connected.c is the reference.
 */
#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP

uint32_t snapuq_fc_dsp_scratch_size(const snapuq_dims_t *filter_dims)
{
    return filter_dims->n >= 4 ? 2u * (uint32_t)(filter_dims->c & ~3) : 0u;
}

/* acc[0..3] = bias[0..3] (0 without a bias) + rows r0 = f0, r1 = f1, r2 = f0 + D2, r3 = f1 + D2
 * (unaligned, 4 n4 bytes each) . the widened input xw (2 words per 4 elements: (x0, x2), (x1, x3),
 * offset added) */
static inline void rows4(const int8_t *f0, const int8_t *f1, int32_t D2, const uint32_t *xw, int32_t n4,
                         const int32_t *bias, int32_t *acc)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    if (bias != NULL) {
        a0 = bias[0];
        a1 = bias[1];
        a2 = bias[2];
        a3 = bias[3];
    }
#if SNAPUQ_DSP_ASM
    /* one group of 4 elements: loads in pairs (a load after a load pipelines), rows 2, 3 by register
     * offset before rows 0, 1 advance their pointers */
#define FC_GROUP                                                                                             \
    "ldrd %[xe], %[xo], [%[xw]], #8\n\t"                                                                     \
    "ldr %[wa], [%[f0], %[d2]]\n\t"                                                                          \
    "ldr %[wb], [%[f1], %[d2]]\n\t"                                                                          \
    "sxtb16 %[t], %[wa]\n\t"                                                                                 \
    "sxtb16 %[wa], %[wa], ror #8\n\t"                                                                        \
    "smlad %[a2], %[t], %[xe], %[a2]\n\t"                                                                    \
    "smlad %[a2], %[wa], %[xo], %[a2]\n\t"                                                                   \
    "sxtb16 %[t], %[wb]\n\t"                                                                                 \
    "sxtb16 %[wb], %[wb], ror #8\n\t"                                                                        \
    "smlad %[a3], %[t], %[xe], %[a3]\n\t"                                                                    \
    "smlad %[a3], %[wb], %[xo], %[a3]\n\t"                                                                   \
    "ldr %[wa], [%[f0]], #4\n\t"                                                                             \
    "ldr %[wb], [%[f1]], #4\n\t"                                                                             \
    "sxtb16 %[t], %[wa]\n\t"                                                                                 \
    "sxtb16 %[wa], %[wa], ror #8\n\t"                                                                        \
    "smlad %[a0], %[t], %[xe], %[a0]\n\t"                                                                    \
    "smlad %[a0], %[wa], %[xo], %[a0]\n\t"                                                                   \
    "sxtb16 %[t], %[wb]\n\t"                                                                                 \
    "sxtb16 %[wb], %[wb], ror #8\n\t"                                                                        \
    "smlad %[a1], %[t], %[xe], %[a1]\n\t"                                                                    \
    "smlad %[a1], %[wb], %[xo], %[a1]\n\t"
    const uint32_t *const xend = xw + 2 * n4;
    uint32_t xe, xo, wa, wb, t;
    if (n4 & 1) {
        __asm__ volatile(FC_GROUP
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [f0] "+r"(f0),
                           [f1] "+r"(f1), [xw] "+r"(xw), [xe] "=&r"(xe), [xo] "=&r"(xo), [wa] "=&r"(wa),
                           [wb] "=&r"(wb), [t] "=&r"(t)
                         : [d2] "r"(D2)
                         : "memory");
    }
    if (n4 & 2) {
        __asm__ volatile(FC_GROUP FC_GROUP
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [f0] "+r"(f0),
                           [f1] "+r"(f1), [xw] "+r"(xw), [xe] "=&r"(xe), [xo] "=&r"(xo), [wa] "=&r"(wa),
                           [wb] "=&r"(wb), [t] "=&r"(t)
                         : [d2] "r"(D2)
                         : "memory");
    }
    if (n4 >= 4) {
        /* four groups per pass; the end is read from the stack (every register holds a value) */
        __asm__ volatile("1:\n\t" FC_GROUP FC_GROUP FC_GROUP FC_GROUP "ldr %[t], %[xend]\n\t"
                         "cmp %[xw], %[t]\n\t"
                         "bne 1b\n\t"
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [f0] "+r"(f0),
                           [f1] "+r"(f1), [xw] "+r"(xw), [xe] "=&r"(xe), [xo] "=&r"(xo), [wa] "=&r"(wa),
                           [wb] "=&r"(wb), [t] "=&r"(t)
                         : [d2] "r"(D2), [xend] "m"(xend)
                         : "cc", "memory");
    }
#undef FC_GROUP
#else
    int32_t i;
    for (i = 0; i < 4 * n4; i += 4) {
        const uint32_t xe = xw[0], xo = xw[1];
        const uint32_t w0 = snapuq_ld4(f0 + i), w1 = snapuq_ld4(f1 + i);
        const uint32_t w2 = snapuq_ld4(f0 + D2 + i), w3 = snapuq_ld4(f1 + D2 + i);
        a0 = snapuq_smlad(snapuq_sxtb16_ror8(w0), xo, snapuq_smlad(snapuq_sxtb16(w0), xe, a0));
        a1 = snapuq_smlad(snapuq_sxtb16_ror8(w1), xo, snapuq_smlad(snapuq_sxtb16(w1), xe, a1));
        a2 = snapuq_smlad(snapuq_sxtb16_ror8(w2), xo, snapuq_smlad(snapuq_sxtb16(w2), xe, a2));
        a3 = snapuq_smlad(snapuq_sxtb16_ror8(w3), xo, snapuq_smlad(snapuq_sxtb16(w3), xe, a3));
        xw += 2;
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* bias[oc] + (filter row oc . (in + in_offset)) over the elements D4 .. D - 1 not in 4-groups */
static inline int32_t row_tail(const snapuq_fc_args_t *a, const int8_t *in, int32_t oc, int32_t D4, int32_t s)
{
    const int8_t *f = a->filter + (size_t)oc * a->filter_dims.c;
    int32_t d;
    for (d = D4; d < a->filter_dims.c; d++) {
        s = snapuq_add_wrap(s, f[d] * ((int32_t)in[d] + a->fc.in_offset));
    }
    return s;
}

/* one output row over 4-groups, the input widened on the fly (offset folded in by SXTAB16) */
static inline int32_t row_fly(const int8_t *f, const int8_t *in, int32_t D4, uint32_t off2, int32_t s)
{
    int32_t d;
    for (d = 0; d < D4; d += 4) {
        const uint32_t xv = snapuq_ld4(in + d), w = snapuq_ld4(f + d);
        s = snapuq_smlad(snapuq_sxtb16(w), snapuq_sxtab16(off2, xv), s);
        s = snapuq_smlad(snapuq_sxtb16_ror8(w), snapuq_sxtab16_ror8(off2, xv), s);
    }
    return s;
}

/* one output row over 4-groups of the widened input */
static inline int32_t row_wide(const int8_t *f, const uint32_t *xw, int32_t D4, int32_t s)
{
    int32_t d;
    for (d = 0; d < D4; d += 4) {
        const uint32_t w = snapuq_ld4(f + d);
        s = snapuq_smlad(snapuq_sxtb16(w), xw[0], s);
        s = snapuq_smlad(snapuq_sxtb16_ror8(w), xw[1], s);
        xw += 2;
    }
    return s;
}

snapuq_status_t snapuq_fc_dsp(const snapuq_fc_args_t *a)
{
    const int32_t D = a->filter_dims.c, D4 = D & ~3, OC = a->out_dims.c;
    const uint32_t off2 = snapuq_dup16(a->fc.in_offset);
    const uint32_t need = snapuq_fc_dsp_scratch_size(&a->filter_dims);
    uint32_t *const xw = (uint32_t *)a->ctx.buf;
    const int fast = snapuq_dsp_requant_fast_ok(a->quant.mult, a->quant.shift, a->quant.step != 0 ? OC : 1);
    int32_t acc[CONV_CHUNK];
    int32_t b, oc, d;
    if (need > 0 && (xw == NULL || a->ctx.size < need || ((uintptr_t)xw & 3u) != 0)) {
        return SNAPUQ_ERR_ARENA;
    }
    for (b = 0; b < a->in_dims.n; b++) {
        const int8_t *in = a->in + (size_t)b * D;
        int8_t *out = a->out + (size_t)b * OC;
        int32_t oc0;
        if (need > 0) {
            for (d = 0; d < D4; d += 4) {
                const uint32_t xv = snapuq_ld4(in + d);
                xw[d >> 1] = snapuq_sxtab16(off2, xv);
                xw[(d >> 1) + 1] = snapuq_sxtab16_ror8(off2, xv);
            }
        }
        for (oc0 = 0; oc0 < OC; oc0 += CONV_CHUNK) {
            const int32_t n = OC - oc0 < CONV_CHUNK ? OC - oc0 : CONV_CHUNK;
            int32_t j = 0;
            if (need > 0) {
                for (; j + 4 <= n; j += 4) { /* rows oc0 + j .. oc0 + j + 3 */
                    const int8_t *f0 = a->filter + (size_t)(oc0 + j) * D;
                    rows4(f0, f0 + D, 2 * D, xw, D4 >> 2, a->bias != NULL ? a->bias + oc0 + j : NULL, acc + j);
                }
            }
            for (oc = j; oc < n; oc++) {
                const int8_t *f = a->filter + (size_t)(oc0 + oc) * D;
                const int32_t s = a->bias != NULL ? a->bias[oc0 + oc] : 0;
                acc[oc] = need > 0 ? row_wide(f, xw, D4, s) : row_fly(f, in, D4, off2, s);
            }
            if (D4 < D) {
                for (oc = 0; oc < n; oc++) {
                    acc[oc] = row_tail(a, in, oc0 + oc, D4, acc[oc]);
                }
            }
            snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->fc.out_offset,
                                   a->fc.activation.min, a->fc.activation.max, fast, acc, out, oc0, n);
        }
    }
    return SNAPUQ_OK;
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_fc_dsp_unused_t;
#endif
