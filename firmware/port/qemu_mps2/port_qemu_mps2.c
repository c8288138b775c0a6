/*
 * QEMU MPS2 port: mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7).
 * Serial: CMSDK APB UART0 at 0x40004000 (QEMU -serial maps the first serial backend to it).
 * Counter: SysTick on the 25 MHz SYSCLK; with `-icount shift=0` QEMU runs 1 instruction per ns
 * of virtual time, so one tick is exactly 40 instructions. QEMU has no cycle-accurate pipeline
 * and no DWT: the host labels these figures as QEMU instruction counts.
 * Timestamp pin: FPGAIO LED0 (0x40028000). Exit: semihosting.
 */
#include "../cortexm/cortexm.h"
#include "../snapuq_port.h"

#ifndef SNAPUQ_BOARD
#error "define SNAPUQ_BOARD (qemu_m4 or qemu_m7)"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

#define UART0_BASE 0x40004000u
#define UART_DATA (UART0_BASE + 0x00u)
#define UART_STATE (UART0_BASE + 0x04u)
#define UART_CTRL (UART0_BASE + 0x08u)
#define UART_BAUDDIV (UART0_BASE + 0x10u)
#define UART_STATE_TXFULL 0x1u
#define UART_STATE_RXFULL 0x2u

#define FPGAIO_LED 0x40028000u

#define SYSCLK_HZ 25000000u

void snapuq_port_init(void)
{
    SNAPUQ_REG(UART_BAUDDIV) = 16u;
    SNAPUQ_REG(UART_CTRL) = 0x3u; /* TX enable, RX enable, no interrupts */
    SNAPUQ_REG(FPGAIO_LED) = 0u;
    snapuq_cortexm_systick_start();
}

const char *snapuq_port_board(void) { return STR(SNAPUQ_BOARD); }

const char *snapuq_port_cpu(void)
{
#if defined(__ARM_ARCH_7EM__) && defined(SNAPUQ_CPU_M7)
    return "cortex-m7";
#elif defined(__ARM_ARCH_7EM__)
    return "cortex-m4";
#else
    return "cortex-m";
#endif
}

uint32_t snapuq_port_cpu_hz(void) { return SYSCLK_HZ; }
const char *snapuq_port_clock(void) { return "qemu_mps2_sysclk_25mhz"; }

void snapuq_port_write(const char *buf, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) {
        while (SNAPUQ_REG(UART_STATE) & UART_STATE_TXFULL) {
        }
        SNAPUQ_REG(UART_DATA) = (uint8_t)buf[i];
    }
}

int snapuq_port_getc(uint32_t timeout_ms)
{
    uint64_t start = snapuq_cortexm_systick_count();
    uint64_t span = (uint64_t)timeout_ms * (SYSCLK_HZ / 1000u);
    for (;;) {
        if (SNAPUQ_REG(UART_STATE) & UART_STATE_RXFULL) {
            return (int)(SNAPUQ_REG(UART_DATA) & 0xFFu);
        }
        if (snapuq_cortexm_systick_count() - start >= span) {
            return -1;
        }
    }
}

uint64_t snapuq_port_counter(void) { return snapuq_cortexm_systick_count(); }
uint32_t snapuq_port_counter_hz(void) { return SYSCLK_HZ; }
const char *snapuq_port_counter_kind(void) { return "qemu_systick_25mhz"; }

uint32_t snapuq_port_millis(void)
{
    return (uint32_t)(snapuq_cortexm_systick_count() / (SYSCLK_HZ / 1000u));
}

void snapuq_port_timestamp(int level)
{
    SNAPUQ_REG(FPGAIO_LED) = level ? 1u : 0u;
}

size_t snapuq_port_stack_peak(void) { return snapuq_cortexm_stack_peak(); }
size_t snapuq_port_stack_size(void) { return snapuq_cortexm_stack_size(); }
size_t snapuq_port_flash_used(void) { return snapuq_cortexm_flash_used(); }
size_t snapuq_port_flash_size(void) { return snapuq_cortexm_flash_size(); }
size_t snapuq_port_ram_static(void) { return snapuq_cortexm_ram_static(); }
size_t snapuq_port_ram_size(void) { return snapuq_cortexm_ram_size(); }

uint8_t *snapuq_port_pool(size_t *bytes) { return snapuq_cortexm_pool(bytes); }

void snapuq_port_reset(void) { snapuq_cortexm_reset(); }

void snapuq_port_exit(int code)
{
    snapuq_cortexm_exit(code);
    snapuq_cortexm_reset();
}

void snapuq_cortexm_fault(uint32_t kind)
{
    static const char msg[] = "\r\ne-fault-";
    char k = (char)('0' + (char)(kind % 10u));
    snapuq_port_write(msg, sizeof msg - 1u);
    snapuq_port_write(&k, 1u);
    snapuq_port_write("\r\n", 2u);
    snapuq_cortexm_reset();
}
