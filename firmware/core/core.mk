# core.mk - THE list of snapuq's portable C core sources (paths relative to firmware/core).
#
# Every build reads this file; none keeps its own list:
#   firmware/Makefile, firmware/core/Makefile          include it
#   platformio.ini -> firmware/core/library.json        (library_build.py parses it)
#   micropython_modules/snapuq/micropython.mk           include it
#   micropython_modules/snapuq/micropython.cmake        file(STRINGS) + regex
#   tests/c/ccore.py (host C tests, host/snapuq C library) parse it
# Keep the format: one `VAR += file` per line, so the non-make readers stay one-line regexes.
#
#   SNAPUQ_CORE_RUNTIME_SRC  int8 TFLite runtime: loader, planner, operators (ops/op_<name>.c),
#                            reference kernels (kernels/ref/<op>.c, one file per operator family)
#   SNAPUQ_CORE_DSP_SRC      Armv7E-M DSP kernels kernels/dsp/<op>.c and the registrations that run
#                            them, ops/dsp/op_<op>.c (replacing ops/op_<op>.c's reference ones);
#                            compiled everywhere, empty unless -DSNAPUQ_KERNELS_DSP=1 selects them;
#                            ops without one use the reference)
#   SNAPUQ_CORE_SNAP_SRC     SNAP-UQ score, calibration, stream monitor, model blob reader, the input
#                            path (raw readings or codes -> the model's input + the input tap)
#   SNAPUQ_CORE_TOKENS_SRC   Uncert token scoring (optional)

SNAPUQ_CORE_RUNTIME_SRC += snapuq_runtime.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_loader.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_planner.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_schedule.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_flatbuffer.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_quant.c
SNAPUQ_CORE_RUNTIME_SRC += snapuq_opnames.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/conv.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/depthwise_conv.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/fully_connected.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/pooling.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/add.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/mean.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/softmax.c
SNAPUQ_CORE_RUNTIME_SRC += kernels/ref/quantize.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_table.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_common.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_conv.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_fc.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_pool.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_add.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_concat.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_mean.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_reshape.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_softmax.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_logistic.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_quantize.c
SNAPUQ_CORE_RUNTIME_SRC += ops/op_relu.c

SNAPUQ_CORE_DSP_SRC += kernels/dsp/conv.c
SNAPUQ_CORE_DSP_SRC += kernels/dsp/depthwise_conv.c
SNAPUQ_CORE_DSP_SRC += kernels/dsp/fully_connected.c
SNAPUQ_CORE_DSP_SRC += kernels/dsp/mean.c
SNAPUQ_CORE_DSP_SRC += kernels/dsp/pooling.c
SNAPUQ_CORE_DSP_SRC += kernels/dsp/requant.c
SNAPUQ_CORE_DSP_SRC += ops/dsp/op_conv.c
SNAPUQ_CORE_DSP_SRC += ops/dsp/op_fc.c
SNAPUQ_CORE_DSP_SRC += ops/dsp/op_mean.c
SNAPUQ_CORE_DSP_SRC += ops/dsp/op_pool.c

SNAPUQ_CORE_SNAP_SRC += snapuq_snap.c
SNAPUQ_CORE_SNAP_SRC += snapuq_snap_calib.c
SNAPUQ_CORE_SNAP_SRC += snapuq_snap_monitor.c
SNAPUQ_CORE_SNAP_SRC += snapuq_blob.c
SNAPUQ_CORE_SNAP_SRC += snapuq_input.c

SNAPUQ_CORE_TOKENS_SRC += snapuq_tokens.c

# include directory (relative to firmware/core)
SNAPUQ_CORE_INC += .
