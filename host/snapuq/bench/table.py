"""`snapuq bench --table`: the seed paper's deployment table, measured as firmware.

board x workload x method -> flash, peak RAM (static + arena + stack), instructions per inference,
modelled latency and energy, and the UQ columns of `snapuq eval` for the same models.

Methods, each its own firmware image linked with the board's real budgets (the QEMU linker scripts carry
the STM32F767ZI 2 MB / 512 KB and STM32L432KC 256 KB / 64 KB limits):
  BASE   the backbone alone (D/variants/base.tflite), no heads, no SNAP core
  SNAP   the exported model with its heads + the integer SNAP score (D/snapuq_model.c)
  EE-ens the early-exit model (D/variants/ee.tflite), firmware sums the exits' int8 softmax outputs
  DEEP   M members (D/variants/deep_k.tflite) linked into one image, run in turn on one arena,
         their int8 softmax outputs summed on the device
MC dropout is not in the table: the exported int8 graphs have no dropout (TFLite drops it at
conversion) and the runtime has no masked-activation operator, so T passes would be T identical runs.

"OOM" comes from a real failure: the link (`region FLASH/RAM overflowed`; the needed size is then read
from the same image linked without a budget) or the firmware's arena check at boot (`e-arena`,
needed vs available pool). Instructions are QEMU instruction counts (-icount shift=0); latency and energy
are a model: instructions at one per cycle at the board's clock, times the datasheet run power.
Every run is checked: the device's outputs (or summed softmax) against TFLM on the same inputs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.errors import SnapuqError
from snapuq.modeldir import ModelPaths

ROOT = resources.project_dir()
FIRMWARE = resources.firmware_dir()
METHODS = ("base", "snap", "ee", "deep")
METHOD_LABEL = {"base": "BASE", "snap": "SNAP-UQ", "ee": "EE-ens", "deep": "DEEP"}
EVAL_METHOD = {"base": "msp", "snap": "snap", "ee": "ee_ensemble", "deep": "deep_ensemble"}
# cifar10: the real MLPerf Tiny ResNet-8 (full CIFAR-10); resnet8: the salvaged-subset one kept for the
# deployment table's EE-ens / DEEP cost cells until models/cifar10 has its trained baselines (variants/)
WORKLOADS = {"digits": "models/digits", "keywords": "models/keywords", "cifar10": "models/cifar10",
             "resnet8": "models/resnet8"}  # fmt: skip
# timed inferences per cell: QEMU's -icount counts are deterministic and the timed input is fixed,
# so repeats only average the 40-instruction SysTick granularity
TABLE_REPEATS = 3
MC_DROPOUT_NOTE = (
    "not measured: the int8 graphs carry no dropout (removed at conversion) and the runtime "
    "has no masked-activation operator; T passes would be T identical inferences"
)

# Paper (SNAP-UQ, ICLR 2026, Table: MCU deployment): flash KB, peak RAM KB, latency ms, energy mJ.
PAPER = {
    ("big", "keywords"): {
        "base": (220, 84, 60, 2.1),
        "ee": (360, 132, 85, 3.0),
        "deep": (290, 108, 70, 2.5),
        "snap": (182, 70, 52, 1.7),
    },
    ("small", "resnet8"): {
        "base": (180, 92, 260, 9.5),
        "ee": None,
        "deep": None,
        "snap": (158, 85, 178, 6.4),
    },
    ("small", "cifar10"): {
        "base": (180, 92, 260, 9.5),
        "ee": None,
        "deep": None,
        "snap": (158, 85, 178, 6.4),
    },
}


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
    "big": Board(
        "big", "Big-MCU (STM32F767ZI, M7)", "qemu_m7", "nucleo_f767zi", "mps2-an500", 2048 * 1024, 512 * 1024
    ),
    "small": Board(
        "small",
        "Small-MCU (STM32L432KC, M4)",
        "qemu_m4",
        "nucleo_l432kc",
        "mps2-an386",
        256 * 1024,
        64 * 1024,
    ),
}


# ------------------------------------------------------------------ building

_OVERFLOW = re.compile(r"region `(FLASH|RAM)' overflowed by (\d+) bytes")


# set when the table is interrupted: no cell starts a build or a QEMU after it
_STOP = threading.Event()


def _make(target: str, args: list[str], jobs: int = 1) -> subprocess.CompletedProcess:
    """make -C firmware, as a child that an interrupt stops with its compilers (popen_owned)."""
    from snapuq.harness.qemu import popen_owned

    if _STOP.is_set():
        raise SnapuqError("interrupted")
    cmd = ["make", "-C", str(FIRMWARE), f"-j{max(1, jobs)}", target, *args]
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
    from snapuq.export.tflm import TFLMInterpreter

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
) -> dict[str, Any]:
    from snapuq.harness.protocol import Device
    from snapuq.harness.qemu import INSTR_PER_TICK_ICOUNT, QemuProcess, board_spec, open_serial

    spec = board_spec("qemu:" + board.qemu.split("_")[1])
    res: dict[str, Any] = {}
    with QemuProcess(spec, elf, icount=True) as q:
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
            else:
                inf = dev.infer(repeats, 1, timeout=600)
            stats = dev.stats()
        finally:
            dev.close()
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


# ------------------------------------------------------------------ inputs, eval


def check_inputs(
    model_dir: Path, n: int, data_dir: str | None, seed: int = 0
) -> tuple[list[np.ndarray], str]:
    man = json.loads(ModelPaths(model_dir).manifest.read_text())
    inp = man["input"]
    shape = tuple(inp["shape"])
    try:
        from snapuq.data import load_dataset
        from snapuq.export.convert import quantize_input

        cfg = json.loads(ModelPaths(model_dir).config.read_text())
        ds = load_dataset(cfg["dataset"], data_dir, int(cfg.get("seed", 0)))
        xs = [
            quantize_input(ds.x_test[i][None], inp["scale"], inp["zero_point"]).reshape(shape)
            for i in range(n)
        ]
        return xs, f"first {n} test inputs of {cfg['dataset']}"
    except Exception as e:  # noqa: BLE001 - any dataset problem: fall back to random inputs
        rng = np.random.default_rng(seed)
        xs = [rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8) for _ in range(n)]
        return xs, f"{n} seeded random int8 inputs (dataset not available: {str(e).splitlines()[0][:80]})"


def eval_columns(model_dir: Path) -> tuple[dict[str, dict[str, Any]], str]:
    p = model_dir / "eval" / "metrics.json"
    if not p.is_file():
        return {}, f"no {p} (run `snapuq eval {model_dir} --report {model_dir}/eval`)"
    m = json.loads(p.read_text())
    cols: dict[str, dict[str, Any]] = {}
    for meth, name in EVAL_METHOD.items():
        r = (m.get("methods") or {}).get(name)
        if not r:
            continue
        det = (m.get("details") or {}).get(name) or {}
        cols[meth] = {
            "auroc_ok_vs_err": r.get("auroc_ok_vs_err"),
            "auroc_id_vs_ood": r.get("auroc_id_vs_ood"),
            "auroc_idok_vs_ood": det.get("auroc_idok_vs_ood"),
            "cid_auprc": r.get("cid_auprc"),
            "cid_delay": r.get("cid_delay"),
            "eval_method": name,
        }
    src = (
        f"{p}: snapuq eval of the same training run (float Keras models; n_test={m.get('n_test')}, "
        f"n_ood={m.get('n_ood')}, OOD={m.get('ood_source')})"
    )
    return cols, src


# ------------------------------------------------------------------ the table


def _resolve_workload(w: str) -> Path:
    p = Path(WORKLOADS.get(w, w))
    if not p.is_absolute():
        p = ROOT / p if not p.exists() else p
    if not ModelPaths(p).manifest.is_file():
        raise SnapuqError(f"workload '{w}': {ModelPaths(p).manifest} missing (train + export the model)")
    make_safe_path(p, f"workload '{w}':")
    from snapuq.modeldir import check_parts

    mp = ModelPaths(p)  # a cell's firmware is built from the generated C: of this export (MANIFEST.sha256)
    check_parts(p, need=(mp.INT8, mp.MANIFEST), also=(mp.C_SOURCE, mp.C_HEADER))
    return p


def measure_cell(
    board: Board,
    method: str,
    model_dir: Path,
    variants: dict[str, Any] | None,
    build: Path,
    inputs: list[np.ndarray],
    repeats: int,
    real_link: bool,
    expected: list[dict[str, Any]] | None = None,
    make_jobs: int = 1,
) -> dict[str, Any]:
    from snapuq.bench.variants import variant_files

    if method == "snap":
        files = [ModelPaths(model_dir).int8]
    else:
        if variants is None or method not in variants["methods"]:
            return {
                "status": "missing",
                "reason": f"no {method} variant (snapuq bench --export-variants {model_dir})",
            }
        files = variant_files(model_dir, variants, method)
    # one build folder per cell (board in the name: cells run in parallel, linked_tflite.c included)
    variant = f"_{board.key}_{model_dir.name}_{method}"
    cell: dict[str, Any] = {
        "members": len(files) if method == "deep" else 1,
        "model_bytes": sum(f.stat().st_size for f in files),
    }
    t0 = time.monotonic()
    link = build_image(board, board.qemu, method, model_dir, files, build, variant, make_jobs)
    if real_link:
        rl = build_image(board, board.real, method, model_dir, files, build, variant, make_jobs)
        cell["real_board_link"] = {
            "target": board.real,
            "result": "ok" if rl["ok"] else "; ".join(rl.get("link_error") or ["failed"]),
        }
    cell["seconds"] = {"build": round(time.monotonic() - t0, 1)}
    if not link["ok"]:
        cell.update(
            {
                "status": "OOM",
                "oom_source": "link",
                "link_error": link["link_error"],
                "needed": link.get("needed"),
                "available": link["available"],
            }
        )
        return cell
    if _STOP.is_set():
        raise SnapuqError("interrupted")
    t1 = time.monotonic()
    run = run_image(board, Path(link["elf"]), method, files, inputs, repeats, expected)
    cell["seconds"]["run"] = round(time.monotonic() - t1, 1)
    if not run["ok"]:
        cell.update({"status": "OOM", "oom_source": "arena check (e-arena at boot)", **run["oom_arena"]})
        return cell
    cell.update({"status": "ok", **{k: v for k, v in run.items() if k != "ok"}})
    return cell


def _energy(board: Board, instr: float) -> tuple[float, float, str]:
    from snapuq.harness.energy import board_power

    bp = board_power(board.real)
    assert bp is not None
    ms = instr / bp.clock_hz * 1e3
    return ms, bp.energy_uj(instr) / 1e3, f"{bp.source}; {bp.clock_hz / 1e6:.0f} MHz, 1 instruction per cycle"


def _data_dirs(given: str | None, workloads: list[str]) -> dict[str, str | None]:
    """--data-dir DIR (every workload) or W=DIR,W2=DIR2 (per workload)."""
    if not given or "=" not in given:
        return {w: given for w in workloads}
    out: dict[str, str | None] = dict.fromkeys(workloads)
    for part in given.split(","):
        w, sep, d = part.partition("=")
        if not sep or w.strip() not in out or not d.strip():
            raise SnapuqError(
                f"--data-dir: '{part}' is not W=DIR for one of the workloads ({', '.join(workloads)})"
            )
        out[w.strip()] = d.strip()
    return out


def _jobs(given: int | None) -> int:
    if given is not None:
        if given < 1:
            raise SnapuqError(f"--jobs must be >= 1, got {given}")
        return given
    return max(1, min(4, os.cpu_count() or 1))


def run_table(args) -> int:
    from snapuq.bench.variants import load_variants, variant_files
    from snapuq.io import check_out_file, write_text
    from snapuq.modeldir import default_data_dir

    t_start = time.time()
    _STOP.clear()
    out = Path(args.out) if args.out else resources.work_dir("bench", "table.json")
    md_path = out.with_suffix(".md")
    build = (Path(args.build_dir) if args.build_dir else resources.work_dir("bench-table")).resolve()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    boards = [b.strip() for b in args.table_boards.split(",") if b.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for opt, given in (("--workloads", workloads), ("--table-boards", boards), ("--methods", methods)):
        if not given:  # an empty table written with rc 0 otherwise
            raise SnapuqError(f"{opt}: empty list (give at least one)")
    make_safe_path(build, "--build-dir")
    for b in boards:
        if b not in BOARDS:
            raise SnapuqError(f"--table-boards: unknown board '{b}' (big, small)")
    for m in methods:
        if m not in METHODS:
            raise SnapuqError(f"--methods: unknown method '{m}' ({', '.join(METHODS)})")
    if args.check_inputs < 1:
        raise SnapuqError(f"--check-inputs must be >= 1, got {args.check_inputs}")
    repeats = args.repeats if args.repeats is not None else TABLE_REPEATS
    jobs = _jobs(getattr(args, "jobs", None))
    # both result files are checked before minutes of work, and written atomically at the end
    check_out_file(out)
    check_out_file(md_path)
    dirs = {w: _resolve_workload(w) for w in workloads}
    data_dirs = _data_dirs(args.data_dir, workloads)
    cells: list[tuple[str, Path, str, str]] = [
        (w, d, b, m) for w, d in dirs.items() for b in boards for m in methods
    ]
    total = len(cells)
    meta: dict[str, Any] = {}
    prepared: dict[str, tuple[Any, list[np.ndarray]]] = {}
    expected: dict[tuple[str, str], list[dict[str, Any]]] = {}
    uq_cols: dict[str, dict[str, dict[str, Any]]] = {}
    for w, d in dirs.items():
        variants = load_variants(d)
        inputs, in_src = check_inputs(d, args.check_inputs, default_data_dir(d, data_dirs[w]))
        uq, uq_src = eval_columns(d)
        uq_cols[w] = uq
        man = json.loads(ModelPaths(d).manifest.read_text())
        meta[w] = {
            "model_dir": str(d),
            "dataset": man.get("dataset"),
            "backbone": man.get("backbone"),
            "check_inputs": in_src,
            "uq_source": uq_src,
            "arena_tflm": {m: v["arena_bytes_tflm"] for m, v in (variants or {}).get("methods", {}).items()},
            "arena_tflm_snap": man["model"].get("arena_bytes_tflm"),
        }
        prepared[w] = (variants, inputs)
        # TFLM's outputs for the check inputs, once per workload x method (both boards compare to them)
        for m in methods:
            if m == "snap":
                files = [ModelPaths(d).int8]
            elif variants is not None and m in variants["methods"]:
                files = variant_files(d, variants, m)
            else:
                continue
            expected[(w, m)] = expected_outputs(files, m, inputs)

    print_lock = threading.Lock()
    done = [0]

    def say(text: str) -> None:
        with print_lock:
            print(text, file=sys.stderr, flush=True)

    def one(w: str, d: Path, b: str, m: str) -> dict[str, Any]:
        board = BOARDS[b]
        t0 = time.monotonic()
        say(f"[start] {w} {b} {METHOD_LABEL[m]}: build + run ...")
        variants, inputs = prepared[w]
        cell = measure_cell(
            board,
            m,
            d,
            variants,
            build,
            inputs,
            repeats,
            not args.no_real_link,
            expected.get((w, m)),
            make_jobs,
        )
        cell.update(
            {
                "board": b,
                "board_label": board.label,
                "workload": w,
                "method": m,
                "method_label": METHOD_LABEL[m],
            }
        )
        if cell["status"] == "ok":
            ms, mj, src = _energy(board, cell["instructions"]["total"])
            cell["model"] = {"latency_ms": ms, "energy_mj": mj, "source": "model: " + src}
        if m in uq_cols[w]:
            cell["uq"] = uq_cols[w][m]
        if (b, w) in PAPER:
            pv = PAPER[(b, w)].get(m)
            cell["paper"] = (
                "OOM" if pv is None else dict(zip(("flash_kb", "ram_kb", "latency_ms", "energy_mj"), pv))
            )
        with print_lock:
            done[0] += 1
            k = done[0]
        say(f"[{k}/{total}] {w} {b} {METHOD_LABEL[m]}: {_summary(cell)} ({time.monotonic() - t0:.0f} s)")
        return cell

    # cells in parallel: each has its own build folder and QEMU; with -icount the instruction counts do
    # not depend on how busy the host is. Compiles inside one make share the CPUs left over.
    make_jobs = max(1, (os.cpu_count() or 1) // jobs)
    say(
        f"bench --table: {total} cells ({len(dirs)} workloads x {len(boards)} boards x "
        f"{len(methods)} methods), {jobs} at a time, build folder {build}"
    )
    pool = ThreadPoolExecutor(max_workers=jobs)
    # started board by board in turn: two cells running side by side then compile different cores (a
    # board's core objects are shared by its later cells, not compiled twice at once); rows keep the
    # table's order
    order = sorted(range(total), key=lambda k: (workloads.index(cells[k][0]), methods.index(cells[k][3]), k))
    submitted = {k: pool.submit(one, *cells[k]) for k in order}
    futures: list[Future] = [submitted[k] for k in range(total)]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures if f.done() and f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()
            raise failed[0].exception()  # type: ignore[misc]
        rows = [f.result() for f in futures]
    except BaseException:
        _STOP.set()
        pool.shutdown(wait=False, cancel_futures=True)
        from snapuq.harness.qemu import _kill_children

        _kill_children()  # running cells end at once (their make or QEMU is gone), nothing is left behind
        raise
    pool.shutdown(wait=True)
    report = {
        "format": 1,
        "instructions_unit": "QEMU instructions per inference (-icount shift=0), not cycles",
        "latency_energy": "model: instructions / board clock (1 instruction per cycle) x datasheet run power",
        "mc_dropout": MC_DROPOUT_NOTE,
        "repeats": repeats,
        "real_board_link": not args.no_real_link,
        "workloads": meta,
        "rows": rows,
        "jobs": jobs,
        "seconds": round(time.time() - t_start, 1),
    }
    md = markdown(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(report, indent=1) + "\n")
    write_text(md_path, md)
    print(md)
    print(f"bench --table: wrote {out} and {md_path} ({report['seconds']:.0f} s)")
    return 0


def _kb(b: float | None) -> str:
    return "—" if b is None else f"{b / 1024:.1f}"


def _summary(c: dict[str, Any]) -> str:
    if c["status"] == "ok":
        return (
            f"flash {_kb(c['flash'])} KB, peak RAM {_kb(c['ram']['peak'])} KB, "
            f"{c['instructions']['total'] / 1e6:.2f} M instr, mismatches {c['mismatches_vs_tflm']}"
        )
    if c["status"] == "OOM":
        return "OOM: " + _oom_text(c)
    return c.get("reason", c["status"])


def _oom_text(c: dict[str, Any]) -> str:
    if c.get("oom_source") == "link":
        need = c.get("needed") or {}
        av = c["available"]
        parts = list(c["link_error"])
        if need:
            parts.append(
                f"needs flash {need['flash']} B / static RAM + stack {need['ram_static_plus_stack']} B, "
                f"has {av['flash']} / {av['ram']} B"
            )
        return "link: " + "; ".join(parts)
    return (
        f"arena check: needs {c['needed']} B of pool (arena {c['arena']} + input), has {c['available']} B "
        f"(RAM {c['ram_budget']} B - static {c['ram_static']} B - stack {c['stack_reserved']} B)"
    )


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "—" if v is None else fmt.format(v)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| board | workload | method | flash KB | peak RAM KB (static+arena+stack) | instr/inf (QEMU) "
        "| latency ms (model) | energy mJ (model) | AUROC ✓/✗ | AUROC ID/OOD | CID AUPRC | delay "
        "| device vs TFLM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["rows"]:
        uq = c.get("uq") or {}
        uqc = [
            _f(uq.get("auroc_ok_vs_err")),
            _f(uq.get("auroc_id_vs_ood")),
            _f(uq.get("cid_auprc")),
            _f(uq.get("cid_delay"), "{:.0f}"),
        ]
        head = [
            c["board_label"],
            c["workload"],
            c["method_label"] + (f" (M={c['members']})" if c["method"] == "deep" else ""),
        ]
        if c["status"] == "ok":
            r = c["ram"]
            ram = (
                f"{_kb(r['peak'])} ({_kb(r['static'])}+{_kb(r['arena'] + r['input'])}+{_kb(r['stack_peak'])})"
            )
            lines.append(
                "| "
                + " | ".join(
                    head
                    + [
                        _kb(c["flash"]),
                        ram,
                        f"{c['instructions']['total']:,.0f}",
                        _f(c["model"]["latency_ms"]),
                        _f(c["model"]["energy_mj"], "{:.3f}"),
                    ]
                    + uqc
                    + [f"{c['mismatches_vs_tflm']} on {c['checked_inputs']}"]
                )
                + " |"
            )
        elif c["status"] == "OOM":
            lines.append(
                "| " + " | ".join(head + ["**OOM**", _oom_text(c), "—", "—", "—"] + uqc + ["—"]) + " |"
            )
        else:
            lines.append(
                "| "
                + " | ".join(head + [c["status"], c.get("reason", ""), "—", "—", "—"] + uqc + ["—"])
                + " |"
            )
    lines += [
        "",
        f"Instructions: {report['instructions_unit']}. Latency/energy: {report['latency_energy']}.",
        f"MC dropout: {report['mc_dropout']}.",
        "UQ columns: `snapuq eval` of the same model (host, float): "
        + ", ".join(f"{METHOD_LABEL[k]} = {v}" for k, v in EVAL_METHOD.items())
        + "; delay in frames.",
        real_link_line(report),
    ]
    for w, m in report["workloads"].items():
        lines.append(
            f"- {w}: {m['dataset']} / {m['backbone']}; check inputs: {m['check_inputs']}; "
            f"UQ: {m['uq_source']}"
        )
    lines += ["", arena_markdown(report)]
    side = paper_markdown(report)
    if side:
        lines += ["", side]
    return "\n".join(lines) + "\n"


def real_link_line(report: dict[str, Any]) -> str:
    """What the real boards' own linker scripts said about the same objects."""
    res = []
    for c in report["rows"]:
        r = c.get("real_board_link")
        if r is None:
            continue
        target, text = (r["target"], r["result"]) if isinstance(r, dict) else (BOARDS[c["board"]].real, r)
        res.append((f"{c['workload']} {c['method_label']} on {target}", text))
    if not res:
        return "Real-board images: not linked (--no-real-link); the QEMU images carry the same budgets."
    bad = [f"{who}: {text}" for who, text in res if text != "ok"]
    return (
        f"Real-board images (the boards' own linker scripts): {len(res) - len(bad)} of {len(res)} linked"
        + (f"; failed: {'; '.join(bad)}." if bad else ".")
    )


