"""PlatformIO library script for firmware/core: compile exactly the sources core.mk lists (the one
source list of the core; the Makefiles, MicroPython fragments and host tests read it too).
Groups: RUNTIME + DSP + SNAP (the firmware needs no token scoring)."""

import os
import re

Import("env")  # noqa: F821  (SCons)

GROUPS = ("RUNTIME", "DSP", "SNAP")
here = os.getcwd()  # PlatformIO runs library scripts from the library folder
files = []
with open(os.path.join(here, "core.mk")) as f:
    for line in f:
        m = re.match(r"^SNAPUQ_CORE_([A-Z]+)_SRC\s*\+=\s*(\S+)\s*$", line)
        if m and m.group(1) in GROUPS:
            files.append(m.group(2))
if not files:
    raise SystemExit("snapuq: firmware/core/core.mk lists no sources")
env.Replace(SRC_FILTER=["-<*>"] + [f"+<{p}>" for p in files])  # noqa: F821
