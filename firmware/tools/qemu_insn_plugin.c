/* A QEMU TCG plugin (system emulation, one vCPU) that counts what a cycle model needs, inside a window of
 * the guest's execution: from every entry at ON (the first instruction of a function, e.g.
 * snapuq_model_invoke) to the next translation block that starts at an OFF address (the return sites of
 * its calls).
 *
 * Per translation block: executions, and how many of them fell through to the next address (so the
 * executions whose last instruction branched elsewhere are known). Per instruction: its bytes and QEMU's
 * disassembly (once), the loads it made from the flash address range, and how many of those missed a
 * small fully associative LRU cache of DLINES lines of DLINE bytes (a flash accelerator's data cache);
 * per block execution in the window, how many instruction-fetch lines of ILINE bytes missed an ILINES-line
 * LRU (its instruction cache), counted only for code in flash.
 *
 * Arguments (-plugin FILE,arg=value,...): on=0xADDR  off=0xADDR (repeatable, up to 16)
 *   flash=0xLO:0xHI  out=PATH  ilines=N iline=BYTES dlines=N dline=BYTES
 *   max=N: after N windows write the counts and uninstall (QEMU runs on at full speed; 0: until exit)
 *   skip=N: leave the first N entries at ON uncounted (e.g. inferences run with a profiler on)
 * Output (text, at exit, to PATH): "W windows", then per block executed in the window
 *   "T vaddr execs fallthrough imiss ninsns" followed by one "I vaddr size flashloads dmiss disas" line
 *   per instruction.
 *
 * The declarations below are the plugin ABI that QEMU 7.2 exports (version 1); QEMU's own header is
 * not installed by Debian's packages. Built by snapuq.harness.cycles with the host compiler. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                              void *userdata);
typedef void (*udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*simple_cb_t)(qemu_plugin_id_t id);
void qemu_plugin_uninstall(qemu_plugin_id_t id, simple_cb_t cb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
char *qemu_plugin_insn_disas(const struct qemu_plugin_insn *insn);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_OFF 16
#define MAX_LINES 512
#define HASH_BITS 16
#define HASH_SIZE (1u << HASH_BITS)

typedef struct {
    uint64_t vaddr;
    uint32_t size;
    uint64_t flash_loads;
    uint64_t dmiss;
    char *disas;
} insn_t;

typedef struct block {
    uint64_t vaddr;
    uint64_t end; /* the address after its last instruction */
    uint32_t n;
    insn_t *insns;
    uint64_t execs;
    uint64_t fallthrough;
    uint64_t imiss;
    struct block *next_in_bucket;
} block_t;

typedef struct {
    uint32_t lines;
    uint32_t shift;
    uint64_t tag[MAX_LINES];
    uint64_t age[MAX_LINES];
    uint64_t clock;
} lru_t;

static uint64_t on_addr = UINT64_MAX;
static uint64_t off_addr[MAX_OFF];
static int n_off;
static uint64_t flash_lo = 0, flash_hi = 0;
static char out_path[512] = "insn_counts.txt";
static block_t *buckets[HASH_SIZE];
static block_t *last; /* the block executed before, while counting */
static bool counting;
static uint64_t windows;
static lru_t icache, dcache;
static uint64_t max_windows;
static uint64_t skip_windows, seen_windows;
static bool written;
static qemu_plugin_id_t self_id;

static void write_counts(void);
static void uninstalled(qemu_plugin_id_t id)
{
    (void)id;
}

static uint32_t log2u(uint64_t v)
{
    uint32_t s = 0;
    while ((1ull << s) < v) {
        s++;
    }
    return s;
}

static void lru_init(lru_t *c, uint64_t lines, uint64_t bytes)
{
    memset(c, 0, sizeof *c);
    c->lines = (uint32_t)(lines > MAX_LINES ? MAX_LINES : lines);
    c->shift = log2u(bytes ? bytes : 1);
    for (uint32_t i = 0; i < MAX_LINES; i++) {
        c->tag[i] = UINT64_MAX;
    }
}

/* true on a miss (the line is then brought in, replacing the least recently used) */
static bool lru_access(lru_t *c, uint64_t addr)
{
    uint64_t tag = addr >> c->shift;
    uint32_t victim = 0;
    if (c->lines == 0) {
        return true;
    }
    c->clock++;
    for (uint32_t i = 0; i < c->lines; i++) {
        if (c->tag[i] == tag) {
            c->age[i] = c->clock;
            return false;
        }
        if (c->age[i] < c->age[victim]) {
            victim = i;
        }
    }
    c->tag[victim] = tag;
    c->age[victim] = c->clock;
    return true;
}

static bool in_flash(uint64_t a)
{
    return a >= flash_lo && a < flash_hi;
}

