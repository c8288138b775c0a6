/*
 * snapuq_flatbuffer.h - bounds-checked, in-place reader for the FlatBuffers binary format
 * (internal to the core). Every accessor checks offsets, vtables and vector lengths against
 * the buffer length and returns -1 instead of reading outside it; multi-byte values are read
 * byte-wise, little-endian, so the buffer needs no alignment.
 */
#ifndef SNAPUQ_FLATBUFFER_H
#define SNAPUQ_FLATBUFFER_H

#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *b;
    uint32_t len;
} snapuq_fb_t;

typedef struct {
    uint32_t pos;    /* absolute table position */
    uint32_t vt;     /* absolute vtable position */
    uint16_t vt_len; /* vtable bytes */
    uint16_t obj_len;
} snapuq_fbt_t;

/* little-endian loads from unaligned memory */
static inline uint32_t snapuq_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint16_t snapuq_rd_u16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] | ((uint16_t)p[1] << 8));
}
static inline int32_t snapuq_rd_i32(const uint8_t *p)
{
    return (int32_t)snapuq_rd_u32(p);
}
static inline int64_t snapuq_rd_i64(const uint8_t *p)
{
    return (int64_t)((uint64_t)snapuq_rd_u32(p) | ((uint64_t)snapuq_rd_u32(p + 4) << 32));
}
static inline float snapuq_rd_f32(const uint8_t *p)
{
    uint32_t u = snapuq_rd_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Table at absolute position pos (4-aligned, vtable inside the buffer); 0 = ok. */
int snapuq_fb_table(const snapuq_fb_t *fb, uint32_t pos, snapuq_fbt_t *t);
/* Offset of field `id` inside the table (0 if absent); -1 if `size` bytes overrun the table. */
int32_t snapuq_fb_field(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, unsigned size);
/* Scalar fields: *v = the value, or `def` when the field is absent; 0 = ok. */
int snapuq_fb_u8(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint8_t def, uint8_t *v);
int snapuq_fb_i32(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, int32_t def, int32_t *v);
int snapuq_fb_f32(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, float def, float *v);
int snapuq_fb_u64(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint64_t *v);
/* Follow the uoffset in field id. *abs = 0 when the field is absent. */
int snapuq_fb_ref(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint32_t *abs);
/* Vector in field id with elements of `esize` bytes: *data = first element, *n = count.
 * Absent vector: n = 0, data = 0. */
int snapuq_fb_vec(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, uint32_t esize,
                  uint32_t *data, uint32_t *n);
/* String field, NUL-terminated inside the buffer; "" when absent. */
int snapuq_fb_str(const snapuq_fb_t *fb, const snapuq_fbt_t *t, unsigned id, const char **s);
/* Table element i of a vector of tables whose first element is at `data`. */
int snapuq_fb_vec_table(const snapuq_fb_t *fb, uint32_t data, uint32_t i, snapuq_fbt_t *t);

#endif /* SNAPUQ_FLATBUFFER_H */
