/*
 * snapuq_port.h - the only platform interface the snapuq firmware uses.
 *
 * One implementation per target lives in firmware/port/<target>/:
 *   qemu_mps2/  QEMU mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7): CMSDK APB UART0, SysTick,
 *               FPGAIO LED as timestamp pin, semihosting exit
 *   stm32/      Nucleo-F767ZI ("Big-MCU", 216 MHz), Nucleo-L432KC ("Small-MCU", 80 MHz), Nucleo-F446RE
 *               (180 MHz) and the STM32F405 (QEMU netduinoplus2 in CI): real clock trees, USART on the
 *               ST-LINK VCP, DWT cycle counter (SysTick where absent), a GPIO timestamp pin (register
 *               level, no vendor HAL needed)
 *   esp32s3/    ESP-IDF: UART0, CPU cycle counter, GPIO timestamp pin
 *   rp2040/     Arduino (Earle Philhower core or ArduinoCore-mbed): USB serial, SysTick cycles, GPIO pin
 *
 * Rules: no dynamic memory; every call returns quickly (the only blocking call is
 * snapuq_port_getc, bounded by its timeout); C99.
 */
#ifndef SNAPUQ_PORT_H
#define SNAPUQ_PORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bring up clocks, the serial port, the counter and the timestamp pin. Called once from main(). */
void snapuq_port_init(void);

/* Board name reported by the `name%` command, e.g. "qemu_m4", "nucleo_f767zi". */
const char *snapuq_port_board(void);

/* CPU core name, e.g. "cortex-m4". */
const char *snapuq_port_cpu(void);

/* Nominal core clock in Hz (what the board runs at; QEMU reports the emulated board's SYSCLK). */
uint32_t snapuq_port_cpu_hz(void);

/* The clock tree the port set up, e.g. "pll_hsi_216mhz"; when a bring-up step timed out the port
 * keeps the reset clock and says so: "reset_hsi_16mhz(timeout:pll_lock)". Reported by `profile`. */
const char *snapuq_port_clock(void);

/* Serial output: blocks until every byte is queued to the UART. */
void snapuq_port_write(const char *buf, size_t len);

/* Serial input: returns the next byte 0..255, -1 when none arrived within timeout_ms
 * (timeout_ms == 0: poll once), or SNAPUQ_PORT_EOF when the input is closed for good (host
 * build reading a pipe; never on boards). */
#define SNAPUQ_PORT_EOF (-2)
int snapuq_port_getc(uint32_t timeout_ms);

/* Free-running 64-bit counter and its rate in Hz. On STM32 this is the DWT cycle counter
 * (rate == core clock); on QEMU it is SysTick at the board's 25 MHz SYSCLK, which under
 * `-icount shift=0` advances exactly 1 tick per 40 executed instructions. */
uint64_t snapuq_port_counter(void);
uint32_t snapuq_port_counter_hz(void);

/* What the counter measures: "dwt_cycles", "ccount_cycles", "systick_cycles" or
 * "qemu_systick_25mhz" (virtual time; instructions only with -icount). */
const char *snapuq_port_counter_kind(void);

/* Milliseconds since init (derived from the counter). */
uint32_t snapuq_port_millis(void);

/* Timestamp hook for an external power monitor (MLPerf Tiny EnergyRunner style):
 * level 1 at the start of a timed window, 0 at its end; drives a GPIO where the board has one. */
void snapuq_port_timestamp(int level);

/* Stack high-water mark: bytes of the stack region ever used since init (the port paints the
 * stack at reset and scans for the lowest overwritten word), and the region's size. */
size_t snapuq_port_stack_peak(void);
size_t snapuq_port_stack_size(void);

/* Static memory figures from the linker: flash image bytes (text + rodata + data load image)
 * and RAM bytes used by .data + .bss. */
size_t snapuq_port_flash_used(void);
size_t snapuq_port_flash_size(void);
size_t snapuq_port_ram_static(void);
size_t snapuq_port_ram_size(void);

/* The RAM pool for the tensor arena (and an uploaded model): the linker gives every byte of the
 * RAM budget not taken by .data, .bss and the stack. Aligned to 16 bytes. */
uint8_t *snapuq_port_pool(size_t *bytes);

/* Reset the board (does not return). */
void snapuq_port_reset(void);

/* End a test program with an exit code (semihosting on QEMU; a reset or halt on boards). */
void snapuq_port_exit(int code);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_PORT_H */
