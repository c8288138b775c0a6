/*
 * snapuq_status.h - status codes and the error convention shared by every snapuq C module.
 *
 * One convention in the runtime, the loader, the blob reader and SNAP:
 *   - Every public snapuq_* function that can fail returns a snapuq_status_t: SNAPUQ_OK is 0, every
 *     error is positive, and snapuq_status_str() gives a stable, short English name ("ok", "bad
 *     argument", ...; a string table by designated initializers, so its order cannot drift).
 *   - Where a status alone does not name the problem, the function also writes one line (no
 *     newline, at most SNAPUQ_ERROR_LEN - 1 bytes, static text and numbers only) naming the
 *     offending offset, tensor, operator, field or constant into a message buffer:
 *       * the model's own buffer for the functions that check a model's content: snapuq_model_init
 *         (the loader, each operator's parse), snapuq_model_set_arena (each operator's prepare);
 *         read it with snapuq_model_error();
 *       * otherwise a caller-provided buffer, passed as (char *msg, size_t msg_len) after the
 *         other arguments (the blob reader, snapuq_snap_check, snapuq_snap_params_check): msg may be
 *         NULL (status only); the line is truncated to msg_len - 1 bytes and always NUL-terminated;
 *         it is "" when the call succeeds.
 *   - Functions whose statuses are self-explanatory (ARG for a NULL pointer or an index out of
 *     range, STATE for a call out of order, SIZE for a length that differs, NUMERIC for a
 *     calibration that cannot be solved) return the status alone; their comment lists them.
 * The lines are what users see (the firmware's `e-` replies, the MicroPython ValueError, the host
 * library's exceptions), identical in the C core and the pure-MicroPython twin.
 */
#ifndef SNAPUQ_STATUS_H
#define SNAPUQ_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNAPUQ_ERROR_LEN 96 /* bytes of a message buffer (the model's, or one a caller provides) */

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

/* Write `text` as the one-line message into msg (msg_len bytes, truncated, NUL-terminated; nothing
 * when msg is NULL or msg_len is 0) and return st: `return snapuq_message(msg, n, SNAPUQ_ERR_FORMAT,
 * "...")`. */
snapuq_status_t snapuq_message(char *msg, size_t msg_len, snapuq_status_t st, const char *text);

#ifdef __cplusplus
}
#endif

#endif /* SNAPUQ_STATUS_H */
