/*
 * kernels/dsp/conv.c - CONV_2D for cores with the Armv7E-M DSP extension (Cortex-M4/M7/M33); the
 * same-named kernels/ref/conv.c is the reference. Built only with -DSNAPUQ_KERNELS_DSP=1; results
 * are identical to the reference (same exact int32 sums, same requantization).
 *
 *  - the input offset is folded into the widening: SXTAB16 (and its ROR #8 form) adds the offset
 *    to two int8 lanes in the same instruction that sign-extends them, so x + offset costs
 *    nothing over a plain SXTB16;
 *  - in_c % 4 == 0, a 1x1 filter or a patch of at most SNAPUQ_CONV_GEMM_MAX bytes widened: a GEMM of
 *    output-pixel pairs x output channels. Each pair's patches are widened once, offset added, into
 *    arena scratch (4 k_h k_w in_c bytes: CMSIS-NN's im2col size; a 1x1 filter without padding reads
 *    its input pixels directly, a padding tap is 0), then every output-channel pair runs over those
 *    words: per 4 input elements four input words, two filter words widened, 8 SMLAD for 16 MACs
 *    (the channel-pair loop inside the assembly);
 *  - in_c % 4 == 0 otherwise (a larger patch, or SNAPUQ_CONV_GEMM_MAX 0: the Small-MCU builds, whose
 *    RAM cannot spare the scratch): the direct path, no scratch: 2 output pixels x 2 output channels
 *    per pass (every widened input word is used by two channels, every widened filter word by two
 *    pixels: 8 SMLAD per 6 loads/widenings for 16 MACs), never a padding tap: for each output
 *    pixel only the valid kernel rows and the valid run of kernel columns are visited;
 *  - a patch path for every in_c % 4 != 0 (first layers: in_c = 1 or 3), any kernel size: the
 *    pixel's patch is gathered once, offset added, into an int16 buffer in SMLAD lane order, zeros
 *    at padding taps, then every output channel is a straight SMLAD dot product over the filter
 *    row. The buffer is arena scratch (a->ctx), sized by snapuq_conv_dsp_scratch_size() and
 *    planned with the arena: no stack buffer, no size limit, no scalar fallback.
 *
 * On a host (no __ARM_FEATURE_DSP) snapuq_simd.h is portable C with the instructions' exact
 * semantics, so the same code and the same tests run everywhere.
 */
#include <string.h>

#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP

/* where one block's valid taps lie: `rows` runs of n bytes (n % 4 == 0, n > 0, rows > 0); after a
 * run the input pointers advance by xskip and the filter pointers by fskip (row stride minus n) */
typedef struct {
    int32_t rows, n;
    ptrdiff_t xskip, fskip;
} runs_t;

/* 2 pixels (xa, xb) x 2 channels (f0, f1) */
static inline void dot_2x2(const int8_t *xa, const int8_t *xb, const int8_t *f0, const int8_t *f1, const runs_t *g,
                           uint32_t off2, int32_t *acc)
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
#if SNAPUQ_DSP_ASM
    /* 14 live registers in the inner loop: the offset and the loop end are reloaded from the
     * stack (24 instructions per 16 MACs); the kernel-row loop is in the same block */
    uint32_t t0, t1, t2, t3, t4, t5;
    const uint32_t koff = off2;
    const int32_t kn = g->n;
    const ptrdiff_t kxs = g->xskip, kfs = g->fskip;
    int32_t krows = g->rows;
    const int8_t *kend;
    __asm__ volatile(
        "0:\n\t"
        "ldr %[t4], %[kn]\n\t"
        "add %[t4], %[f0], %[t4]\n\t"
        "str %[t4], %[kend]\n\t"
        "1:\n\t"
        "ldr %[t4], %[koff]\n\t"
        "ldr %[t5], [%[xa]], #4\n\t"
        "sxtab16 %[t0], %[t4], %[t5]\n\t"
        "sxtab16 %[t1], %[t4], %[t5], ror #8\n\t"
        "ldr %[t5], [%[xb]], #4\n\t"
        "sxtab16 %[t2], %[t4], %[t5]\n\t"
        "sxtab16 %[t3], %[t4], %[t5], ror #8\n\t"
        "ldr %[t5], [%[f0]], #4\n\t"
        "sxtb16 %[t4], %[t5]\n\t"
        "sxtb16 %[t5], %[t5], ror #8\n\t"
        "smlad %[a00], %[t4], %[t0], %[a00]\n\t"
        "smlad %[a00], %[t5], %[t1], %[a00]\n\t"
        "smlad %[a10], %[t4], %[t2], %[a10]\n\t"
        "smlad %[a10], %[t5], %[t3], %[a10]\n\t"
        "ldr %[t5], [%[f1]], #4\n\t"
        "sxtb16 %[t4], %[t5]\n\t"
        "sxtb16 %[t5], %[t5], ror #8\n\t"
        "smlad %[a01], %[t4], %[t0], %[a01]\n\t"
        "smlad %[a01], %[t5], %[t1], %[a01]\n\t"
        "smlad %[a11], %[t4], %[t2], %[a11]\n\t"
        "smlad %[a11], %[t5], %[t3], %[a11]\n\t"
        "ldr %[t4], %[kend]\n\t"
        "cmp %[f0], %[t4]\n\t"
        "bne 1b\n\t"
        "ldr %[t4], %[kxs]\n\t"
        "add %[xa], %[xa], %[t4]\n\t"
        "add %[xb], %[xb], %[t4]\n\t"
        "ldr %[t4], %[kfs]\n\t"
        "add %[f0], %[f0], %[t4]\n\t"
        "add %[f1], %[f1], %[t4]\n\t"
        "ldr %[t4], %[krows]\n\t"
        "subs %[t4], %[t4], #1\n\t"
        "str %[t4], %[krows]\n\t"
        "bne 0b\n\t"
        : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [xa] "+r"(xa), [xb] "+r"(xb),
          [f0] "+r"(f0), [f1] "+r"(f1), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3),
          [t4] "=&r"(t4), [t5] "=&r"(t5), [kend] "=m"(kend), [krows] "+m"(krows)
        : [koff] "m"(koff), [kn] "m"(kn), [kxs] "m"(kxs), [kfs] "m"(kfs)
        : "cc", "memory");
