/*
 * snapuq_proto.h - the harness protocol: a byte-driven parser, pure C99 (no port, no libc beyond
 * string.h), built into the firmware and, unchanged, into host test and fuzz programs.
 *
 * Grammar (MLPerf Tiny / EEMBC runner style; see docs/FIRMWARE.md):
 *   stream   := { junk | command }
 *   command  := text '%'                 text: printable bytes, <= SNAPUQ_PROTO_LINE_MAX
 *   text     := word { ' ' word }         leading/trailing blanks, CR, LF, TAB ignored
 *   reply    := { line } ready
 *   line     := ("m-" | "e-") text '*' crc "\r\n"
 *   ready    := "m-ready lines=" N '*' crc "\r\n"   N: number of lines of this reply before it
 *   crc      := 8 lowercase hex digits: CRC-32 of the line's bytes before the last '*'
 * Every line the firmware sends carries its CRC, so the host tells a clean reply from one
 * damaged on the wire (dropped, flipped or injected bytes) and from a reply with a lost line.
 * A handler may switch the parser into binary mode (snapuq_proto_expect_binary): exactly N raw
 * bytes follow the '%', checked against a CRC-32 (IEEE 802.3, as zlib.crc32) given in the
 * command. Errors always produce one "e-..." line followed by "m-ready" and the parser is back
 * in text mode:
 *   e-overflow          command longer than SNAPUQ_PROTO_LINE_MAX (bytes up to the next '%' dropped)
 *   e-unknown-command   first word not in the command table
 *   e-args              wrong number of arguments / unparsable number
 *   e-timeout           no byte for the binary or text timeout; the partial frame is dropped
 *   e-crc               binary payload complete but its CRC-32 differs
 *   e-<handler ...>     handler-specific errors
 * Non-printable bytes inside a command make it "e-bad-byte". The parser never blocks, never
 * reads or writes outside its buffers and accepts any byte sequence.
 */
#ifndef SNAPUQ_PROTO_H
#define SNAPUQ_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNAPUQ_PROTO_LINE_MAX 160
#define SNAPUQ_PROTO_MAX_ARGS 8
#define SNAPUQ_PROTO_OUT_MAX 256

struct snapuq_proto;

/* Command handler: argv[0] is the command word; argc <= SNAPUQ_PROTO_MAX_ARGS. It writes its
 * reply lines with the snapuq_proto_* output helpers; the parser appends "m-ready" unless the
 * handler started a binary transfer (then "m-ready" follows the transfer). */
typedef void (*snapuq_proto_handler)(struct snapuq_proto *p, int argc, char **argv);

/* Called when a binary transfer ended: ok = 1 when all bytes arrived and the CRC matched. */
typedef void (*snapuq_proto_binary_done)(struct snapuq_proto *p, int ok, uint32_t got);

typedef struct {
    const char *name;
    snapuq_proto_handler fn;
    uint8_t min_args, max_args; /* not counting argv[0] */
    const char *help;
} snapuq_proto_command_t;

typedef void (*snapuq_proto_write_fn)(void *ctx, const char *buf, size_t len);

typedef struct snapuq_proto {
    /* configuration */
    const snapuq_proto_command_t *commands;
    size_t n_commands;
    snapuq_proto_write_fn write;
    void *write_ctx;
    void *user;                 /* for handlers */
    uint32_t binary_timeout_ms; /* gap allowed between two bytes of a binary payload */
    uint32_t text_timeout_ms;   /* gap allowed inside a partial text command (0 = never) */
    /* state */
    uint8_t mode;               /* 0 text, 1 text-discard (after overflow), 2 binary */
    uint8_t bad_byte;
    char line[SNAPUQ_PROTO_LINE_MAX + 1];
    size_t line_len;
    uint8_t *bin_dst;
    uint32_t bin_want, bin_got, bin_crc_want, bin_crc;
    snapuq_proto_binary_done bin_done;
    uint32_t last_byte_ms;
    char out[SNAPUQ_PROTO_OUT_MAX];
    size_t out_len;
    uint32_t out_crc;           /* CRC-32 of the line being written */
    uint32_t reply_lines;       /* lines sent since the last "m-ready" */
    /* counters for `stats` */
    uint32_t n_commands_ok, n_errors;
} snapuq_proto_t;

/* Initialise with a command table and an output sink. Timeouts default to 1000 ms (binary)
 * and 0 (text: a human at a terminal may pause). */
void snapuq_proto_init(snapuq_proto_t *p, const snapuq_proto_command_t *commands, size_t n_commands,
                       snapuq_proto_write_fn write, void *write_ctx, void *user);

/* Feed one received byte (now_ms: a millisecond clock, used for timeouts). */
void snapuq_proto_feed(snapuq_proto_t *p, uint8_t byte, uint32_t now_ms);

/* Call when no byte arrived for a while (e.g. after a getc timeout): ends a stalled binary
 * transfer or partial text command with e-timeout once the configured gap has passed. */
void snapuq_proto_poll(snapuq_proto_t *p, uint32_t now_ms);

/* Inside a handler: receive exactly `n` (> 0) raw bytes into dst (capacity >= n; NULL: count
 * and discard them, to stay in step with a sender whose frame is refused) next, checked
 * against crc32; `done` is called at the end (also on timeout/CRC error, with ok = 0). */
void snapuq_proto_expect_binary(snapuq_proto_t *p, uint8_t *dst, uint32_t n, uint32_t crc32,
                                snapuq_proto_binary_done done);

/* ---- output helpers (buffered; a line is sent when ended) ---- */
void snapuq_proto_puts(snapuq_proto_t *p, const char *s);
void snapuq_proto_put_i64(snapuq_proto_t *p, int64_t v);
void snapuq_proto_put_u64(snapuq_proto_t *p, uint64_t v);
void snapuq_proto_put_hex32(snapuq_proto_t *p, uint32_t v);
/* " key=value" */
void snapuq_proto_kv_i(snapuq_proto_t *p, const char *key, int64_t v);
void snapuq_proto_kv_u(snapuq_proto_t *p, const char *key, uint64_t v);
void snapuq_proto_kv_s(snapuq_proto_t *p, const char *key, const char *v);
/* " key=v0,v1,..." */
void snapuq_proto_kv_i8v(snapuq_proto_t *p, const char *key, const int8_t *v, size_t n);
void snapuq_proto_kv_i32v(snapuq_proto_t *p, const char *key, const int32_t *v, size_t n);
/* " key=hexbytes" (two lowercase hex digits per byte; int8 as two's complement) */
void snapuq_proto_kv_hex(snapuq_proto_t *p, const char *key, const uint8_t *v, size_t n);
/* terminate the current line with '*' + its CRC-32 (8 hex digits) + CRLF and send it */
void snapuq_proto_endl(snapuq_proto_t *p);
/* end a reply: "m-ready lines=N" (N = lines since the previous m-ready) */
void snapuq_proto_ready(snapuq_proto_t *p);
/* whole lines: "e-<what>[ detail]" / "m-<what>" */
void snapuq_proto_error(snapuq_proto_t *p, const char *what, const char *detail);
void snapuq_proto_line(snapuq_proto_t *p, const char *line);

/* Parse a decimal (optionally negative) or 0x-hex integer; returns 0 on success. */
int snapuq_proto_parse_i64(const char *s, int64_t *out);
int snapuq_proto_parse_u32(const char *s, uint32_t *out);

/* CRC-32 (IEEE, reflected, init and final xor 0xFFFFFFFF): crc = snapuq_crc32_update(0, buf, n). */
uint32_t snapuq_crc32_update(uint32_t crc, const uint8_t *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_PROTO_H */
