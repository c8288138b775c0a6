/*
 * snapuq_app_model.h - binds the application to the model it is built with.
 *
 *   SNAPUQ_APP_BUILTIN_MODEL=1 (default): link the generated snapuq_model.c of `snapuq export`
 *     (its directory on the include path) and use its flatbuffer and SNAP configuration.
 *   SNAPUQ_APP_BLOB=1: link a plain flatbuffer array written by firmware/tools/bin2c.py
 *     (backbone-only variants for `snapuq bench`); implies SNAPUQ_APP_WITH_SNAP=0.
 *   SNAPUQ_APP_ENSEMBLE=1 (with SNAPUQ_APP_BLOB): every linked member runs in turn on one shared
 *     arena and the int8 softmax outputs of all members are summed on the device (deep ensemble;
 *     one member with several exit outputs = early-exit ensemble).
 *   SNAPUQ_APP_BUILTIN_MODEL=0: no model at all (protocol-only builds).
 */
#ifndef SNAPUQ_APP_MODEL_H
#define SNAPUQ_APP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifndef SNAPUQ_APP_BLOB
#define SNAPUQ_APP_BLOB 0
#endif
#ifndef SNAPUQ_APP_BUILTIN_MODEL
#define SNAPUQ_APP_BUILTIN_MODEL 1
#endif
#if SNAPUQ_APP_BLOB
#undef SNAPUQ_APP_WITH_SNAP
#define SNAPUQ_APP_WITH_SNAP 0
#endif
#ifndef SNAPUQ_APP_WITH_SNAP
#define SNAPUQ_APP_WITH_SNAP SNAPUQ_APP_BUILTIN_MODEL
#endif
#ifndef SNAPUQ_APP_ENSEMBLE
#define SNAPUQ_APP_ENSEMBLE 0
#endif
#if SNAPUQ_APP_ENSEMBLE && !SNAPUQ_APP_BLOB
#error "SNAPUQ_APP_ENSEMBLE needs SNAPUQ_APP_BLOB=1 (make ... SNAP=0 ENSEMBLE=1 BLOB=...)"
#endif

#if SNAPUQ_APP_BUILTIN_MODEL && SNAPUQ_APP_BLOB
extern const uint8_t snapuq_blob_tflite[];
extern const size_t snapuq_blob_tflite_len;
extern const char snapuq_blob_name[];
extern const size_t snapuq_blob_count;                /* ensemble members (1 for a plain blob) */
extern const uint8_t *const snapuq_blob_members[];
extern const size_t snapuq_blob_member_len[];
#define SNAPUQ_APP_TFLITE snapuq_blob_tflite
#define SNAPUQ_APP_TFLITE_LEN snapuq_blob_tflite_len
#define SNAPUQ_APP_MODEL_NAME snapuq_blob_name
#elif SNAPUQ_APP_BUILTIN_MODEL
#include "snapuq_model.h"
#define SNAPUQ_APP_TFLITE snapuq_model_tflite
#define SNAPUQ_APP_TFLITE_LEN snapuq_model_tflite_len
#define SNAPUQ_APP_SNAP_CONFIG snapuq_model_snap_config
#define SNAPUQ_APP_MODEL_NAME SNAPUQ_MODEL_NAME
#else
#define SNAPUQ_APP_MODEL_NAME "none"
#endif

#endif