#else
    int32_t r;
    for (r = 0; r < g->rows; r++) {
        const int8_t *end = f0 + g->n;
        while (f0 != end) {
            const uint32_t w0 = snapuq_ld4(f0), w1 = snapuq_ld4(f1);
            const uint32_t f0e = snapuq_sxtb16(w0), f0o = snapuq_sxtb16_ror8(w0);
            const uint32_t f1e = snapuq_sxtb16(w1), f1o = snapuq_sxtb16_ror8(w1);
            uint32_t x = snapuq_ld4(xa);
            uint32_t xe = snapuq_sxtab16(off2, x), xo = snapuq_sxtab16_ror8(off2, x);
            a00 = snapuq_smlad(f0e, xe, a00);
            a01 = snapuq_smlad(f1e, xe, a01);
            a00 = snapuq_smlad(f0o, xo, a00);
            a01 = snapuq_smlad(f1o, xo, a01);
            x = snapuq_ld4(xb);
            xe = snapuq_sxtab16(off2, x);
            xo = snapuq_sxtab16_ror8(off2, x);
            a10 = snapuq_smlad(f0e, xe, a10);
            a11 = snapuq_smlad(f1e, xe, a11);
            a10 = snapuq_smlad(f0o, xo, a10);
            a11 = snapuq_smlad(f1o, xo, a11);
            f0 += 4;
            f1 += 4;
            xa += 4;
            xb += 4;
        }
        xa += g->xskip;
        xb += g->xskip;
        f0 += g->fskip;
        f1 += g->fskip;
    }
#endif
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/* 1 pixel x 2 channels */
static inline void dot_1x2(const int8_t *x, const int8_t *f0, const int8_t *f1, const runs_t *g, uint32_t off2,
                           int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1];
#if SNAPUQ_DSP_ASM
    uint32_t t0, t1, t2, t3;
    const int32_t kn = g->n;
    const ptrdiff_t kxs = g->xskip, kfs = g->fskip;
    int32_t krows = g->rows;
    const int8_t *end;
    __asm__ volatile(
        "0:\n\t"
        "ldr %[end], %[kn]\n\t"
        "add %[end], %[f0], %[end]\n\t"
        "1:\n\t"
        "ldr %[t0], [%[x]], #4\n\t"
        "sxtab16 %[t1], %[off], %[t0]\n\t"
        "sxtab16 %[t0], %[off], %[t0], ror #8\n\t"
        "ldr %[t2], [%[f0]], #4\n\t"
        "sxtb16 %[t3], %[t2]\n\t"
        "sxtb16 %[t2], %[t2], ror #8\n\t"
        "smlad %[a0], %[t3], %[t1], %[a0]\n\t"
        "smlad %[a0], %[t2], %[t0], %[a0]\n\t"
        "ldr %[t2], [%[f1]], #4\n\t"
        "sxtb16 %[t3], %[t2]\n\t"
        "sxtb16 %[t2], %[t2], ror #8\n\t"
        "smlad %[a1], %[t3], %[t1], %[a1]\n\t"
        "smlad %[a1], %[t2], %[t0], %[a1]\n\t"
        "cmp %[f0], %[end]\n\t"
        "bne 1b\n\t"
        "ldr %[t0], %[kxs]\n\t"
        "add %[x], %[x], %[t0]\n\t"
        "ldr %[t0], %[kfs]\n\t"
        "add %[f0], %[f0], %[t0]\n\t"
        "add %[f1], %[f1], %[t0]\n\t"
        "ldr %[t0], %[krows]\n\t"
        "subs %[t0], %[t0], #1\n\t"
        "str %[t0], %[krows]\n\t"
        "bne 0b\n\t"
        : [a0] "+r"(a0), [a1] "+r"(a1), [x] "+r"(x), [f0] "+r"(f0), [f1] "+r"(f1), [t0] "=&r"(t0),
          [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [end] "=&r"(end), [krows] "+m"(krows)
        : [off] "r"(off2), [kn] "m"(kn), [kxs] "m"(kxs), [kfs] "m"(kfs)
        : "cc", "memory");
#else
    int32_t r;
    for (r = 0; r < g->rows; r++) {
        const int8_t *end = f0 + g->n;
        while (f0 != end) {
            const uint32_t w0 = snapuq_ld4(f0), w1 = snapuq_ld4(f1), xv = snapuq_ld4(x);
            const uint32_t xe = snapuq_sxtab16(off2, xv), xo = snapuq_sxtab16_ror8(off2, xv);
            a0 = snapuq_smlad(snapuq_sxtb16(w0), xe, a0);
            a1 = snapuq_smlad(snapuq_sxtb16(w1), xe, a1);
            a0 = snapuq_smlad(snapuq_sxtb16_ror8(w0), xo, a0);
            a1 = snapuq_smlad(snapuq_sxtb16_ror8(w1), xo, a1);
            f0 += 4;
            f1 += 4;
            x += 4;
        }
        x += g->xskip;
        f0 += g->fskip;
        f1 += g->fskip;
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
}

/* one pixel block of CONV_2D: the valid taps of one pixel (xb == NULL) or of two pixels with the
 * same valid taps, `cols` groups of runs (one per valid kernel column under column dilation,
 * else one) `xcol` / `fcol` bytes apart */
typedef struct {
    const snapuq_conv_args_t *a;
    size_t fstride; /* bytes per output channel's filter */
    uint32_t off2;
    int fast; /* requant_fast_ok */
} conv_ctx_t;

static void conv_block(const conv_ctx_t *k, const int8_t *xa, const int8_t *xb, int8_t *outa, int8_t *outb,
                       const runs_t *g, size_t f_off, int32_t cols, ptrdiff_t xcol, ptrdiff_t fcol)
{
    const snapuq_conv_args_t *a = k->a;
    const int32_t out_c = a->out_dims.c;
    const int32_t live = g->rows > 0 && g->n > 0;
    const int fast = k->fast;
    int32_t accA[CONV_CHUNK], accB[CONV_CHUNK];
    int32_t ch0, oc, c;
    for (ch0 = 0; ch0 < out_c; ch0 += CONV_CHUNK) {
        const int32_t ch1 = ch0 + CONV_CHUNK < out_c ? ch0 + CONV_CHUNK : out_c;
        for (oc = ch0; oc < ch1; oc += 2) {
            /* an odd last channel runs as a pair with itself */
            const int32_t oc1 = oc + 1 < ch1 ? oc + 1 : oc;
            const int8_t *f0 = a->filter + (size_t)oc * k->fstride + f_off;
            const int8_t *f1 = a->filter + (size_t)oc1 * k->fstride + f_off;
            int32_t acc[4];
            acc[0] = acc[2] = a->bias != NULL ? a->bias[oc] : 0;
            acc[1] = acc[3] = a->bias != NULL ? a->bias[oc1] : 0;
            if (live) {
                for (c = 0; c < cols; c++) {
                    if (xb != NULL) {
                        dot_2x2(xa + c * xcol, xb + c * xcol, f0 + c * fcol, f1 + c * fcol, g, k->off2, acc);
                    } else {
                        dot_1x2(xa + c * xcol, f0 + c * fcol, f1 + c * fcol, g, k->off2, acc);
                    }
                }
            }
            accA[oc - ch0] = acc[0];
            accA[oc1 - ch0] = acc[1];
            accB[oc - ch0] = acc[2];
            accB[oc1 - ch0] = acc[3];
        }
        snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->conv.out_offset, a->conv.activation.min, a->conv.activation.max,
                               fast, accA, outa, ch0, ch1 - ch0);
        if (xb != NULL) {
            snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->conv.out_offset, a->conv.activation.min, a->conv.activation.max,
                                   fast, accB, outb, ch0, ch1 - ch0);
        }
    }
}

