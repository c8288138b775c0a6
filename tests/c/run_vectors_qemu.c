/*
 * run_vectors_qemu.c - the vector set (tests/vectors) on an emulated Cortex-M: reads VECTORS.bin
 * and writes OUTPUTS.bin through ARM semihosting (QEMU -semihosting-config enable=on), so the core
 * runs exactly as the firmware builds it (arm-none-eabi-gcc, Cortex-M4F, reference or DSP kernels),
 * without a UART protocol in between. Built and run by tests/host/test_vectors.py.
 *
 * VECTORS.bin (little-endian u32): magic "SNVX", n_cases; per case: model_len, n_records,
 *   in_bytes, then the model bytes (padded to 4) and n_records * in_bytes of int8 inputs.
 * OUTPUTS.bin: per case: u32 status (snapuq_status_t), u32 out_bytes, then (status 0)
 *   n_records * out_bytes: every output of every record, concatenated in output order.
 * Exit code (SYS_EXIT_EXTENDED): 0 when every file operation succeeded, 1 otherwise.
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_runtime.h"

#define MODEL_MAX (512u * 1024u)
#define ARENA_MAX (512u * 1024u)
#define REC_MAX (64u * 1024u)

void snapuq_cortexm_fault(uint32_t kind);
void snapuq_cortexm_exit(int code);

static uint8_t g_model_buf[MODEL_MAX] __attribute__((aligned(16)));
static uint8_t g_arena[ARENA_MAX] __attribute__((aligned(SNAPUQ_ARENA_ALIGN)));
static uint8_t g_in[REC_MAX];
static uint8_t g_out[REC_MAX];
static snapuq_model_t g_model;

static int32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm("r0") = op;
    register const void *r1 __asm("r1") = arg;
    __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}

static int32_t sh_open(const char *name, uint32_t mode)
{
    const uint32_t block[3] = {(uint32_t)(uintptr_t)name, mode, (uint32_t)strlen(name)};
    return semihost(0x01u, block);
}

/* 1 when all `len` bytes were read (SYS_READ returns the number of bytes NOT read) */
static int sh_read(int32_t fd, void *buf, uint32_t len)
{
    const uint32_t block[3] = {(uint32_t)fd, (uint32_t)(uintptr_t)buf, len};
    return semihost(0x06u, block) == 0;
}

static int sh_write(int32_t fd, const void *buf, uint32_t len)
{
    const uint32_t block[3] = {(uint32_t)fd, (uint32_t)(uintptr_t)buf, len};
    return semihost(0x05u, block) == 0;
}

static void sh_close(int32_t fd)
{
    const uint32_t block[1] = {(uint32_t)fd};
    (void)semihost(0x02u, block);
}

void snapuq_cortexm_fault(uint32_t kind)
{
    snapuq_cortexm_exit(100 + (int)kind);
    for (;;) {
    }
}

static int read_u32(int32_t fd, uint32_t *v)
{
    return sh_read(fd, v, 4u);
}

static uint32_t out_record_bytes(void)
{
    uint32_t total = 0;
    uint16_t i;
    snapuq_tensor_info_t ti;
    for (i = 0; i < snapuq_model_output_count(&g_model); i++) {
        snapuq_model_output_info(&g_model, i, &ti);
        total += ti.bytes;
    }
    return total;
}

static int run_case(int32_t in_fd, int32_t out_fd)
{
    uint32_t model_len, n, in_bytes, r;
    uint32_t hdr[2];
    size_t need = 0;
    snapuq_status_t st;
    if (!read_u32(in_fd, &model_len) || !read_u32(in_fd, &n) || !read_u32(in_fd, &in_bytes) ||
        model_len > MODEL_MAX || in_bytes > REC_MAX ||
        !sh_read(in_fd, g_model_buf, (model_len + 3u) & ~3u)) {
        return 0;
    }
    st = snapuq_model_init(&g_model, g_model_buf, model_len);
    if (st == SNAPUQ_OK) {
        snapuq_model_arena_size(&g_model, &need);
        st = need > ARENA_MAX ? SNAPUQ_ERR_ARENA : snapuq_model_set_arena(&g_model, g_arena, ARENA_MAX);
    }
    hdr[0] = (uint32_t)st;
    hdr[1] = st == SNAPUQ_OK ? out_record_bytes() : 0u;
    if (hdr[1] > REC_MAX) {
        hdr[0] = (uint32_t)SNAPUQ_ERR_LIMIT;
        hdr[1] = 0;
    }
    if (!sh_write(out_fd, hdr, sizeof hdr)) {
        return 0;
    }
    for (r = 0; r < n; r++) {
        if (!sh_read(in_fd, g_in, in_bytes)) {
            return 0;
        }
        if (hdr[0] != SNAPUQ_OK) {
            continue;
        }
        {
            uint8_t *y = g_out;
            uint16_t i;
            snapuq_tensor_info_t ti;
            snapuq_model_input_info(&g_model, 0, &ti);
            if (ti.bytes != in_bytes || snapuq_model_set_input(&g_model, 0, g_in, in_bytes) != SNAPUQ_OK ||
                snapuq_model_invoke(&g_model) != SNAPUQ_OK) {
                memset(g_out, 0, hdr[1]);
            } else {
                for (i = 0; i < snapuq_model_output_count(&g_model); i++) {
                    snapuq_model_output_info(&g_model, i, &ti);
                    snapuq_model_get_output(&g_model, i, y, ti.bytes);
                    y += ti.bytes;
                }
            }
        }
        if (!sh_write(out_fd, g_out, hdr[1])) {
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    int32_t in_fd = sh_open("vectors.bin", 1u);   /* "rb" */
    int32_t out_fd = sh_open("outputs.bin", 5u);  /* "wb" */
    uint32_t magic = 0, n_cases = 0, c;
    int ok = in_fd >= 0 && out_fd >= 0 && read_u32(in_fd, &magic) && magic == 0x58564E53u &&
             read_u32(in_fd, &n_cases);
    for (c = 0; ok && c < n_cases; c++) {
        ok = run_case(in_fd, out_fd);
    }
    if (in_fd >= 0) {
        sh_close(in_fd);
    }
    if (out_fd >= 0) {
        sh_close(out_fd);
    }
    snapuq_cortexm_exit(ok ? 0 : 1);
    return 0;
}
