/*
 * snapuq_kernels_dsp.c - CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED for cores with the
 * Armv7E-M DSP extension (Cortex-M4/M7/M33). Built only with -DSNAPUQ_KERNELS_DSP=1; results are
 * identical to snapuq_kernels_ref.c (same exact int32 sums, same requantization).
 *
 * Techniques (instruction counts in docs/C_CORE.md):
 *  - the input offset is folded into the widening: SXTAB16 (and its ROR #8 form) adds the offset
 *    to two int8 lanes in the same instruction that sign-extends them, so x + offset costs
 *    nothing over a plain SXTB16;
 *  - CONV_2D works on 2 output pixels x 2 output channels per pass (every widened input word is
 *    used by two channels, every widened filter word by two pixels: 8 SMLAD per 6 loads/widenings
 *    for 16 MACs) and never multiplies a padding tap: for each output row/pixel only the valid
 *    kernel rows and the valid run of kernel columns are visited (one contiguous run of
 *    (kx1 - kx0) * in_c bytes per kernel row in NHWC, in both input and filter);
 *  - a first-layer path for in_c % 4 != 0 (in_c = 1 or 3): the pixel's patch is gathered once,
 *    offset added, into a small int16 buffer on the stack in SMLAD lane order, zeros at padding
 *    taps, then every output channel is a straight SMLAD dot product over the filter row;
 *  - DEPTHWISE_CONV_2D (depth multiplier 1) handles 4 channels per word: SXTAB16 / SXTB16 split
 *    each input and filter word into even/odd channel lanes and SMLABB / SMLATT accumulate the
 *    four channels separately;
 *  - FULLY_CONNECTED computes 4 output rows per pass over one widened input word;
 *  - the requantization uses one SMLAL for TFLite's rounding doubling high multiply (exact:
 *    floor((a*b + 2^30) / 2^31) equals the reference's nudge-and-truncate for every a, b except
 *    a = b = INT32_MIN, which is taken by the reference path).
 *
 * On a host (no __ARM_FEATURE_DSP) snapuq_simd.h is portable C with the instructions' exact
 * semantics, so the same code and the same tests run everywhere.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapuq_fixed.h"
#include "snapuq_kernels.h"
#include "snapuq_simd.h"

#if SNAPUQ_KERNELS_DSP

/* largest gathered patch (int16 elements) of the first-layer path: 3x3x3 = 27, 5x5x3 = 75,
 * 7x7x1 = 49; 192 elements = 384 bytes of stack */
#define PATCH_MAX 192

/* one output channel's requantization, prepared once and applied to each of its outputs */
typedef struct {
    int32_t m, left, right, mask, half, out_off, lo, hi, exact;
} rq_t;

static inline void rq_prepare(rq_t *q, int32_t m, int32_t s, int32_t out_off, int32_t lo, int32_t hi)
{
    q->m = m;
    q->left = s > 0 ? s : 0;
    q->right = s > 0 ? 0 : -s;
    q->mask = (int32_t)(((uint32_t)1 << q->right) - 1u);
    q->half = q->mask >> 1;
    q->out_off = out_off;
    q->lo = lo;
    q->hi = hi;
    q->exact = m == INT32_MIN; /* the one case where SMLAL rounding differs: saturate like the reference */
}

static inline int8_t rq_apply(const rq_t *q, int32_t acc)
{
    int32_t v;
    if (q->exact) {
        v = snapuq_mbqm(acc, q->m, q->left - q->right);
    } else {
        const int64_t p = (int64_t)snapuq_shl_wrap(acc, q->left) * q->m + ((int64_t)1 << 30);
        const int32_t y = (int32_t)(p >> 31); /* arithmetic shift on every supported compiler */
        v = (y >> q->right) + ((y & q->mask) > q->half + (y < 0 ? 1 : 0) ? 1 : 0);
    }
    v += q->out_off;
    return (int8_t)(v < q->lo ? q->lo : (v > q->hi ? q->hi : v));
}

/* ------------------------------------------------------------------ CONV_2D */

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
#if SNAPUQ_SIMD_NATIVE
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
#if SNAPUQ_SIMD_NATIVE
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

