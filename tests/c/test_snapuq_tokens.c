/*
 * Driver for tests/host/test_tokens_c.py: reads cases from stdin, prints what snapuq_tokens
 * computes, so pytest can compare it with snapuq.tokens.fixed. Also checks the argument errors.
 *
 * stdin:  n_cases, then per case "T N C scale_q16 zero_point mean_w_q16 std_w_q16 K" and T*N*C
 *         int8 codes. stdout per case: "lut" 256 values, "scores" N, "u" T*N, "topk" K, "mask" N.
 */
#include <stdio.h>
#include <stdlib.h>

#include "snapuq_tokens.h"

#define MAX_ELEMS 65536
#define MAX_N 1024

static int8_t logits[MAX_ELEMS];
static uint32_t u[MAX_ELEMS];
static uint32_t scores[MAX_N];
static uint16_t idx[MAX_N];
static uint8_t keep[MAX_N];
static uint32_t lut[SNAPUQ_TOKENS_LUT_LEN];

static int check_errors(void)
{
    snapuq_tokens_config_t cfg = {4, 3, 2, 65536u, 58982u};
    int8_t q[24] = {0};
    uint32_t s[3] = {3, 1, 2};
    uint16_t id[3] = {0, 0, 0};
    uint8_t m[3];
    int bad = 0;
    bad += snapuq_tokens_evidence_lut(1000u, 0, NULL) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_evidence_lut(0u, 0, lut) != SNAPUQ_ERR_QUANT;
    bad += snapuq_tokens_evidence_lut(1u << 23, 0, lut) != SNAPUQ_ERR_QUANT;
    bad += snapuq_tokens_evidence_lut(1000u, 128, lut) != SNAPUQ_ERR_QUANT;
    bad += snapuq_tokens_evidence_lut(1000u, -129, lut) != SNAPUQ_ERR_QUANT;
    bad += snapuq_tokens_evidence_lut(1000u, 5, lut) != SNAPUQ_OK;
    bad += snapuq_tokens_importance(NULL, lut, q, scores, NULL) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_importance(&cfg, NULL, q, scores, NULL) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_importance(&cfg, lut, NULL, scores, NULL) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_importance(&cfg, lut, q, NULL, NULL) != SNAPUQ_ERR_ARG;
    cfg.C = 1;
    bad += snapuq_tokens_importance(&cfg, lut, q, scores, NULL) != SNAPUQ_ERR_ARG;
    cfg.C = 2;
    cfg.T = 0;
    bad += snapuq_tokens_importance(&cfg, lut, q, scores, NULL) != SNAPUQ_ERR_ARG;
    cfg.T = 4;
    cfg.std_weight_q16 = 2u * 65536u + 1u;
    bad += snapuq_tokens_importance(&cfg, lut, q, scores, NULL) != SNAPUQ_ERR_ARG;
    cfg.std_weight_q16 = 58982u;
    bad += snapuq_tokens_importance(&cfg, lut, q, scores, NULL) != SNAPUQ_OK;
    bad += snapuq_tokens_topk(s, 3, 0, id) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_topk(s, 3, 4, id) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_topk(NULL, 3, 1, id) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_topk(s, 3, 2, NULL) != SNAPUQ_ERR_ARG;
    bad += snapuq_tokens_topk(s, 3, 2, id) != SNAPUQ_OK || id[0] != 0 || id[1] != 2;
    bad += snapuq_tokens_keep_mask(id, 2, 3, m) != SNAPUQ_OK || m[0] != 1 || m[1] != 0 || m[2] != 1;
    id[1] = 0;
    bad += snapuq_tokens_keep_mask(id, 2, 3, m) != SNAPUQ_ERR_ARG; /* duplicate */
    id[1] = 3;
    bad += snapuq_tokens_keep_mask(id, 2, 3, m) != SNAPUQ_ERR_ARG; /* out of range */
    bad += snapuq_tokens_keep_mask(NULL, 2, 3, m) != SNAPUQ_ERR_ARG;
    return bad;
}

int main(void)
{
    int n_cases, c;
    if (check_errors() != 0) {
        printf("error checks FAILED\n");
        return 1;
    }
    printf("error checks ok\n");
    if (scanf("%d", &n_cases) != 1) {
        return 2;
    }
    for (c = 0; c < n_cases; ++c) {
        unsigned T, N, C, scale, mw, sw, K;
        int zp;
        size_t i, n;
        snapuq_tokens_config_t cfg;
        snapuq_status_t st;
        if (scanf("%u %u %u %u %d %u %u %u", &T, &N, &C, &scale, &zp, &mw, &sw, &K) != 8) {
            return 2;
        }
        n = (size_t)T * N * C;
        if (n > MAX_ELEMS || N > MAX_N) {
            return 2;
        }
        for (i = 0; i < n; ++i) {
            int v;
            if (scanf("%d", &v) != 1) {
                return 2;
            }
            logits[i] = (int8_t)v;
        }
        cfg.T = (uint16_t)T;
        cfg.N = (uint16_t)N;
        cfg.C = (uint16_t)C;
        cfg.mean_weight_q16 = mw;
        cfg.std_weight_q16 = sw;
        st = snapuq_tokens_evidence_lut(scale, zp, lut);
        printf("status_lut %d\nlut", (int)st);
        for (i = 0; i < SNAPUQ_TOKENS_LUT_LEN; ++i) {
            printf(" %lu", (unsigned long)lut[i]);
        }
        st = snapuq_tokens_importance(&cfg, lut, logits, scores, u);
        printf("\nstatus_imp %d\nscores", (int)st);
        for (i = 0; i < N; ++i) {
            printf(" %lu", (unsigned long)scores[i]);
        }
        printf("\nu");
        for (i = 0; i < (size_t)T * N; ++i) {
            printf(" %lu", (unsigned long)u[i]);
        }
        st = snapuq_tokens_topk(scores, (uint16_t)N, (uint16_t)K, idx);
        printf("\nstatus_topk %d\ntopk", (int)st);
        for (i = 0; i < K; ++i) {
            printf(" %u", (unsigned)idx[i]);
        }
        st = snapuq_tokens_keep_mask(idx, (uint16_t)K, (uint16_t)N, keep);
        printf("\nstatus_mask %d\nmask", (int)st);
        for (i = 0; i < N; ++i) {
            printf(" %u", (unsigned)keep[i]);
        }
        printf("\n");
    }
    printf("done %d\n", n_cases);
    return 0;
}
