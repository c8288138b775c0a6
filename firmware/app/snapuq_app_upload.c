/*
 * snapuq_app_upload.c - what the host sends the harness firmware: the input tensor (load: a binary
 * frame; db: MLPerf-style hex text) and a model (model N CRC: a .tflite or a .snapuq blob into the RAM
 * pool, the model loaded before it kept until the new one loads).
 */
#include <string.h>

#include "snapuq_app_internal.h"

static void load_done(snapuq_proto_t *p, int ok, uint32_t got)
{
    if (!ok) {
        snapuq_app.have_input = 0u;
        return; /* the parser already sent e-crc / e-timeout */
    }
    if (!snapuq_app.loaded) {
        (void)snapuq_app_need_model(p);
        snapuq_app.have_input = 0u;
        return;
    }
    if (got != snapuq_app.in_bytes) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", got);
        snapuq_proto_kv_u(p, "want", snapuq_app.in_bytes);
        p->n_errors++;
        snapuq_proto_endl(p);
        snapuq_app.have_input = 0u;
        return;
    }
    snapuq_app.have_input = 1u;
    snapuq_app.have_result = 0u;
    snapuq_proto_puts(p, "m-load-done");
    snapuq_proto_kv_u(p, "bytes", got);
    snapuq_proto_puts(p, " crc=");
    snapuq_proto_put_hex32(p, p->bin_crc);
    snapuq_proto_endl(p);
}

