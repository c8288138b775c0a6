/*
 * snapuq_app.c - the harness firmware's protocol and dispatch: the command table, boot, and the
 * commands about the board and the image (grammar in snapuq_proto.h and docs/FIRMWARE.md). Every
 * reply is one or more "m-..." / "e-..." lines, then "m-ready lines=N"; every line ends with '*' and
 * its CRC-32 (snapuq_proto_endl). The other jobs live in their own files (snapuq_app_internal.h).
 */
#include "snapuq_app.h"

#include <string.h>

#include "../port/snapuq_port.h"
#include "snapuq_app_internal.h"

#define APP_VERSION "1"

snapuq_app_t snapuq_app;
snapuq_proto_t snapuq_app_proto;

/* ------------------------------------------------------------------ helpers */

static void port_write(void *ctx, const char *buf, size_t len)
{
    (void)ctx;
    snapuq_port_write(buf, len);
}

void snapuq_app_status_error(snapuq_proto_t *p, const char *what, snapuq_status_t st)
{
    snapuq_proto_puts(p, "e-");
    snapuq_proto_puts(p, what);
    snapuq_proto_kv_s(p, "status", snapuq_status_str(st));
    if (snapuq_app.model.error[0] != '\0') {
        snapuq_proto_puts(p, " msg=\"");
        snapuq_proto_puts(p, snapuq_model_error(&snapuq_app.model));
        snapuq_proto_puts(p, "\"");
    }
    p->n_errors++;
    snapuq_proto_endl(p);
}

