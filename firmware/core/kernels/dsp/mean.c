/*
 * kernels/dsp/mean.c - MEAN over H and W of an NHWC tensor (global average pooling, the SNAP heads'
 * input) for cores with the Armv7E-M DSP extension; the same-named kernels/ref/mean.c is the
 * reference; the MEAN registration (ops/dsp/op_mean.c) runs it for every other set of axes and
 * the rare requantizations snapuq_mean_dsp_supported() declines, and reports that choice.
 *
 *  - 4 channels per word: SXTAB16 and its ROR #8 form add channels (0, 2) and (1, 3) of one pixel
 *    into two words of 16-bit lanes, 3 instructions per 4 elements, 8 channels per pixel step; on a
 *    word-aligned tensor (C % 4 == 0) one LDRD per pixel and 4 pixels per loop pass (0.81
 *    instructions per element);
 *  - the lanes start at -zp * n (n <= 128 pixels per pass), so they end holding sum(x - zp)
 *    exactly (|sum| <= 255 * 128 < 2^15): no widening, no zero-point subtraction;
 *  - the requantization reads the 16-bit lanes directly: SMLAWB / SMLAWT give floor(acc * m / 2^16)
 *    + 2^14, an arithmetic shift by 15 makes that floor((acc * m + 2^30) / 2^31), TFLite's rounding
 *    doubling high multiply (exact for m != INT32_MIN; proof below), then one rounding shift
 *    (ASRS + ADC, which also adds the output zero point) and SSAT: 7 instructions per output;
 *  - more than 128 pixels: passes of 128 flushed into int32 sums, requantized with one SMLAL.
 * Bit-exact with the reference (tests/c/kernel_prop.c runs both on random shapes).
 *
 * floor((acc*m + 2^30) / 2^31) with X = acc*m = q * 2^16 + r (q = floor(X / 2^16), 0 <= r < 2^16):
 * (X + 2^30) / 2^31 = ((q + 2^14) * 2^16 + r) / 2^31 and r < 2^16 cannot carry past a multiple of
 * 2^31 that (q + 2^14) * 2^16 does not reach, so the floor is floor((q + 2^14) / 2^15).
 */
#include "dsp_common.h"

#if SNAPUQ_KERNELS_DSP

/* pixels per 16-bit lane pass: |zp * n| + |sum x| <= 128 * 128 + 127 * 128 < 2^15 */
#define MEAN_LANE_PIXELS 128

/* requantization of one MEAN (shared by all channels): 1/n folded into m (snapuq_mean_fold),
 * right = -shift in 1..31 */
typedef struct {
    int32_t m, right, out_zp, zp;
} mean_rq_t;

/* one output from a 16-bit lane already holding sum(x - zp): t = SMLAWB/SMLAWT(m, lane, 2^14) */
static inline int8_t rq_lane(int32_t t, int32_t right, int32_t out_zp)
{
    return (int8_t)snapuq_ssat8(snapuq_rshift_round_add(t >> 15, right, out_zp));
}

/* one output from an int32 sum(x - zp), |sum| < 2^30: one SMLAL */
static inline int8_t rq_i32(const mean_rq_t *q, int32_t acc)
{
    const int64_t p = (int64_t)acc * q->m + ((int64_t)1 << 30);
    return (int8_t)snapuq_ssat8(snapuq_rshift_round_add((int32_t)(p >> 31), q->right, q->out_zp));
}

/* the four outputs of channels c .. c + 3 from lanes e = (c, c + 2), o = (c + 1, c + 3) */
static inline void rq_word(int32_t m, int32_t right, int32_t out_zp, uint32_t e, uint32_t o, int8_t *out)
{
    const int32_t half = 1 << 14;
    out[0] = rq_lane(snapuq_smlawb(m, e, half), right, out_zp);
    out[1] = rq_lane(snapuq_smlawb(m, o, half), right, out_zp);
    out[2] = rq_lane(snapuq_smlawt(m, e, half), right, out_zp);
    out[3] = rq_lane(snapuq_smlawt(m, o, half), right, out_zp);
}