def paper_markdown(report: dict[str, Any]) -> str:
    """The paper's rows beside ours for the (board, workload) pairs the paper reports, and SNAP's
    overhead over BASE on the same backbone (measured flash, peak RAM, QEMU instructions)."""
    out: list[str] = []
    for (b, w), paper in PAPER.items():
        cells = {c["method"]: c for c in report["rows"] if c.get("board") == b and c.get("workload") == w}
        if not cells:
            continue
        out += [
            f"**{BOARDS[b].label}, {w}** — paper: flash KB / peak RAM KB / latency ms; ours: flash and peak "
            "RAM measured on the image, latency a model (QEMU instructions at 1 per cycle)",
            "",
            "| method | paper flash | ours flash | paper RAM | ours peak RAM | paper ms | ours ms (model) "
            "| ours instr |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in METHODS:
            c = cells.get(m)
            if c is None:
                continue
            pv = paper.get(m)
            pf, pr, pl = ("OOM", "—", "—") if pv is None else (str(pv[0]), str(pv[1]), str(pv[2]))
            if c["status"] == "ok":
                ours = [
                    _kb(c["flash"]),
                    _kb(c["ram"]["peak"]),
                    _f(c["model"]["latency_ms"], "{:.1f}"),
                    f"{c['instructions']['total']:,.0f}",
                ]
            else:
                ours = [
                    "**"
                    + c["status"]
                    + "** ("
                    + (_oom_text(c) if c["status"] == "OOM" else c.get("reason", ""))
                    + ")",
                    "—",
                    "—",
                    "—",
                ]
            out.append(
                f"| {METHOD_LABEL[m]} | {pf} | {ours[0]} | {pr} | {ours[1]} | {pl} | {ours[2]} | {ours[3]} |"
            )
        base, snap = cells.get("base"), cells.get("snap")
        if base and snap and base["status"] == snap["status"] == "ok":
            df = snap["flash"] - base["flash"]
            dr = snap["ram"]["peak"] - base["ram"]["peak"]
            di = snap["instructions"]["total"] - base["instructions"]["total"]
            out += [
                "",
                f"SNAP-UQ vs BASE ({w}, {b}): flash {df / 1024:+.1f} KB ({100 * df / base['flash']:+.0f} %), "
                f"peak RAM {dr / 1024:+.1f} KB ({100 * dr / base['ram']['peak']:+.0f} %), instructions "
                f"{di:+,.0f} ({100 * di / base['instructions']['total']:+.1f} %).",
            ]
            if paper.get("base") and paper.get("snap"):
                pb, ps = paper["base"], paper["snap"]
                out.append(
                    f"Paper: SNAP {ps[0]} vs BASE {pb[0]} KB flash, {ps[1]} vs {pb[1]} KB RAM, "
                    f"{ps[2]} vs {pb[2]} ms."
                )
        out.append("")
    return "\n".join(out).rstrip() + "\n" if out else ""


def arena_markdown(report: dict[str, Any]) -> str:
    """Our planned arena (persistent tables + activations) vs TFLM's smallest working arena, per model."""
    out = [
        "| workload | method | our arena B | TFLM arena B | ours / TFLM | member switch instr/inf |",
        "|---|---|---|---|---|---|",
    ]
    seen: set[tuple[str, str]] = set()
    for c in report["rows"]:
        key = (c["workload"], c["method"])
        if key in seen or c["status"] != "ok":
            continue
        seen.add(key)
        meta = report["workloads"].get(c["workload"], {})
        tflm = (meta.get("arena_tflm") or {}).get(c["method"])
        t = max(tflm) if isinstance(tflm, list) and tflm else None
        if t is None and c["method"] == "snap":
            t = meta.get("arena_tflm_snap")
        ours = c["ram"]["arena"]
        sw = c["instructions"].get("member_switch") or 0
        out.append(
            f"| {c['workload']} | {c['method_label']} | {ours} | {t if t else '—'} | "
            f"{_f(ours / t if t else None)} | {f'{sw:,.0f}' if sw else '—'} |"
        )
    return "\n".join(out) + "\n"