/* in_c % 4 == 0: direct (im2col-free) 2x2-blocked convolution over the valid taps. Two pixels
 * with the same valid taps form a block: vertically (same column of two output rows whose valid
 * kernel rows agree) or else horizontally (neighbours in one row whose valid kernel columns
 * agree); the rest run one pixel at a time. */
static void conv_c4(const snapuq_conv_args_t *a)
{
    const int32_t C = a->in_dims.c, KW = a->filter_dims.w;
    const size_t row_bytes = (size_t)a->in_dims.w * C;
    conv_ctx_t k;
    runs_t g;
    int32_t b, oy, ox;
    k.a = a;
    k.fstride = (size_t)a->filter_dims.h * (size_t)KW * (size_t)C;
    k.off2 = snapuq_dup16(a->conv.in_offset);
    k.fast = snapuq_dsp_requant_fast_ok(a->quant.mult, a->quant.shift, a->quant.step != 0 ? a->out_dims.c : 1);
    for (b = 0; b < a->in_dims.n; b++) {
        const int8_t *in_b = a->in + (size_t)b * a->in_dims.h * row_bytes;
        int8_t *out_b = a->out + (size_t)b * a->out_dims.h * a->out_dims.w * a->out_dims.c;
        for (oy = 0; oy < a->out_dims.h;) {
            int32_t ky0, ky1, ky0n = -1, ky1n = -1, vert;
            tap_range(oy, a->conv.stride.h, a->conv.padding.h, a->conv.dilation.h, a->filter_dims.h, a->in_dims.h, &ky0, &ky1);
            if (oy + 1 < a->out_dims.h) {
                tap_range(oy + 1, a->conv.stride.h, a->conv.padding.h, a->conv.dilation.h, a->filter_dims.h, a->in_dims.h, &ky0n, &ky1n);
            }
            vert = ky0n == ky0 && ky1n == ky1;
            for (ox = 0; ox < a->out_dims.w;) {
                const int32_t iy = oy * a->conv.stride.h - a->conv.padding.h + a->conv.dilation.h * ky0;
                const int32_t ix = ox * a->conv.stride.w - a->conv.padding.w;
                int8_t *outa = out_b + ((size_t)oy * a->out_dims.w + ox) * a->out_dims.c;
                int32_t kx0, kx1, kx0b = -1, kx1b = -1, cols, step;
                ptrdiff_t xcol, fcol;
                const int8_t *xa, *xb;
                int8_t *outb;
                tap_range(ox, a->conv.stride.w, a->conv.padding.w, a->conv.dilation.w, KW, a->in_dims.w, &kx0, &kx1);
                xa = in_b + (size_t)iy * row_bytes + (size_t)(ix + a->conv.dilation.w * kx0) * C;
                if (vert) {
                    xb = xa + (size_t)a->conv.stride.h * row_bytes;
                    outb = outa + (size_t)a->out_dims.w * a->out_dims.c;
                    step = 1;
                } else {
                    if (ox + 1 < a->out_dims.w) {
                        tap_range(ox + 1, a->conv.stride.w, a->conv.padding.w, a->conv.dilation.w, KW, a->in_dims.w, &kx0b, &kx1b);
                    }
                    if (kx0b == kx0 && kx1b == kx1) {
                        xb = xa + (size_t)a->conv.stride.w * C;
                        outb = outa + a->out_dims.c;
                        step = 2;
                    } else {
                        xb = NULL;
                        outb = NULL;
                        step = 1;
                    }
                }
                g.rows = ky1 - ky0;
                if (a->conv.dilation.w == 1) {
                    /* a kernel row's valid columns: one contiguous run in input and filter */
                    cols = 1;
                    g.n = (kx1 - kx0) * C;
                    xcol = fcol = 0;
                } else {
                    cols = kx1 - kx0;
                    g.n = C;
                    xcol = (ptrdiff_t)a->conv.dilation.w * C;
                    fcol = C;
                }
                g.xskip = (ptrdiff_t)a->conv.dilation.h * (ptrdiff_t)row_bytes - g.n;
                g.fskip = (ptrdiff_t)KW * C - g.n;
                if (kx1 <= kx0) {
                    g.rows = 0;
                }
                conv_block(&k, xa, xb, outa, outb, &g, ((size_t)ky0 * KW + kx0) * C, cols, xcol, fcol);
                ox += step;
            }
            oy += vert ? 2 : 1;
        }
    }
}

