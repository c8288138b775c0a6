/*
 * kernels/dsp/depthwise_conv.c - DEPTHWISE_CONV_2D for cores with the Armv7E-M DSP extension; the
 * same-named kernels/ref/depthwise_conv.c is the reference (the registration, ops/dsp/op_conv.c, runs
 * it for depth multipliers other than 1 and reports that choice).
 *
 * Depth multiplier 1: 4 channels per word; SXTAB16 / SXTB16 (and their ROR #8 forms) split each
 * input and filter word into even/odd channel lanes (input offset folded in), SMLABB / SMLATT
 * accumulate the four channels separately; 3- and 2-wide kernel rows run as straight-line asm.
 * The filter is read from a copy in the arena scratch (snapuq_dwconv_dsp_scratch_size() bytes), made
 * once per call: a 4-channel group's taps lie on k_h * k_w different lines, more than a flash
 * accelerator's data cache holds (8 lines on STM32L4), so reading them from flash missed on every tap.
 */
#include <string.h>

#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP


/* one depthwise tap for 4 channels: input word t0 and filter word t2 widened into even/odd channel
 * lanes (offset folded into the input widening), SMLABB/SMLATT per channel */
#define DW_ASM_MAC                                                                                  \
    "sxtab16 %[t1], %[off], %[t0], ror #8\n\t"                                                     \
    "sxtab16 %[t0], %[off], %[t0]\n\t"                                                             \
    "sxtb16 %[t3], %[t2], ror #8\n\t"                                                              \
    "sxtb16 %[t2], %[t2]\n\t"                                                                      \
    "smlabb %[a0], %[t0], %[t2], %[a0]\n\t"                                                        \
    "smlatt %[a2], %[t0], %[t2], %[a2]\n\t"                                                        \
    "smlabb %[a1], %[t1], %[t3], %[a1]\n\t"                                                        \
    "smlatt %[a3], %[t1], %[t3], %[a3]\n\t"
#define DW_ASM_LD0 "ldr %[t0], [%[x]]\n\tldr %[t2], [%[f]]\n\t"
#define DW_ASM_LD1 "ldr %[t0], [%[x], %[cs]]\n\tldr %[t2], [%[f], %[cs]]\n\t"
#define DW_ASM_LD2 "ldr %[t0], [%[x], %[cs], lsl #1]\n\tldr %[t2], [%[f], %[cs], lsl #1]\n\t"
/* the rows loop around one kernel row's taps: x and f advance by a row; the filter's row step and the
 * count live on the stack (13 registers in use: -Os keeps one more for itself) */
#define DW_ASM_ROWS(taps)                                                                           \
    __asm__ volatile("1:\n\t" taps "add %[x], %[x], %[xrow]\n\t"                                   \
                     "ldr %[t0], %[frow]\n\t"                                                      \
                     "add %[f], %[f], %[t0]\n\t"                                                   \
                     "ldr %[t0], %[n]\n\t"                                                         \
                     "subs %[t0], %[t0], #1\n\t"                                                   \
                     "str %[t0], %[n]\n\t"                                                         \
                     "bne 1b\n\t"                                                                  \
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0), \
                       [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [x] "+r"(x), [f] "+r"(f),     \
                       [n] "+m"(n)                                                                 \
                     : [cs] "r"(cs), [xrow] "r"(xrow), [frow] "m"(frow), [off] "r"(off2)           \
                     : "cc", "memory")

/* a0..a3 += n (> 0) kernel rows of `taps` (2 or 3) adjacent taps for 4 channels: input x and filter f
 * (the filter copy), both with a column step of cs = C bytes, rows xrow / frow apart */
