/*
 * snapuq_flatbuffer.c - bounds-checked FlatBuffers accessors (see snapuq_flatbuffer.h).
 */
#include <stdint.h>
#include <string.h>

#include "snapuq_flatbuffer.h"

int snapuq_fb_table(const snapuq_fb_t *fb, uint32_t pos, snapuq_fbt_t *t)
{
    int64_t vt;
    if (pos > fb->len || fb->len - pos < 4u || (pos & 3u) != 0) {
        return -1;
    }
    vt = (int64_t)pos - (int64_t)snapuq_rd_i32(fb->b + pos);
    if (vt < 0 || vt > (int64_t)fb->len - 4 || (vt & 1) != 0) {
        return -1;
    }
    t->pos = pos;
    t->vt = (uint32_t)vt;
    t->vt_len = snapuq_rd_u16(fb->b + t->vt);
    t->obj_len = snapuq_rd_u16(fb->b + t->vt + 2);
    if (t->vt_len < 4 || (t->vt_len & 1u) != 0 || (uint32_t)t->vt_len > fb->len - t->vt ||
        t->obj_len < 4 || (uint32_t)t->obj_len > fb->len - pos) {
        return -1;
    }
    return 0;
}

int32_t snapuq_fb_field(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, unsigned size)
{
    uint32_t at = 4u + 2u * id;
    uint16_t off;
    if (at + 2u > t->vt_len) {
        return 0;
    }
    off = snapuq_rd_u16(fb->b + t->vt + at);
    if (off == 0) {
        return 0;
    }
    if (off < 4u || (uint32_t)off + size > t->obj_len) {
        return -1;
    }
    return off;
}

int snapuq_fb_u8(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint8_t def, uint8_t *v)
{
    int32_t o = snapuq_fb_field(fb, t, id, 1);
    if (o < 0) {
        return -1;
    }
    *v = o ? fb->b[t->pos + (uint32_t)o] : def;
    return 0;
}

int snapuq_fb_i32(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, int32_t def, int32_t *v)
{
    int32_t o = snapuq_fb_field(fb, t, id, 4);
    if (o < 0) {
        return -1;
    }
    *v = o ? snapuq_rd_i32(fb->b + t->pos + (uint32_t)o) : def;
    return 0;
}

int snapuq_fb_f32(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, float def, float *v)
{
    int32_t o = snapuq_fb_field(fb, t, id, 4);
    if (o < 0) {
        return -1;
    }
    *v = o ? snapuq_rd_f32(fb->b + t->pos + (uint32_t)o) : def;
    return 0;
}

int snapuq_fb_u64(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint64_t *v)
{
    int32_t o = snapuq_fb_field(fb, t, id, 8);
    if (o < 0) {
        return -1;
    }
    *v = o ? (uint64_t)snapuq_rd_i64(fb->b + t->pos + (uint32_t)o) : 0u;
    return 0;
}

int snapuq_fb_ref(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint32_t *abs)
{
    int32_t o = snapuq_fb_field(fb, t, id, 4);
    uint32_t at, rel;
    if (o < 0) {
        return -1;
    }
    if (o == 0) {
        *abs = 0;
        return 0;
    }
    at = t->pos + (uint32_t)o;
    rel = snapuq_rd_u32(fb->b + at);
    if (rel == 0 || rel > fb->len - at) {
        return -1;
    }
    *abs = at + rel;
    return 0;
}

int snapuq_fb_vec(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint32_t esize,
                  uint32_t *data, uint32_t *n)
{
    uint32_t abs;
    uint32_t cnt;
    if (snapuq_fb_ref(fb, t, id, &abs) != 0) {
        return -1;
    }
    *n = 0;
    *data = 0;
    if (abs == 0) {
        return 0;
    }
    if (fb->len - abs < 4u) {
        return -1;
    }
    cnt = snapuq_rd_u32(fb->b + abs);
    if (esize != 0 && cnt > (fb->len - abs - 4u) / esize) {
        return -1;
    }
    *n = cnt;
    *data = abs + 4u;
    return 0;
}

int snapuq_fb_str(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, const char **s)
{
    uint32_t data, n;
    if (snapuq_fb_vec(fb, t, id, 1, &data, &n) != 0) {
        return -1;
    }
    if (data == 0) {
        *s = "";
        return 0;
    }
    if (n >= fb->len - data || fb->b[data + n] != 0 || memchr(fb->b + data, 0, n) != NULL) {
        return -1;
    }
    *s = (const char *)(fb->b + data);
    return 0;
}

int snapuq_fb_vec_table(const snapuq_fb_t *fb, uint32_t data, uint32_t i, snapuq_fbt_t *t)
{
    const uint32_t at = data + 4u * i;
    const uint32_t rel = snapuq_rd_u32(fb->b + at);
    if (rel == 0 || rel > fb->len - at) {
        return -1;
    }
    return snapuq_fb_table(fb, at + rel, t);
}