/* ---- the GEMM path (in_c % 4 == 0) ----
 * Each pair of output pixels' patches is widened once into the caller's scratch, offset added, in
 * SMLAD lane order (per 4 patch elements: pixel A's (x0, x2), (x1, x3), then pixel B's; 4 K bytes for
 * K = k_h k_w in_c). Every output channel pair then runs over those words: per 4 elements four input
 * words, two filter words widened, 8 SMLAD (18 instructions per 16 MACs). */
#if SNAPUQ_DSP_ASM
/* one group of 4 input channels of a 2 x 2 (pixel x channel) block: five loads in a row (a load after a
 * load pipelines; an LDRD does not), channel 1's word by register offset, then channel 0's, which
 * advances f0 */
#define SNAPUQ_1X1_BODY                                   \
    "ldr %[xao], [%[pw], #4]\n\t"                        \
    "ldr %[xbe], [%[pw], #8]\n\t"                        \
    "ldr %[xbo], [%[pw], #12]\n\t"                       \
    "ldr %[xae], [%[pw]], #16\n\t"                       \
    "ldr %[t], [%[f0], %[cr]]\n\t"                        \
    "sxtb16 %[we], %[t]\n\t"                              \
    "sxtb16 %[t], %[t], ror #8\n\t"                       \
    "smlad %[a01], %[we], %[xae], %[a01]\n\t"             \
    "smlad %[a01], %[t], %[xao], %[a01]\n\t"              \
    "smlad %[a11], %[we], %[xbe], %[a11]\n\t"             \
    "smlad %[a11], %[t], %[xbo], %[a11]\n\t"              \
    "ldr %[t], [%[f0]], #4\n\t"                           \
    "sxtb16 %[we], %[t]\n\t"                              \
    "sxtb16 %[t], %[t], ror #8\n\t"                       \
    "smlad %[a00], %[we], %[xae], %[a00]\n\t"             \
    "smlad %[a00], %[t], %[xao], %[a00]\n\t"              \
    "smlad %[a10], %[we], %[xbe], %[a10]\n\t"             \
    "smlad %[a10], %[t], %[xbo], %[a10]\n\t"
#endif

/* npairs (> 0) output-channel pairs from filter row f0 on (unaligned rows of C bytes, C % 4 == 0) over the
 * widened pair pw: pair j starts at start[2j], start[2j + 1] and lands in acc[2j], acc[2j + 1] (pixel A)
 * and acc[CONV_CHUNK + 2j], acc[CONV_CHUNK + 2j + 1] (pixel B). The loop over the pairs is part of the
 * assembly (its three pointers / counters live on the stack between pairs). */
static inline void mac1x1_pairs(const uint32_t *pw, const int8_t *f0, int32_t C, const int32_t *start, int32_t *acc,
                                int32_t npairs)
{
#if SNAPUQ_DSP_ASM
    const uint32_t *const end = pw + C; /* 4 words per 4 input channels */
    int32_t a00, a01, a10, a11;
    uint32_t xae, xao, xbe, xbo, we, t;
    const int32_t *sp_start = start;
    int32_t *sp_acc = acc;
    int32_t sp_n = npairs;
    __asm__ volatile("0:\n\t"
                     "ldr %[t], %[sps]\n\t"
                     "ldrd %[a00], %[a01], [%[t]], #8\n\t"
                     "str %[t], %[sps]\n\t"
                     "mov %[a10], %[a00]\n\t"
                     "mov %[a11], %[a01]\n\t"
                     "tst %[cr], #4\n\t"
                     "beq 2f\n\t" SNAPUQ_1X1_BODY "cmp %[pw], %[end]\n\t"
                     "beq 3f\n\t"
                     "2:\n\t" SNAPUQ_1X1_BODY SNAPUQ_1X1_BODY "cmp %[pw], %[end]\n\t"
                     "bne 2b\n\t"
                     "3:\n\t"
                     "ldr %[t], %[spa]\n\t"
                     "strd %[a10], %[a11], [%[t], %[boff]]\n\t"
                     "strd %[a00], %[a01], [%[t]], #8\n\t"
                     "str %[t], %[spa]\n\t"
                     "sub %[pw], %[pw], %[cr], lsl #2\n\t"
                     "add %[f0], %[f0], %[cr]\n\t"
                     "ldr %[t], %[spn]\n\t"
                     "subs %[t], %[t], #1\n\t"
                     "str %[t], %[spn]\n\t"
                     "bne 0b\n\t"
                     : [a00] "=&r"(a00), [a01] "=&r"(a01), [a10] "=&r"(a10), [a11] "=&r"(a11), [pw] "+r"(pw),
                       [f0] "+r"(f0), [xae] "=&r"(xae), [xao] "=&r"(xao), [xbe] "=&r"(xbe), [xbo] "=&r"(xbo),
                       [we] "=&r"(we), [t] "=&r"(t), [sps] "+m"(sp_start), [spa] "+m"(sp_acc), [spn] "+m"(sp_n)
                     : [cr] "r"(C), [end] "r"(end), [boff] "i"(4 * CONV_CHUNK)
                     : "cc", "memory");
#else
    int32_t j, i;
    for (j = 0; j < npairs; j++) {
        const int8_t *r0 = f0 + (size_t)2 * j * C, *r1 = r0 + C;
        const uint32_t *x = pw;
        int32_t a00 = start[2 * j], a01 = start[2 * j + 1], a10 = a00, a11 = a01;
        for (i = 0; i < C; i += 4) {
            const uint32_t w0 = snapuq_ld4(r0 + i), w1 = snapuq_ld4(r1 + i);
            const uint32_t f0e = snapuq_sxtb16(w0), f0o = snapuq_sxtb16_ror8(w0);
            const uint32_t f1e = snapuq_sxtb16(w1), f1o = snapuq_sxtb16_ror8(w1);
            a00 = snapuq_smlad(f0o, x[1], snapuq_smlad(f0e, x[0], a00));
            a01 = snapuq_smlad(f1o, x[1], snapuq_smlad(f1e, x[0], a01));
            a10 = snapuq_smlad(f0o, x[3], snapuq_smlad(f0e, x[2], a10));
            a11 = snapuq_smlad(f1o, x[3], snapuq_smlad(f1e, x[2], a11));
            x += 4;
        }
        acc[2 * j] = a00;
        acc[2 * j + 1] = a01;
        acc[CONV_CHUNK + 2 * j] = a10;
        acc[CONV_CHUNK + 2 * j + 1] = a11;
    }
#endif
}

