/* snapuq_proto.c - harness protocol parser (see snapuq_proto.h for the grammar). */
#include "snapuq_proto.h"

#include <string.h>

#define MODE_TEXT 0u
#define MODE_DISCARD 1u
#define MODE_BINARY 2u

int snapuq_proto_parse_i64(const char *s, int64_t *out)
{
    int neg = 0;
    uint64_t v = 0;
    int base = 10;
    int any = 0;
    if (s == NULL || out == NULL) {
        return -1;
    }
    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    for (; *s != '\0'; s++) {
        int d;
        if (*s >= '0' && *s <= '9') {
            d = *s - '0';
        } else if (base == 16 && *s >= 'a' && *s <= 'f') {
            d = *s - 'a' + 10;
        } else if (base == 16 && *s >= 'A' && *s <= 'F') {
            d = *s - 'A' + 10;
        } else {
            return -1;
        }
        if (v > (UINT64_C(0x7FFFFFFFFFFFFFFF) - (uint64_t)d) / (uint64_t)base) {
            return -1;
        }
        v = v * (uint64_t)base + (uint64_t)d;
        any = 1;
    }
    if (!any) {
        return -1;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

int snapuq_proto_parse_u32(const char *s, uint32_t *out)
{
    int64_t v;
    if (snapuq_proto_parse_i64(s, &v) != 0 || v < 0 || v > (int64_t)0xFFFFFFFFu) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

void snapuq_proto_init(snapuq_proto_t *p, const snapuq_proto_command_t *commands, size_t n_commands,
                       snapuq_proto_write_fn write, void *write_ctx, void *user)
{
    memset(p, 0, sizeof *p);
    p->commands = commands;
    p->n_commands = n_commands;
    p->write = write;
    p->write_ctx = write_ctx;
    p->user = user;
    p->binary_timeout_ms = 1000u;
    p->text_timeout_ms = 0u;
}

void snapuq_proto_expect_binary(snapuq_proto_t *p, uint8_t *dst, uint32_t n, uint32_t crc32,
                                snapuq_proto_binary_done done)
{
    if (n == 0u) {
        return; /* nothing to receive: stays in text mode */
    }
    p->mode = MODE_BINARY;
    p->bin_dst = dst;
    p->bin_want = n;
    p->bin_got = 0u;
    p->bin_crc_want = crc32;
    p->bin_crc = 0u;
    p->bin_done = done;
}

static void builtin_help(snapuq_proto_t *p)
{
    size_t i;
    for (i = 0; i < p->n_commands; i++) {
        snapuq_proto_puts(p, "m-help ");
        snapuq_proto_puts(p, p->commands[i].name);
        if (p->commands[i].help != NULL) {
            snapuq_proto_puts(p, " ");
            snapuq_proto_puts(p, p->commands[i].help);
        }
        snapuq_proto_endl(p);
    }
    snapuq_proto_line(p, "m-help sync TOKEN -> m-sync-TOKEN");
    snapuq_proto_line(p, "m-help help");
}

static void finish_binary(snapuq_proto_t *p, int ok)
{
    snapuq_proto_binary_done done = p->bin_done;
    uint32_t got = p->bin_got;
    p->mode = MODE_TEXT;
    p->line_len = 0u;
    p->bin_done = NULL;
    if (done != NULL) {
        done(p, ok, got);
    }
    snapuq_proto_ready(p);
}

static void dispatch(snapuq_proto_t *p)
{
    char *argv[SNAPUQ_PROTO_MAX_ARGS];
    int argc = 0;
    size_t i = 0;
    size_t c;
    char *s = p->line;

    p->line[p->line_len] = '\0';
    if (p->bad_byte) {
        snapuq_proto_error(p, "bad-byte", "non-printable byte in command");
        snapuq_proto_ready(p);
        return;
    }
    /* tokenize on blanks */
    while (s[i] != '\0') {
        while (s[i] == ' ') {
            s[i++] = '\0';
        }
        if (s[i] == '\0') {
            break;
        }
        if (argc == SNAPUQ_PROTO_MAX_ARGS) {
            snapuq_proto_error(p, "args", "too many words");
            snapuq_proto_ready(p);
            return;
        }
        argv[argc++] = &s[i];
        while (s[i] != '\0' && s[i] != ' ') {
            i++;
        }
    }
    if (argc == 0) {
        return; /* empty command (a lone '%'): silently ignored, used for resync */
    }
    if (strcmp(argv[0], "sync") == 0) {
        snapuq_proto_puts(p, "m-sync-");
        snapuq_proto_puts(p, argc > 1 ? argv[1] : "");
        snapuq_proto_endl(p);
        snapuq_proto_ready(p);
        return;
    }
    if (strcmp(argv[0], "help") == 0) {
        builtin_help(p);
        snapuq_proto_ready(p);
        return;
    }
    for (c = 0; c < p->n_commands; c++) {
        const snapuq_proto_command_t *cmd = &p->commands[c];
        if (strcmp(argv[0], cmd->name) == 0) {
            if (argc - 1 < (int)cmd->min_args || argc - 1 > (int)cmd->max_args) {
                snapuq_proto_error(p, "args", cmd->help);
                snapuq_proto_ready(p);
                return;
            }
            p->n_commands_ok++;
            cmd->fn(p, argc, argv);
            if (p->mode != MODE_BINARY) {
                snapuq_proto_ready(p);
            }
            return;
        }
    }
    snapuq_proto_error(p, "unknown-command", argv[0]);
    snapuq_proto_ready(p);
}

void snapuq_proto_feed(snapuq_proto_t *p, uint8_t b, uint32_t now_ms)
{
    p->last_byte_ms = now_ms;
    if (p->mode == MODE_BINARY) {
        if (p->bin_got < p->bin_want) {
            if (p->bin_dst != NULL) {
                p->bin_dst[p->bin_got] = b;
            }
            p->bin_got++;
            p->bin_crc = snapuq_crc32_update(p->bin_crc, &b, 1u);
        }
        if (p->bin_got == p->bin_want) {
            if (p->bin_crc != p->bin_crc_want) {
                snapuq_proto_puts(p, "e-crc want=");
                snapuq_proto_put_hex32(p, p->bin_crc_want);
                snapuq_proto_puts(p, " got=");
                snapuq_proto_put_hex32(p, p->bin_crc);
                p->n_errors++;
                snapuq_proto_endl(p);
                finish_binary(p, 0);
            } else {
                finish_binary(p, 1);
            }
        }
        return;
    }
    if (b == '%') {
        if (p->mode == MODE_DISCARD) {
            snapuq_proto_error(p, "overflow", "command too long");
            snapuq_proto_ready(p);
        } else {
            /* strip trailing blanks */
            while (p->line_len > 0u && p->line[p->line_len - 1u] == ' ') {
                p->line_len--;
            }
            dispatch(p);
        }
        p->mode = (p->mode == MODE_BINARY) ? MODE_BINARY : MODE_TEXT;
        if (p->mode == MODE_TEXT) {
            p->line_len = 0u;
        }
        p->bad_byte = 0u;
        return;
    }
    if (p->mode == MODE_DISCARD) {
        return;
    }
    if (b == '\r' || b == '\n' || b == '\t') {
        b = ' ';
    }
    if (b == ' ' && p->line_len == 0u) {
        return; /* leading blanks */
    }
    if (b < 0x20u || b > 0x7Eu) {
        p->bad_byte = 1u;
        b = '?';
    }
    if (p->line_len >= SNAPUQ_PROTO_LINE_MAX) {
        p->mode = MODE_DISCARD;
        p->line_len = 0u;
        return;
    }
    p->line[p->line_len++] = (char)b;
}

void snapuq_proto_poll(snapuq_proto_t *p, uint32_t now_ms)
{
    uint32_t idle = now_ms - p->last_byte_ms;
    if (p->mode == MODE_BINARY) {
        if (idle >= p->binary_timeout_ms) {
            snapuq_proto_puts(p, "e-timeout");
            snapuq_proto_kv_u(p, "got", p->bin_got);
            snapuq_proto_kv_u(p, "want", p->bin_want);
            p->n_errors++;
            snapuq_proto_endl(p);
            finish_binary(p, 0);
        }
        return;
    }
    if (p->text_timeout_ms != 0u && (p->line_len > 0u || p->mode == MODE_DISCARD) &&
        idle >= p->text_timeout_ms) {
        p->line_len = 0u;
        p->mode = MODE_TEXT;
        p->bad_byte = 0u;
        snapuq_proto_error(p, "timeout", "partial command dropped");
        snapuq_proto_ready(p);
    }
}
