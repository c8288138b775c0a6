/*
 * snapuq_app_internal.h - what the application's feature files share (not a public header).
 *
 * The application is one file per job, selected by the build (firmware/Makefile, platformio.ini):
 *
 *   snapuq_app.c           protocol and dispatch: the command table, boot, board and model info
 *   snapuq_app_lifecycle.c the model: load (compiled in or uploaded), plan the pool, infer, results
 *   snapuq_app_upload.c    uploads: the input (load, db) and a model or blob (model N CRC)
 *   one runner, the part of an inference that differs between images:
 *     snapuq_app_run.c       one model, backbone only (SNAP=0)
 *     snapuq_app_snap.c      one model scored by SNAP, on-device calibration and the drift monitor (SNAP=1)
 *     snapuq_app_ensemble.c  every linked member in turn, their softmax outputs summed (SNAP=0 ENSEMBLE=1)
 *
 * A runner defines every snapuq_app_run_* function below; the command table lists a runner's own
 * commands under the flag that selects it (the one place a feature flag is tested).
 */
#ifndef SNAPUQ_APP_INTERNAL_H
#define SNAPUQ_APP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../core/snapuq_runtime.h"
#include "snapuq_app_model.h"
#include "snapuq_proto.h"

#define SNAPUQ_APP_KEPT_NONE 0u
#define SNAPUQ_APP_KEPT_BUILTIN 1u
#define SNAPUQ_APP_KEPT_UPLOAD 2u
#define SNAPUQ_APP_ALIGN16(x) (((x) + 15u) & ~(size_t)15u)

/* The state every feature reads: the model, the RAM pool and the staged input. */
typedef struct {
    snapuq_model_t model;
    uint8_t loaded;            /* model initialised and given an arena */
    uint16_t in_index;
    uint32_t in_bytes;
    uint8_t *staging;          /* the last uploaded input (copied in before every invoke) */
    uint8_t direct_input;      /* no room for a staging copy: uploads go straight into the model's
                                  input tensor, and each upload is consumed by one inference */
    uint8_t have_input;
    uint8_t have_result;
    size_t model_bytes;
    uint8_t model_uploaded;
    /* an uploaded model's bytes in the pool, [up_off, up_off + up_len), and their CRC-32: kept
       intact while the next upload arrives (it goes to the other end of the pool), so a bad upload
       falls back to them; up_len == 0: none (the model, if any, is the compiled-in one) */
    size_t up_off, up_len;
    uint32_t up_crc;
    size_t rx_off;             /* where the upload being received goes */
    uint8_t kept;              /* what a failed upload falls back to: SNAPUQ_APP_KEPT_* */
    char model_sha256[65];     /* of the flatbuffer it runs (compiled in or uploaded) */
    char snap_sha256[65];      /* of the SNAP constants it scores with (a blob's section; "" unknown) */
    size_t arena_need, arena_persist, arena_act, arena_act_noreuse;
    uint8_t *pool;
    size_t pool_len;
    /* hex upload (MLPerf "db") */
    uint32_t db_want, db_got;
    /* profiling */
    uint8_t prof_on;
    uint64_t prof_t0;
    uint64_t op_ticks[SNAPUQ_MAX_OPS];
    /* last timing */
    uint64_t last_model_ticks, last_snap_ticks;
} snapuq_app_t;

extern snapuq_app_t snapuq_app;
extern snapuq_proto_t snapuq_app_proto;

/* ---- snapuq_app.c: reply helpers */
/* "e-WHAT status=NAME[ msg="the model's message"]" */
void snapuq_app_status_error(snapuq_proto_t *p, const char *what, snapuq_status_t st);
/* 1 when a model is loaded, else "e-no-model" and 0 */
int snapuq_app_need_model(snapuq_proto_t *p);

/* ---- snapuq_app_lifecycle.c: the model */
/* Plan the part [lo, hi) of the pool as [arena | input staging] for the flatbuffer (see the file). */
void snapuq_app_load_model(const uint8_t *tflite, size_t len, size_t lo, size_t hi, uint8_t uploaded);
/* The upload at [off, off + n) of the pool (a .snapuq blob or a .tflite). */
void snapuq_app_load_upload(size_t off, size_t n);
/* The compiled-in model, if the image has one. */
void snapuq_app_load_builtin(void);
void snapuq_app_cmd_infer(snapuq_proto_t *p, int argc, char **argv);
void snapuq_app_cmd_results(snapuq_proto_t *p, int argc, char **argv);
void snapuq_app_cmd_outputs(snapuq_proto_t *p, int argc, char **argv);

/* ---- snapuq_app_upload.c: uploads */
void snapuq_app_cmd_load(snapuq_proto_t *p, int argc, char **argv);
void snapuq_app_cmd_db(snapuq_proto_t *p, int argc, char **argv);
void snapuq_app_cmd_model(snapuq_proto_t *p, int argc, char **argv);

/* ---- the runner (snapuq_app_run.c, snapuq_app_snap.c or snapuq_app_ensemble.c) */
/* At boot, before the compiled-in model loads. */
void snapuq_app_run_boot(void);
/* The arena a model gets, from its own need (the ensemble: that of its largest linked member). */
size_t snapuq_app_run_arena(size_t need, uint8_t uploaded);
/* A model just loaded with its arena (app.loaded = 1); the runner may refuse it (app.loaded = 0). */
void snapuq_app_run_loaded(void);
/* An upload the runner reads itself (SNAP: a .snapuq blob): 1 when it took it. */
int snapuq_app_run_open(const uint8_t *b, size_t n, size_t lo, size_t hi);
/* One inference on the staged input; the time split between the model and SNAP. */
snapuq_status_t snapuq_app_run_once(uint64_t *model_ticks, uint64_t *snap_ticks);
/* Before the timed runs of `infer`; after them (they succeeded); its fields of m-infer. */
void snapuq_app_run_timed_begin(void);
void snapuq_app_run_timed_end(void);
void snapuq_app_run_infer_kv(snapuq_proto_t *p);
/* The fields of m-results (called with a result); 0: none, the plain logits are sent. */
int snapuq_app_run_results(snapuq_proto_t *p);
/* Its fields of m-profile: about the image, and (with a model loaded) about the model. */
void snapuq_app_run_profile_image(snapuq_proto_t *p);
void snapuq_app_run_profile_model(snapuq_proto_t *p);
/* Its fields of m-model-loaded. */
void snapuq_app_run_model_kv(snapuq_proto_t *p);

/* ---- commands of the SNAP runner (snapuq_app_snap.c) */
void snapuq_app_cmd_calib(snapuq_proto_t *p, int argc, char **argv);
void snapuq_app_cmd_monitor(snapuq_proto_t *p, int argc, char **argv);

#endif
