"""The core cross-compiles for Cortex-M4F and Cortex-M7 with -Werror (reference and DSP
kernels); records .text/.rodata per object (build/c-core-tests/arm_sizes.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402

CPUS = {"m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
        "m7": ["-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"],
        "m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"]}

pytestmark = pytest.mark.skipif(not ccore.have_tools("arm-none-eabi-gcc", "arm-none-eabi-size"),
                                reason="arm-none-eabi-gcc not installed (tools/setup.sh installs it)")


def sections(obj: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], check=True, capture_output=True,
                         text=True).stdout
    res = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            for key in res:
                if parts[0].startswith("." + key):
                    res[key] += int(parts[1])
    return res


@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_cross_compile(cpu: str, tmp_path: Path) -> None:
    result: dict[str, dict[str, dict[str, int]]] = {}
    kernels = ["ref", "dsp"] if cpu != "m0plus" else ["ref"]
    for k in kernels:
        result[k] = {}
        for src in ccore.RUNTIME_SRC + ccore.SNAP_SRC:
            obj = tmp_path / f"{k}_{src.replace('/', '_')}.o"
            subprocess.run(["arm-none-eabi-gcc", *ccore.CFLAGS[:4], "-Os", "-ffunction-sections",
                            "-fdata-sections", *CPUS[cpu], f"-I{ccore.CORE}",
                            f"-DSNAPUQ_KERNELS_DSP={int(k == 'dsp')}",
                            "-c", str(ccore.CORE / src), "-o", str(obj)], check=True, capture_output=True,
                           text=True)
            result[k][src] = sections(obj)
        if k == "dsp":
            dsp_obj = tmp_path / "dsp_kernels_dsp_conv.c.o"
            dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(dsp_obj)], check=True,
                                 capture_output=True, text=True).stdout
            assert "smlad" in dis and "sxtb16" in dis, "DSP kernels do not use SMLAD/SXTB16"
        runtime = {s: sum(result[k][f][s] for f in ccore.RUNTIME_SRC)
                   for s in ("text", "rodata", "data", "bss")}
        snap = {s: sum(result[k][f][s] for f in ccore.SNAP_SRC if f.startswith("snapuq_snap"))
                for s in ("text", "rodata", "data", "bss")}
        result[k]["_runtime_total"] = runtime
        result[k]["_snap_total"] = snap
        assert runtime["data"] == 0 and runtime["bss"] == 0 and snap["data"] == 0 and snap["bss"] == 0
        assert 0 < snap["text"] < runtime["text"]
    ccore.BUILD.mkdir(parents=True, exist_ok=True)
    (ccore.BUILD / f"arm_sizes_{cpu}.json").write_text(json.dumps(result, indent=1))
