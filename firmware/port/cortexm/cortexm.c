/* Shared Cortex-M helpers: stack high-water, linker figures, SysTick counter, reset, semihosting. */
#include "cortexm.h"

extern uint32_t __stack_bottom__, __stack_top__;
extern uint8_t __pool_start__, __pool_end__;
extern uint32_t __flash_used__, __flash_size__, __ram_static__, __ram_size__;

#define STACK_PAINT 0xA5C3A5C3u

void snapuq_cortexm_stack_paint(void)
{
    uint32_t here;
    volatile uint32_t *p = &__stack_bottom__;
    /* leave 64 bytes below the current frame untouched */
    uint32_t *limit = (uint32_t *)(((uintptr_t)&here - 64u) & ~(uintptr_t)3u);
    while ((uint32_t *)p < limit) {
        *p++ = STACK_PAINT;
    }
}

size_t snapuq_cortexm_stack_peak(void)
{
    const volatile uint32_t *p = &__stack_bottom__;
    while ((const uint32_t *)p < &__stack_top__ && *p == STACK_PAINT) {
        p++;
    }
    return (size_t)((uintptr_t)&__stack_top__ - (uintptr_t)p);
}

size_t snapuq_cortexm_stack_size(void)
{
    return (size_t)((uintptr_t)&__stack_top__ - (uintptr_t)&__stack_bottom__);
}

/* Linker-defined absolute symbols: their address is the value. */
size_t snapuq_cortexm_flash_used(void) { return (size_t)(uintptr_t)&__flash_used__; }
size_t snapuq_cortexm_flash_size(void) { return (size_t)(uintptr_t)&__flash_size__; }
size_t snapuq_cortexm_ram_static(void) { return (size_t)(uintptr_t)&__ram_static__; }
size_t snapuq_cortexm_ram_size(void) { return (size_t)(uintptr_t)&__ram_size__; }

uint8_t *snapuq_cortexm_pool(size_t *bytes)
{
    *bytes = (size_t)(&__pool_end__ - &__pool_start__);
    return &__pool_start__;
}

#define SYSTICK_RELOAD 0x00FFFFFFu
static volatile uint32_t systick_wraps;

void SysTick_Handler(void)
{
    systick_wraps++;
}

void snapuq_cortexm_systick_start(void)
{
    SNAPUQ_REG(SYST_CSR) = 0u;
    SNAPUQ_REG(SYST_RVR) = SYSTICK_RELOAD;
    SNAPUQ_REG(SYST_CVR) = 0u;
    /* CLKSOURCE = processor clock, TICKINT, ENABLE */
    SNAPUQ_REG(SYST_CSR) = 0x7u;
}

uint64_t snapuq_cortexm_systick_count(void)
{
    uint32_t wraps, val;
    do {
        wraps = systick_wraps;
        val = SNAPUQ_REG(SYST_CVR) & SYSTICK_RELOAD;
        /* a wrap pending but not yet serviced: COUNTFLAG is cleared by the read of CSR, so
           retry until the interrupt has run and the wrap count is stable around the read */
    } while (wraps != systick_wraps);
    return (uint64_t)wraps * (SYSTICK_RELOAD + 1u) + (uint64_t)(SYSTICK_RELOAD - val);
}

void snapuq_cortexm_reset(void)
{
    __asm volatile("dsb" ::: "memory");
    SNAPUQ_REG(SCB_AIRCR) = (0x5FAu << 16) | (1u << 2);
    __asm volatile("dsb" ::: "memory");
    for (;;) {
    }
}

void snapuq_cortexm_exit(int code)
{
    /* SYS_EXIT_EXTENDED (0x20): block = {ADP_Stopped_ApplicationExit, code} */
    volatile uint32_t block[2] = {0x20026u, (uint32_t)code};
    register uint32_t r0 __asm("r0") = 0x20u;
    register volatile uint32_t *r1 __asm("r1") = block;
    __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}
