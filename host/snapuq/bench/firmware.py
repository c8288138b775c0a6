"""Build one firmware image for a board's budgets (the link's overflow, the size it would need) and run it
on QEMU, its outputs checked against TFLM: the measurement of one `snapuq bench --table` cell."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.errors import SnapuqError
from snapuq.export.tflm import TFLMInterpreter
from snapuq.harness import cycles as cyc
from snapuq.harness.protocol import Device
from snapuq.harness.qemu import INSTR_PER_TICK_ICOUNT, QemuProcess, board_spec, open_serial, popen_owned

FIRMWARE = resources.firmware_dir()


@dataclass(frozen=True)
class Board:
    key: str
    label: str
    qemu: str  # make target of the QEMU image with this board's budgets
    real: str  # make target of the real board
    machine: str
    flash: int
    ram: int


BOARDS = {
    "big": Board("big", "Big-MCU (STM32F767ZI, M7)", "qemu_m7", "nucleo_f767zi", "mps2-an500",
                 2048 * 1024, 512 * 1024),
    "small": Board("small", "Small-MCU (STM32L432KC, M4)", "qemu_m4", "nucleo_l432kc", "mps2-an386",
                   256 * 1024, 64 * 1024),
}


# ------------------------------------------------------------------ building

_OVERFLOW = re.compile(r"region `(FLASH|RAM)' overflowed by (\d+) bytes")


# set when the table is interrupted: no cell starts a build or a QEMU after it
_STOP = threading.Event()


def _make(target: str, args: list[str], jobs: int = 1) -> subprocess.CompletedProcess:
    """make -C firmware, as a child that an interrupt stops with its compilers (popen_owned)."""

    if _STOP.is_set():
        raise SnapuqError("interrupted")
    # PYTHON: the firmware's tools (caps.py) read models with this interpreter's snapuq
    cmd = ["make", "-C", str(FIRMWARE), f"-j{max(1, jobs)}", target, f"PYTHON={sys.executable}", *args]
    proc = popen_owned(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _size(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True).stdout
    sec = {}
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sec[parts[0]] = int(parts[1])
    return sec


# what a path given to make (MODEL=, BUILD=, TFLITE=) may hold: make splits its prerequisites at white space
# and reads ':' '%' '$' in them, and its recipes pass the value to the shell unquoted
_MAKE_UNSAFE = re.compile(r"[^\w./+@,=~-]")


def make_safe_path(path: str | Path, what: str) -> str:
    """The absolute path, for a make command line; SnapuqError (one line, naming `what`) when it holds white
    space or a character that make or its shell recipes would split or expand."""
    s = str(Path(path).resolve())
    bad = sorted(set(_MAKE_UNSAFE.findall(s)))
    if bad:
        shown = ", ".join("a space" if c == " " else repr(c) for c in bad)
        raise SnapuqError(f"{what} {s}: the firmware build (make) cannot take a path with {shown}; "
                          "move or link it to a path of letters, digits and ._-/+@,=~")  # fmt: skip
    return s


def make_args(method: str, model_dir: Path, files: list[Path], build: Path, variant: str) -> list[str]:
    a = [f"BUILD={make_safe_path(build, '--build-dir')}", f"VARIANT={variant}"]
    if method == "snap":
        return a + [f"MODEL={make_safe_path(model_dir, 'model directory')}", "SNAP=1"]
    a += ["SNAP=0", "TFLITE=" + " ".join(make_safe_path(f, "model file") for f in files)]
    if method in ("ee", "deep"):
        a.append("ENSEMBLE=1")
    return a


def image_dir(board_target: str, method: str, build: Path, variant: str, full: bool = False) -> Path:
    return build / (
        board_target + ("_full" if full else "") + ("" if method == "snap" else "_nosnap") + variant
    )


def build_image(
    board: Board,
    target: str,
    method: str,
    model_dir: Path,
    files: list[Path],
    build: Path,
    variant: str,
    make_jobs: int = 1,
) -> dict[str, Any]:
    """Link one image; on overflow, link it again without a budget to read what it would need."""
    args = make_args(method, model_dir, files, build, variant)
    proc = _make(target, args, make_jobs)
    elf = image_dir(target, method, build, variant) / "firmware.elf"
    if proc.returncode == 0:
        return {"ok": True, "elf": str(elf)}
    text = proc.stdout + proc.stderr
    over = _OVERFLOW.findall(text)
    if not over and "does not fit the board" not in text:
        tail = "\n".join(text.strip().splitlines()[-12:])
        raise SnapuqError(f"firmware build failed (make {target} {' '.join(args)}):\n{tail}")
    res: dict[str, Any] = {
        "ok": False,
        "link_error": sorted({f"region {r} overflowed by {n} bytes" for r, n in over}),
    }
    # the same objects linked with the whole QEMU memory: what the image needs
    if target.startswith("qemu_"):
        full = _make(target, args + ["BUDGET=full"], make_jobs)
        felf = image_dir(target, method, build, variant, full=True) / "firmware.elf"
        if full.returncode == 0:
            s = _size(felf)
            stack = board_stack(board)
            res["needed"] = {
                "flash": s.get(".text", 0) + s.get(".ARM.exidx", 0) + s.get(".data", 0),
                "ram_static": s.get(".data", 0) + s.get(".bss", 0),
                "ram_static_plus_stack": s.get(".data", 0) + s.get(".bss", 0) + stack,
            }
    res["available"] = {"flash": board.flash, "ram": board.ram}
    return res


def board_stack(board: Board) -> int:
    ld = (FIRMWARE / "ld" / ("qemu_m4.ld" if board.key == "small" else "qemu_m7.ld")).read_text()
    m = re.search(r"SNAPUQ_STACK_SIZE\s*=\s*(\d+)K", ld)
    return int(m.group(1)) * 1024 if m else 0


# ------------------------------------------------------------------ running


def _expected(files: list[Path], method: str, xq: np.ndarray) -> dict[str, Any]:
    outs: list[list[np.ndarray]] = []
    details: list[list[dict]] = []
    for f in files:
        ip = TFLMInterpreter(f.read_bytes())
        outs.append(ip.invoke(xq))
        details.append([ip.output_details(i) for i in range(ip.n_outputs)])
    if method in ("base", "snap"):
        return {"outputs": [o.reshape(-1).astype(int).tolist() for o in outs[0]]}
    psum = None
    for o_list, d_list in zip(outs, details):
        for o, det in zip(o_list, d_list):
            if np.dtype(det["dtype"]) != np.int8:
                continue
            zp = int(det["quantization_parameters"]["zero_points"][0])
            v = o.reshape(-1).astype(np.int64) - zp
            psum = v if psum is None else psum + v
    assert psum is not None
    return {"psum": psum.tolist(), "pred": int(np.argmax(psum))}


def expected_outputs(files: list[Path], method: str, inputs: list[np.ndarray]) -> list[dict[str, Any]]:
    """TFLM's answer for every check input (the same for both boards)."""
    return [_expected(files, method, x) for x in inputs]


