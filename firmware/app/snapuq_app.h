/*
 * snapuq_app.h - the benchmark / harness firmware application: the command table of the
 * protocol (snapuq_proto.h) over the int8 runtime and the SNAP core. Portable: it talks to the
 * board only through snapuq_port.h, so the same code runs on Cortex-M boards, QEMU and the host.
 *
 * Model: the one compiled in (generated snapuq_model.c of `snapuq export`, linked when
 * SNAPUQ_APP_BUILTIN_MODEL=1) or one uploaded with `model N CRC%` into the RAM pool.
 * SNAPUQ_APP_WITH_SNAP=0 builds the backbone-only variant (no SNAP core linked; used by
 * `snapuq bench` to measure what SNAP adds).
 */
#ifndef SNAPUQ_APP_H
#define SNAPUQ_APP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load the built-in model (if any), print the boot banner and "m-ready". */
void snapuq_app_init(void);

/* One received byte / an idle poll (drives protocol timeouts). */
void snapuq_app_feed(uint8_t byte);
void snapuq_app_poll(void);

#ifdef __cplusplus
}
#endif

#endif