/* lanes (e0, o0, e1, o1) += channels 0..7 of n pixels `step` bytes apart; 2 pixels per iteration */
static inline const int8_t *sum8(const int8_t *x, int32_t n, ptrdiff_t step, uint32_t *lanes)
{
    uint32_t e0 = lanes[0], o0 = lanes[1], e1 = lanes[2], o1 = lanes[3];
    int32_t p;
    for (p = 0; p + 2 <= n; p += 2) {
        const uint32_t w0 = snapuq_ld4(x), w1 = snapuq_ld4(x + 4);
        const uint32_t w2 = snapuq_ld4(x + step), w3 = snapuq_ld4(x + step + 4);
        e0 = snapuq_sxtab16(e0, w0);
        o0 = snapuq_sxtab16_ror8(o0, w0);
        e1 = snapuq_sxtab16(e1, w1);
        o1 = snapuq_sxtab16_ror8(o1, w1);
        e0 = snapuq_sxtab16(e0, w2);
        o0 = snapuq_sxtab16_ror8(o0, w2);
        e1 = snapuq_sxtab16(e1, w3);
        o1 = snapuq_sxtab16_ror8(o1, w3);
        x += 2 * step;
    }
    if (p < n) {
        const uint32_t w0 = snapuq_ld4(x), w1 = snapuq_ld4(x + 4);
        e0 = snapuq_sxtab16(e0, w0);
        o0 = snapuq_sxtab16_ror8(o0, w0);
        e1 = snapuq_sxtab16(e1, w1);
        o1 = snapuq_sxtab16_ror8(o1, w1);
        x += step;
    }
    lanes[0] = e0;
    lanes[1] = o0;
    lanes[2] = e1;
    lanes[3] = o1;
    return x;
}

/* sum8 where x and step are word-aligned: one LDRD per pixel, 4 pixels per iteration (26 instructions
 * per 32 elements: LDRD, the pointer step and 4 SXTAB16 per pixel, then the loop test); the last n % 4
 * pixels by sum8 */
static inline const int8_t *sum8_aligned(const int8_t *x, int32_t n, ptrdiff_t step, uint32_t *lanes)
{
#if SNAPUQ_DSP_ASM
    if (n >= 4) {
        const int8_t *const end = x + (ptrdiff_t)(n & ~3) * step;
        uint32_t e0 = lanes[0], o0 = lanes[1], e1 = lanes[2], o1 = lanes[3], w0, w1;
#define MEAN_PIXEL                                                                                           \
    "ldrd %[w0], %[w1], [%[x]]\n\t"                                                                           \
    "add %[x], %[x], %[st]\n\t"                                                                              \
    "sxtab16 %[e0], %[e0], %[w0]\n\t"                                                                        \
    "sxtab16 %[o0], %[o0], %[w0], ror #8\n\t"                                                                \
    "sxtab16 %[e1], %[e1], %[w1]\n\t"                                                                        \
    "sxtab16 %[o1], %[o1], %[w1], ror #8\n\t"
        __asm__ volatile("1:\n\t" MEAN_PIXEL MEAN_PIXEL MEAN_PIXEL MEAN_PIXEL "cmp %[x], %[end]\n\t"
                         "bne 1b\n\t"
                         : [e0] "+r"(e0), [o0] "+r"(o0), [e1] "+r"(e1), [o1] "+r"(o1), [x] "+r"(x),
                           [w0] "=&r"(w0), [w1] "=&r"(w1)
                         : [st] "r"(step), [end] "r"(end)
                         : "cc", "memory");
#undef MEAN_PIXEL
        lanes[0] = e0;
        lanes[1] = o0;
        lanes[2] = e1;
        lanes[3] = o1;
        n &= 3;
    }
#endif
    return sum8(x, n, step, lanes);
}

/* lanes (e, o) += channels 0..3 of n pixels */
static inline const int8_t *sum4(const int8_t *x, int32_t n, ptrdiff_t step, uint32_t *lanes)
{
    uint32_t e = lanes[0], o = lanes[1];
    int32_t p;
    for (p = 0; p < n; p++) {
        const uint32_t w = snapuq_ld4(x);
        e = snapuq_sxtab16(e, w);
        o = snapuq_sxtab16_ror8(o, w);
        x += step;
    }
    lanes[0] = e;
    lanes[1] = o;
    return x;
}

/* channel c alone (a tail of C % 4 channels): int32 sum(x - zp) */
static int32_t sum1(const int8_t *x, int32_t n, ptrdiff_t step, int32_t zp)
{
    int32_t s = -zp * n, p;
    for (p = 0; p < n; p++) {
        s += *x;
        x += step;
    }
    return s;
}

