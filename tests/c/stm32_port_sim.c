/*
 * Runs firmware/port/stm32/port_stm32.c on the host against a register model of the part's RCC, PWR,
 * flash interface, USART and DWT (reset values from the reference manuals; ready flags follow their
 * enable bits unless a fault scenario holds one low), then prints the registers the bring-up left.
 * Compiled once per part (-DSNAPUQ_STM32F767 / L432 / F446 / F405); tests/host/test_stm32_port_sim.py
 * checks the output against the clock trees the reference manuals give.
 *
 * usage: stm32_port_sim SCENARIO   ok | pll_stuck | od_stuck | switch_stuck | no_rcc | no_dwt
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile uint32_t *sim_reg(uint32_t addr);
#define SNAPUQ_REG(addr) (*sim_reg((uint32_t)(addr)))
#define SNAPUQ_BARRIER() ((void)0)

#include "../../firmware/port/stm32/port_stm32.c"

/* ------------------------------------------------------------------ the register model */
#define NREG 256
static uint32_t reg_addr[NREG], reg_val[NREG];
static int nreg;
static uint32_t zero_sink;
static int pll_ok = 1, od_ok = 1, switch_ok = 1, rcc_present = 1, dwt_present = 1;
static unsigned long dcisw_writes;

static uint32_t *slot(uint32_t addr)
{
    int i;
    for (i = 0; i < nreg; i++) {
        if (reg_addr[i] == addr) {
            return &reg_val[i];
        }
    }
    if (nreg == NREG) {
        fprintf(stderr, "register model full\n");
        exit(2);
    }
    reg_addr[nreg] = addr;
    reg_val[nreg] = 0u;
    return &reg_val[nreg++];
}

static void set(uint32_t addr, uint32_t v) { *slot(addr) = v; }
static uint32_t get(uint32_t addr) { return *slot(addr); }

static int in_rcc_domain(uint32_t a)
{
    return (a >= RCC && a < RCC + 0x400u) || a == FLASH_ACR || (a >= 0x40007000u && a < 0x40007400u);
}

/* Bring the status bits in line with the control bits (what the hardware does between accesses). */
static void settle(void)
{
    uint32_t cr = get(RCC_CR), cfgr = get(RCC_CFGR);
    cr = (cr & (1u << 24)) && pll_ok ? (cr | (1u << 25)) : (cr & ~(1u << 25));
    set(RCC_CR, cr);
    if (switch_ok) {
        set(RCC_CFGR, (cfgr & ~(3u << 2)) | ((cfgr & 3u) << 2));
    }
#if !defined(FAM_L4)
    {
        uint32_t pcr = get(PWR_CR), csr = get(PWR_CSR) & ~((1u << 16) | (1u << 17));
        if ((pcr & (1u << 16)) && od_ok) {
            csr |= 1u << 16;
        }
        if ((pcr & (1u << 17)) && (csr & (1u << 16))) {
            csr |= 1u << 17;
        }
        set(PWR_CSR, csr);
    }
#endif
    if (dwt_present && (get(DWT_CTRL) & 1u)) {
        set(DWT_CYCCNT, get(DWT_CYCCNT) + 1u);
    }
    set(USART_ISR, get(USART_ISR) | ISR_TXE);
}

volatile uint32_t *sim_reg(uint32_t addr)
{
    if (!rcc_present && in_rcc_domain(addr)) {
        zero_sink = 0u; /* an emulator without the model: reads 0, writes vanish */
        return &zero_sink;
    }
    if (!dwt_present && addr >= 0xE0001000u && addr < 0xE0002000u) {
        zero_sink = 0u;
        return &zero_sink;
    }
    if (addr == 0xE000EF60u) {
        dcisw_writes++;
    }
    settle();
    return slot(addr);
}

