/*
 * ESP32-S3 port (ESP-IDF, PlatformIO `platform = espressif32`, `framework = espidf`):
 * UART0 (USB-serial bridge) at 115200, the Xtensa CCOUNT cycle counter, GPIO 4 as the
 * timestamp pin, the RAM pool as a static buffer. Needs the ESP-IDF headers: not compiled in this
 * repository's CI (Xtensa has no Debian cross compiler here).
 */
#include <stdlib.h>

#include "driver/gpio.h"
#include "driver/uart.h"
#include "esp_cpu.h"
#include "esp_system.h"
#include "esp_timer.h"

#include "../snapuq_port.h"

#ifndef SNAPUQ_ESP32_POOL_BYTES
#define SNAPUQ_ESP32_POOL_BYTES (256u * 1024u)
#endif
#define TS_GPIO GPIO_NUM_4
#define CPU_HZ 240000000u

static uint8_t pool[SNAPUQ_ESP32_POOL_BYTES] __attribute__((aligned(16)));
static uint32_t last_cc, wraps;

void snapuq_port_init(void)
{
    const uart_config_t cfg = {.baud_rate = 115200, .data_bits = UART_DATA_8_BITS,
                               .parity = UART_PARITY_DISABLE, .stop_bits = UART_STOP_BITS_1,
                               .flow_ctrl = UART_HW_FLOWCTRL_DISABLE, .source_clk = UART_SCLK_DEFAULT};
    uart_driver_install(UART_NUM_0, 4096, 0, 0, NULL, 0);
    uart_param_config(UART_NUM_0, &cfg);
    gpio_reset_pin(TS_GPIO);
    gpio_set_direction(TS_GPIO, GPIO_MODE_OUTPUT);
}

const char *snapuq_port_board(void) { return "esp32s3"; }
const char *snapuq_port_cpu(void) { return "xtensa-lx7"; }
uint32_t snapuq_port_cpu_hz(void) { return CPU_HZ; }
const char *snapuq_port_clock(void) { return "esp_idf_default"; }

void snapuq_port_write(const char *buf, size_t len) { uart_write_bytes(UART_NUM_0, buf, len); }

int snapuq_port_getc(uint32_t timeout_ms)
{
    uint8_t c;
    int n = uart_read_bytes(UART_NUM_0, &c, 1, timeout_ms / portTICK_PERIOD_MS);
    return n == 1 ? (int)c : -1;
}

uint64_t snapuq_port_counter(void)
{
    uint32_t c = (uint32_t)esp_cpu_get_cycle_count();
    if (c < last_cc) {
        wraps++;
    }
    last_cc = c;
    return ((uint64_t)wraps << 32) | c;
}

uint32_t snapuq_port_counter_hz(void) { return CPU_HZ; }
const char *snapuq_port_counter_kind(void) { return "ccount_cycles"; }
uint32_t snapuq_port_millis(void) { return (uint32_t)(esp_timer_get_time() / 1000); }
void snapuq_port_timestamp(int level) { gpio_set_level(TS_GPIO, level ? 1 : 0); }
size_t snapuq_port_stack_peak(void) { return 0u; /* see uxTaskGetStackHighWaterMark */ }
size_t snapuq_port_stack_size(void) { return 0u; }
size_t snapuq_port_flash_used(void) { return 0u; }
size_t snapuq_port_flash_size(void) { return 0u; }
size_t snapuq_port_ram_static(void) { return 0u; }
size_t snapuq_port_ram_size(void) { return 0u; }
uint8_t *snapuq_port_pool(size_t *bytes)
{
    *bytes = sizeof pool;
    return pool;
}
void snapuq_port_reset(void) { esp_restart(); }
void snapuq_port_exit(int code)
{
    (void)code;
    esp_restart();
}

/* ESP-IDF entry point */
int main(void);
void app_main(void);
void app_main(void) { (void)main(); }
