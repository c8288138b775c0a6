/*
 * snapuq_snap_section.h - the layout of the blob's SNAP section (docs/BLOB.md), described once.
 *
 * Each table lists the fields of one part of the section as X(name, type, offset, since):
 *   name    the field (C identifier; the Python writer packs fields by this name)
 *   type    b4 (4 bytes), u8, u16, i16, u32, i32, f64; little-endian
 *   offset  bytes from the start of the header or record
 *   since   the section version that appended the field (a field is present when the section's
 *           version is at least `since` and the field lies inside the header length H)
 * Fields are listed in offset order and packed without gaps, so a table's size is the sum of its
 * field sizes (the header's size for version v: the fields with since <= v).
 *
 * Readers and writers all take the layout from here: firmware/core/snapuq_blob.c (accessors
 * generated from these tables), host/snapuq/snap_section.py (parses this file; the writer
 * snapuq.micropython.snap_section packs by it) and the pure-MicroPython twin
 * (micropython_modules/twin/snapuq.py, whose copy of the tables is generated from this file:
 * `python -m snapuq.snap_section twin`; tests/host/test_snap_section.py checks it is current).
 * Change the layout only by appending fields with a higher `since` (docs/BLOB.md, "Versions").
 *
 * Plain macros only: no declarations, so any C file (and a non-C parser) can read it.
 */
#ifndef SNAPUQ_SNAP_SECTION_H
#define SNAPUQ_SNAP_SECTION_H

/* bytes of each field type */
#define SNAPUQ_SNAP_SIZEOF_b4 4
#define SNAPUQ_SNAP_SIZEOF_u8 1
#define SNAPUQ_SNAP_SIZEOF_u16 2
#define SNAPUQ_SNAP_SIZEOF_i16 2
#define SNAPUQ_SNAP_SIZEOF_u32 4
#define SNAPUQ_SNAP_SIZEOF_i32 4
#define SNAPUQ_SNAP_SIZEOF_f64 8

/* Section header. Offsets named *_off count from the section start; 0 means "none" where the
 * text says so. */
#define SNAPUQ_SNAP_HEADER_FIELDS(X)                                                               \
    X(magic, b4, 0, 1)             /* "SNAP" */                                                  \
    X(version, u16, 4, 1)          /* section version */                                         \
    X(header_len, u16, 6, 1)       /* H: header bytes */                                         \
    X(tap_rec_len, u16, 8, 1)      /* TR: tap record bytes (multiple of 4) */                    \
    X(out_rec_len, u16, 10, 1)     /* OR: output record bytes (multiple of 4) */                 \
    X(spec_version, u8, 12, 1)     /* fixed-point spec version (docs/FIXED_POINT.md) */           \
    X(variant, u8, 13, 1)          /* 0 best, 1 literal */                                       \
    X(hinge, u8, 14, 1)            /* 1: step 6's hinge applies */                               \
    X(n_taps, u8, 15, 1)                                                                         \
    X(n_classes, u16, 16, 1)                                                                     \
    X(n_outputs, u16, 18, 1)       /* records in the output table */                             \
    X(out_logits, u16, 20, 1)      /* model output index of the logits */                        \
    X(out_probs, u16, 22, 1)       /* model output index of the probabilities */                 \
    X(n_class_names, u16, 24, 1)                                                                 \
    X(combine, u8, 26, 1)          /* 0 logistic, 1 perr_alarm */                                \
    X(perr_step_shift, u8, 27, 1)  /* p_err table step shift (8) */                              \
    X(conf_a_q16, i32, 28, 1)                                                                    \
    X(b0_q16, i32, 32, 1)                                                                        \
    X(b1_m, i32, 36, 1)                                                                          \
    X(b1_n, i32, 40, 1)                                                                          \
    X(b2_m, i32, 44, 1)                                                                          \
    X(b2_n, i32, 48, 1)                                                                          \
    X(hinge_q_q16, i32, 52, 1)     /* 0 without hinge, as the next two */                        \
    X(hinge_m, i32, 56, 1)                                                                       \
    X(hinge_n, i32, 60, 1)                                                                       \
    X(u_threshold_q16, i32, 64, 1)                                                               \
    X(z_clamp_q16, i32, 68, 1)     /* the spec's 1048575 */                                      \
    X(lut_step_shift, i32, 72, 1)  /* the spec's 11 */                                           \
    X(sigmoid_lut_off, u32, 76, 1) /* 513 x i32 */                                               \
    X(tap_table_off, u32, 80, 1)   /* n_taps x TR */                                             \
    X(out_table_off, u32, 84, 1)   /* n_outputs x OR */                                          \
    X(class_table_off, u32, 88, 1) /* n_class_names x u32 string offsets */                      \
    X(strings_off, u32, 92, 1)                                                                   \
    X(strings_len, u32, 96, 1)                                                                   \
    X(alarm_k_q16, i32, 100, 1)    /* perr_alarm; 0 otherwise */                                 \
    X(perr_lut_off, u32, 104, 1)   /* 257 x i32; 0 when combine is logistic */                   \
    X(intap_off, u32, 108, 2)      /* input-tap record; 0: none */                               \
    X(in_norm_off, u32, 112, 3)    /* input-normalization record; 0: none */