/* (f . A + s, f . B + s) over the widened pair pw: the last channel of an odd count */
static inline void mac1x1_1x2(const uint32_t *pw, const int8_t *f, int32_t C, int32_t s, int32_t *ra, int32_t *rb)
{
    int32_t i, a0 = s, b0 = s;
    for (i = 0; i < C; i += 4) {
        const uint32_t w = snapuq_ld4(f + i), we = snapuq_sxtb16(w), wo = snapuq_sxtb16_ror8(w);
        a0 = snapuq_smlad(wo, pw[1], snapuq_smlad(we, pw[0], a0));
        b0 = snapuq_smlad(wo, pw[3], snapuq_smlad(we, pw[2], b0));
        pw += 4;
    }
    *ra = a0;
    *rb = b0;
}

int snapuq_conv_dsp_is_1x1(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims,
                           const snapuq_dims_t *out_dims)
{
    return in_dims->c % 4 == 0 && in_dims->c > 0 && filter_dims->h == 1 && filter_dims->w == 1 &&
           out_dims->n == in_dims->n;
}

/* the input pixel under output pixel q (all images, row-major) of a 1x1 filter, no padding */
static inline const int8_t *px1x1(const snapuq_conv_args_t *a, int32_t q)
{
    const int32_t hw = a->out_dims.h * a->out_dims.w;
    const int32_t b = q / hw, oy = (q - b * hw) / a->out_dims.w, ox = q - b * hw - oy * a->out_dims.w;
    return a->in + (((size_t)b * a->in_dims.h + (size_t)oy * a->conv.stride.h) * a->in_dims.w +
                    (size_t)ox * a->conv.stride.w) * a->in_dims.c;
}

/* pixel x (C int8, C % 4 == 0) widened with the offset into lane `pix` (0: A, 1: B) of the pair pw */
static inline void widen1x1(const int8_t *x, int32_t C, uint32_t off2, uint32_t *pw, int32_t pix)
{
    int32_t i;
    pw += 2 * pix;
    for (i = 0; i < C; i += 4) {
        const uint32_t v = snapuq_ld4(x + i);
        pw[0] = snapuq_sxtab16(off2, v);
        pw[1] = snapuq_sxtab16_ror8(off2, v);
        pw += 4;
    }
}

/* output pixel q's patch (all images, row-major; k_h * k_w taps of in_c int8, in_c % 4 == 0) widened
 * with the offset into lane `pix` (0: A, 1: B) of the pair pw; a padding tap's lanes are 0 */
SNAPUQ_NOINLINE static void gather_c4(const snapuq_conv_args_t *a, int32_t q, uint32_t off2, uint32_t *pw, int32_t pix)
{
    const int32_t C = a->in_dims.c, H = a->in_dims.h, W = a->in_dims.w;
    const int32_t hw = a->out_dims.h * a->out_dims.w;
    const int32_t b = q / hw, oy = (q - b * hw) / a->out_dims.w, ox = q - b * hw - oy * a->out_dims.w;
    const int32_t iy0 = oy * a->conv.stride.h - a->conv.padding.h;
    const int32_t ix0 = ox * a->conv.stride.w - a->conv.padding.w;
    const int8_t *img = a->in + (size_t)b * H * W * C;
    int32_t ky, kx, i;
    pw += 2 * pix;
    for (ky = 0; ky < a->filter_dims.h; ky++) {
        const int32_t iy = iy0 + ky * a->conv.dilation.h;
        for (kx = 0; kx < a->filter_dims.w; kx++) {
            const int32_t ix = ix0 + kx * a->conv.dilation.w;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                const int8_t *x = img + ((size_t)iy * W + ix) * C;
                for (i = 0; i < C; i += 4) {
                    const uint32_t v = snapuq_ld4(x + i);
                    pw[0] = snapuq_sxtab16(off2, v);
                    pw[1] = snapuq_sxtab16_ror8(off2, v);
                    pw += 4;
                }
            } else {
                for (i = 0; i < C; i += 4) {
                    pw[0] = 0;
                    pw[1] = 0;
                    pw += 4;
                }
            }
        }
    }
}

/* the start values of a convolution without bias */
static const int32_t zero_start[CONV_CHUNK] = {0};

/* in_c % 4 == 0, any kernel: a GEMM of pixel pairs x output channels; pw: the scratch, the pair's
 * widened patches (4 k_h k_w in_c bytes, CMSIS-NN's im2col size) */