def run_image(
    board: Board,
    elf: Path,
    method: str,
    files: list[Path],
    inputs: list[np.ndarray],
    repeats: int,
    expected: list[dict[str, Any]] | None = None,
    cycles: bool = True,
    silicon_key: str | None = None,
) -> dict[str, Any]:
    spec = board_spec("qemu:" + board.qemu.split("_")[1])
    res: dict[str, Any] = {}
    plugin, counts, silicon = None, elf.parent / "insn_counts.txt", None
    if cycles:  # the instruction stream of every invoke, for the cycle model (snapuq.harness.cycles)
        silicon = cyc.silicon_for(board.qemu, silicon_key)
        counts.unlink(missing_ok=True)
        plugin = cyc.plugin_arg(cyc.plugin_library(), elf, silicon, counts.resolve())
    with QemuProcess(spec, elf, icount=True, plugin=plugin) as q:
        dev = Device(open_serial(q.url), timeout=120)
        try:
            dev.wait_boot(timeout=30)
            prof = dev.profile()
            stats = dev.stats()
            if not int(prof.get("loaded", 0)):
                # single models fall back to loading straight into the input tensor (no staging copy);
                # ensembles keep the input in a staging buffer beside the shared arena
                staging = int(stats.get("input", 0)) if method in ("ee", "deep") else 0
                need = ((int(stats["arena"]) + 15) // 16) * 16 + staging
                return {
                    "ok": False,
                    "oom_arena": {
                        "needed": need,
                        "available": int(stats["pool"]),
                        "arena": int(stats["arena"]),
                        "ram_static": int(stats["ram_static"]),
                        "stack_reserved": int(stats["stack_size"]),
                        "ram_budget": int(stats["ram_size"]),
                    },
                }
            mism, checked = 0, 0
            if expected is None:
                expected = expected_outputs(files, method, inputs)
            for x, exp in zip(inputs, expected):
                dev.load_input(x.astype(np.int8).tobytes())
                dev.infer(1, 0)
                if "psum" in exp:
                    r = dev.results()
                    got = r.get("psum")
                    got = [got] if isinstance(got, int) else got
                    mism += int(got != exp["psum"]) + int(int(r.get("pred", -1)) != exp["pred"])
                else:
                    outs = dev.outputs()
                    for i, e in enumerate(exp["outputs"]):
                        g = outs.get(i)
                        mism += len(e) if g is None else int(np.count_nonzero(np.array(g) != np.array(e)))
                checked += 1
            if int(stats.get("direct_input", 0)):
                # the input tensor is the upload buffer: one load per inference
                tot = {"ticks": 0, "model_ticks": 0, "snap_ticks": 0, "switch_ticks": 0}
                for _ in range(repeats):
                    dev.load_input(inputs[0].astype(np.int8).tobytes())
                    r1 = dev.infer(1, 0)
                    for key in tot:
                        tot[key] += int(r1.get(key, 0))
                inf = tot
                n_run = checked + repeats
            else:
                inf = dev.infer(repeats, 1, timeout=600)
                n_run = checked + repeats + 1  # one warm-up
            stats = dev.stats()
        finally:
            dev.close()
    if silicon is not None:
        est = cyc.estimate(*cyc.read_counts(counts), silicon, inferences=n_run)
        res["cycles_modelled"] = est["cycles_modelled"]
        res["ms_modelled"] = est["ms_modelled"]
        res["cycle_model"] = est
    k = INSTR_PER_TICK_ICOUNT
    res.update(
        {
            "ok": True,
            "checked_inputs": checked,
            "mismatches_vs_tflm": mism,
            "instructions": {
                "total": int(inf["ticks"]) * k / repeats,
                "model": int(inf["model_ticks"]) * k / repeats,
                "snap_score": int(inf["snap_ticks"]) * k / repeats,
                "member_switch": int(inf.get("switch_ticks", 0)) * k / repeats,
            },
            "flash": int(stats["flash"]),
            "ram": {
                "static": int(stats["ram_static"]),
                "arena": int(stats["arena"]),
                "input": 0 if int(stats.get("direct_input", 0)) else int(stats["input"]),
                "direct_input": int(stats.get("direct_input", 0)),
                "stack_peak": int(stats["stack_peak"]),
                "peak": int(stats["ram_peak"]),
                "budget": int(stats["ram_size"]),
                "pool": int(stats["pool"]),
                "model_struct": int(stats["model_struct"]),
            },
        }
    )
    return res