/* valid kernel taps [k0, k1) along one axis for output position o */
static inline void tap_range(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t in,
                             int32_t *k0, int32_t *k1)
{
    const int32_t i0 = o * stride - pad;
    int32_t a = 0, b = k;
    while (a < b && i0 + dil * a < 0) {
        a++;
    }
    while (b > a && i0 + dil * (b - 1) >= in) {
        b--;
    }
    *k0 = a;
    *k1 = b;
}

static void conv_store(const snapuq_conv_args_t *a, int8_t *out, int32_t oc, int32_t acc)
{
    rq_t q;
    if (a->bias != NULL) {
        acc = snapuq_add_wrap(acc, a->bias[oc]);
    }
    rq_prepare(&q, a->mult[oc], a->shift[oc], a->out_offset, a->act_min, a->act_max);
    out[oc] = rq_apply(&q, acc);
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

/* 1 when every channel has a right shift (shift < 0) and no multiplier is INT32_MIN: the common
 * case, requantized by requant_run without per-output checks */
static int requant_fast_ok(const int32_t *mult, const int32_t *shift, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        if (shift[i] >= 0 || shift[i] < -31 || mult[i] == INT32_MIN) {
            return 0;
        }
    }
    return 1;
}

/* requantize n int32 sums of channels oc0 .. oc0 + n - 1 (one pixel) into out[oc0 ..]; with fast
 * (requant_fast_ok) one SMLAL, a rounding shift (ASRS + ADC) and the clamp per output */
static void requant_run(const int32_t *mult_all, const int32_t *shift_all, int32_t out_off, int32_t lo, int32_t hi,
                        int fast, const int32_t *acc, int8_t *out, int32_t oc0, int32_t n)
{
    const int32_t *mult = mult_all + oc0, *shift = shift_all + oc0;
    int32_t i;
    out += oc0;
    if (fast && lo == -128 && hi == 127) {
        for (i = 0; i < n; i++) {
            const int64_t p = (int64_t)acc[i] * mult[i] + ((int64_t)1 << 30);
            out[i] = (int8_t)snapuq_ssat8(snapuq_rshift_round((int32_t)(p >> 31), -shift[i]) + out_off);
        }
        return;
    }
    if (fast) {
        for (i = 0; i < n; i++) {
            /* floor((a*b + 2^30) / 2^31) == the reference's rounding doubling high multiply for
             * b != INT32_MIN; arithmetic shift of a negative int64 on every supported compiler */
            const int64_t p = (int64_t)acc[i] * mult[i] + ((int64_t)1 << 30);
            int32_t v = snapuq_rshift_round((int32_t)(p >> 31), -shift[i]) + out_off;
            v = v < lo ? lo : v;
            out[i] = (int8_t)(v > hi ? hi : v);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        const int32_t m = mult[i], s = shift[i];
        int32_t v;
        if (s <= 0 && m != INT32_MIN) {
            const int32_t r = -s;
            const int64_t p = (int64_t)acc[i] * m + ((int64_t)1 << 30);
            const int32_t y = (int32_t)(p >> 31);
            const int32_t mask = (int32_t)(((uint32_t)1 << r) - 1u);
            v = (y >> r) + ((y & mask) > (mask >> 1) + (int32_t)((uint32_t)y >> 31) ? 1 : 0);
        } else {
            v = snapuq_mbqm(acc[i], m, s);
        }
        v += out_off;
        out[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}

#define CONV_CHUNK 32 /* output channels accumulated before requantizing (2 x 128 B of stack) */

static void conv_block(const conv_ctx_t *k, const int8_t *xa, const int8_t *xb, int8_t *outa, int8_t *outb,
                       const runs_t *g, size_t f_off, int32_t cols, ptrdiff_t xcol, ptrdiff_t fcol)
{
    const snapuq_conv_args_t *a = k->a;
    const int32_t out_c = a->out_c;
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
        requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, accA, outa, ch0, ch1 - ch0);
        if (xb != NULL) {
            requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, accB, outb, ch0, ch1 - ch0);
        }
    }
}