SNAPUQ_NOINLINE static void conv_gemm(const snapuq_conv_args_t *args, uint32_t *pw)
{
    const snapuq_conv_args_t la = *args;
    const snapuq_conv_args_t *const a = &la;
    const int32_t K = a->filter_dims.h * a->filter_dims.w * a->in_dims.c, OC = a->out_dims.c;
    const int32_t P = a->out_dims.n * a->out_dims.h * a->out_dims.w;
    const uint32_t off2 = snapuq_dup16(a->conv.in_offset);
    const int fast = snapuq_dsp_requant_fast_ok(a->quant.mult, a->quant.shift, a->quant.step != 0 ? OC : 1);
    const int pointwise = snapuq_conv_dsp_is_1x1(&a->in_dims, &a->filter_dims, &a->out_dims) &&
                          a->conv.padding.h == 0 && a->conv.padding.w == 0;
    int32_t accs[2 * CONV_CHUNK]; /* pixel A's sums, then pixel B's */
    int32_t *const accA = accs, *const accB = accs + CONV_CHUNK;
    int32_t p, oc, ch0;
    for (p = 0; p < P; p += 2) {
        const int two = p + 1 < P;
        int8_t *outa = a->out + (size_t)p * OC;
        /* the last pixel of an odd count fills both lanes; its lane-B sums are not stored */
        if (pointwise) { /* a 1x1 filter without padding: the input pixels themselves */
            widen1x1(px1x1(a, p), K, off2, pw, 0);
            widen1x1(px1x1(a, two ? p + 1 : p), K, off2, pw, 1);
        } else {
            gather_c4(a, p, off2, pw, 0);
            gather_c4(a, two ? p + 1 : p, off2, pw, 1);
        }
        for (ch0 = 0; ch0 < OC; ch0 += CONV_CHUNK) {
            const int32_t ch1 = ch0 + CONV_CHUNK < OC ? ch0 + CONV_CHUNK : OC;
            oc = ch0;
            if (ch1 - ch0 >= 2) {
                mac1x1_pairs(pw, a->filter + (size_t)ch0 * K, K, a->bias != NULL ? a->bias + ch0 : zero_start, accA,
                             (ch1 - ch0) >> 1);
                oc = ch0 + ((ch1 - ch0) & ~1);
            }
            if (oc < ch1) {
                mac1x1_1x2(pw, a->filter + (size_t)oc * K, K, a->bias != NULL ? a->bias[oc] : 0, &accA[oc - ch0],
                           &accB[oc - ch0]);
            }
            snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->conv.out_offset,
                                   a->conv.activation.min, a->conv.activation.max, fast, accA, outa, ch0,
                                   ch1 - ch0);
            if (two) {
                snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->conv.out_offset,
                                       a->conv.activation.min, a->conv.activation.max, fast, accB, outa + OC,
                                       ch0, ch1 - ch0);
            }
        }
    }
}

/* position of patch element k in SMLAD lane order (halfwords k0, k2, k1, k3 per group of 4), in
 * the two-pixel patch: per group of 4 elements, pixel A's two words then pixel B's two words */
static inline int32_t lane_pos2(int32_t k, int32_t pix)
{
    return ((k & ~3) << 1) + (pix << 2) + ((k & 1) << 1) + ((k >> 1) & 1);
}

/* int16 lane i of the patch words (memcpy: the words are also read as uint32) */
static inline void patch_st(uint32_t *pw, int32_t i, int32_t v)
{
    const int16_t h = (int16_t)v;
    memcpy((int16_t *)(void *)pw + i, &h, sizeof h);
}

/* acc[0..3] += (f0 . A, f1 . A, f0 . B, f1 . B) over Kp int8 (Kp % 4 == 0, Kp > 0) of filter rows
 * f0, f1 (unaligned) and the two-pixel patch pp (A and B interleaved per group of 4, SMLAD lane
 * order): every widened filter word serves both pixels (18 instructions per 16 MACs) */
static inline void patch_2x2(const int8_t *f0, const int8_t *f1, const uint32_t *pp, int32_t Kp, int32_t *acc)
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
#if SNAPUQ_DSP_ASM
    const uint32_t *pend = pp + Kp;
    uint32_t w0e, w0o, w1e, w1o, p0, p1;
    __asm__ volatile("1:\n\t"
                     "ldr %[w0o], [%[f0]], #4\n\t"
                     "ldr %[w1o], [%[f1]], #4\n\t"
                     "sxtb16 %[w0e], %[w0o]\n\t"
                     "sxtb16 %[w0o], %[w0o], ror #8\n\t"
                     "sxtb16 %[w1e], %[w1o]\n\t"
                     "sxtb16 %[w1o], %[w1o], ror #8\n\t"
                     "ldrd %[p0], %[p1], [%[pp]], #8\n\t"
                     "smlad %[a00], %[w0e], %[p0], %[a00]\n\t"
                     "smlad %[a00], %[w0o], %[p1], %[a00]\n\t"
                     "smlad %[a01], %[w1e], %[p0], %[a01]\n\t"
                     "smlad %[a01], %[w1o], %[p1], %[a01]\n\t"
                     "ldrd %[p0], %[p1], [%[pp]], #8\n\t"
                     "smlad %[a10], %[w0e], %[p0], %[a10]\n\t"
                     "smlad %[a10], %[w0o], %[p1], %[a10]\n\t"
                     "smlad %[a11], %[w1e], %[p0], %[a11]\n\t"
                     "smlad %[a11], %[w1o], %[p1], %[a11]\n\t"
                     "cmp %[pp], %[pend]\n\t"
                     "bne 1b\n\t"
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [f0] "+r"(f0),
                       [f1] "+r"(f1), [pp] "+r"(pp), [w0e] "=&r"(w0e), [w0o] "=&r"(w0o), [w1e] "=&r"(w1e),
                       [w1o] "=&r"(w1o), [p0] "=&r"(p0), [p1] "=&r"(p1)
                     : [pend] "r"(pend)
                     : "cc", "memory");
