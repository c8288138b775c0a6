"""PlatformIO builder for the QEMU boards (MPS2 Cortex-M4/M7, netduinoplus2 = STM32F405): compiles the env's sources (build_src_filter)
with the system arm-none-eabi-gcc, links with firmware/ld/<board>.ld; `-t upload` (or `-t exec`)
boots the image in qemu-system-arm with the UART on this terminal."""

import os

from SCons.Script import AlwaysBuild, Default, DefaultEnvironment

env = DefaultEnvironment()
board = env.BoardConfig()
# the board's build.ldscript (firmware/ld/<board>.ld) is passed by PlatformIO itself
cpu_flags = board.get("build.cpu_flags").split()
ld_dir = os.path.join(env.subst("$PROJECT_DIR"), "firmware", "ld")
env.Replace(LDSCRIPT_PATH=os.path.join(ld_dir, board.get("build.ldscript")))

env.Replace(
    AR="arm-none-eabi-ar", AS="arm-none-eabi-gcc", CC="arm-none-eabi-gcc", CXX="arm-none-eabi-g++",
    OBJCOPY="arm-none-eabi-objcopy", RANLIB="arm-none-eabi-ranlib", SIZETOOL="arm-none-eabi-size",
    PROGSUFFIX=".elf",
    SIZEPROGREGEXP=r"^(?:\.text|\.ARM\.exidx|\.data)\s+(\d+).*",
    SIZEDATAREGEXP=r"^(?:\.data|\.bss)\s+(\d+).*",
    SIZECHECKCMD="$SIZETOOL -A -d $SOURCES",
    SIZEPRINTCMD="$SIZETOOL -B -d $SOURCES",
)
sysclk = int(board.get("build.qemu_sysclk_hz", 0))
env.Append(
    ASFLAGS=cpu_flags,
    CCFLAGS=cpu_flags + ["-O2", "-g", "-ffunction-sections", "-fdata-sections", "-fno-common"],
    CPPDEFINES=[("SNAPUQ_BOARD", board.get("build.snapuq_board"))]
    + ([("SNAPUQ_CPU_M7", 1)] if board.get("build.cpu") == "cortex-m7" else [])
    # boards whose emulator has no clock controller model: the fixed SYSCLK QEMU runs them at
    + ([("SNAPUQ_QEMU_SYSCLK_HZ", f"{sysclk}u"), ("SNAPUQ_QEMU_SYSCLK_MHZ", sysclk // 1_000_000)]
       if sysclk else []),
    LINKFLAGS=cpu_flags + ["-nostartfiles", "-Wl,--gc-sections", "--specs=nano.specs", "-L" + ld_dir],
    LIBS=["c", "gcc", "nosys"],
)

target_elf = env.BuildProgram()
machine = board.get("build.qemu_machine")
qemu_cmd = (f"qemu-system-arm -M {machine} -nographic -monitor none -icount shift=0 "
            "-semihosting-config enable=on,target=native -serial stdio -kernel $SOURCE")
AlwaysBuild(env.Alias("upload", target_elf, qemu_cmd))
AlwaysBuild(env.Alias("exec", target_elf, qemu_cmd))
Default([target_elf])