/* H*W <= 128: one lane pass per channel group, requantized from the lanes */
static void mean_short(const mean_rq_t *q, const int8_t *in, int8_t *out, int32_t HW, int32_t C)
{
    const uint32_t init = snapuq_dup16(-q->zp * HW);
    const int32_t m = q->m, right = q->right, out_zp = q->out_zp; /* in registers across the loops */
    const int aligned = (((uintptr_t)in | (uintptr_t)C) & 3u) == 0u; /* LDRD needs word addresses */
    int32_t c = 0;
    for (; c + 8 <= C; c += 8) {
        uint32_t l[4];
        l[0] = l[1] = l[2] = l[3] = init;
        (void)(aligned ? sum8_aligned(in + c, HW, C, l) : sum8(in + c, HW, C, l));
        rq_word(m, right, out_zp, l[0], l[1], out + c);
        rq_word(m, right, out_zp, l[2], l[3], out + c + 4);
    }
    for (; c + 4 <= C; c += 4) {
        uint32_t l[2];
        l[0] = l[1] = init;
        (void)sum4(in + c, HW, C, l);
        rq_word(m, right, out_zp, l[0], l[1], out + c);
    }
    for (; c < C; c++) {
        out[c] = rq_i32(q, sum1(in + c, HW, C, q->zp));
    }
}

/* H*W > 128: lane passes of up to 128 pixels flushed into int32 sums */
SNAPUQ_NOINLINE static void mean_long(const mean_rq_t *q, const int8_t *in, int8_t *out, int32_t HW, int32_t C)
{
    const int aligned = (((uintptr_t)in | (uintptr_t)C) & 3u) == 0u;
    int32_t c = 0, p, j;
    for (; c + 4 <= C; c += C - c >= 8 ? 8 : 4) {
        const int32_t eight = C - c >= 8;
        const int8_t *x = in + c;
        int32_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (p = 0; p < HW;) {
            const int32_t n = HW - p < MEAN_LANE_PIXELS ? HW - p : MEAN_LANE_PIXELS;
            const uint32_t init = snapuq_dup16(-q->zp * n);
            uint32_t l[4];
            l[0] = l[1] = l[2] = l[3] = init;
            x = eight ? (aligned ? sum8_aligned(x, n, C, l) : sum8(x, n, C, l)) : sum4(x, n, C, l);
            for (j = 0; j < (eight ? 2 : 1); j++) {
                /* lanes e = (c, c + 2), o = (c + 1, c + 3) of word j */
                s[4 * j] += (int16_t)(l[2 * j] & 0xFFFFu);
                s[4 * j + 2] += (int16_t)(l[2 * j] >> 16);
                s[4 * j + 1] += (int16_t)(l[2 * j + 1] & 0xFFFFu);
                s[4 * j + 3] += (int16_t)(l[2 * j + 1] >> 16);
            }
            p += n;
        }
        for (j = 0; j < (eight ? 8 : 4); j++) {
            out[c + j] = rq_i32(q, s[j]);
        }
    }
    for (; c < C; c++) {
        out[c] = rq_i32(q, sum1(in + c, HW, C, q->zp));
    }
}

int snapuq_mean_dsp_supported(const snapuq_mean_args_t *a)
{
    const int32_t HW = a->dims[1] * a->dims[2];
    int32_t m, shift;
    if (a->reduce[0] || !a->reduce[1] || !a->reduce[2] || a->reduce[3] || HW < 1 || HW > (1 << 22)) {
        return 0;
    }
    snapuq_mean_fold(a->mult, a->shift, HW, &m, &shift);
    /* a left shift or no right shift: the reference's general requantization */
    return m != INT32_MIN && shift <= -1 && shift >= -31;
}

snapuq_status_t snapuq_mean_dsp(const snapuq_mean_args_t *a)
{
    const int32_t B = a->dims[0], HW = a->dims[1] * a->dims[2], C = a->dims[3];
    mean_rq_t q;
    int32_t b, shift;
    /* snapuq_mean_dsp_supported(), with the fold computed once */
    if (a->reduce[0] || !a->reduce[1] || !a->reduce[2] || a->reduce[3] || HW < 1 || HW > (1 << 22)) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE;
    }
    snapuq_mean_fold(a->mult, a->shift, HW, &q.m, &shift);
    if (q.m == INT32_MIN || shift > -1 || shift < -31) {
        return SNAPUQ_ERR_UNSUPPORTED_TYPE;
    }
    q.right = -shift;
    q.out_zp = a->out_zp;
    q.zp = a->in_zp;
    for (b = 0; b < B; b++) {
        const int8_t *in = a->in + (size_t)b * HW * C;
        int8_t *out = a->out + (size_t)b * C;
        if (HW <= MEAN_LANE_PIXELS) {
            mean_short(&q, in, out, HW, C);
        } else {
            mean_long(&q, in, out, HW, C);
        }
    }
    return SNAPUQ_OK;
}

#else
/* reference build: this translation unit intentionally defines nothing else */
typedef int snapuq_mean_dsp_unused_t;
#endif