#else
    int32_t i;
    for (i = 0; i < Kp; i += 4) {
        const uint32_t w0 = snapuq_ld4(f0 + i), w1 = snapuq_ld4(f1 + i);
        const uint32_t w0e = snapuq_sxtb16(w0), w0o = snapuq_sxtb16_ror8(w0);
        const uint32_t w1e = snapuq_sxtb16(w1), w1o = snapuq_sxtb16_ror8(w1);
        a00 = snapuq_smlad(w0o, pp[1], snapuq_smlad(w0e, pp[0], a00));
        a01 = snapuq_smlad(w1o, pp[1], snapuq_smlad(w1e, pp[0], a01));
        a10 = snapuq_smlad(w0o, pp[3], snapuq_smlad(w0e, pp[2], a10));
        a11 = snapuq_smlad(w1o, pp[3], snapuq_smlad(w1e, pp[2], a11));
        pp += 4;
    }
#endif
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/* gather output pixel q (of all images, row-major) into lane `pix` of the two-pixel patch, offset
 * added. A pixel whose every tap is inside the input reads through tab (the input offset of each
 * patch element, K4 = K rounded down to 4 of them in groups of 4: ldrsb, PKHBT and one SADD16 per two
 * elements); a pixel with padding taps has its lanes zeroed first, then its valid taps stored */
static void patch_gather(const snapuq_conv_args_t *a, uint32_t *pw, const int32_t *tab, int32_t K, int32_t Kp,
                         int32_t q, int32_t pix)
{
    const int32_t C = a->in_dims.c, KW = a->filter_dims.w, off = a->conv.in_offset;
    const int32_t hw = a->out_dims.h * a->out_dims.w;
    const int32_t b = q / hw, oy = (q - b * hw) / a->out_dims.w, ox = q - b * hw - oy * a->out_dims.w;
    const int32_t iy0 = oy * a->conv.stride.h - a->conv.padding.h;
    const int32_t ix0 = ox * a->conv.stride.w - a->conv.padding.w;
    const int8_t *img = a->in + (size_t)b * a->in_dims.h * a->in_dims.w * C;
    int32_t ky0, ky1, kx0, kx1, ky, kx, c, i;
    tap_range(oy, a->conv.stride.h, a->conv.padding.h, a->conv.dilation.h, a->filter_dims.h, a->in_dims.h, &ky0, &ky1);
    tap_range(ox, a->conv.stride.w, a->conv.padding.w, a->conv.dilation.w, KW, a->in_dims.w, &kx0, &kx1);
    if (ky1 - ky0 == a->filter_dims.h && kx1 - kx0 == KW) {
        const int8_t *x = img + ((size_t)iy0 * a->in_dims.w + ix0) * C;
        const uint32_t off2 = snapuq_dup16(off);
        const int32_t K4 = K & ~3;
        uint32_t *dst = pw + 2 * pix;
        for (i = 0; i < K4; i += 4) {
            const uint32_t v0 = (uint32_t)(int32_t)x[tab[i]], v1 = (uint32_t)(int32_t)x[tab[i + 1]];
            const uint32_t v2 = (uint32_t)(int32_t)x[tab[i + 2]], v3 = (uint32_t)(int32_t)x[tab[i + 3]];
            dst[0] = snapuq_sadd16((v0 & 0xFFFFu) | (v2 << 16), off2);
            dst[1] = snapuq_sadd16((v1 & 0xFFFFu) | (v3 << 16), off2);
            dst += 4;
        }
        for (; i < K; i++) {
            patch_st(pw, lane_pos2(i, pix), x[tab[i]] + off);
        }
        return;
    }
    for (i = 0; i < Kp; i++) {
        patch_st(pw, lane_pos2(i, pix), 0);
    }
    for (ky = ky0; ky < ky1; ky++) {
        const int8_t *xrow = img + (size_t)(iy0 + a->conv.dilation.h * ky) * a->in_dims.w * C;
        for (kx = kx0; kx < kx1; kx++) {
            const int8_t *x = xrow + (size_t)(ix0 + a->conv.dilation.w * kx) * C;
            const int32_t k = (ky * KW + kx) * C;
            for (c = 0; c < C; c++) {
                patch_st(pw, lane_pos2(k + c, pix), x[c] + off);
            }
        }
    }
}

/* filter rows of K bytes whose last Kp-byte read (Kp = K rounded up to 4) can pass the filter's end */
static inline int32_t tail_rows(int32_t K)
{
    return K == 1 ? 3 : 1;
}

/* in_c % 4 != 0, any kernel size (first layers: in_c = 1 or 3): two consecutive output pixels are
 * gathered once each, offset added, into one interleaved patch
 * in the arena scratch (snapuq_conv_dsp_scratch_size; SMLAD lane order, zeros at padding taps and in
 * the pad to a multiple of 4), then every pair of output channels is a 2 x 2 SMLAD block over the
 * filter rows (a lone pixel runs as a pair with itself). A filter row is read Kp bytes long: past
 * its end the patch is zero; the last row is read from a zero-padded copy in the scratch, so no
 * read leaves the filter. */