/* in_c % 4 == 0: direct (im2col-free) 2x2-blocked convolution over the valid taps. Two pixels
 * with the same valid taps form a block: vertically (same column of two output rows whose valid
 * kernel rows agree) or else horizontally (neighbours in one row whose valid kernel columns
 * agree); the rest run one pixel at a time. */
static void conv_c4(const snapuq_conv_args_t *a)
{
    const int32_t C = a->in_c, KW = a->k_w;
    const size_t row_bytes = (size_t)a->in_w * C;
    conv_ctx_t k;
    runs_t g;
    int32_t b, oy, ox;
    k.a = a;
    k.fstride = (size_t)a->k_h * (size_t)KW * (size_t)C;
    k.off2 = snapuq_dup16(a->in_offset);
    k.fast = requant_fast_ok(a->mult, a->shift, a->out_c);
    for (b = 0; b < a->batches; b++) {
        const int8_t *in_b = a->in + (size_t)b * a->in_h * row_bytes;
        int8_t *out_b = a->out + (size_t)b * a->out_h * a->out_w * a->out_c;
        for (oy = 0; oy < a->out_h;) {
            int32_t ky0, ky1, ky0n = -1, ky1n = -1, vert;
            tap_range(oy, a->stride_h, a->pad_h, a->dil_h, a->k_h, a->in_h, &ky0, &ky1);
            if (oy + 1 < a->out_h) {
                tap_range(oy + 1, a->stride_h, a->pad_h, a->dil_h, a->k_h, a->in_h, &ky0n, &ky1n);
            }
            vert = ky0n == ky0 && ky1n == ky1;
            for (ox = 0; ox < a->out_w;) {
                const int32_t iy = oy * a->stride_h - a->pad_h + a->dil_h * ky0;
                const int32_t ix = ox * a->stride_w - a->pad_w;
                int8_t *outa = out_b + ((size_t)oy * a->out_w + ox) * a->out_c;
                int32_t kx0, kx1, kx0b = -1, kx1b = -1, cols, step;
                ptrdiff_t xcol, fcol;
                const int8_t *xa, *xb;
                int8_t *outb;
                tap_range(ox, a->stride_w, a->pad_w, a->dil_w, KW, a->in_w, &kx0, &kx1);
                xa = in_b + (size_t)iy * row_bytes + (size_t)(ix + a->dil_w * kx0) * C;
                if (vert) {
                    xb = xa + (size_t)a->stride_h * row_bytes;
                    outb = outa + (size_t)a->out_w * a->out_c;
                    step = 1;
                } else {
                    if (ox + 1 < a->out_w) {
                        tap_range(ox + 1, a->stride_w, a->pad_w, a->dil_w, KW, a->in_w, &kx0b, &kx1b);
                    }
                    if (kx0b == kx0 && kx1b == kx1) {
                        xb = xa + (size_t)a->stride_w * C;
                        outb = outa + a->out_c;
                        step = 2;
                    } else {
                        xb = NULL;
                        outb = NULL;
                        step = 1;
                    }
                }
                g.rows = ky1 - ky0;
                if (a->dil_w == 1) {
                    /* a kernel row's valid columns: one contiguous run in input and filter */
                    cols = 1;
                    g.n = (kx1 - kx0) * C;
                    xcol = fcol = 0;
                } else {
                    cols = kx1 - kx0;
                    g.n = C;
                    xcol = (ptrdiff_t)a->dil_w * C;
                    fcol = C;
                }
                g.xskip = (ptrdiff_t)a->dil_h * (ptrdiff_t)row_bytes - g.n;
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

/* position of patch element k in SMLAD lane order (halfwords k0, k2, k1, k3 per group of 4) */
static inline int32_t lane_pos(int32_t k)
{
    return (k & ~3) + ((k & 1) << 1) + ((k >> 1) & 1);
}

/* a0 += f0 . patch, a1 += f1 . patch over n4 int8 (n4 % 4 == 0, n4 > 0), patch in SMLAD lane order */
static inline void patch_pair(const int8_t *f0, const int8_t *f1, const uint32_t *pp, int32_t n4, int32_t *a0p,
                              int32_t *a1p)
{
    int32_t a0 = *a0p, a1 = *a1p;
#if SNAPUQ_SIMD_NATIVE
    const uint32_t *pend = pp + n4 / 2;
    uint32_t w0, w1, p0, p1, t;
    __asm__("1:\n\t"
            "ldr %[w0], [%[f0]], #4\n\t"
            "ldr %[w1], [%[f1]], #4\n\t"
            "ldrd %[p0], %[p1], [%[pp]], #8\n\t"
            "sxtb16 %[t], %[w0]\n\t"
            "smlad %[a0], %[t], %[p0], %[a0]\n\t"
            "sxtb16 %[t], %[w1]\n\t"
            "smlad %[a1], %[t], %[p0], %[a1]\n\t"
            "sxtb16 %[t], %[w0], ror #8\n\t"
            "smlad %[a0], %[t], %[p1], %[a0]\n\t"
            "sxtb16 %[t], %[w1], ror #8\n\t"
            "smlad %[a1], %[t], %[p1], %[a1]\n\t"
            "cmp %[pp], %[pend]\n\t"
            "bne 1b\n\t"
            : [a0] "+r"(a0), [a1] "+r"(a1), [f0] "+r"(f0), [f1] "+r"(f1), [pp] "+r"(pp), [w0] "=&r"(w0),
              [w1] "=&r"(w1), [p0] "=&r"(p0), [p1] "=&r"(p1), [t] "=&r"(t)
            : [pend] "r"(pend)
            : "cc", "memory");
#else
    int32_t i;
    for (i = 0; i < n4; i += 4) {
        const uint32_t w0 = snapuq_ld4(f0 + i), w1 = snapuq_ld4(f1 + i);
        a0 = snapuq_smlad(snapuq_sxtb16(w0), pp[0], a0);
        a1 = snapuq_smlad(snapuq_sxtb16(w1), pp[0], a1);
        a0 = snapuq_smlad(snapuq_sxtb16_ror8(w0), pp[1], a0);
        a1 = snapuq_smlad(snapuq_sxtb16_ror8(w1), pp[1], a1);
        pp += 2;
    }
#endif
    *a0p = a0;
    *a1p = a1;
}

/* n channels' dot products with one gathered patch (K int16, zero-padded to a multiple of 4 and
 * packed in SMLAD lane order), two channels per pass sharing the patch loads */
static void patch_dot(const int8_t *f0, const int8_t *fend, const int32_t *bias, const uint32_t *patch,
                      const int16_t *lin, int32_t K, int32_t n, int32_t *acc)
{
    const int32_t K4 = K & ~3, Kp = (K + 3) & ~3;
    static const int32_t zero = 0;
    const int32_t *bp = bias != NULL ? bias : &zero;
    const int32_t bstep = bias != NULL ? 1 : 0;
    int32_t j, i;
    /* pairs whose zero-padded read stays inside the filter: no tail */
    for (j = 0; j + 2 <= n && fend - (f0 + K) >= (ptrdiff_t)Kp; j += 2) {
        int32_t a0 = bp[0], a1 = bp[bstep];
        patch_pair(f0, f0 + K, patch, Kp, &a0, &a1);
        acc[j] = a0;
        acc[j + 1] = a1;
        f0 += 2 * K;
        bp += 2 * bstep;
    }
    for (; j < n; j += 2) {
        /* an odd last channel pairs with itself */
        const int32_t two = j + 1 < n;
        const int8_t *f1 = two ? f0 + K : f0;
        /* the zero-padded read runs past the filter only for the last channel: stop at K4 there */
        const int32_t n4 = fend - f1 >= (ptrdiff_t)Kp ? Kp : K4;
        int32_t a0 = bp[0], a1 = bp[two ? bstep : 0];
        if (n4 > 0) {
            patch_pair(f0, f1, patch, n4, &a0, &a1);
        }
        for (i = n4; i < K; i++) {
            a0 = snapuq_add_wrap(a0, (int32_t)f0[i] * lin[lane_pos(i)]);
            a1 = snapuq_add_wrap(a1, (int32_t)f1[i] * lin[lane_pos(i)]);
        }
        acc[j] = a0;
        if (two) {
            acc[j + 1] = a1;
        }
        f0 = f1 + K;
        bp += 2 * bstep;
    }
}

/* in_c % 4 != 0 with a small kernel (first layers: in_c = 1 or 3): gather the pixel's patch once,
 * offset added, in SMLAD lane order [k0, k2 | k1, k3] per group of 4, zeros at padding taps */
static void conv_patch(const snapuq_conv_args_t *a)
{
    const int32_t C = a->in_c, K = a->k_h * a->k_w * C, Kp = (K + 3) & ~3;
    const int8_t *fend = a->filter + (size_t)a->out_c * K;
    const int fast = requant_fast_ok(a->mult, a->shift, a->out_c);
    union {
        uint32_t w[PATCH_MAX / 2];
        int16_t h[PATCH_MAX];
    } pt; /* the patch in SMLAD lane order: word 2g = (k0, k2), word 2g + 1 = (k1, k3) of group g */
    int32_t accs[CONV_CHUNK];
    int32_t b, oy, ox, oc, ky, kx, c, i;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            int32_t ky0, ky1;
            tap_range(oy, a->stride_h, a->pad_h, a->dil_h, a->k_h, a->in_h, &ky0, &ky1);
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                int32_t kx0, kx1;
                for (i = 0; i < Kp / 2; i++) {
                    pt.w[i] = 0; /* padding taps and the pad to a multiple of 4: x + offset = 0 */
                }
                tap_range(ox, a->stride_w, a->pad_w, a->dil_w, a->k_w, a->in_w, &kx0, &kx1);                for (ky = ky0; ky < ky1; ky++) {
                    const int8_t *xrow = a->in + ((size_t)b * a->in_h + iy0 + a->dil_h * ky) * a->in_w * C;
                    if (C == 1) {
                        /* grayscale first layer: one element per tap */
                        const int8_t *x = xrow + ix0 + a->dil_w * kx0;
                        int32_t k = ky * a->k_w + kx0;
                        for (kx = kx0; kx < kx1; kx++) {
                            pt.h[lane_pos(k)] = (int16_t)(*x + a->in_offset);
                            x += a->dil_w;
                            k++;
                        }
                        continue;
                    }
                    for (kx = kx0; kx < kx1; kx++) {
                        const int8_t *x = xrow + (size_t)(ix0 + a->dil_w * kx) * C;
                        const int32_t k = (ky * a->k_w + kx) * C;
                        for (c = 0; c < C; c++) {
                            pt.h[lane_pos(k + c)] = (int16_t)(x[c] + a->in_offset);
                        }
                    }
                }
                for (oc = 0; oc < a->out_c; oc += CONV_CHUNK) {
                    const int32_t n = a->out_c - oc < CONV_CHUNK ? a->out_c - oc : CONV_CHUNK;
                    patch_dot(a->filter + (size_t)oc * K, fend, a->bias != NULL ? a->bias + oc : NULL, pt.w, pt.h, K,
                              n, accs);
                    requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, accs, out, oc, n);
                }
            }
        }
    }
}

