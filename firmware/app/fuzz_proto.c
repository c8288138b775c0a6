/*
 * libFuzzer target: the whole harness firmware (protocol parser + commands + int8 runtime +
 * SNAP core, with the built-in model when the build has one) fed an arbitrary byte stream.
 * After the stream a '%', a jump of the clock past every timeout, and a sync must be answered:
 * the firmware never crashes (ASan/UBSan) and never stops answering.
 *   make -C firmware fuzz && build/firmware/fuzz/fuzz_proto -max_total_time=60
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../port/snapuq_port.h"
#include "snapuq_app.h"

static uint8_t pool[1u << 20] __attribute__((aligned(16)));
static uint32_t fake_ms;
static uint64_t fake_ticks;
static char out_tail[64];
static size_t out_total;

void snapuq_port_init(void) {}
const char *snapuq_port_board(void) { return "fuzz"; }
const char *snapuq_port_cpu(void) { return "host"; }
uint32_t snapuq_port_cpu_hz(void) { return 1000000u; }
const char *snapuq_port_clock(void) { return "fuzz"; }
void snapuq_port_write(const char *buf, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) {
        memmove(out_tail, out_tail + 1, sizeof out_tail - 2u);
        out_tail[sizeof out_tail - 2u] = buf[i];
        out_tail[sizeof out_tail - 1u] = '\0';
    }
    out_total += len;
}
int snapuq_port_getc(uint32_t timeout_ms)
{
    (void)timeout_ms;
    return SNAPUQ_PORT_EOF;
}
uint64_t snapuq_port_counter(void) { return fake_ticks += 7u; }
uint32_t snapuq_port_counter_hz(void) { return 1000000u; }
const char *snapuq_port_counter_kind(void) { return "fuzz"; }
uint32_t snapuq_port_millis(void) { return fake_ms; }
void snapuq_port_timestamp(int level) { (void)level; }
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
void snapuq_port_reset(void) {}
void snapuq_port_exit(int code) { (void)code; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sync[] = "%sync fz%";
    size_t i;
    fake_ms = 0u;
    snapuq_app_init();
    for (i = 0; i < size; i++) {
        /* the byte 0xFF advances the clock by 2 s instead (exercises the timeouts) */
        if (data[i] == 0xFFu) {
            fake_ms += 2000u;
            snapuq_app_poll();
        } else {
            snapuq_app_feed(data[i]);
        }
    }
    /* what the host's resync does: a '%' ends any partial command (which may itself start a
       binary frame), the frame times out, then "sync TOKEN%" */
    snapuq_app_feed((uint8_t)'%');
    fake_ms += 700000u;
    snapuq_app_poll();
    for (i = 1; i < sizeof sync - 1u; i++) {
        snapuq_app_feed((uint8_t)sync[i]);
    }
    if (strstr(out_tail, "m-sync-fz*") == NULL || strstr(out_tail, "\r\nm-ready lines=1*") == NULL) {
        fprintf(stderr, "firmware stopped answering; output tail: %s\n", out_tail);
        abort();
    }
    return 0;
}
