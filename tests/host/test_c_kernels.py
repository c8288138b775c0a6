"""DSP kernels == reference kernels, byte for byte, on random CONV_2D / DEPTHWISE_CONV_2D /
FULLY_CONNECTED cases (tests/c/kernel_prop.c; CONV_2D patches of any size, above the old
192-element limit too, on the arena-style scratch its size query asks for): on the host (portable
SIMD helpers, ASan+UBSan) and on QEMU Cortex-M4 / M7 (the inline-assembly paths). The reference
kernels are checked against tflite-micro by test_c_runtime.py, so both kernel sets are TFLM bit-exact."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402

# every kernel file core.mk lists: kernels/ref/<op>.c and the same-named kernels/dsp/<op>.c
KERNELS = [s for s in ccore.core_sources("RUNTIME", "DSP") if s.startswith("kernels/")]
SEMI = ccore.TESTS_C / "qemu_semihost"
BOARDS = {"m4": ("mps2-an386", ["-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16"]),
          "m7": ("mps2-an500", ["-mcpu=cortex-m7", "-mfpu=fpv5-d16"])}


def _assert_big_patches(out: str) -> None:
    """CONV_2D patches above the old 192-element stack buffer ran the DSP patch path (arena scratch), and
    1x1 stride-1 convolutions (odd channel counts, one pixel, C % 8 == 4) ran the 1x1 path."""
    m = re.search(r"patch_k_over_192=(\d+)", out)
    assert m and int(m.group(1)) >= 10, out
    m = re.search(r"conv_1x1=(\d+)", out)  # CONV_2D cases on the 1x1 stride-1 path
    assert m and int(m.group(1)) >= 20, out


@pytest.mark.parametrize("build", ["default", "small"])
def test_dsp_kernels_equal_reference_on_host(build: str, tmp_path: Path) -> None:
    """small: the Small-MCU images' core defines (CONV_2D's direct path for every filter larger than 1x1,
    32-channel accumulation)."""
    from snapuq.bench.kernels import SMALL_CORE_DEFS

    exe = tmp_path / "kernel_prop"
    defs = list(SMALL_CORE_DEFS["qemu_m4"]) if build == "small" else []
    cmd = ["gcc", *ccore.CFLAGS, *ccore.SAN, "-DSNAPUQ_KERNELS_DSP=1", *defs, f"-I{ccore.CORE}",
           str(ccore.TESTS_C / "kernel_prop.c"), *[str(ccore.CORE / k) for k in KERNELS], "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    p = subprocess.run([str(exe), "2000", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "kernel_prop: ok 2000" in p.stdout, p.stdout + p.stderr
    _assert_big_patches(p.stdout)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm")
@pytest.mark.parametrize("board", sorted(BOARDS))
def test_dsp_kernels_equal_reference_on_qemu(board: str, tmp_path: Path) -> None:
    machine, cpu = BOARDS[board]
    elf = tmp_path / f"kernel_prop_{board}.elf"
    cmd = ["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-mthumb",
           "-mfloat-abi=hard", *cpu, "-DSNAPUQ_KERNELS_DSP=1", "-DKP_SEMIHOST", "-DKP_CASES=1200",
           f"-I{ccore.CORE}", "-nostartfiles", "-T", str(SEMI / "link.ld"), str(SEMI / "startup.c"),
           str(SEMI / "kernel_prop_main.c"), str(ccore.TESTS_C / "kernel_prop.c"),
           *[str(ccore.CORE / k) for k in KERNELS], "-o", str(elf)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    qemu = ["qemu-system-arm", "-M", machine, "-nographic", "-semihosting-config", "enable=on,target=native",
            "-kernel", str(elf), "-monitor", "none", "-serial", "none"]
    p = subprocess.run(qemu, capture_output=True, text=True, timeout=120)  # semihosting writes to stderr
    assert p.returncode == 0 and "kernel_prop: ok 1200" in p.stdout + p.stderr, p.stdout + p.stderr
    _assert_big_patches(p.stdout + p.stderr)