/* anything else (in_c % 4 != 0 with a large kernel): scalar over the valid taps */
static void conv_scalar(const snapuq_conv_args_t *a)
{
    int32_t b, oy, ox, oc, ky, kx, ic;
    const int32_t C = a->in_c;
    for (b = 0; b < a->batches; b++) {
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            int32_t ky0, ky1;
            tap_range(oy, a->stride_h, a->pad_h, a->dil_h, a->k_h, a->in_h, &ky0, &ky1);
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * a->out_c;
                int32_t kx0, kx1;
                tap_range(ox, a->stride_w, a->pad_w, a->dil_w, a->k_w, a->in_w, &kx0, &kx1);
                for (oc = 0; oc < a->out_c; oc++) {
                    int32_t acc = 0;
                    for (ky = ky0; ky < ky1; ky++) {
                        const int32_t iy = iy0 + a->dil_h * ky;
                        for (kx = kx0; kx < kx1; kx++) {
                            const int8_t *x = a->in + (((size_t)b * a->in_h + iy) * a->in_w + ix0 + a->dil_w * kx) * C;
                            const int8_t *f = a->filter + (((size_t)oc * a->k_h + ky) * a->k_w + kx) * C;
                            for (ic = 0; ic < C; ic++) {
                                acc = snapuq_add_wrap(acc, (int32_t)f[ic] * ((int32_t)x[ic] + a->in_offset));
                            }
                        }
                    }
                    conv_store(a, out, oc, acc);
                }
            }
        }
    }
}

