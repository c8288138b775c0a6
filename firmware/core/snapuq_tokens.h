/*
 * snapuq_tokens.h - Uncert token importance and top-K selection on the device.
 *
 * Integer-only and bit-exact with snapuq.tokens.fixed (host/snapuq/tokens/fixed.py, which states
 * the contract step by step; docs/TOKENS.md explains it). For every token i of a spiking
 * transformer and every time step t, the model head gives int8 logits q[t][i][c] with real value
 * scale * (q - zero_point). The kernel computes
 *
 *   evidence e = softplus(logit)              (256-entry Q16 LUT, built once per scale/zp)
 *   U_t = C / sum_c (e_c + 1)                 (Dirichlet uncertainty, Q16, 0 < U_t <= 1)
 *   score_i = w_mean * mean_t U_t + lambda * std_t U_t      (Q16; paper: w_mean 1, lambda 0.9)
 *
 * and selects the K highest-scoring tokens (descending score, ties to the lower index); those are
 * kept, the rest pruned before the next attention. No allocation: every buffer is caller-owned,
 * no scratch memory is needed. Uses 64-bit integer arithmetic (one 64-bit division per token
 * and step).
 */
#ifndef SNAPUQ_TOKENS_H
#define SNAPUQ_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SNAPUQ_TOKENS_LUT_LEN 256
#define SNAPUQ_TOKENS_MAX_T 255
#define SNAPUQ_TOKENS_SCALE_Q16_MAX (1UL << 23) /* exclusive: real scale < 128 */
#define SNAPUQ_TOKENS_LAMBDA_DEFAULT_Q16 58982u /* round(0.9 * 2^16) */
#define SNAPUQ_TOKENS_ONE_Q16 65536u

typedef struct {
    uint16_t T;                /* time steps, 1..SNAPUQ_TOKENS_MAX_T */
    uint16_t N;                /* tokens, >= 1 */
    uint16_t C;                /* classes, >= 2 */
    uint32_t mean_weight_q16;  /* weight of mean_t U, Q16, 0..131072 (65536 = 1.0) */
    uint32_t std_weight_q16;   /* lambda, weight of std_t U, Q16, 0..131072 (58982 = 0.9) */
} snapuq_tokens_config_t;

/* Fill lut[256] (index = int8 code + 128) with softplus(scale * (code - zero_point)) in Q16.
 * scale_q16 = round(scale * 2^16), 1 <= scale_q16 < 2^23; -128 <= zero_point <= 127.
 * Entries are 0..2^32-1. Returns SNAPUQ_ERR_ARG (lut NULL) or SNAPUQ_ERR_QUANT (range). */
snapuq_status_t snapuq_tokens_evidence_lut(uint32_t scale_q16, int32_t zero_point, uint32_t *lut);

/* Importance of each token.
 *   logits: int8 [T][N][C] (C contiguous, then tokens, then steps), T*N*C codes
 *   lut:    from snapuq_tokens_evidence_lut()
 *   scores: out, N entries, Q16 (0..2*2^17)
 *   u_out:  optional out (may be NULL), T*N entries [T][N], Q16 U_t of every token and step
 * Returns SNAPUQ_ERR_ARG for NULL pointers or a config outside the stated ranges. */
snapuq_status_t snapuq_tokens_importance(const snapuq_tokens_config_t *cfg, const uint32_t *lut,
                                         const int8_t *logits, uint32_t *scores, uint32_t *u_out);

/* Indices of the k largest of scores[0..n-1] into idx_out[0..k-1], by descending score, ties to
 * the lower index. 1 <= k <= n <= 65535. O(n*k), no scratch. Returns SNAPUQ_ERR_ARG otherwise. */
snapuq_status_t snapuq_tokens_topk(const uint32_t *scores, uint16_t n, uint16_t k, uint16_t *idx_out);

/* keep[i] = 1 for the indices in idx[0..k-1], 0 elsewhere (n entries). idx values must be < n
 * and distinct. Returns SNAPUQ_ERR_ARG otherwise. */
snapuq_status_t snapuq_tokens_keep_mask(const uint16_t *idx, uint16_t k, uint16_t n, uint8_t *keep);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_TOKENS_H */
