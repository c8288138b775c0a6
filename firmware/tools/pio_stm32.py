"""PlatformIO extra script for the real-board STM32 envs (the official `ststm32` platform, no framework).

Without a framework the platform passes only `-mthumb -mcpu=<cpu>` (soft float), `-Os`, and links
with `-T <ldscript>` without `-L` for the script's folder. This script adds, for every env that
sets `custom_snapuq_fpu`:
  - the hard-float ABI with the board's FPU on the compile, assemble *and* link lines (the link
    line picks the hard-float multilib of newlib/libgcc);
  - firmware/ld on the library path (the board scripts INCLUDE cortexm_common.ld);
  - no C runtime start files (firmware/port/cortexm/startup.c is the reset handler), newlib-nano,
    unused sections dropped, a link map next to the ELF.
"""

import os

Import("env")  # noqa: F821  (SCons)

fpu = env.GetProjectOption("custom_snapuq_fpu", "")  # noqa: F821
if not fpu:
    raise SystemExit("snapuq: set custom_snapuq_fpu (e.g. fpv4-sp-d16) for this env")
flags = [f"-mfpu={fpu}", "-mfloat-abi=hard"]
ld_dir = os.path.join(env.subst("$PROJECT_DIR"), "firmware", "ld")  # noqa: F821
env.Append(  # noqa: F821
    CCFLAGS=flags,
    ASFLAGS=flags,
    LIBPATH=[ld_dir],
    LINKFLAGS=flags + ["-nostartfiles", "--specs=nano.specs", "-Wl,--gc-sections",
                       "-Wl,-Map=" + os.path.join(env.subst("$BUILD_DIR"), "firmware.map")],  # noqa: F821
)