static void reset_values(void)
{
#if defined(FAM_L4)
    set(RCC_CR, 0x00000063u);      /* MSION, MSIRDY, MSIRANGE 6 (4 MHz) */
    set(RCC_PLLCFGR, 0x00001000u);
    set(PWR_CR1, 0x00000200u);     /* VOS range 1 */
#else
    set(RCC_CR, 0x00000083u);      /* HSION, HSIRDY, HSITRIM 16 */
    set(RCC_PLLCFGR, 0x24003010u);
#if defined(SNAPUQ_STM32F405)
    set(PWR_CR, 0x00004000u);
#else
    set(PWR_CR, 0x0000C000u);
#endif
#endif
    set(SCB_CCSIDR, 0xF01FE019u);  /* Cortex-M7 32 KB D-cache: 256 sets x 4 ways */
    set(USART_ISR, ISR_TXE);
}

static void usage(void)
{
    fprintf(stderr, "usage: stm32_port_sim ok|pll_stuck|od_stuck|switch_stuck|no_rcc|no_dwt\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *sc = argc > 1 ? argv[1] : "";
    uint64_t c0, c1;
    if (strcmp(sc, "ok") == 0) {
    } else if (strcmp(sc, "pll_stuck") == 0) {
        pll_ok = 0;
    } else if (strcmp(sc, "od_stuck") == 0) {
        od_ok = 0;
    } else if (strcmp(sc, "switch_stuck") == 0) {
        switch_ok = 0;
    } else if (strcmp(sc, "no_rcc") == 0) {
        rcc_present = 0;
        dwt_present = 0;
    } else if (strcmp(sc, "no_dwt") == 0) {
        dwt_present = 0;
    } else {
        usage();
    }
    reset_values();
    snapuq_port_init();
    c0 = snapuq_port_counter();
    c1 = snapuq_port_counter();
    printf("board=%s cpu=%s clock=%s cpu_hz=%lu counter=%s counter_hz=%lu counting=%d\n", snapuq_port_board(),
           snapuq_port_cpu(), snapuq_port_clock(), (unsigned long)snapuq_port_cpu_hz(), snapuq_port_counter_kind(),
           (unsigned long)snapuq_port_counter_hz(), c1 > c0);
    if (rcc_present) {
        printf("RCC_CR=0x%08lx RCC_PLLCFGR=0x%08lx RCC_CFGR=0x%08lx FLASH_ACR=0x%08lx\n", (unsigned long)get(RCC_CR),
               (unsigned long)get(RCC_PLLCFGR), (unsigned long)get(RCC_CFGR), (unsigned long)get(FLASH_ACR));
#if defined(FAM_L4)
        printf("PWR_CR=0x%08lx PWR_CSR=0x%08lx\n", (unsigned long)get(PWR_CR1), 0ul);
#else
        printf("PWR_CR=0x%08lx PWR_CSR=0x%08lx\n", (unsigned long)get(PWR_CR), (unsigned long)get(PWR_CSR));
#endif
    }
    printf("USART=0x%08lx USART_BRR=%lu USART_CR1=0x%08lx SCB_CCR=0x%08lx DCISW_writes=%lu\n", (unsigned long)USART,
           (unsigned long)get(USART_BRR), (unsigned long)get(USART_CR1), (unsigned long)get(SCB_CCR), dcisw_writes);
    return 0;
}

/* ------------------------------------------------------------------ what cortexm.c gives on a board */
static uint64_t fake_systick;
void snapuq_cortexm_systick_start(void) {}
uint64_t snapuq_cortexm_systick_count(void) { return fake_systick += 10u; }
size_t snapuq_cortexm_stack_peak(void) { return 0u; }
size_t snapuq_cortexm_stack_size(void) { return 0u; }
size_t snapuq_cortexm_flash_used(void) { return 0u; }
size_t snapuq_cortexm_flash_size(void) { return 0u; }
size_t snapuq_cortexm_ram_static(void) { return 0u; }
size_t snapuq_cortexm_ram_size(void) { return 0u; }
uint8_t *snapuq_cortexm_pool(size_t *bytes)
{
    *bytes = 0u;
    return NULL;
}
void snapuq_cortexm_reset(void) { exit(3); }
void snapuq_cortexm_exit(int code) { exit(code); }
