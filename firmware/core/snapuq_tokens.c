/*
 * snapuq_tokens.c - Uncert token importance (integer) and top-K selection.
 * The arithmetic is specified in host/snapuq/tokens/fixed.py; keep both in step.
 */
#include "snapuq_tokens.h"

#define G_LEN 129
#define G_STEP_SHIFT 13

/* G[k] = round(log(1 + exp(-k/8)) * 2^16), k = 0..128 */
static const uint32_t G_TABLE[G_LEN] = {
    45426u, 41458u, 37745u, 34283u, 31069u, 28095u, 25354u, 22836u,
    20530u, 18425u, 16510u, 14773u, 13200u, 11780u, 10500u, 9350u,
    8318u, 7394u, 6567u, 5829u, 5170u, 4583u, 4061u, 3597u,
    3184u, 2818u, 2493u, 2205u, 1950u, 1724u, 1523u, 1346u,
    1189u, 1051u, 928u, 820u, 724u, 639u, 565u, 498u,
    440u, 389u, 343u, 303u, 267u, 236u, 208u, 184u,
    162u, 143u, 126u, 112u, 98u, 87u, 77u, 68u,
    60u, 53u, 47u, 41u, 36u, 32u, 28u, 25u,
    22u, 19u, 17u, 15u, 13u, 12u, 10u, 9u,
    8u, 7u, 6u, 6u, 5u, 4u, 4u, 3u,
    3u, 3u, 2u, 2u, 2u, 2u, 1u, 1u,
    1u, 1u, 1u, 1u, 1u, 1u, 1u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    0u
};

static uint32_t softplus_q16(int64_t x)
{
    uint64_t u = (uint64_t)(x < 0 ? -x : x);
    uint32_t g = 0;
    if (u < ((uint64_t)(G_LEN - 1) << G_STEP_SHIFT)) {
        uint32_t i = (uint32_t)(u >> G_STEP_SHIFT);
        uint32_t f = (uint32_t)(u & ((1u << G_STEP_SHIFT) - 1u));
        g = G_TABLE[i] - (uint32_t)(((uint64_t)(G_TABLE[i] - G_TABLE[i + 1]) * f) >> G_STEP_SHIFT);
    }
    return (uint32_t)((x > 0 ? (uint64_t)x : 0u) + g);
}

snapuq_status_t snapuq_tokens_evidence_lut(uint32_t scale_q16, int32_t zero_point, uint32_t *lut)
{
    int32_t q;
    if (lut == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (scale_q16 < 1u || scale_q16 >= SNAPUQ_TOKENS_SCALE_Q16_MAX || zero_point < -128 || zero_point > 127) {
        return SNAPUQ_ERR_QUANT;
    }
    for (q = -128; q <= 127; ++q) {
        lut[q + 128] = softplus_q16((int64_t)(q - zero_point) * (int64_t)scale_q16);
    }
    return SNAPUQ_OK;
}

static uint64_t isqrt_u64(uint64_t v)
{
    uint64_t r = 0;
    uint64_t bit = (uint64_t)1 << 62;
    while (bit > v) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (v >= r + bit) {
            v -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return r;
}

snapuq_status_t snapuq_tokens_importance(const snapuq_tokens_config_t *cfg, const uint32_t *lut,
                                         const int8_t *logits, uint32_t *scores, uint32_t *u_out)
{
    uint32_t i, t, c;
    if (cfg == NULL || lut == NULL || logits == NULL || scores == NULL) {
        return SNAPUQ_ERR_ARG;
    }
    if (cfg->T < 1u || cfg->T > SNAPUQ_TOKENS_MAX_T || cfg->N < 1u || cfg->C < 2u ||
        cfg->mean_weight_q16 > 2u * SNAPUQ_TOKENS_ONE_Q16 || cfg->std_weight_q16 > 2u * SNAPUQ_TOKENS_ONE_Q16) {
        return SNAPUQ_ERR_ARG;
    }
    for (i = 0; i < cfg->N; ++i) {
        uint64_t su = 0, su2 = 0, d, r, num;
        for (t = 0; t < cfg->T; ++t) {
            const int8_t *q = logits + ((size_t)t * cfg->N + i) * cfg->C;
            uint64_t a = (uint64_t)cfg->C << 16;
            uint64_t u;
            for (c = 0; c < cfg->C; ++c) {
                a += lut[(int32_t)q[c] + 128];
            }
            u = ((uint64_t)cfg->C << 32) / a;
            su += u;
            su2 += u * u;
            if (u_out != NULL) {
                u_out[(size_t)t * cfg->N + i] = (uint32_t)u;
            }
        }
        d = (uint64_t)cfg->T * su2 - su * su; /* >= 0 (Cauchy-Schwarz), exact */
        r = isqrt_u64(d);
        num = (uint64_t)cfg->mean_weight_q16 * su + (uint64_t)cfg->std_weight_q16 * r;
        scores[i] = (uint32_t)(num / ((uint64_t)cfg->T << 16));
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_tokens_topk(const uint32_t *scores, uint16_t n, uint16_t k, uint16_t *idx_out)
{
    uint16_t i, filled = 0;
    if (scores == NULL || idx_out == NULL || k < 1u || k > n) {
        return SNAPUQ_ERR_ARG;
    }
    /* insertion into a list sorted by descending score; equal scores keep arrival (index) order */
    for (i = 0; i < n; ++i) {
        uint16_t pos = filled;
        while (pos > 0 && scores[idx_out[pos - 1]] < scores[i]) {
            --pos;
        }
        if (pos >= k) {
            continue;
        }
        {
            uint16_t j = (filled < k) ? filled : (uint16_t)(k - 1u);
            for (; j > pos; --j) {
                idx_out[j] = idx_out[j - 1];
            }
        }
        idx_out[pos] = i;
        if (filled < k) {
            ++filled;
        }
    }
    return SNAPUQ_OK;
}

snapuq_status_t snapuq_tokens_keep_mask(const uint16_t *idx, uint16_t k, uint16_t n, uint8_t *keep)
{
    uint16_t i;
    if (idx == NULL || keep == NULL || k > n) {
        return SNAPUQ_ERR_ARG;
    }
    for (i = 0; i < n; ++i) {
        keep[i] = 0;
    }
    for (i = 0; i < k; ++i) {
        if (idx[i] >= n || keep[idx[i]] != 0) {
            return SNAPUQ_ERR_ARG;
        }
        keep[idx[i]] = 1;
    }
    return SNAPUQ_OK;
}
