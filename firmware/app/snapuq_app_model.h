/*
 * snapuq_app_model.h - binds the application to the model it is built with.
 *
 *   SNAPUQ_APP_BUILTIN_MODEL=1 (default): link the generated snapuq_model.c of `snapuq export`
 *     (its directory on the include path) and use its flatbuffer and SNAP configuration.
 *   SNAPUQ_APP_LINKED_TFLITE=1: link plain .tflite flatbuffers as arrays written by
 *     firmware/tools/bin2c.py (`make ... SNAP=0 TFLITE=...`: backbone-only variants for `snapuq bench`);
 *     implies SNAPUQ_APP_WITH_SNAP=0.
 *   SNAPUQ_APP_ENSEMBLE=1 (with SNAPUQ_APP_LINKED_TFLITE): every linked member runs in turn on one
 *     shared arena and the int8 softmax outputs of all members are summed on the device (deep
 *     ensemble; one member with several exit outputs = early-exit ensemble).
 *   SNAPUQ_APP_BUILTIN_MODEL=0: no model at all (protocol-only builds).
 * The build links the runner these select (snapuq_app_internal.h); the flags are read here and in the
 * command table only.
 */
#ifndef SNAPUQ_APP_MODEL_H
#define SNAPUQ_APP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifndef SNAPUQ_APP_LINKED_TFLITE
#define SNAPUQ_APP_LINKED_TFLITE 0
#endif
#ifndef SNAPUQ_APP_BUILTIN_MODEL
#define SNAPUQ_APP_BUILTIN_MODEL 1
#endif
#if SNAPUQ_APP_LINKED_TFLITE
#undef SNAPUQ_APP_WITH_SNAP
#define SNAPUQ_APP_WITH_SNAP 0
#endif
#ifndef SNAPUQ_APP_WITH_SNAP
#define SNAPUQ_APP_WITH_SNAP SNAPUQ_APP_BUILTIN_MODEL
#endif
#ifndef SNAPUQ_APP_ENSEMBLE
#define SNAPUQ_APP_ENSEMBLE 0
#endif
#if SNAPUQ_APP_ENSEMBLE && !SNAPUQ_APP_LINKED_TFLITE
#error "SNAPUQ_APP_ENSEMBLE needs SNAPUQ_APP_LINKED_TFLITE=1 (make ... SNAP=0 ENSEMBLE=1 TFLITE=...)"
#endif

#if SNAPUQ_APP_BUILTIN_MODEL && SNAPUQ_APP_LINKED_TFLITE
extern const uint8_t snapuq_linked_tflite[];
extern const size_t snapuq_linked_tflite_len;
extern const char snapuq_linked_name[];
extern const size_t snapuq_linked_count;                /* ensemble members (1 for a plain .tflite) */
extern const uint8_t *const snapuq_linked_members[];
extern const size_t snapuq_linked_member_len[];
#define SNAPUQ_APP_TFLITE snapuq_linked_tflite
#define SNAPUQ_APP_TFLITE_LEN snapuq_linked_tflite_len
#define SNAPUQ_APP_MODEL_NAME snapuq_linked_name
#elif SNAPUQ_APP_BUILTIN_MODEL
#include "snapuq_model.h"
#define SNAPUQ_APP_TFLITE snapuq_model_tflite
#define SNAPUQ_APP_TFLITE_LEN snapuq_model_tflite_len
#define SNAPUQ_APP_SNAP_CONFIG snapuq_model_snap_config
#define SNAPUQ_APP_MODEL_NAME SNAPUQ_MODEL_NAME
#ifdef SNAPUQ_MODEL_SNAP_SHA256 /* written by `snapuq export` into snapuq_model.h */
#define SNAPUQ_APP_SNAP_SHA256 SNAPUQ_MODEL_SNAP_SHA256
#endif
#else
#define SNAPUQ_APP_TFLITE ((const uint8_t *)0)
#define SNAPUQ_APP_TFLITE_LEN 0u
#define SNAPUQ_APP_MODEL_NAME "none"
#endif
#ifndef SNAPUQ_APP_SNAP_SHA256
#define SNAPUQ_APP_SNAP_SHA256 "" /* unknown */
#endif

#endif