/* Tap record (n_taps of them, TR bytes apart, from tap_table_off). */
#define SNAPUQ_SNAP_TAP_FIELDS(X)                                                                  \
    X(d, u16, 0, 1)                                                                              \
    X(out_a, u16, 2, 1)            /* model output indices of a, mu, logvar */                   \
    X(out_mu, u16, 4, 1)                                                                         \
    X(out_logvar, u16, 6, 1)                                                                     \
    X(z_a, i32, 8, 1)                                                                            \
    X(z_mu, i32, 12, 1)                                                                          \
    X(z_v, i32, 16, 1)                                                                           \
    X(k_a, i32, 20, 1)                                                                           \
    X(k_mu, i32, 24, 1)                                                                          \
    X(lut_shift, i32, 28, 1)                                                                     \
    X(p_m, i32, 32, 1)                                                                           \
    X(p_n, i32, 36, 1)                                                                           \
    X(q_m, i32, 40, 1)                                                                           \
    X(q_n, i32, 44, 1)                                                                           \
    X(r_q16, i32, 48, 1)                                                                         \
    X(w_q16, i32, 52, 1)                                                                         \
    X(inv_sigma_lut_off, u32, 56, 1) /* 256 x i32 */                                             \
    X(name, u32, 60, 1)            /* string offset */

/* Output record (n_outputs of them, OR bytes apart, from out_table_off). */
#define SNAPUQ_SNAP_OUTPUT_FIELDS(X)                                                               \
    X(index, u16, 0, 1)            /* model output index */                                      \
    X(zero_point, i16, 2, 1)       /* checked against the model */                               \
    X(name, u32, 4, 1)             /* string offset */

/* Input-tap record (section version 2; at intap_off; docs/FIXED_POINT.md step 4b). */
#define SNAPUQ_SNAP_INTAP_FIELDS(X)                                                                \
    X(rows, u16, 0, 2)                                                                           \
    X(cols, u16, 2, 2)                                                                           \
    X(n_feat, u16, 4, 2)                                                                         \
    X(reserved, u16, 6, 2)         /* 0 */                                                       \
    X(z_x, i32, 8, 2)              /* the input's zero point */                                  \
    X(p_m, i32, 12, 2)                                                                           \
    X(p_n, i32, 16, 2)                                                                           \
    X(r_q16, i32, 20, 2)                                                                         \
    X(w_q16, i32, 24, 2)                                                                         \
    X(g_m_off, u32, 28, 2)         /* n_feat x i32 each */                                       \
    X(g_n_off, u32, 32, 2)                                                                       \
    X(h_q12_off, u32, 36, 2)

/* Input-normalization record (section version 3; at in_norm_off): its fixed part; C scales
 * (f64) follow at `scale`, then C offsets (f64). */
#define SNAPUQ_SNAP_NORM_FIELDS(X)                                                                 \
    X(channels, u16, 0, 3)         /* C, 1..SNAPUQ_SNAP_NORM_MAX_CHANNELS */                     \
    X(reserved, u16, 2, 3)         /* 0 */                                                       \
    X(scale, f64, 4, 3)            /* first of C scales, then C offsets */

#define SNAPUQ_SNAP_MAGIC "SNAP"
#define SNAPUQ_SNAP_NORM_MAX_CHANNELS 4096

#endif /* SNAPUQ_SNAP_SECTION_H */
