/*
 * snapuq_status.h - status codes shared by every snapuq C module.
 *
 * Every public snapuq_* function returns a snapuq_status_t. SNAPUQ_OK is 0; every error is
 * positive. snapuq_status_str() gives a stable, short English name ("ok", "bad argument", ...);
 * the model loader additionally keeps a one-line message naming the offending offset, tensor
 * or operator (snapuq_model_error()).
 */
#ifndef SNAPUQ_STATUS_H
#define SNAPUQ_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SNAPUQ_OK = 0,
    SNAPUQ_ERR_ARG = 1,           /* NULL pointer, out-of-range index or argument */
    SNAPUQ_ERR_FORMAT = 2,        /* malformed / truncated flatbuffer (offset, vtable, vector) */
    SNAPUQ_ERR_VERSION = 3,       /* wrong file identifier ("TFL3") or schema version */
    SNAPUQ_ERR_UNSUPPORTED_OP = 4,   /* operator outside the supported int8 subset */
    SNAPUQ_ERR_UNSUPPORTED_TYPE = 5, /* tensor type / operator option combination unsupported */
    SNAPUQ_ERR_SHAPE = 6,         /* tensor shape inconsistent with its operator */
    SNAPUQ_ERR_QUANT = 7,         /* missing or invalid quantization parameters */
    SNAPUQ_ERR_LIMIT = 8,         /* model exceeds a compile-time limit (SNAPUQ_MAX_*) */
    SNAPUQ_ERR_ARENA = 9,         /* arena missing, misaligned or smaller than required */
    SNAPUQ_ERR_NOT_FOUND = 10,    /* no tensor / tap with that name */
    SNAPUQ_ERR_STATE = 11,        /* call out of order (e.g. invoke before set_arena) */
    SNAPUQ_ERR_SIZE = 12,         /* caller buffer length does not match the tensor / state */
    SNAPUQ_ERR_NUMERIC = 13,      /* calibration: too few samples, singular system, no convergence */
    SNAPUQ_STATUS_COUNT = 14
} snapuq_status_t;

/* Short English name of a status; never NULL ("unknown status" for values out of range). */
const char *snapuq_status_str(snapuq_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_STATUS_H */
