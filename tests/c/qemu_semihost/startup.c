/*
 * startup.c - minimal bare-metal start for QEMU mps2 boards (Cortex-M4 an386, Cortex-M7 an500)
 * used by C tests that run on the emulated core: vector table, .data/.bss init, FPU on, main's
 * result returned to the host through Arm semihosting (QEMU -semihosting-config enable=on).
 */
#include <stdint.h>

extern uint32_t _estack, _sidata, _sdata, _edata, _sbss, _ebss;
int semihost_main(void);
void Reset_Handler(void);
void kp_puts(const char *s);

static void default_handler(void)
{
    for (;;) {
    }
}

__attribute__((section(".isr_vector"), used)) const void *const vectors[16] = {
    &_estack,          (const void *)Reset_Handler, (const void *)default_handler, (const void *)default_handler,
    (const void *)default_handler, (const void *)default_handler, (const void *)default_handler, 0, 0, 0, 0,
    (const void *)default_handler, (const void *)default_handler, 0, (const void *)default_handler,
    (const void *)default_handler};

static int semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void kp_puts(const char *s)
{
    semihost(0x04, s); /* SYS_WRITE0 */
}

void Reset_Handler(void)
{
    uint32_t *s = &_sidata, *d = &_sdata;
    uint32_t exit_block[2];
    int rc;
    while (d < &_edata) {
        *d++ = *s++;
    }
    for (d = &_sbss; d < &_ebss;) {
        *d++ = 0;
    }
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: FPU full access */
    __asm__ volatile("dsb\n\tisb");
    rc = semihost_main();
    exit_block[0] = 0x20026u; /* ADP_Stopped_ApplicationExit */
    exit_block[1] = (uint32_t)rc;
    semihost(0x20, exit_block); /* SYS_EXIT_EXTENDED: exit status = rc */
    semihost(0x18, (const void *)0x20026u);
    for (;;) {
    }
}
