/*
 * Startup code and vector table shared by the Cortex-M ports (qemu_mps2, stm32).
 * Reset_Handler copies .data, zeroes .bss, enables the FPU when the build uses it, paints the
 * stack for the high-water measurement and calls main(). Faults call snapuq_cortexm_fault(),
 * which each port implements (QEMU: report on the UART and reset).
 */
#include <stdint.h>

#include "cortexm.h"

extern uint32_t __etext, __data_start__, __data_end__, __bss_start__, __bss_end__;
extern uint32_t __stack_bottom__, __stack_top__;

int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void SysTick_Handler(void);
void HardFault_Handler(void);

void Default_Handler(void)
{
    snapuq_cortexm_fault(0u);
}

void HardFault_Handler(void)
{
    snapuq_cortexm_fault(1u);
}

static void mem_fault(void) { snapuq_cortexm_fault(2u); }
static void bus_fault(void) { snapuq_cortexm_fault(3u); }
static void usage_fault(void) { snapuq_cortexm_fault(4u); }

void __attribute__((weak)) SysTick_Handler(void) {}

#define N_EXTERNAL_IRQ 32

typedef void (*vector_t)(void);

__attribute__((section(".isr_vector"), used)) const vector_t snapuq_vectors[16 + N_EXTERNAL_IRQ] = {
    [0] = (vector_t)(uintptr_t)&__stack_top__,
    [1] = Reset_Handler,
    [2] = Default_Handler, /* NMI */
    [3] = HardFault_Handler,
    [4] = mem_fault,
    [5] = bus_fault,
    [6] = usage_fault,
    [11] = Default_Handler, /* SVCall */
    [12] = Default_Handler, /* DebugMon */
    [14] = Default_Handler, /* PendSV */
    [15] = SysTick_Handler,
    [16 ... 16 + N_EXTERNAL_IRQ - 1] = Default_Handler,
};

/* Written before the C runtime is set up: only locals in registers, no library calls. */
void __attribute__((noreturn, used)) Reset_Handler(void)
{
    uint32_t *src = &__etext;
    uint32_t *dst = &__data_start__;
    while (dst < &__data_end__) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start__; dst < &__bss_end__; dst++) {
        *dst = 0u;
    }
#if defined(__ARM_FP)
    /* CPACR: full access to CP10 and CP11 (the FPU) */
    SNAPUQ_REG(0xE000ED88u) |= (0xFu << 20);
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    snapuq_cortexm_stack_paint();
    (void)main();
    for (;;) {
        snapuq_cortexm_exit(0);
    }
}
