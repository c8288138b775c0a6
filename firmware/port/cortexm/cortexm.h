/* Helpers shared by the Cortex-M ports: register access, stack painting, semihosting, SysTick. */
#ifndef SNAPUQ_CORTEXM_H
#define SNAPUQ_CORTEXM_H

#include <stddef.h>
#include <stdint.h>

/* register access (a test can define it first to run a port against a register model on the host) */
#ifndef SNAPUQ_REG
#define SNAPUQ_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#endif
#ifndef SNAPUQ_BARRIER
#define SNAPUQ_BARRIER() __asm volatile("dsb\n\tisb" ::: "memory")
#endif

/* System control block / SysTick / DWT */
#define SCB_AIRCR 0xE000ED0Cu
#define SCB_DEMCR 0xE000EDFCu
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#define DWT_CTRL 0xE0001000u
#define DWT_CYCCNT 0xE0001004u
#define DWT_LAR 0xE0001FB0u

/* Paint the stack region below the current stack pointer with a known word. */
void snapuq_cortexm_stack_paint(void);
/* Bytes of the stack region overwritten since painting. */
size_t snapuq_cortexm_stack_peak(void);
size_t snapuq_cortexm_stack_size(void);

uint8_t *snapuq_cortexm_pool(size_t *bytes);
size_t snapuq_cortexm_flash_used(void);
size_t snapuq_cortexm_flash_size(void);
size_t snapuq_cortexm_ram_static(void);
size_t snapuq_cortexm_ram_size(void);

/* SysTick as a 64-bit counter: 24-bit down counter + overflow interrupt. */
void snapuq_cortexm_systick_start(void);
uint64_t snapuq_cortexm_systick_count(void);

/* Request a system reset through AIRCR.SYSRESETREQ. */
void snapuq_cortexm_reset(void) __attribute__((noreturn));

/* Semihosting SYS_EXIT_EXTENDED (only meaningful under a debugger or QEMU -semihosting). */
void snapuq_cortexm_exit(int code);

/* Implemented by each port: a fault or an unexpected interrupt (kind 0 unexpected IRQ,
 * 1 HardFault, 2 MemManage, 3 BusFault, 4 UsageFault). Must not return. */
void snapuq_cortexm_fault(uint32_t kind) __attribute__((noreturn));

#endif