SNAPUQ_NOINLINE static void conv_patch(const snapuq_conv_args_t *args, uint32_t *pw)
{
    /* a local copy of the arguments: the patch stores into the arena scratch cannot alias it, so its
     * fields stay in registers across them */
    const snapuq_conv_args_t la = *args;
    const snapuq_conv_args_t *const a = &la;
    const int32_t C = a->in_dims.c, K = a->filter_dims.h * a->filter_dims.w * C, Kp = (K + 3) & ~3;
    const int32_t OC = a->out_dims.c, step = a->quant.step, off = a->conv.out_offset;
    const int32_t lo = a->conv.activation.min, hi = a->conv.activation.max;
    const int32_t *const mult = a->quant.mult, *const shift = a->quant.shift;
    const int fast = snapuq_dsp_requant_fast_ok(mult, shift, step != 0 ? OC : 1);
    /* the filter rows whose Kp-byte read would leave the filter (the last one; the last three when
     * K == 1), zero-padded copies after the patch */
    const int32_t ntail = tail_rows(K) < OC ? tail_rows(K) : OC, first_tail = OC - ntail;
    int8_t *tail = (int8_t *)(void *)(pw + Kp);
    int32_t *tab = (int32_t *)(void *)(pw + Kp + ((ntail * Kp) >> 2));
    const int32_t nq = a->out_dims.n * a->out_dims.h * a->out_dims.w;
    int32_t accA[CONV_CHUNK], accB[CONV_CHUNK];
    int32_t q, oc, ch0, i;
    for (i = 0; i < 2 * Kp; i++) {
        patch_st(pw, i, 0);
    }
    for (i = 0; i < ntail * Kp; i++) {
        tail[i] = i % Kp < K ? a->filter[(size_t)(first_tail + i / Kp) * K + i % Kp] : 0;
    }
    {
        /* the input offset of every patch element of a pixel without padding taps */
        int32_t ky, kx, c, k = 0;
        for (ky = 0; ky < a->filter_dims.h; ky++) {
            for (kx = 0; kx < a->filter_dims.w; kx++) {
                for (c = 0; c < C; c++) {
                    tab[k++] = (ky * a->conv.dilation.h * a->in_dims.w + kx * a->conv.dilation.w) * C + c;
                }
            }
        }
    }
    /* consecutive output pixels in pairs (an odd last one pairs with itself) */
    for (q = 0; q < nq; q += 2) {
        const int32_t two = q + 1 < nq;
        int8_t *outa = a->out + (size_t)q * OC;
        int8_t *outb = outa + OC;
        patch_gather(a, pw, tab, K, Kp, q, 0);
        patch_gather(a, pw, tab, K, Kp, two ? q + 1 : q, 1);
        for (ch0 = 0; ch0 < OC; ch0 += CONV_CHUNK) {
            const int32_t ch1 = ch0 + CONV_CHUNK < OC ? ch0 + CONV_CHUNK : OC;
            for (oc = ch0; oc < ch1; oc += 2) {
                /* an odd last channel runs as a pair with itself */
                const int32_t oc1 = oc + 1 < ch1 ? oc + 1 : oc;
                const int8_t *f0 = oc >= first_tail ? tail + (size_t)(oc - first_tail) * Kp : a->filter + (size_t)oc * K;
                const int8_t *f1 = oc1 >= first_tail ? tail + (size_t)(oc1 - first_tail) * Kp : a->filter + (size_t)oc1 * K;
                int32_t acc[4];
                acc[0] = acc[2] = a->bias != NULL ? a->bias[oc] : 0;
                acc[1] = acc[3] = a->bias != NULL ? a->bias[oc1] : 0;
                patch_2x2(f0, f1, pw, Kp, acc);
                accA[oc - ch0] = acc[0];
                accA[oc1 - ch0] = acc[1];
                accB[oc - ch0] = acc[2];
                accB[oc1 - ch0] = acc[3];
            }
            snapuq_dsp_requant_run(mult, shift, step, off, lo, hi, fast, accA, outa, ch0, ch1 - ch0);
            if (two) {
                snapuq_dsp_requant_run(mult, shift, step, off, lo, hi, fast, accB, outb, ch0, ch1 - ch0);
            }
        }
    }
}

static int32_t patch_elems(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims)
{
    return (filter_dims->h * filter_dims->w * in_dims->c + 3) & ~3;
}

/* in_c % 4 == 0: the GEMM path for a 1x1 filter, or for a widened pixel pair of at most
 * SNAPUQ_CONV_GEMM_MAX bytes */
static int gemm_path(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims)
{
    const uint32_t bytes = 4u * (uint32_t)(filter_dims->h * filter_dims->w * in_dims->c);
    return (filter_dims->h == 1 && filter_dims->w == 1) || bytes <= (uint32_t)SNAPUQ_CONV_GEMM_MAX;
}

uint32_t snapuq_conv_dsp_scratch_size(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims)
{
    if (in_dims->c % 4 == 0 && in_dims->c > 0) {
        /* the GEMM path's widened pixel pair; the direct path needs none */
        return gemm_path(in_dims, filter_dims) ? 4u * (uint32_t)(filter_dims->h * filter_dims->w * in_dims->c) : 0u;
    }
    /* the patch path's two-pixel int16 patch and the zero-padded copies of the last filter rows */
    {
        const int32_t K = filter_dims->h * filter_dims->w * in_dims->c;
        /* + the element offsets of a pixel without padding taps: K int32 */
        return (uint32_t)(4 + tail_rows(K)) * (uint32_t)patch_elems(in_dims, filter_dims) + 4u * (uint32_t)K;
    }
}

const char *snapuq_conv_dsp_kernel(const snapuq_dims_t *in_dims, const snapuq_dims_t *filter_dims)
{
    if (in_dims->c % 4 != 0 || in_dims->c <= 0) {
        return "dsp-patch";
    }
    if (filter_dims->h == 1 && filter_dims->w == 1) {
        return "dsp-1x1";
    }
    return gemm_path(in_dims, filter_dims) ? "dsp-gemm" : "dsp-direct";
}

snapuq_status_t snapuq_conv_dsp(const snapuq_conv_args_t *a)
{
    const uint32_t need = snapuq_conv_dsp_scratch_size(&a->in_dims, &a->filter_dims);
    if (need == 0) {
        conv_c4(a);
        return SNAPUQ_OK;
    }
    if (a->ctx.buf == NULL || a->ctx.size < need || ((uintptr_t)a->ctx.buf & 3u) != 0) {
        return SNAPUQ_ERR_ARENA;
    }
    if (a->in_dims.c % 4 == 0) {
        conv_gemm(a, (uint32_t *)a->ctx.buf);
        return SNAPUQ_OK;
    }
    conv_patch(a, (uint32_t *)a->ctx.buf);
    return SNAPUQ_OK;
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_conv_dsp_unused_t;
#endif
