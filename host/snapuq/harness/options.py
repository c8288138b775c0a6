"""The options of `snapuq harness` (host/snapuq/commands/harness.py fills them) and their checks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from snapuq.errors import SnapuqError


@dataclass
class Options:
    port: str
    model: Path
    dataset: str
    split: str
    out: Path
    limit: int | None = None
    start: int = 0
    data_dir: str | None = None
    resume: bool = False
    retries: int = 5
    timeout: float = 20.0
    icount: bool = True
    baud: int = 115200
    check_outputs: bool = True
    build_dir: Path | None = None
    power: str | None = None
    power_vdd_mv: int = 3300  # --power: the supply the PPK2 (ampere meter) sits in series with
    progress: bool = True
    firmware: Path | None = None  # qemu: boot this ELF (e.g. from `pio run -e qemu_m4`) instead of make
    stop_after: int | None = None  # for tests: stop (as if killed) after this many new lines
    stream: bool = False  # stream a CID stream (clean / corrupted segments of the split) instead of the split
    severity: int = 3
    segment: int = 300
    inputs: Path | None = None  # a bare .tflite (--model FILE): its inputs (.npz: x, optional y), else random
    seed: int = 0  # a bare .tflite without --inputs: the seed of its random int8 inputs
    cycle_model: bool = True  # qemu:m4 / qemu:m7 with -icount: model cycles from the instruction stream
    input_source: dict | None = None  # set by the runner for a bare .tflite: where the inputs came from


def check_options(opts: Options) -> None:
    """Every numeric option in range, before any work."""
    if opts.limit is not None and opts.limit < 1:
        raise SnapuqError(f"--limit must be >= 1 (omit it for the whole split), got {opts.limit}")
    if opts.start < 0:
        raise SnapuqError(f"--start must be >= 0, got {opts.start}")
    if opts.retries < 0:
        raise SnapuqError(f"--retries must be >= 0, got {opts.retries}")
    if not (opts.timeout > 0 and math.isfinite(opts.timeout)):
        raise SnapuqError(f"--timeout must be a finite number of seconds > 0 (each wait adds the time its "
                          f"bytes take on the link), got {opts.timeout}")
    if opts.baud <= 0:
        raise SnapuqError(f"--baud must be > 0, got {opts.baud}")
    if opts.stream and not 1 <= opts.severity <= 5:
        raise SnapuqError(f"--severity must be in 1..5, got {opts.severity}")
    if opts.stream and opts.segment < 1:
        raise SnapuqError(f"--segment must be >= 1, got {opts.segment}")
    if opts.firmware is not None:
        check_elf(Path(opts.firmware))


def check_elf(path: Path) -> None:
    if not path.is_file():
        raise SnapuqError(f"--firmware {path}: no such file")
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise SnapuqError(f"--firmware {path}: not an ELF image (build one with make -C firmware or pio run)")
    if len(head) < 20 or head[4] != 1 or int.from_bytes(head[18:20], "little") != 40:
        raise SnapuqError(f"--firmware {path}: not a 32-bit ARM ELF image")