/* load N CRC  -> N raw bytes follow the '%' */
void snapuq_app_cmd_load(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n, crc;
    (void)argc;
    if (snapuq_proto_parse_u32(argv[1], &n) != 0 || snapuq_proto_parse_u32(argv[2], &crc) != 0 ||
        n == 0u) {
        snapuq_proto_error(p, "args", "load N CRC32 (N > 0 raw bytes follow)");
        return;
    }
    /* A frame longer than the input buffer (or with no model, no buffer at all) is refused at once:
       none of it is consumed, so a damaged or absurd N (load 4294967295) never makes the board swallow
       bytes until its byte-gap timeout; what the sender sent after the command is junk to the text
       parser up to the next '%' (the host's resync). A shorter frame is received (and discarded)
       to stay in step with its sender, and its size error reported after it. */
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if (n > snapuq_app.in_bytes) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", n);
        snapuq_proto_kv_u(p, "want", snapuq_app.in_bytes);
        snapuq_proto_puts(p, " msg=\"frame longer than the input buffer; nothing received\"");
        p->n_errors++;
        snapuq_proto_endl(p);
        snapuq_app.have_input = 0u;
        return;
    }
    if (n != snapuq_app.in_bytes) {
        snapuq_proto_expect_binary(p, NULL, n, crc, load_done);
    } else {
        snapuq_proto_expect_binary(p, snapuq_app.staging, n, crc, load_done);
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* MLPerf Tiny style: "db load N" then "db HEXBYTES" chunks until N bytes arrived. */
void snapuq_app_cmd_db(snapuq_proto_t *p, int argc, char **argv)
{
    const char *h;
    (void)argc;
    if (!snapuq_app_need_model(p)) {
        return;
    }
    if (strcmp(argv[1], "load") == 0) {
        uint32_t n;
        if (argc != 3 || snapuq_proto_parse_u32(argv[2], &n) != 0 || n != snapuq_app.in_bytes) {
            snapuq_proto_puts(p, "e-size");
            snapuq_proto_kv_u(p, "want", snapuq_app.in_bytes);
            p->n_errors++;
            snapuq_proto_endl(p);
            return;
        }
        snapuq_app.db_want = n;
        snapuq_app.db_got = 0u;
        snapuq_app.have_input = 0u;
        snapuq_proto_line(p, "m-load-ready");
        return;
    }
    if (argc != 2 || snapuq_app.db_want == 0u) {
        snapuq_proto_error(p, "args", "db load N first, then db HEX");
        return;
    }
    for (h = argv[1]; h[0] != '\0'; h += 2) {
        int hi = hexval(h[0]);
        int lo = h[1] != '\0' ? hexval(h[1]) : -1;
        if (hi < 0 || lo < 0) {
            snapuq_proto_error(p, "hex", "odd length or non-hex digit");
            snapuq_app.db_want = 0u;
            return;
        }
        if (snapuq_app.db_got >= snapuq_app.db_want) {
            snapuq_proto_error(p, "size", "more bytes than announced");
            snapuq_app.db_want = 0u;
            return;
        }
        snapuq_app.staging[snapuq_app.db_got++] = (uint8_t)((hi << 4) | lo);
    }
    if (snapuq_app.db_got == snapuq_app.db_want) {
        snapuq_app.db_want = 0u;
        snapuq_app.have_input = 1u;
        snapuq_app.have_result = 0u;
        snapuq_proto_puts(p, "m-load-done");
        snapuq_proto_kv_u(p, "bytes", snapuq_app.db_got);
        snapuq_proto_endl(p);
    }
}


/* A failed upload: the model loaded before it runs again. An uploaded one is loaded again from its
 * bytes when their CRC-32 still holds (the new model's arena may have been planned over them, see
 * cmd_model), else the compiled-in model. */
static void restore_kept(snapuq_proto_t *p)
{
    if (snapuq_app.kept == SNAPUQ_APP_KEPT_UPLOAD) {
        if (snapuq_crc32_update(0u, snapuq_app.pool + snapuq_app.up_off, snapuq_app.up_len) == snapuq_app.up_crc) {
            snapuq_app_load_upload(snapuq_app.up_off, snapuq_app.up_len);
        }
        if (!snapuq_app.loaded) {
            snapuq_app.kept = SNAPUQ_APP_KEPT_BUILTIN;
        }
    }
    if (snapuq_app.kept == SNAPUQ_APP_KEPT_BUILTIN && !snapuq_app.loaded) {
        snapuq_app_load_builtin();
    }
    if (snapuq_app.loaded) {
        snapuq_proto_puts(p, "m-model-kept");
        snapuq_proto_kv_u(p, "builtin", (uint64_t)(snapuq_app.up_len == 0u));
        snapuq_proto_kv_u(p, "bytes", snapuq_app.model_bytes);
        snapuq_proto_endl(p);
    } else {
        snapuq_app.up_len = 0u;
    }
}

static void model_done(snapuq_proto_t *p, int ok, uint32_t got)
{
    if (ok) {
        snapuq_app_load_upload(snapuq_app.rx_off, got);
        if (snapuq_app.loaded) {
            snapuq_app.up_off = snapuq_app.rx_off;
            snapuq_app.up_len = got;
            snapuq_app.up_crc = p->bin_crc;
            snapuq_proto_puts(p, "m-model-loaded");
            snapuq_proto_kv_u(p, "bytes", got);
            snapuq_app_run_model_kv(p);
            snapuq_proto_kv_u(p, "arena", snapuq_app.arena_need);
            snapuq_proto_kv_u(p, "in_bytes", snapuq_app.in_bytes);
            snapuq_proto_endl(p);
            return;
        }
    }
    restore_kept(p); /* the frame failed (e-crc / e-timeout) or the model did not load */
}

/* model N CRC + N raw bytes: a .tflite or .snapuq blob into the RAM pool; model builtin: back to
 * the compiled-in one.
 * The pool holds the upload and its arena + input staging. While an upload arrives the current
 * model stays: the compiled-in one lives in flash (its arena is planned again when the upload
 * fails), an uploaded one keeps its bytes at one end of the pool and the new upload goes to the
 * other end. So N may be the whole pool when the current model is the compiled-in one (or none),
 * and the pool less the kept upload otherwise (`model builtin` first frees it). A larger N is
 * refused at once (e-size max=ROOM), before any byte of the frame is consumed; else the device
 * says m-model-go (a line of this command's reply) and the host sends the N bytes only then. */
void snapuq_app_cmd_model(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t n, crc;
    size_t room;
    if (argc == 2 && strcmp(argv[1], "builtin") == 0) {
        if (!SNAPUQ_APP_BUILTIN_MODEL) {
            snapuq_proto_error(p, "no-model", "this build has no compiled-in model");
            return;
        }
        snapuq_app_load_builtin();
        if (snapuq_app.loaded) {
            snapuq_proto_line(p, "m-model-loaded builtin=1");
        }
        return;
    }
    if (argc != 3 || snapuq_proto_parse_u32(argv[1], &n) != 0 ||
        snapuq_proto_parse_u32(argv[2], &crc) != 0 || n == 0u) {
        snapuq_proto_error(p, "args", "model N CRC32 (+ N raw bytes) | model builtin");
        return;
    }
    if (!snapuq_app.loaded) {
        snapuq_app.up_len = 0u;
    }
    room = snapuq_app.up_len == 0u ? snapuq_app.pool_len
           : (snapuq_app.up_off == 0u ? snapuq_app.pool_len - SNAPUQ_APP_ALIGN16(snapuq_app.up_len) : snapuq_app.up_off);
    if (n > room) {
        snapuq_proto_puts(p, "e-size");
        snapuq_proto_kv_u(p, "got", n);
        snapuq_proto_kv_u(p, "max", room);
        snapuq_proto_puts(p, snapuq_app.up_len == 0u
                                 ? " msg=\"model larger than the RAM pool; nothing received\""
                                 : " msg=\"model larger than the RAM pool beside the uploaded model kept until the "
                                   "new one loads (model builtin frees it); nothing received\"");
        p->n_errors++;
        snapuq_proto_endl(p);
        return;
    }
    snapuq_app.kept = !snapuq_app.loaded ? SNAPUQ_APP_KEPT_NONE : (snapuq_app.up_len == 0u ? SNAPUQ_APP_KEPT_BUILTIN : SNAPUQ_APP_KEPT_UPLOAD);
    /* the kept upload at the pool's top: the new one at the bottom; else at the top */
    snapuq_app.rx_off = (snapuq_app.up_len != 0u && snapuq_app.up_off != 0u) ? 0u : ((snapuq_app.pool_len - n) & ~(size_t)15u);
    snapuq_app.loaded = 0u;
    snapuq_app.have_input = 0u;
    snapuq_app.have_result = 0u;
    snapuq_proto_puts(p, "m-model-go");
    snapuq_proto_kv_u(p, "bytes", n);
    snapuq_proto_puts(p, " crc=");
    snapuq_proto_put_hex32(p, crc);
    snapuq_proto_kv_u(p, "max", room);
    snapuq_proto_endl(p);
    snapuq_proto_expect_binary(p, snapuq_app.pool + snapuq_app.rx_off, n, crc, model_done);
}