static void on_exec(unsigned int vcpu, void *udata)
{
    block_t *b = udata;
    (void)vcpu;
    if (counting) {
        for (int i = 0; i < n_off; i++) {
            if (b->vaddr == off_addr[i]) {
                counting = false;
                if (last != NULL && last->end == b->vaddr) {
                    last->fallthrough++;
                }
                last = NULL;
                if (max_windows != 0 && windows >= max_windows && !written) {
                    write_counts(); /* enough inferences: the rest run without the plugin */
                    qemu_plugin_uninstall(self_id, uninstalled);
                }
                return;
            }
        }
    } else if (b->vaddr == on_addr && ++seen_windows > skip_windows) {
        counting = true;
        windows++;
        last = NULL;
    }
    if (!counting) {
        return;
    }
    if (last != NULL && last->end == b->vaddr) {
        last->fallthrough++;
    }
    b->execs++;
    if (in_flash(b->vaddr)) {
        uint64_t first = b->vaddr >> icache.shift, lastl = (b->end - 1) >> icache.shift;
        for (uint64_t l = first; l <= lastl; l++) {
            b->imiss += lru_access(&icache, l << icache.shift);
        }
    }
    last = b;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    insn_t *in = udata;
    (void)vcpu;
    if (!counting || qemu_plugin_mem_is_store(info) || !in_flash(vaddr)) {
        return;
    }
    in->flash_loads++;
    in->dmiss += lru_access(&dcache, vaddr);
}

static block_t *find_block(uint64_t vaddr, uint32_t n)
{
    uint32_t h = (uint32_t)((vaddr >> 1) * 2654435761u) >> (32 - HASH_BITS);
    for (block_t *b = buckets[h]; b != NULL; b = b->next_in_bucket) {
        if (b->vaddr == vaddr && b->n == n) {
            return b;
        }
    }
    block_t *b = calloc(1, sizeof *b);
    if (b == NULL) {
        abort();
    }
    b->vaddr = vaddr;
    b->n = n;
    b->insns = calloc(n ? n : 1, sizeof *b->insns);
    if (b->insns == NULL) {
        abort();
    }
    b->next_in_bucket = buckets[h];
    buckets[h] = b;
    return b;
}

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    block_t *b = find_block(qemu_plugin_tb_vaddr(tb), (uint32_t)n);
    (void)id;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        insn_t *in = &b->insns[i];
        if (in->disas == NULL) {
            in->vaddr = qemu_plugin_insn_vaddr(insn);
            in->size = (uint32_t)qemu_plugin_insn_size(insn);
            in->disas = qemu_plugin_insn_disas(insn);
        }
        b->end = in->vaddr + in->size;
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, in);
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    if (!written) {
        write_counts();
    }
}

static void write_counts(void)
{
    FILE *f = fopen(out_path, "w");
    written = true;
    if (f == NULL) {
        return;
    }
    fprintf(f, "W %" PRIu64 "\n", windows);
    for (uint32_t h = 0; h < HASH_SIZE; h++) {
        for (block_t *b = buckets[h]; b != NULL; b = b->next_in_bucket) {
            if (b->execs == 0) {
                continue;
            }
            fprintf(f, "T %" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u\n", b->vaddr, b->execs,
                    b->fallthrough, b->imiss, b->n);
            for (uint32_t i = 0; i < b->n; i++) {
                const insn_t *in = &b->insns[i];
                const char *d = in->disas ? in->disas : "?";
                fprintf(f, "I %" PRIx64 " %u %" PRIu64 " %" PRIu64 " ", in->vaddr, in->size, in->flash_loads,
                        in->dmiss);
                for (; *d; d++) { /* one line per instruction */
                    fputc(*d == '\n' ? ' ' : *d, f);
                }
                fputc('\n', f);
            }
        }
    }
    fclose(f);
}

static uint64_t num(const char *s)
{
    return strtoull(s, NULL, 0);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv)
{
    uint64_t il = 32, ib = 32, dl = 8, db = 32;
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "on=", 3) == 0) {
            on_addr = num(a + 3) & ~1ull;
        } else if (strncmp(a, "off=", 4) == 0 && n_off < MAX_OFF) {
            off_addr[n_off++] = num(a + 4) & ~1ull;
        } else if (strncmp(a, "flash=", 6) == 0) {
            char *colon = strchr(a + 6, ':');
            flash_lo = num(a + 6);
            flash_hi = colon ? num(colon + 1) : 0;
        } else if (strncmp(a, "out=", 4) == 0) {
            snprintf(out_path, sizeof out_path, "%s", a + 4);
        } else if (strncmp(a, "ilines=", 7) == 0) {
            il = num(a + 7);
        } else if (strncmp(a, "iline=", 6) == 0) {
            ib = num(a + 6);
        } else if (strncmp(a, "dlines=", 7) == 0) {
            dl = num(a + 7);
        } else if (strncmp(a, "skip=", 5) == 0) {
            skip_windows = num(a + 5);
        } else if (strncmp(a, "max=", 4) == 0) {
            max_windows = num(a + 4);
        } else if (strncmp(a, "dline=", 6) == 0) {
            db = num(a + 6);
        } else {
            fprintf(stderr, "insn plugin: unknown argument '%s'\n", a);
            return -1;
        }
    }
    self_id = id;
    lru_init(&icache, il, ib);
    lru_init(&dcache, dl, db);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
