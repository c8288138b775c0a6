/*
 * tokens_icount_main.c - instructions per call of the Uncert token kernel (firmware/core/snapuq_tokens.c)
 * on QEMU (run with -icount shift=0: one instruction per ns of virtual time; SysTick runs on the
 * 25 MHz SYSCLK, so one tick = 40 instructions; each figure is averaged over TI_REPS calls).
 *
 * For every stage size (T, N, C, K) given at build time it prints one line
 *   tokens_icount T=4 N=64 C=10 K=52 lut=<instr> importance=<instr> topk=<instr>
 * with pseudo-random int8 logits, then "tokens_icount: ok".
 */
#include <stdint.h>

#include "snapuq_tokens.h"

#ifndef TI_REPS
#define TI_REPS 40
#endif
#define TI_MAX (4 * 64 * 10)

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define INSTR_PER_TICK 40u

void kp_puts(const char *s);
int semihost_main(void);

static int8_t logits[TI_MAX];
static uint32_t lut[SNAPUQ_TOKENS_LUT_LEN];
static uint32_t scores[64];
static uint16_t idx[64];

static const uint16_t SIZES[][4] = {/* T, N, C, K = ceil(0.8 N) */
                                    {4, 64, 10, 52}, {4, 16, 10, 13}, {4, 49, 10, 40}};

static uint32_t now(void)
{
    return 0xFFFFFFu - (SYST_CVR & 0xFFFFFFu);
}

static void put_u32(char **p, uint32_t v)
{
    char tmp[11];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (n) {
        *(*p)++ = tmp[--n];
    }
}

static void put_s(char **p, const char *s)
{
    while (*s) {
        *(*p)++ = *s++;
    }
}

int semihost_main(void)
{
    uint32_t seed = 12345u;
    unsigned si;
    SYST_CSR = 0u;
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0u;
    SYST_CSR = 0x5u; /* processor clock, no interrupt, enabled; 2^24 ticks = 671 M instructions */
    for (si = 0; si < sizeof SIZES / sizeof SIZES[0]; si++) {
        snapuq_tokens_config_t cfg;
        uint32_t t0, t_lut, t_imp, t_topk, i, r;
        char line[160], *p = line;
        cfg.T = SIZES[si][0];
        cfg.N = SIZES[si][1];
        cfg.C = SIZES[si][2];
        cfg.mean_weight_q16 = SNAPUQ_TOKENS_ONE_Q16;
        cfg.std_weight_q16 = SNAPUQ_TOKENS_LAMBDA_DEFAULT_Q16;
        for (i = 0; i < (uint32_t)cfg.T * cfg.N * cfg.C; i++) {
            seed = seed * 1664525u + 1013904223u;
            logits[i] = (int8_t)(seed >> 24);
        }
        t0 = now();
        for (r = 0; r < TI_REPS; r++) {
            if (snapuq_tokens_evidence_lut(9830u /* 0.15 */, -3, lut) != SNAPUQ_OK) {
                return 2;
            }
        }
        t_lut = now() - t0;
        t0 = now();
        for (r = 0; r < TI_REPS; r++) {
            if (snapuq_tokens_importance(&cfg, lut, logits, scores, 0) != SNAPUQ_OK) {
                return 3;
            }
        }
        t_imp = now() - t0;
        t0 = now();
        for (r = 0; r < TI_REPS; r++) {
            if (snapuq_tokens_topk(scores, cfg.N, SIZES[si][3], idx) != SNAPUQ_OK) {
                return 4;
            }
        }
        t_topk = now() - t0;
        put_s(&p, "tokens_icount T=");
        put_u32(&p, cfg.T);
        put_s(&p, " N=");
        put_u32(&p, cfg.N);
        put_s(&p, " C=");
        put_u32(&p, cfg.C);
        put_s(&p, " K=");
        put_u32(&p, SIZES[si][3]);
        put_s(&p, " lut=");
        put_u32(&p, t_lut * INSTR_PER_TICK / TI_REPS);
        put_s(&p, " importance=");
        put_u32(&p, t_imp * INSTR_PER_TICK / TI_REPS);
        put_s(&p, " topk=");
        put_u32(&p, t_topk * INSTR_PER_TICK / TI_REPS);
        put_s(&p, "\n");
        *p = 0;
        kp_puts(line);
    }
    kp_puts("tokens_icount: ok\n");
    return 0;
}