void snapuq_conv_dsp(const snapuq_conv_args_t *a)
{
    if (a->in_c % 4 == 0 && a->in_c > 0) {
        conv_c4(a);
    } else if (a->k_h * a->k_w * a->in_c <= PATCH_MAX) {
        conv_patch(a);
    } else {
        conv_scalar(a);
    }
}

/* ------------------------------------------------------------------ DEPTHWISE_CONV_2D */

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
#define DW_ASM_LD1 "ldr %[t0], [%[x], %[xs]]\n\tldr %[t2], [%[f], %[fs]]\n\t"
#define DW_ASM_LD2                                                                                  \
    "add %[t0], %[x], %[xs], lsl #1\n\tadd %[t2], %[f], %[fs], lsl #1\n\t"                      \
    "ldr %[t0], [%[t0]]\n\tldr %[t2], [%[t2]]\n\t"
#define DW_ASM_OUT                                                                                  \
    [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0), [t1] "=&r"(t1),     \
        [t2] "=&r"(t2), [t3] "=&r"(t3)
#define DW_ASM_IN [x] "r"(xr), [f] "r"(fr), [xs] "r"(xstep), [fs] "r"((ptrdiff_t)C), [off] "r"(off2)

void snapuq_dwconv_dsp(const snapuq_conv_args_t *a)
{
    const int32_t C = a->out_c, C4 = C & ~3;
    const uint32_t off2 = snapuq_dup16(a->in_offset);
    const int fast = requant_fast_ok(a->mult, a->shift, a->out_c);
    const int32_t *bias = a->bias;
    static const int32_t zero4[4] = {0, 0, 0, 0};
    const int8_t *xr0, *fr0;
    int32_t acc[CONV_CHUNK];
    int32_t b, oy, ox, c, ky, kx, ch0;
    if (a->depth_mult != 1) {
        snapuq_dwconv_ref(a);
        return;
    }
    for (b = 0; b < a->batches; b++) {
        const int8_t *in_b = a->in + (size_t)b * a->in_h * a->in_w * C;
        for (oy = 0; oy < a->out_h; oy++) {
            const int32_t iy0 = oy * a->stride_h - a->pad_h;
            int32_t ky0, ky1;
            tap_range(oy, a->stride_h, a->pad_h, a->dil_h, a->k_h, a->in_h, &ky0, &ky1);
            for (ox = 0; ox < a->out_w; ox++) {
                const int32_t ix0 = ox * a->stride_w - a->pad_w;
                int8_t *out = a->out + (((size_t)b * a->out_h + oy) * a->out_w + ox) * C;
                const ptrdiff_t xstep = (ptrdiff_t)a->dil_w * C, xrow = (ptrdiff_t)a->dil_h * a->in_w * C;
                const ptrdiff_t frow = (ptrdiff_t)a->k_w * C;
                int32_t kx0, kx1, ntap;
                tap_range(ox, a->stride_w, a->pad_w, a->dil_w, a->k_w, a->in_w, &kx0, &kx1);
                ntap = kx1 - kx0;
                xr0 = in_b + ((size_t)(iy0 + a->dil_h * ky0) * a->in_w + ix0 + a->dil_w * kx0) * C;
                fr0 = a->filter + ((size_t)ky0 * a->k_w + kx0) * C;
                for (ch0 = 0; ch0 < C; ch0 += CONV_CHUNK) {
                    const int32_t ch1 = ch0 + CONV_CHUNK < C ? ch0 + CONV_CHUNK : C;
                    const int32_t ch1_4 = ch1 < C4 ? ch1 : C4;
                    for (c = ch0; c < ch1_4; c += 4) {
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
                        if (ntap == 3) {
                            /* the common 3-wide kernel row, unrolled */
                            for (ky = ky0; ky < ky1; ky++) {
#if SNAPUQ_SIMD_NATIVE
                                uint32_t t0, t1, t2, t3;
                                __asm__(DW_ASM_LD0 DW_ASM_MAC DW_ASM_LD1 DW_ASM_MAC DW_ASM_LD2 DW_ASM_MAC
                                        : DW_ASM_OUT : DW_ASM_IN : "memory");
#else
                                DW_TAP(xr, fr);
                                DW_TAP(xr + xstep, fr + C);
                                DW_TAP(xr + 2 * xstep, fr + 2 * C);
#endif
                                xr += xrow;
                                fr += frow;
                            }
                        } else if (ntap == 2) {
                            /* a 3-wide row at a border */
                            for (ky = ky0; ky < ky1; ky++) {
#if SNAPUQ_SIMD_NATIVE
                                uint32_t t0, t1, t2, t3;
                                __asm__(DW_ASM_LD0 DW_ASM_MAC DW_ASM_LD1 DW_ASM_MAC : DW_ASM_OUT : DW_ASM_IN : "memory");
#else
                                DW_TAP(xr, fr);
                                DW_TAP(xr + xstep, fr + C);
#endif
                                xr += xrow;
                                fr += frow;
                            }
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
                            const int32_t iy = iy0 + a->dil_h * ky;
                            for (kx = kx0; kx < kx1; kx++) {
                                const int32_t ix = ix0 + a->dil_w * kx;
                                s = snapuq_add_wrap(s, (int32_t)a->filter[((size_t)ky * a->k_w + kx) * C + c] *
                                                           ((int32_t)in_b[((size_t)iy * a->in_w + ix) * C + c] + a->in_offset));
                            }
                        }
                        acc[c - ch0] = s;
                    }
                    requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, acc, out, ch0, ch1 - ch0);
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ FULLY_CONNECTED */

void snapuq_fc_dsp(const snapuq_fc_args_t *a)
{
    const int32_t D = a->depth, D4 = D & ~3;
    const uint32_t off2 = snapuq_dup16(a->in_offset);
    const int fast = requant_fast_ok(a->mult, a->shift, a->out_c);
    int32_t acc[CONV_CHUNK];
    int32_t b, oc, d;
    for (b = 0; b < a->batches; b++) {
        const int8_t *in = a->in + (size_t)b * D;
        int8_t *out = a->out + (size_t)b * a->out_c;
        for (oc = 0; oc + 4 <= a->out_c; oc += 4) {
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
                const int32_t xv = (int32_t)in[d] + a->in_offset;
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
                requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, acc, out, oc - (CONV_CHUNK - 4),
                            CONV_CHUNK);
            }
        }
        if (oc + 2 <= a->out_c) {
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
                const int32_t xv = (int32_t)in[d] + a->in_offset;
                a0 = snapuq_add_wrap(a0, f0[d] * xv);
                a1 = snapuq_add_wrap(a1, f1[d] * xv);
            }
            acc[oc % CONV_CHUNK] = a0;
            acc[oc % CONV_CHUNK + 1] = a1;
            oc += 2;
        }
        for (; oc < a->out_c; oc++) {
            const int8_t *f = a->filter + (size_t)oc * D;
            int32_t s = a->bias != NULL ? a->bias[oc] : 0;
            for (d = 0; d < D4; d += 4) {
                const uint32_t xv = snapuq_ld4(in + d), w = snapuq_ld4(f + d);
                s = snapuq_smlad(snapuq_sxtb16(w), snapuq_sxtab16(off2, xv), s);
                s = snapuq_smlad(snapuq_sxtb16_ror8(w), snapuq_sxtab16_ror8(off2, xv), s);
            }
            for (; d < D; d++) {
                s = snapuq_add_wrap(s, f[d] * ((int32_t)in[d] + a->in_offset));
            }
            acc[oc % CONV_CHUNK] = s;
        }
        if (oc % CONV_CHUNK != 0) {
            const int32_t oc0 = (oc - 1) - (oc - 1) % CONV_CHUNK;
            requant_run(a->mult, a->shift, a->out_offset, a->act_min, a->act_max, fast, acc, out, oc0, oc - oc0);
        }
    }
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_kernels_dsp_unused_t;
#endif
