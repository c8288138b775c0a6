/*
 * snapuq_blob.h - reader of the snapuq model blob (`model.snapuq`): one file holding the int8
 * .tflite and a compact binary SNAP section (taps, output indices and names, LUTs, fixed-point
 * constants, class names), protected by a CRC-32. The format is specified in docs/BLOB.md;
 * host/snapuq/micropython.py writes it, the firmware's `model` upload, the MicroPython C
 * module and the pure-MicroPython twin read it.
 *
 *   snapuq_blob_t b;  char msg[SNAPUQ_ERROR_LEN];
 *   snapuq_blob_open(&b, bytes, len, msg, sizeof msg);          // header, bounds, CRC, SNAP section
 *   snapuq_model_init(&model, b.tflite, b.tflite_len);          // ... set_arena
 *   snapuq_blob_snap_config(&b, &model, &cfg, msg, sizeof msg); // cfg's LUT pointers point into the blob
 *
 * Everything is read in place (the blob may live in flash) and must stay unchanged while the
 * model and config are used. The blob must start on a 4-byte boundary (its LUTs are int32
 * arrays used where they lie). No allocation; every length and offset is checked, so any byte
 * string either opens or returns an error status with a one-line reason in the caller's message
 * buffer (snapuq_status.h: msg may be NULL; "" on success). The section's layout is
 * snapuq_snap_section.h.
 */
#ifndef SNAPUQ_BLOB_H
#define SNAPUQ_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_runtime.h"
#include "snapuq_snap.h"
#include "snapuq_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SNAPUQ_BLOB_MAGIC "SNUQ"
#define SNAPUQ_BLOB_VERSION 2      /* blob header version this reader reads */
#define SNAPUQ_BLOB_HEADER 32      /* header bytes */
#define SNAPUQ_SNAP_SECTION_VERSION 3 /* newest SNAP section version this reader knows */

typedef struct {
    const uint8_t *tflite;  /* the .tflite flatbuffer inside the blob */
    uint32_t tflite_len;
    const uint8_t *snap;    /* the SNAP section */
    uint32_t snap_len;
    uint16_t snap_version;  /* SNAP section version (>= 1; later versions only append fields) */
    uint16_t n_outputs;     /* named outputs in the section's output table */
    uint16_t n_taps;
    uint16_t n_class_names;
    uint16_t in_channels;   /* input normalization channels C (section v3), 0: none */
    uint32_t in_norm;       /* its record's offset in the section (0: none) */
} snapuq_blob_t;

/* CRC-32 (IEEE 802.3, zlib's crc32) of n bytes. */
uint32_t snapuq_crc32(const uint8_t *p, size_t n);

/* Check the header, the section bounds, the CRC and the SNAP section's tables (every offset,
 * count, string and LUT inside the section). Statuses: OK, ARG (NULL or unaligned blob),
 * FORMAT (bad magic, truncated, offsets, CRC), VERSION (blob or section version unknown). */
snapuq_status_t snapuq_blob_open(snapuq_blob_t *blob, const void *bytes, size_t len, char *msg,
                                 size_t msg_len);

/* Fill *cfg (spec_version, variant, taps, output indices, LUT pointers into the blob, default
 * calibration) from the SNAP section and check it against a loaded model: every output index
 * exists, is int8 and has the section's size (d per tap, n_classes for logits and probs), has a
 * record in the section's output table (names unique, the logits named "logits", zero points equal
 * to the model's), the default calibration passes snapuq_snap_params_check() and the config
 * snapuq_snap_check(): a config this returns scores every inference. Statuses: OK, ARG, STATE (model not loaded), FORMAT, LIMIT
 * (more taps than SNAPUQ_MAX_TAPS), SIZE, QUANT (zero point differs from the model). */
snapuq_status_t snapuq_blob_snap_config(const snapuq_blob_t *blob, const snapuq_model_t *model,
                                        snapuq_snap_config_t *cfg, char *msg, size_t msg_len);

/* Named output i (0..n_outputs-1): its name and model output index. Statuses: OK, ARG. */
snapuq_status_t snapuq_blob_output(const snapuq_blob_t *blob, uint16_t i, const char **name,
                                   uint16_t *index);
/* The recorded input normalization (section v3; docs/BLOB.md): a raw reading's element i (flat index
 * into the input, channels last) as the model's float input, (float)((double)raw * scale[i % C] +
 * offset[i % C]) -- the generated snapuq_model_quantize_input's map, before the TFLite quantization.
 * Returns raw unchanged when the section has none (blob->in_channels == 0). */
float snapuq_blob_normalize_input(const snapuq_blob_t *blob, uint32_t i, float raw);
/* Channel c's scale and offset (c < blob->in_channels). Statuses: OK, ARG. */
snapuq_status_t snapuq_blob_input_normalization(const snapuq_blob_t *blob, uint16_t c, double *scale,
                                                double *offset);

/* Name of tap l and of class c ("" when the section has none). Statuses: OK, ARG. */
snapuq_status_t snapuq_blob_tap_name(const snapuq_blob_t *blob, uint16_t l, const char **name);
snapuq_status_t snapuq_blob_class_name(const snapuq_blob_t *blob, uint16_t c, const char **name);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_BLOB_H */
