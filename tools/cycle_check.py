#!/usr/bin/env python3
"""Check the cycle model (snapuq.harness.cycles) against published silicon latencies.

    tools/cycle_check.py --part l4r5zi FILE.tflite=MS [FILE2.tflite=MS2 ...] [--out check.json]
    tools/cycle_check.py --part l4r5zi --elf IMAGE.elf --symbol FUNCTION MS

The second form models any bare-metal image for mps2-an386 (mps2-an500 for a Cortex-M7 part) that calls
FUNCTION (the inference) and ends by semihosting: every call of FUNCTION is an inference (e.g. another
runtime's image built from the exact code a published latency was measured with; docs/BENCH.md "Modelled
cycles" has the recipe used).

Each file is linked into the stock SNAP=0 firmware for the Cortex-M4 QEMU board with the whole emulated
memory (BUDGET=full: the L4R5ZI's 2 MB / 640 KB hold what the L432KC budget does not), run on 3 seeded
random inputs (outputs checked against TFLM) and 3 timed inferences under the instruction plugin, and its
modelled ms at the part's clock set beside the published figure MS: error = modelled / published - 1.
The published figures are the caller's (e.g. MLPerf Tiny v0.5 reference, NUCLEO-L4R5ZI: KWS 181.9, IC 704,
VWW 600.6, AD 10.05 ms); what ran on the silicon may be other software than the snapuq core, so the error
measures the model and the software difference together unless the same software runs here."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from snapuq.bench.firmware import BOARDS, run_image
from snapuq.harness.cycles import SILICON
from snapuq.harness.qemu import board_spec, build_firmware
from snapuq.io import write_text
from snapuq.native.ccore import CoreModel


def check(path: Path, published_ms: float, part: str, build: Path) -> dict:
    buf = path.read_bytes()
    sha = hashlib.sha256(buf).hexdigest()
    build.mkdir(parents=True, exist_ok=True)
    linked = build / f"model_{sha[:16]}.tflite"
    linked.write_bytes(buf)
    elf = build_firmware(board_spec("qemu:m4"), None, build, budget="full", snap=False, tflite=linked,
                         variant=f"_chk{sha[:10]}")
    core = CoreModel(buf)
    rng = np.random.default_rng(0)
    inputs = [rng.integers(-128, 128, size=core.inputs[0].shape).astype(np.int8) for _ in range(3)]
    run = run_image(BOARDS["small"], elf, "base", [linked], inputs, 3, silicon_key=part)
    cm = run["cycle_model"]
    return {"file": path.name, "sha256": sha, "published_ms": published_ms, "ms_modelled": cm["ms_modelled"],
            "error": cm["ms_modelled"] / published_ms - 1, "cycles_modelled": cm["cycles_modelled"],
            "ms_low": cm["ms_low"], "ms_high": cm["ms_high"],
            "instructions": run["instructions"]["total"], "cpi": cm["cpi"],
            "mismatches_vs_tflm": run["mismatches_vs_tflm"], "breakdown": cm["breakdown"]}


def check_elf(elf: Path, symbol: str, published_ms: float, part: str) -> dict:
    import subprocess

    from snapuq.harness import cycles as cyc

    sil = SILICON[part]
    out = elf.resolve().parent / f"{elf.stem}.insn_counts.txt"
    out.unlink(missing_ok=True)
    arg = cyc.plugin_arg(cyc.plugin_library(), elf, sil, out, symbol=symbol)
    machine = {"m4": "mps2-an386", "m7": "mps2-an500"}[sil.core]  # the part's core: Cortex-M4 or M7 board
    p = subprocess.run(["qemu-system-arm", "-M", machine, "-nographic", "-monitor", "none", "-serial",
                        "none", "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
                        "-plugin", arg, "-kernel", str(elf)], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"{elf}: QEMU exited with {p.returncode}: {(p.stdout + p.stderr)[-300:]}")
    cm = cyc.estimate(*cyc.read_counts(out), sil)
    return {"file": elf.name, "symbol": symbol, "published_ms": published_ms,
            "ms_modelled": cm["ms_modelled"],
            "error": cm["ms_modelled"] / published_ms - 1, "cycles_modelled": cm["cycles_modelled"],
            "ms_low": cm["ms_low"], "ms_high": cm["ms_high"], "instructions": cm["instructions"],
            "cpi": cm["cpi"], "mismatches_vs_tflm": None, "breakdown": cm["breakdown"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="FILE.tflite=PUBLISHED_MS")
    p.add_argument("--part", default="l4r5zi", choices=sorted(SILICON))
    p.add_argument("--build-dir", type=Path, default=Path("build/cycle-check"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--elf", type=Path, default=None,
                   help="model this image instead (the positional arguments: the published ms)")
    p.add_argument("--symbol", default="snapuq_model_invoke", help="--elf: the inference function")
    a = p.parse_args()
    rows = []
    for spec in a.files:
        if a.elf is not None:
            r = check_elf(a.elf, a.symbol, float(spec), a.part)
        else:
            f, _, ms = spec.rpartition("=")
            r = check(Path(f), float(ms), a.part, a.build_dir.resolve())
        rows.append(r)
        print(f"{r['file']}: modelled {r['ms_modelled']:.2f} ms vs published {r['published_ms']} ms "
              f"({r['error']:+.1%}); {r['instructions']:,.0f} instructions, CPI {r['cpi']:.2f}, "
              + (f"{r['mismatches_vs_tflm']} mismatches vs TFLM" if r["mismatches_vs_tflm"] is not None
                 else f"timing range {r['ms_low']:.2f} .. {r['ms_high']:.2f} ms"), flush=True)
    if a.out:
        write_text(a.out, json.dumps({"part": a.part, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