static inline void dw_rows(const int8_t *x, const int8_t *f, ptrdiff_t cs, ptrdiff_t xrow, ptrdiff_t frow, int32_t n,
                           int32_t taps, uint32_t off2, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if SNAPUQ_DSP_ASM
    uint32_t t0, t1, t2, t3;
    if (taps == 3) {
        DW_ASM_ROWS(DW_ASM_LD0 DW_ASM_MAC DW_ASM_LD1 DW_ASM_MAC DW_ASM_LD2 DW_ASM_MAC);
    } else {
        DW_ASM_ROWS(DW_ASM_LD0 DW_ASM_MAC DW_ASM_LD1 DW_ASM_MAC);
    }
#else
    int32_t k;
    for (; n > 0; n--) {
        for (k = 0; k < taps; k++) {
            const uint32_t xv = snapuq_ld4(x + k * cs), fv = snapuq_ld4(f + k * cs);
            const uint32_t xe = snapuq_sxtab16(off2, xv), xo = snapuq_sxtab16_ror8(off2, xv);
            const uint32_t fe = snapuq_sxtb16(fv), fo = snapuq_sxtb16_ror8(fv);
            a0 = snapuq_smlabb(xe, fe, a0);
            a2 = snapuq_smlatt(xe, fe, a2);
            a1 = snapuq_smlabb(xo, fo, a1);
            a3 = snapuq_smlatt(xo, fo, a3);
        }
        x += xrow;
        f += frow;
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* start values of a depthwise convolution without bias */
static const int32_t dw_zero[CONV_CHUNK] = {0};

/* ngroups (> 0) 4-channel groups of one output pixel, each n (> 0) kernel rows of 3 adjacent taps: group g
 * reads input x + 4g and filter f + 4g (column step cs = C, rows xrow / frow apart), starts at
 * start[4g .. 4g + 3] and lands in acc[4g .. 4g + 3]. The loop over the groups is part of the assembly
 * (its pointers and counters live on the stack between groups). */
static inline void dw_groups3(const int8_t *x, const int8_t *f, ptrdiff_t cs, ptrdiff_t xrow, ptrdiff_t frow, int32_t n,
                              uint32_t off2, const int32_t *start, int32_t *acc, int32_t ngroups)
{
#if SNAPUQ_DSP_ASM
    int32_t a0, a1, a2, a3;
    uint32_t t0, t1, t2, t3;
    const int8_t *sp_x = x, *sp_f = f;
    const int32_t *sp_s = start;
    int32_t *sp_a = acc;
    int32_t sp_g = ngroups, sp_r = 0;
    __asm__ volatile("0:\n\t"
                     "ldr %[t0], %[sps]\n\t"
                     "ldrd %[a0], %[a1], [%[t0]]\n\t"
                     "ldrd %[a2], %[a3], [%[t0], #8]\n\t"
                     "add %[t0], %[t0], #16\n\t"
                     "str %[t0], %[sps]\n\t"
                     "ldr %[x], %[spx]\n\t"
                     "ldr %[f], %[spf]\n\t"
                     "ldr %[t0], %[spn]\n\t"
                     "str %[t0], %[spr]\n\t"
                     "1:\n\t" DW_ASM_LD0 DW_ASM_MAC DW_ASM_LD1 DW_ASM_MAC DW_ASM_LD2 DW_ASM_MAC
                     "add %[x], %[x], %[xrow]\n\t"
                     "ldr %[t0], %[frm]\n\t"
                     "add %[f], %[f], %[t0]\n\t"
                     "ldr %[t0], %[spr]\n\t"
                     "subs %[t0], %[t0], #1\n\t"
                     "str %[t0], %[spr]\n\t"
                     "bne 1b\n\t"
                     "ldr %[t0], %[spa]\n\t"
                     "strd %[a0], %[a1], [%[t0]]\n\t"
                     "strd %[a2], %[a3], [%[t0], #8]\n\t"
                     "add %[t0], %[t0], #16\n\t"
                     "str %[t0], %[spa]\n\t"
                     "ldr %[t0], %[spx]\n\t"
                     "add %[t0], %[t0], #4\n\t"
                     "str %[t0], %[spx]\n\t"
                     "ldr %[t0], %[spf]\n\t"
                     "add %[t0], %[t0], #4\n\t"
                     "str %[t0], %[spf]\n\t"
                     "ldr %[t0], %[spg]\n\t"
                     "subs %[t0], %[t0], #1\n\t"
                     "str %[t0], %[spg]\n\t"
                     "bne 0b\n\t"
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [t0] "=&r"(t0),
                       [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [x] "=&r"(x), [f] "=&r"(f),
                       [sps] "+m"(sp_s), [spa] "+m"(sp_a), [spx] "+m"(sp_x), [spf] "+m"(sp_f), [spg] "+m"(sp_g),
                       [spr] "+m"(sp_r)
                     : [cs] "r"(cs), [xrow] "r"(xrow), [frm] "m"(frow), [off] "r"(off2), [spn] "m"(n)
                     : "cc", "memory");
#else
    int32_t g;
    for (g = 0; g < ngroups; g++) {
        acc[4 * g] = start[4 * g];
        acc[4 * g + 1] = start[4 * g + 1];
        acc[4 * g + 2] = start[4 * g + 2];
        acc[4 * g + 3] = start[4 * g + 3];
        dw_rows(x + 4 * g, f + 4 * g, cs, xrow, frow, n, 3, off2, acc + 4 * g);
    }
#endif
}

uint32_t snapuq_dwconv_dsp_scratch_size(const snapuq_dims_t *filter_dims)
{
    return ((uint32_t)(filter_dims->h * filter_dims->w * filter_dims->c) + 3u) & ~3u;
}

snapuq_status_t snapuq_dwconv_dsp(const snapuq_conv_args_t *args)
{
    snapuq_conv_args_t la = *args;
    const snapuq_conv_args_t *const a = &la;
    const uint32_t need = snapuq_dwconv_dsp_scratch_size(&la.filter_dims);
    const int32_t C = a->out_dims.c, C4 = C & ~3;
    const uint32_t off2 = snapuq_dup16(a->conv.in_offset);
    const int fast = snapuq_dsp_requant_fast_ok(a->quant.mult, a->quant.shift, a->quant.step != 0 ? a->out_dims.c : 1);
    const int32_t *bias = a->bias;
    static const int32_t zero4[4] = {0, 0, 0, 0};
    const int8_t *xr0, *fr0;
    int32_t acc[CONV_CHUNK];
    int32_t b, oy, ox, c, ky, kx, ch0;
    if (a->conv.depth_mult != 1) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE; /* the registration runs the reference then */
    }
    if (la.ctx.buf == NULL || la.ctx.size < need || ((uintptr_t)la.ctx.buf & 3u) != 0) {
        return SNAPUQ_ERR_ARENA;
    }
    memcpy(la.ctx.buf, la.filter, (size_t)la.filter_dims.h * la.filter_dims.w * la.filter_dims.c);
    la.filter = (const int8_t *)la.ctx.buf;
    for (b = 0; b < a->in_dims.n; b++) {
        const int8_t *in_b = a->in + (size_t)b * a->in_dims.h * a->in_dims.w * C;
        for (oy = 0; oy < a->out_dims.h; oy++) {
            const int32_t iy0 = oy * a->conv.stride.h - a->conv.padding.h;
            int32_t ky0, ky1;
            tap_range(oy, a->conv.stride.h, a->conv.padding.h, a->conv.dilation.h, a->filter_dims.h, a->in_dims.h, &ky0, &ky1);
            for (ox = 0; ox < a->out_dims.w; ox++) {
                const int32_t ix0 = ox * a->conv.stride.w - a->conv.padding.w;
                int8_t *out = a->out + (((size_t)b * a->out_dims.h + oy) * a->out_dims.w + ox) * C;
                const ptrdiff_t xstep = (ptrdiff_t)a->conv.dilation.w * C, xrow = (ptrdiff_t)a->conv.dilation.h * a->in_dims.w * C;
                const ptrdiff_t frow = (ptrdiff_t)a->filter_dims.w * C;
                int32_t kx0, kx1, ntap;
                tap_range(ox, a->conv.stride.w, a->conv.padding.w, a->conv.dilation.w, a->filter_dims.w, a->in_dims.w, &kx0, &kx1);
                ntap = kx1 - kx0;
                xr0 = in_b + ((size_t)(iy0 + a->conv.dilation.h * ky0) * a->in_dims.w + ix0 + a->conv.dilation.w * kx0) * C;
                fr0 = a->filter + ((size_t)ky0 * a->filter_dims.w + kx0) * C;
                for (ch0 = 0; ch0 < C; ch0 += CONV_CHUNK) {
                    const int32_t ch1 = ch0 + CONV_CHUNK < C ? ch0 + CONV_CHUNK : C;
                    const int32_t ch1_4 = ch1 < C4 ? ch1 : C4;
                    c = ch0;
                    if (ntap == 3 && a->conv.dilation.w == 1 && ky1 > ky0 && ch1_4 > ch0) {
                        /* the common case: every 4-channel group of the chunk in one call */
                        dw_groups3(xr0 + ch0, fr0 + ch0, C, xrow, frow, ky1 - ky0, off2,
                                   bias != NULL ? bias + ch0 : dw_zero, acc, (ch1_4 - ch0) >> 2);
                        c = ch1_4;
                    }
                    for (; c < ch1_4; c += 4) {
                        const int32_t *bp = bias != NULL ? bias + c : zero4;
                        int32_t a0 = bp[0], a1 = bp[1], a2 = bp[2], a3 = bp[3];
                        const int8_t *xr = xr0 + c, *fr = fr0 + c;
#define DW_TAP(xp, fp)                                                                              \
    do {                                                                                            \
        const uint32_t xv_ = snapuq_ld4(xp), fv_ = snapuq_ld4(fp);                                 \
        const uint32_t xe_ = snapuq_sxtab16(off2, xv_), xo_ = snapuq_sxtab16_ror8(off2, xv_);      \
        const uint32_t fe_ = snapuq_sxtb16(fv_), fo_ = snapuq_sxtb16_ror8(fv_);                    \
        a0 = snapuq_smlabb(xe_, fe_, a0);                                                           \
        a2 = snapuq_smlatt(xe_, fe_, a2);                                                           \
        a1 = snapuq_smlabb(xo_, fo_, a1);                                                           \
        a3 = snapuq_smlatt(xo_, fo_, a3);                                                           \
    } while (0)
                        if ((ntap == 3 || ntap == 2) && a->conv.dilation.w == 1) {
                            /* the common 3-wide kernel row, or one at a border: accumulated in place */
                            int32_t *const ac = acc + (c - ch0);
                            ac[0] = a0;
                            ac[1] = a1;
                            ac[2] = a2;
                            ac[3] = a3;
                            if (ky1 > ky0) {
                                dw_rows(xr, fr, C, xrow, frow, ky1 - ky0, ntap, off2, ac);
                            }
                            continue;
                        } else {
                            for (ky = ky0; ky < ky1; ky++) {
                                const int8_t *x = xr, *f = fr;
                                for (kx = 0; kx < ntap; kx++) {
                                    DW_TAP(x, f);
                                    x += xstep;
                                    f += C;
                                }
                                xr += xrow;
                                fr += frow;
                            }
                        }
#undef DW_TAP
                        acc[c - ch0] = a0;
                        acc[c - ch0 + 1] = a1;
                        acc[c - ch0 + 2] = a2;
                        acc[c - ch0 + 3] = a3;
                    }
                    for (; c < ch1; c++) {
                        int32_t s = a->bias != NULL ? a->bias[c] : 0;
                        for (ky = ky0; ky < ky1; ky++) {
                            const int32_t iy = iy0 + a->conv.dilation.h * ky;
                            for (kx = kx0; kx < kx1; kx++) {
                                const int32_t ix = ix0 + a->conv.dilation.w * kx;
                                s = snapuq_add_wrap(s, (int32_t)a->filter[((size_t)ky * a->filter_dims.w + kx) * C + c] *
                                                           ((int32_t)in_b[((size_t)iy * a->in_dims.w + ix) * C + c] + a->conv.in_offset));
                            }
                        }
                        acc[c - ch0] = s;
                    }
                    snapuq_dsp_requant_run(a->quant.mult, a->quant.shift, a->quant.step, a->conv.out_offset, a->conv.activation.min, a->conv.activation.max,
                                           fast, acc, out, ch0, ch1 - ch0);
                }
            }
        }
    }
    return SNAPUQ_OK;
}


#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_dwconv_dsp_unused_t;
#endif