int snapuq_app_need_model(snapuq_proto_t *p)
{
    if (!snapuq_app.loaded) {
        snapuq_proto_error(p, "no-model", "no model loaded (see boot message)");
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ commands */

static void cmd_name(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-name-snapuq-");
    snapuq_proto_puts(p, snapuq_port_board());
    snapuq_proto_endl(p);
}

static void cmd_profile(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-profile");
    snapuq_proto_kv_s(p, "fw", "snapuq");
    snapuq_proto_kv_s(p, "version", APP_VERSION);
    snapuq_proto_kv_s(p, "board", snapuq_port_board());
    snapuq_proto_kv_s(p, "cpu", snapuq_port_cpu());
    snapuq_proto_kv_u(p, "cpu_hz", snapuq_port_cpu_hz());
    snapuq_proto_kv_s(p, "clock", snapuq_port_clock());
    snapuq_proto_kv_s(p, "counter", snapuq_port_counter_kind());
    snapuq_proto_kv_u(p, "counter_hz", snapuq_port_counter_hz());
    snapuq_proto_kv_s(p, "kernels", snapuq_kernels_name());
    snapuq_proto_kv_s(p, "model", SNAPUQ_APP_MODEL_NAME);
    if (snapuq_app.model_bytes != 0u) {
        snapuq_proto_kv_s(p, "model_sha256", snapuq_app.model_sha256);
    }
    snapuq_proto_kv_u(p, "snap", SNAPUQ_APP_WITH_SNAP);
    if (snapuq_app.snap_sha256[0] != '\0') {
        snapuq_proto_kv_s(p, "snap_sha256", snapuq_app.snap_sha256); /* the harness checks it against snapuq.json */
    }
    snapuq_app_run_profile_image(p);
    snapuq_proto_kv_u(p, "loaded", snapuq_app.loaded);
    if (snapuq_app.loaded) {
        snapuq_proto_kv_u(p, "in_bytes", snapuq_app.in_bytes);
        snapuq_proto_kv_u(p, "outputs", snapuq_model_output_count(&snapuq_app.model));
        snapuq_proto_kv_u(p, "ops", snapuq_model_op_count(&snapuq_app.model));
        snapuq_app_run_profile_model(p);
    }
    snapuq_proto_endl(p);
}

static void cmd_stats(snapuq_proto_t *p, int argc, char **argv)
{
    size_t stack_peak = snapuq_port_stack_peak();
    size_t ram_static = snapuq_port_ram_static();
    (void)argc;
    (void)argv;
    snapuq_proto_puts(p, "m-stats");
    snapuq_proto_kv_u(p, "flash", snapuq_port_flash_used());
    snapuq_proto_kv_u(p, "flash_size", snapuq_port_flash_size());
    snapuq_proto_kv_u(p, "ram_static", ram_static);
    snapuq_proto_kv_u(p, "ram_size", snapuq_port_ram_size());
    snapuq_proto_kv_u(p, "pool", snapuq_app.pool_len);
    snapuq_proto_kv_u(p, "arena", snapuq_app.arena_need);
    snapuq_proto_kv_u(p, "arena_persist", snapuq_app.arena_persist);
    snapuq_proto_kv_u(p, "arena_act", snapuq_app.arena_act);
    snapuq_proto_kv_u(p, "arena_act_noreuse", snapuq_app.arena_act_noreuse);
    snapuq_proto_kv_u(p, "input", snapuq_app.in_bytes);
    snapuq_proto_kv_u(p, "direct_input", snapuq_app.direct_input);
    snapuq_proto_kv_u(p, "stack_peak", stack_peak);
    snapuq_proto_kv_u(p, "stack_size", snapuq_port_stack_size());
    snapuq_proto_kv_u(p, "ram_peak",
                      ram_static + ((snapuq_app.arena_need + 15u) & ~(size_t)15u) +
                          (snapuq_app.direct_input ? 0u : snapuq_app.in_bytes) + stack_peak +
                          (snapuq_app.model_uploaded ? ((snapuq_app.model_bytes + 15u) & ~(size_t)15u) : 0u));
    snapuq_proto_kv_u(p, "model_bytes", snapuq_app.model_bytes);
    snapuq_proto_kv_u(p, "model_in_ram", snapuq_app.model_uploaded);
    snapuq_proto_kv_u(p, "model_struct", sizeof(snapuq_model_t));
    snapuq_proto_kv_u(p, "commands", p->n_commands_ok);
    snapuq_proto_kv_u(p, "errors", p->n_errors);
    snapuq_proto_endl(p);
}


/* prof on|off|show : per-operator ticks of the last profiled infer */
static void cmd_prof(snapuq_proto_t *p, int argc, char **argv)
{
    uint16_t i, n;
    (void)argc;
    if (strcmp(argv[1], "on") == 0 || strcmp(argv[1], "off") == 0) {
        snapuq_app.prof_on = (uint8_t)(argv[1][1] == 'n');
        snapuq_proto_puts(p, "m-prof");
        snapuq_proto_kv_u(p, "on", snapuq_app.prof_on);
        snapuq_proto_endl(p);
        return;
    }
    if (strcmp(argv[1], "show") != 0) {
        snapuq_proto_error(p, "args", "prof on|off|show");
        return;
    }
    if (!snapuq_app_need_model(p)) {
        return;
    }
    n = snapuq_model_op_count(&snapuq_app.model);
    for (i = 0; i < n && i < SNAPUQ_MAX_OPS; i++) {
        int32_t code = -1;
        (void)snapuq_model_op_code(&snapuq_app.model, i, &code);
        snapuq_proto_puts(p, "m-prof");
        snapuq_proto_kv_u(p, "op", i);
        snapuq_proto_kv_s(p, "code", snapuq_builtin_name(code));
        snapuq_proto_kv_u(p, "ticks", snapuq_app.op_ticks[i]);
        snapuq_proto_endl(p);
    }
}

static void cmd_timeout(snapuq_proto_t *p, int argc, char **argv)
{
    uint32_t bin, text;
    (void)argc;
    if (snapuq_proto_parse_u32(argv[1], &bin) != 0 || snapuq_proto_parse_u32(argv[2], &text) != 0 ||
        bin == 0u || bin > 60000u || text > 600000u) {
        snapuq_proto_error(p, "args", "timeout BINARY_MS(1..60000) TEXT_MS(0..600000, 0 = none)");
        return;
    }
    p->binary_timeout_ms = bin;
    p->text_timeout_ms = text;
    snapuq_proto_puts(p, "m-timeout");
    snapuq_proto_kv_u(p, "binary_ms", bin);
    snapuq_proto_kv_u(p, "text_ms", text);
    snapuq_proto_endl(p);
}

static void cmd_reset(snapuq_proto_t *p, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snapuq_proto_line(p, "m-reset");
    snapuq_port_reset();
}

static const snapuq_proto_command_t commands[] = {
    {"name", cmd_name, 0, 0, "-> m-name-snapuq-BOARD"},
    {"profile", cmd_profile, 0, 0, "-> m-profile key=value..."},
    {"stats", cmd_stats, 0, 0, "-> m-stats flash= ram_static= arena= stack_peak= ..."},
    {"load", snapuq_app_cmd_load, 2, 2, "N CRC32 + N raw bytes: input tensor (int8)"},
    {"db", snapuq_app_cmd_db, 1, 2, "load N | HEX: input tensor as hex text (MLPerf style)"},
    {"infer", snapuq_app_cmd_infer, 0, 2, "[N] [W]: W warm-up + N timed inferences"},
    {"results", snapuq_app_cmd_results, 0, 0, "-> m-results pred= logits= ebar= z= s= sf= m= u= flag="},
    {"outputs", snapuq_app_cmd_outputs, 0, 0, "-> m-output idx= name= hex= (every output tensor)"},
    {"prof", cmd_prof, 1, 1, "on|off|show: per-operator ticks"},
#if SNAPUQ_APP_WITH_SNAP
    {"calib", snapuq_app_cmd_calib, 1, 2, "reset|feed LABEL|fit [nonneg]|weights|default|show"},
    {"monitor", snapuq_app_cmd_monitor, 1, 4, "W THRESHOLD CUSUM_REF CUSUM_H | off | show"},
#endif
    {"model", snapuq_app_cmd_model, 1, 2, "N CRC32 + N raw bytes (.tflite or .snapuq blob into RAM) | builtin"},
    {"timeout", cmd_timeout, 2, 2, "BINARY_MS TEXT_MS"},
    {"reset", cmd_reset, 0, 0, "reset the board"},
};

void snapuq_app_init(void)
{
    memset(&snapuq_app, 0, sizeof snapuq_app);
    snapuq_proto_init(&snapuq_app_proto, commands, sizeof commands / sizeof commands[0], port_write, NULL,
                      &snapuq_app);
    snapuq_app.pool = snapuq_port_pool(&snapuq_app.pool_len);
    snapuq_app_run_boot();
    snapuq_app_load_builtin();
    snapuq_proto_puts(&snapuq_app_proto, "m-boot");
    snapuq_proto_kv_s(&snapuq_app_proto, "fw", "snapuq");
    snapuq_proto_kv_s(&snapuq_app_proto, "board", snapuq_port_board());
    snapuq_proto_kv_s(&snapuq_app_proto, "clock", snapuq_port_clock());
    snapuq_proto_kv_s(&snapuq_app_proto, "model", SNAPUQ_APP_MODEL_NAME);
    snapuq_proto_kv_u(&snapuq_app_proto, "loaded", snapuq_app.loaded);
    snapuq_proto_endl(&snapuq_app_proto);
    snapuq_proto_ready(&snapuq_app_proto);
}

void snapuq_app_feed(uint8_t byte)
{
    snapuq_proto_feed(&snapuq_app_proto, byte, snapuq_port_millis());
}

void snapuq_app_poll(void)
{
    snapuq_proto_poll(&snapuq_app_proto, snapuq_port_millis());
}

