/*
 * RP2040 port (Arduino core, PlatformIO `platform = raspberrypi`, `board = pico`): USB CDC
 * serial, the Cortex-M0+ SysTick as a cycle counter (24 bit, extended in software), GPIO 15 as
 * the timestamp pin. Needs the Arduino core: not compiled in this repository's CI (the portable
 * core and app are compiled for Cortex-M0+ by `make -C firmware check-m0plus`).
 */
#include <Arduino.h>

extern "C" {
#include "../snapuq_port.h"
#include "../../app/snapuq_app.h"
}

#ifndef SNAPUQ_RP2040_POOL_BYTES
#define SNAPUQ_RP2040_POOL_BYTES (160u * 1024u)
#endif
#define TS_PIN 15
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

static uint8_t pool[SNAPUQ_RP2040_POOL_BYTES] __attribute__((aligned(16)));
static uint32_t last_v, wraps;

extern "C" {
void snapuq_port_init(void)
{
    Serial.begin(115200);
    pinMode(TS_PIN, OUTPUT);
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0u;
    SYST_CSR = 0x5u; /* processor clock, enabled, no interrupt */
}
const char *snapuq_port_board(void) { return "rp2040"; }
const char *snapuq_port_cpu(void) { return "cortex-m0plus"; }
uint32_t snapuq_port_cpu_hz(void) { return (uint32_t)F_CPU; }
const char *snapuq_port_clock(void) { return "arduino_core_f_cpu"; }
void snapuq_port_write(const char *buf, size_t len) { Serial.write((const uint8_t *)buf, len); }
int snapuq_port_getc(uint32_t timeout_ms)
{
    uint32_t t0 = millis();
    do {
        if (Serial.available() > 0) {
            return Serial.read();
        }
    } while (millis() - t0 < timeout_ms);
    return -1;
}
uint64_t snapuq_port_counter(void)
{
    uint32_t v = 0x00FFFFFFu - (SYST_CVR & 0x00FFFFFFu);
    if (v < last_v) {
        wraps++;
    }
    last_v = v;
    return ((uint64_t)wraps << 24) | v;
}
uint32_t snapuq_port_counter_hz(void) { return (uint32_t)F_CPU; }
const char *snapuq_port_counter_kind(void) { return "systick_cycles"; }
uint32_t snapuq_port_millis(void) { return millis(); }
void snapuq_port_timestamp(int level) { digitalWrite(TS_PIN, level ? HIGH : LOW); }
size_t snapuq_port_stack_peak(void) { return 0u; }
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
void snapuq_port_reset(void) { rp2040.reboot(); }
void snapuq_port_exit(int code)
{
    (void)code;
    rp2040.reboot();
}
}

/* Arduino entry points instead of main(): the same loop as firmware/app/main.c */
void setup()
{
    snapuq_port_init();
    snapuq_app_init();
}

void loop()
{
    int c = snapuq_port_getc(20u);
    if (c >= 0) {
        snapuq_app_feed((uint8_t)c);
    } else {
        snapuq_app_poll();
    }
}
