"""`snapuq bench FILE.tflite --out FILE.json`: the deployment cost of any int8 TFLite file, no model dir.

For each QEMU board (m4: mps2-an386 with the Small-MCU STM32L432KC budget 256 KB / 64 KB; m7: mps2-an500 with
the Big-MCU STM32F767ZI budget 2 MB / 512 KB) the stock harness firmware is linked with the file (the same
image `snapuq bench --table` builds for its BASE column), booted under `-icount shift=0`, fed N seeded random
inputs whose every output is checked against TFLM, and timed. Reported: flash, static RAM, the arena (beside
the arena TFLM needs for the same file), stack peak, QEMU instructions per inference (instructions, not
cycles: QEMU models no pipeline), mismatches vs TFLM. A file that does not fit a board is reported as OOM
with the linker's or the firmware's own figures.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.bench.table import BOARDS, build_image, run_image
from snapuq.errors import SnapuqError
from snapuq.export.tflm import arena_bytes
from snapuq.native.ccore import CoreModel

BOARD_KEYS = {"m4": "small", "m7": "big"}


def bench_tflite(path: str | Path, boards: list[str], n_check: int = 3, repeats: int = 3,
                 build: Path | None = None) -> dict[str, Any]:  # fmt: skip

    p = Path(path).resolve()
    buf = p.read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise SnapuqError(f"{p}: not a TFLite flatbuffer (no TFL3 identifier)")
    bad = [b for b in boards if b not in BOARD_KEYS]
    if not boards or bad:
        raise SnapuqError(f"--boards: choose from {', '.join(BOARD_KEYS)}, got '{','.join(boards)}'")
    core = CoreModel(buf)  # the loader's checks first: a file the core refuses never reaches make
    if len(core.inputs) != 1 or core.inputs[0].dtype != np.int8:
        raise SnapuqError(f"{p}: the firmware runs one-input int8 models")
    spec = core.inputs[0]
    rng = np.random.default_rng(0)
    inputs = [rng.integers(-128, 128, size=spec.shape).astype(np.int8) for _ in range(n_check)]
    sha = hashlib.sha256(buf).hexdigest()
    build = (build or resources.work_dir("bench-tflite")).resolve()
    # make takes the file in a space-separated list: link a copy under a plain name (its content hash)
    build.mkdir(parents=True, exist_ok=True)
    linked = build / f"model_{sha[:16]}.tflite"
    if not linked.is_file() or linked.read_bytes() != buf:
        linked.write_bytes(buf)
    report: dict[str, Any] = {
        "model": str(p), "sha256": sha, "bytes": len(buf), "ops": sorted(set(core.op_names())),
        "arena_bytes": {"snapuq_host": int(core.arena_bytes), "tflm": int(arena_bytes(buf, inputs[0]))},
        "check_inputs": n_check, "repeats": repeats,
        "units": {"instructions": "QEMU instructions per inference (-icount shift=0), not cycles",
                  "cycles_modelled": "cycles per inference modelled from the executed instruction stream "
                                     "(snapuq.harness.cycles; the board's part, clock and flash wait states "
                                     "in cycle_model)"},
        "boards": {},
    }  # fmt: skip
    for b in boards:
        board = BOARDS[BOARD_KEYS[b]]
        res = build_image(board, board.qemu, "base", build, [linked], build, f"_tfl{sha[:10]}")
        if not res["ok"]:
            report["boards"][b] = {"board": board.label, "fits": False, **res}
            continue
        run = run_image(board, Path(res["elf"]), "base", [linked], inputs, repeats)
        report["boards"][b] = {"board": board.label, "fits": bool(run.get("ok")), **run}
    return report
