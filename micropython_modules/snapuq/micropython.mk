# snapuq user C module for the make-based MicroPython ports (unix, qemu, stm32, rp2 via make).
#   make USER_C_MODULES=/path/to/snapuq/micropython_modules
# The glue (modsnapuq.c) only converts arguments; the runtime and the SNAP core are compiled
# from firmware/core by path (never copied). Every firmware/core/*.c is included, so this list
# cannot drift from the core or from micropython.cmake (which uses the same glob).
SNAPUQ_MOD_DIR := $(USERMOD_DIR)
SNAPUQ_CORE_DIR := $(abspath $(SNAPUQ_MOD_DIR)/../../firmware/core)

SRC_USERMOD_C += $(SNAPUQ_MOD_DIR)/modsnapuq.c
SRC_USERMOD_LIB_C += $(sort $(wildcard $(SNAPUQ_CORE_DIR)/*.c))

CFLAGS_USERMOD += -I$(SNAPUQ_CORE_DIR)
# Cortex-M with the DSP extension (M4/M7/M33): SNAPUQ_KERNELS_DSP=1 selects the SMLAD kernels.
ifeq ($(SNAPUQ_KERNELS_DSP),1)
CFLAGS_USERMOD += -DSNAPUQ_KERNELS_DSP=1
endif
