# snapuq user C module for the make-based MicroPython ports (unix, qemu, stm32, rp2 via make).
#   make USER_C_MODULES=/path/to/snapuq/micropython_modules
# The glue (modsnapuq.c) only converts arguments; the runtime, the SNAP core and the blob reader
# are compiled from firmware/core by path (never copied), from the one source list core.mk.
# Not the TOKENS group: the module has no token API, so nothing would call it. Model.snap_sha256 uses
# the firmware's own SHA-256 (firmware/app/snapuq_sha256.c), so both report the same digest.
SNAPUQ_MOD_DIR := $(USERMOD_DIR)
SNAPUQ_CORE_DIR := $(abspath $(SNAPUQ_MOD_DIR)/../../firmware/core)
SNAPUQ_APP_DIR := $(abspath $(SNAPUQ_MOD_DIR)/../../firmware/app)
include $(SNAPUQ_CORE_DIR)/core.mk

SRC_USERMOD_C += $(SNAPUQ_MOD_DIR)/modsnapuq.c
SRC_USERMOD_LIB_C += $(addprefix $(SNAPUQ_CORE_DIR)/,$(SNAPUQ_CORE_RUNTIME_SRC) $(SNAPUQ_CORE_DSP_SRC) $(SNAPUQ_CORE_SNAP_SRC))
SRC_USERMOD_LIB_C += $(SNAPUQ_APP_DIR)/snapuq_sha256.c

CFLAGS_USERMOD += $(addprefix -I$(SNAPUQ_CORE_DIR)/,$(SNAPUQ_CORE_INC)) -I$(SNAPUQ_APP_DIR)
# Cortex-M with the DSP extension (M4/M7/M33): SNAPUQ_KERNELS_DSP=1 selects the SMLAD kernels.
ifeq ($(SNAPUQ_KERNELS_DSP),1)
CFLAGS_USERMOD += -DSNAPUQ_KERNELS_DSP=1
endif
