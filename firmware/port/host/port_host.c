/*
 * Host port: the firmware as a normal process talking the protocol on stdin/stdout. Used by the
 * tests (protocol fuzzing with the real application and core, ASan/UBSan builds) and by
 * `pio test -e native`. The counter is CLOCK_MONOTONIC in nanoseconds (host time, not cycles).
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../snapuq_port.h"

#ifndef SNAPUQ_HOST_POOL_BYTES
#define SNAPUQ_HOST_POOL_BYTES (4u * 1024u * 1024u)
#endif

static uint8_t pool[SNAPUQ_HOST_POOL_BYTES] __attribute__((aligned(16)));
static uint64_t t_start;
static int eof_seen;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int ts_fd = -1; /* SNAPUQ_HOST_TIMESTAMP (see snapuq_port_timestamp) */

void snapuq_port_init(void)
{
    const char *path = getenv("SNAPUQ_HOST_TIMESTAMP");
    t_start = now_ns();
    ts_fd = (path != NULL && path[0] != '\0') ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
}

const char *snapuq_port_board(void) { return "host"; }
const char *snapuq_port_cpu(void) { return "host"; }
uint32_t snapuq_port_cpu_hz(void) { return 1000000000u; }
const char *snapuq_port_clock(void) { return "host"; }

void snapuq_port_write(const char *buf, size_t len)
{
    while (len > 0u) {
        ssize_t k = write(STDOUT_FILENO, buf, len);
        if (k <= 0) {
            exit(3); /* the reader went away */
        }
        buf += k;
        len -= (size_t)k;
    }
}

int snapuq_port_getc(uint32_t timeout_ms)
{
    struct pollfd pfd;
    unsigned char c;
    ssize_t k;
    if (eof_seen) {
        return SNAPUQ_PORT_EOF;
    }
    pfd.fd = STDIN_FILENO;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, (int)timeout_ms) <= 0) {
        return -1;
    }
    k = read(STDIN_FILENO, &c, 1u);
    if (k == 1) {
        return (int)c;
    }
    eof_seen = 1;
    return SNAPUQ_PORT_EOF;
}

uint64_t snapuq_port_counter(void) { return now_ns() - t_start; }
uint32_t snapuq_port_counter_hz(void) { return 1000000000u; }
const char *snapuq_port_counter_kind(void) { return "host_ns"; }
uint32_t snapuq_port_millis(void) { return (uint32_t)((now_ns() - t_start) / 1000000u); }
/* The timestamp pin (high during each timed inference; MLPerf Tiny EnergyRunner style): on a board a GPIO
 * wired to the power meter's logic input. Here, with SNAPUQ_HOST_TIMESTAMP=FILE in the environment, each
 * level change appends "LEVEL NS\n" to FILE, NS being CLOCK_MONOTONIC in nanoseconds (the clock a
 * simulated meter on the same host samples by: tests/sim/ppk2_sim.py); without it, nothing. */
void snapuq_port_timestamp(int level)
{
    char line[32];
    uint64_t t = now_ns();
    int n = 0, k;
    char digits[24];
    if (ts_fd < 0) {
        return;
    }
    line[n++] = level ? '1' : '0';
    line[n++] = ' ';
    k = 0;
    do {
        digits[k++] = (char)('0' + (int)(t % 10u));
        t /= 10u;
    } while (t != 0u);
    while (k > 0) {
        line[n++] = digits[--k];
    }
    line[n++] = '\n';
    (void)!write(ts_fd, line, (size_t)n); /* one write: lines from one process never interleave */
}
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

void snapuq_port_reset(void)
{
    static const char msg[] = "m-reset-host-exit\r\n";
    snapuq_port_write(msg, sizeof msg - 1u);
    exit(0);
}

void snapuq_port_exit(int code) { exit(code); }
