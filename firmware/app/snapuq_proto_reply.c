/* snapuq_proto_reply.c - the reply side of the harness protocol: CRC-32, key=value fields and
 * the "*XXXXXXXX" line checksum (see snapuq_proto.h for the grammar). */
#include "snapuq_proto.h"

uint32_t snapuq_crc32_update(uint32_t crc, const uint8_t *buf, size_t n)
{
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < n; i++) {
        crc ^= buf[i];
        for (k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

static void flush(snapuq_proto_t *p)
{
    if (p->out_len > 0u && p->write != NULL) {
        p->write(p->write_ctx, p->out, p->out_len);
    }
    p->out_len = 0u;
}

/* room kept at the end of the buffer for "*XXXXXXXX\r\n" */
#define LINE_TAIL 11u

void snapuq_proto_puts(snapuq_proto_t *p, const char *s)
{
    while (*s != '\0') {
        uint8_t c = (uint8_t)*s++;
        if (p->out_len >= SNAPUQ_PROTO_OUT_MAX - LINE_TAIL) {
            flush(p); /* long lines go out in pieces; the CRC and CRLF still end them */
        }
        p->out_crc = snapuq_crc32_update(p->out_crc, &c, 1u);
        p->out[p->out_len++] = (char)c;
    }
}

void snapuq_proto_put_u64(snapuq_proto_t *p, uint64_t v)
{
    char tmp[24];
    int i = 23;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u && i > 0);
    snapuq_proto_puts(p, &tmp[i]);
}

void snapuq_proto_put_i64(snapuq_proto_t *p, int64_t v)
{
    if (v < 0) {
        snapuq_proto_puts(p, "-");
        snapuq_proto_put_u64(p, (uint64_t)0 - (uint64_t)v);
    } else {
        snapuq_proto_put_u64(p, (uint64_t)v);
    }
}

void snapuq_proto_put_hex32(snapuq_proto_t *p, uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[9];
    int i;
    for (i = 7; i >= 0; i--) {
        tmp[i] = digits[v & 0xFu];
        v >>= 4;
    }
    tmp[8] = '\0';
    snapuq_proto_puts(p, tmp);
}

static void key(snapuq_proto_t *p, const char *k)
{
    snapuq_proto_puts(p, " ");
    snapuq_proto_puts(p, k);
    snapuq_proto_puts(p, "=");
}

void snapuq_proto_kv_i(snapuq_proto_t *p, const char *k, int64_t v)
{
    key(p, k);
    snapuq_proto_put_i64(p, v);
}

void snapuq_proto_kv_u(snapuq_proto_t *p, const char *k, uint64_t v)
{
    key(p, k);
    snapuq_proto_put_u64(p, v);
}

void snapuq_proto_kv_s(snapuq_proto_t *p, const char *k, const char *v)
{
    key(p, k);
    snapuq_proto_puts(p, v);
}

void snapuq_proto_kv_i8v(snapuq_proto_t *p, const char *k, const int8_t *v, size_t n)
{
    size_t i;
    key(p, k);
    for (i = 0; i < n; i++) {
        if (i > 0u) {
            snapuq_proto_puts(p, ",");
        }
        snapuq_proto_put_i64(p, v[i]);
    }
}

void snapuq_proto_kv_hex(snapuq_proto_t *p, const char *k, const uint8_t *v, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;
    key(p, k);
    for (i = 0; i < n; i++) {
        char two[3];
        two[0] = digits[v[i] >> 4];
        two[1] = digits[v[i] & 0xFu];
        two[2] = '\0';
        snapuq_proto_puts(p, two);
    }
}

void snapuq_proto_kv_i32v(snapuq_proto_t *p, const char *k, const int32_t *v, size_t n)
{
    size_t i;
    key(p, k);
    for (i = 0; i < n; i++) {
        if (i > 0u) {
            snapuq_proto_puts(p, ",");
        }
        snapuq_proto_put_i64(p, v[i]);
    }
}

void snapuq_proto_endl(snapuq_proto_t *p)
{
    static const char digits[] = "0123456789abcdef";
    uint32_t crc = p->out_crc;
    int i;
    if (p->out_len > SNAPUQ_PROTO_OUT_MAX - LINE_TAIL) {
        flush(p);
    }
    p->out[p->out_len++] = '*';
    for (i = 7; i >= 0; i--) {
        p->out[p->out_len + (size_t)i] = digits[crc & 0xFu];
        crc >>= 4;
    }
    p->out_len += 8u;
    p->out[p->out_len++] = '\r';
    p->out[p->out_len++] = '\n';
    flush(p);
    p->out_crc = 0u;
    p->reply_lines++;
}

void snapuq_proto_ready(snapuq_proto_t *p)
{
    snapuq_proto_puts(p, "m-ready");
    snapuq_proto_kv_u(p, "lines", p->reply_lines);
    snapuq_proto_endl(p);
    p->reply_lines = 0u;
}

void snapuq_proto_line(snapuq_proto_t *p, const char *line)
{
    snapuq_proto_puts(p, line);
    snapuq_proto_endl(p);
}

void snapuq_proto_error(snapuq_proto_t *p, const char *what, const char *detail)
{
    p->n_errors++;
    snapuq_proto_puts(p, "e-");
    snapuq_proto_puts(p, what);
    if (detail != NULL && detail[0] != '\0') {
        snapuq_proto_puts(p, " ");
        snapuq_proto_puts(p, detail);
    }
    snapuq_proto_endl(p);
}
