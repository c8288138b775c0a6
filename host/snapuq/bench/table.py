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
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.bench.firmware import (
    _STOP,
    BOARDS,
    Board,
    build_image,
    expected_outputs,
    make_safe_path,
    run_image,
)
from snapuq.bench.table_markdown import EVAL_METHOD, METHOD_LABEL, METHODS, _summary, markdown, paper_row
from snapuq.bench.variants import load_variants, variant_files
from snapuq.data import dataset_of
from snapuq.errors import SnapuqError
from snapuq.export.convert import quantize_input
from snapuq.harness.cycles import ERROR_BAR
from snapuq.harness.energy import board_power
from snapuq.harness.qemu import _kill_children
from snapuq.io import check_out_file, write_text
from snapuq.modeldir import ModelPaths, check_parts, default_data_dir, sha256_file

ROOT = resources.project_dir()
# cifar10: the real MLPerf Tiny ResNet-8 (full CIFAR-10, the paper's Small-MCU row); resnet8: the
# salvaged-subset one (39 % accurate), kept as a model of the same graph that needs no data set
WORKLOADS = {"digits": "models/digits", "keywords": "models/keywords", "cifar10": "models/cifar10",
             "resnet8": "models/resnet8"}  # fmt: skip
# timed inferences per cell: QEMU's -icount counts are deterministic and the timed input is fixed,
# so repeats only average the 40-instruction SysTick granularity
TABLE_REPEATS = 3
MC_DROPOUT_NOTE = (
    "not measured: the int8 graphs carry no dropout (removed at conversion) and the runtime "
    "has no masked-activation operator; T passes would be T identical inferences"
)


# ------------------------------------------------------------------ inputs, eval


def check_inputs(
    model_dir: Path, n: int, data_dir: str | None, seed: int = 0
) -> tuple[list[np.ndarray], str]:
    man = json.loads(ModelPaths(model_dir).manifest.read_text())
    inp = man["input"]
    shape = tuple(inp["shape"])
    try:
        cfg = json.loads(ModelPaths(model_dir).config.read_text())
        ds = dataset_of(cfg, data_dir)
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

    mp = ModelPaths(p)  # a cell's firmware is built from the generated C: of this export (MANIFEST.sha256)
    check_parts(p, need=(mp.INT8, mp.MANIFEST), also=(mp.C_SOURCE, mp.C_HEADER))
    return p


def method_files(model_dir: Path, variants: dict[str, Any] | None, method: str) -> list[Path] | None:
    """The int8 model files of one method's firmware; None when its variant is not exported."""

    if method == "snap":
        return [ModelPaths(model_dir).int8]
    if variants is None or method not in variants["methods"]:
        return None
    return variant_files(model_dir, variants, method)


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
    files = method_files(model_dir, variants, method)
    if files is None:
        return {"status": "missing",
                "reason": f"no {method} variant (snapuq bench --export-variants {model_dir})"}  # fmt: skip
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


CYCLE_MODEL_NOTE = (
    "the executed instruction stream of the model's invokes (QEMU plugin) weighted with Cortex-M4 TRM "
    "timings "
    "(M7: single-issue, loads and MACs 1 cycle) + the flash wait states per flash-accelerator cache miss, at "
    "the part's clock (L432KC 80 MHz 4 WS, F767ZI 216 MHz 7 WS); error bar: M4 "
    + ERROR_BAR["m4"] + "; M7 " + ERROR_BAR["m7"])


def _energy(board: Board, instr: float) -> tuple[float, float, str]:
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
            "int8_sha256": sha256_file(ModelPaths(d).int8),
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
            files = method_files(d, variants, m)
            if files is not None:
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
        cell = measure_cell(board, m, d, variants, build, inputs, repeats, not args.no_real_link,
                            expected.get((w, m)), make_jobs)
        cell.update({"board": b, "board_label": board.label, "workload": w, "method": m,
                     "method_label": METHOD_LABEL[m]})
        if cell["status"] == "ok":
            ms, mj, src = _energy(board, cell["instructions"]["total"])
            cell["model"] = {"latency_ms": ms, "energy_mj": mj, "source": "model: " + src}
        if m in uq_cols[w]:
            cell["uq"] = uq_cols[w][m]
        paper = paper_row(b, w)
        if paper is not None:
            pv = paper.get(m)
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

        _kill_children()  # running cells end at once (their make or QEMU is gone), nothing is left behind
        raise
    pool.shutdown(wait=True)
    report = {
        "format": 1,
        "instructions_unit": "QEMU instructions per inference (-icount shift=0), not cycles",
        "latency_energy": "model: instructions / board clock (1 instruction per cycle) x datasheet run power",
        "cycle_model": CYCLE_MODEL_NOTE,
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
