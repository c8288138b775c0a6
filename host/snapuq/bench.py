"""`snapuq bench --out FILE.json`: deployment cost per method and board.

Measured on the emulated boards (QEMU mps2-an386 Cortex-M4 with the Small-MCU budget,
mps2-an500 Cortex-M7 with the Big-MCU budget, `-icount shift=0`, counts are QEMU instructions):
  - per-operator instruction counts of one inference (the firmware's profiler), split into the
    backbone (every operator the logits / probs depend on) and the SNAP heads (the rest);
  - un-profiled instructions of the int8 model and of the integer SNAP score;
  - flash image, static RAM, arena and stack peak reported by the firmware;
  - flash of the SNAP parts: head weights (constant buffers only the heads read), the SNAP
    core's code (its object's .text) and the generated SNAP constants.
Backbone-alone figures are the full figures minus the measured SNAP parts. Multi-pass baselines
(MC dropout x T, deep ensemble x M) are derived from the backbone figures and labelled so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.io import write_text
from snapuq.modeldir import ModelPaths

BOARDS = ("m4", "m7")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "tflite", nargs="?", type=Path, default=None, metavar="FILE.tflite",
        help="any int8 .tflite: flash, RAM, arena (vs TFLM's) and instructions per board, outputs checked",
    )  # fmt: skip
    p.add_argument("--model", type=Path, default=Path("models/digits"))
    p.add_argument("--out", type=Path, default=None,
                   help="JSON file to write (required, except with --table: build/bench/table.json + .md)")
    p.add_argument("--boards", default="m4,m7", help="comma list of qemu boards (m4, m7)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed inferences per board (default 10; --table: 3: QEMU counts are deterministic)")
    p.add_argument("--mc-samples", type=int, default=10, help="T of MC dropout")
    p.add_argument("--ensemble", type=int, default=5, help="M of the deep ensemble")
    p.add_argument("--build-dir", type=Path, default=None)
    from snapuq.bench_table import add_arguments as table_arguments

    table_arguments(p)
    from snapuq.bench_kernels import add_arguments as kernel_arguments

    kernel_arguments(p)


def parse_boards(text: str) -> list[str]:
    """--boards: a non-empty comma list of BOARDS (an empty one wrote a report of no boards, rc 0)."""
    keys = [b.strip() for b in str(text).split(",") if b.strip()]
    if not keys:
        raise SnapuqError(f"--boards: empty list (choose from {', '.join(BOARDS)})")
    for key in keys:
        if key not in BOARDS:
            raise SnapuqError(f"--boards: unknown board '{key}' ({', '.join(BOARDS)})")
    return keys


def check_build_paths(model_dir: Path, build_dir: Path | None) -> None:
    """The model directory and --build-dir go to make (MODEL=, BUILD=): refused in one line when make could
    not take them (white space, ...; snapuq.bench_table.make_safe_path)."""
    from snapuq.bench_table import make_safe_path

    make_safe_path(model_dir, "--model")
    if build_dir is not None:
        make_safe_path(build_dir, "--build-dir")


def graph_split(tflite: bytes) -> dict[str, Any]:
    """Operators and constant bytes of the backbone (ancestors of logits/probs) vs the heads.

    The C core's loader validates the file first (bounds, vtables, shapes); the graph edges are
    then read with the `tflite` schema package."""
    import tflite as tfl

    from snapuq.ccore import CoreModel

    names = CoreModel(tflite).output_names
    m = tfl.Model.GetRootAsModel(tflite, 0)
    sg = m.Subgraphs(0)
    outs = [int(t) for t in sg.OutputsAsNumpy()]
    want = {t for n, t in zip(names, outs) if n in ("logits", "probs")}
    if not want:
        raise SnapuqError("model has no 'logits' output")
    ops = [sg.Operators(i) for i in range(sg.OperatorsLength())]
    op_in = [[int(t) for t in op.InputsAsNumpy()] if op.InputsLength() else [] for op in ops]
    producer = {int(t): k for k, op in enumerate(ops) for t in op.OutputsAsNumpy()}
    backbone: set[int] = set()
    stack = list(want)
    while stack:
        t = stack.pop()
        if t in producer and producer[t] not in backbone:
            backbone.add(producer[t])
            stack.extend(i for i in op_in[producer[t]] if i >= 0)
    heads = set(range(len(ops))) - backbone

    def nbytes(t: int) -> int:
        return int(m.Buffers(sg.Tensors(t).Buffer()).DataLength())

    def const_bytes(sel: set[int]) -> set[int]:
        return {i for o in sel for i in op_in[o] if i >= 0 and nbytes(i) > 0}

    cb, ch = const_bytes(backbone), const_bytes(heads)
    return {"backbone_ops": sorted(backbone), "head_ops": sorted(heads),
            "backbone_weight_bytes": sum(nbytes(i) for i in cb),
            "head_only_weight_bytes": sum(nbytes(i) for i in ch - cb),
            "n_ops": len(ops)}


def _symbol_sizes(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-nm", "-S", "--size-sort", str(elf)], capture_output=True, text=True)
    sizes: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def _snap_code_bytes(elf: Path) -> int:
    """.text of the SNAP core's functions that the linker kept, from the ELF symbol sizes."""
    core = Path(__file__).resolve().parents[2] / "firmware" / "core"
    text = "".join(p.read_text() for p in sorted(core.glob("snapuq_snap*.c")))  # score, calib, monitor
    sizes = _symbol_sizes(elf)
    return sum(v for k, v in sizes.items() if (k.startswith("snapuq_snap_") or k.startswith("snapuq_fit_")
               or k.startswith("snapuq_welford_") or k.startswith("snapuq_monitor_")
               or k.startswith("snapuq_quantile")) and k in text)


def measure_board(key: str, model_dir: Path, x_int8: np.ndarray, repeats: int,
                  split: dict[str, Any], build_dir: Path | None) -> dict[str, Any]:
    from snapuq.harness.protocol import Device
    from snapuq.harness.qemu import (
        INSTR_PER_TICK_ICOUNT,
        QemuProcess,
        board_spec,
        build_firmware,
        open_serial,
    )

    spec = board_spec("qemu:" + key)
    elf = build_firmware(spec, model_dir, build_dir)
    with QemuProcess(spec, elf, icount=True) as q:
        dev = Device(open_serial(q.url), timeout=60)
        try:
            dev.wait_boot(timeout=30)
            # direct-input builds (the input tensor is the upload buffer): one load per inference
            direct = int(dev.stats().get("direct_input", 0))
            dev.load_input(x_int8.tobytes())
            dev.prof(True)
            dev.infer(1, 0 if direct else 1)
            per_op = dev.prof()
            dev.prof(False)
            if direct:
                inf = {"model_ticks": 0, "snap_ticks": 0}
                for _ in range(repeats):
                    dev.load_input(x_int8.tobytes())
                    r1 = dev.infer(1, 0, timeout=120)
                    for key in inf:
                        inf[key] += int(r1.get(key, 0))
            else:
                inf = dev.infer(repeats, 1, timeout=120)
            stats = dev.stats()
            prof = dev.profile()
        finally:
            dev.close()
    k = INSTR_PER_TICK_ICOUNT
    ticks = {int(d["op"]): int(d["ticks"]) for d in per_op}
    tb = sum(ticks.get(o, 0) for o in split["backbone_ops"])
    th = sum(ticks.get(o, 0) for o in split["head_ops"])
    model_instr = int(inf["model_ticks"]) * k / repeats
    snap_score_instr = int(inf["snap_ticks"]) * k / repeats
    frac_heads = th / (tb + th) if tb + th else 0.0
    head_instr = model_instr * frac_heads
    sizes = _symbol_sizes(elf)
    snap_consts = sum(v for n, v in sizes.items() if n.startswith("snapuq_model_")
                      and n != "snapuq_model_tflite" and "class_names" not in n)
    snap_code = _snap_code_bytes(elf)
    flash_total = int(stats["flash"])
    snap_flash = split["head_only_weight_bytes"] + snap_code + snap_consts
    return {
        "board": spec.name, "stands_for": spec.models, "cpu": prof.get("cpu"), "kernels": prof.get("kernels"),
        "instructions_unit": "qemu_instructions (-icount shift=0)",
        "instructions": {"model": model_instr, "backbone": model_instr - head_instr, "snap_heads": head_instr,
                         "snap_score": snap_score_instr, "total": model_instr + snap_score_instr},
        "per_op_profiled": [{"op": int(d["op"]), "code": d["code"], "instructions": int(d["ticks"]) * k,
                             "part": "backbone" if int(d["op"]) in split["backbone_ops"] else "snap_heads"}
                            for d in per_op],
        "flash": {"total": flash_total, "budget": int(stats["flash_size"]),
                  "snap_head_weights": split["head_only_weight_bytes"], "snap_core_code": snap_code,
                  "snap_constants": snap_consts, "backbone_alone": flash_total - snap_flash},
        "ram": {"static": int(stats["ram_static"]), "arena": int(stats["arena"]),
                "stack_peak": int(stats["stack_peak"]), "peak": int(stats["ram_peak"]),
                "budget": int(stats["ram_size"])},
    }


def run(args: argparse.Namespace) -> int:
    from snapuq.io import check_out_file, default_data_dir

    if not getattr(args, "table", False):  # --table takes each workload's own recorded data dir
        args.data_dir = default_data_dir(getattr(args, "model", None), args.data_dir)
        if args.repeats is None:
            args.repeats = 10
    if args.out is not None:
        check_out_file(args.out)
    for name in ("repeats", "mc_samples", "ensemble"):
        v = getattr(args, name, None)
        if isinstance(v, int) and v < 1:
            raise SnapuqError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if getattr(args, "tflite", None) is not None:
        from snapuq.bench_tflite import bench_tflite

        if not args.tflite.is_file():
            raise SnapuqError(f"{args.tflite}: no such file")
        if args.out is None:
            raise SnapuqError("--out FILE.json is required")
        if args.build_dir is not None:
            from snapuq.bench_table import make_safe_path

            make_safe_path(args.build_dir, "--build-dir")
        rep = bench_tflite(args.tflite, [b.strip() for b in args.boards.split(",") if b.strip()],
                           repeats=args.repeats, build=args.build_dir)  # fmt: skip
        write_text(args.out, json.dumps(rep, indent=1) + "\n")
        for b, r in rep["boards"].items():
            if r.get("fits"):
                print(f"{b}: {r['instructions']['total']:,.0f} instructions, flash {r['flash']:,} B, arena "
                      f"{r['ram']['arena']:,} B (TFLM {rep['arena_bytes']['tflm']:,} B), "
                      f"{r['mismatches_vs_tflm']} mismatches vs TFLM")  # fmt: skip
            else:
                print(f"{b}: does not fit ({'; '.join(r.get('link_error') or ['arena'])})")
        return 1 if any(r.get("mismatches_vs_tflm") for r in rep["boards"].values()) else 0
    if getattr(args, "export_variants", None):
        from snapuq.bench_variants import export_variants

        export_variants(Path(args.export_variants), args.data_dir)
        return 0
    if getattr(args, "kernels", False):
        from snapuq.bench_kernels import run_kernels

        return run_kernels(args)
    if getattr(args, "table", False):
        from snapuq.bench_table import run_table

        return run_table(args)
    if args.out is None:
        raise SnapuqError("--out FILE.json is required (or use --table)")
    keys = parse_boards(args.boards)  # before any model is read or firmware built
    check_build_paths(args.model, args.build_dir)
    from snapuq.harness.reference import HostReference

    model_dir = args.model
    ref = HostReference(model_dir)
    split = graph_split(ref.tflite)
    cfg_path = ModelPaths(model_dir).config
    from snapuq.formats import read_config

    cfg = read_config(cfg_path, need=()) if cfg_path.exists() else {}
    from snapuq.data import load_dataset

    # --data-dir (else the one config.json records): a moved model directory's data.npz
    ds = load_dataset(cfg.get("dataset", "digits"), args.data_dir, int(cfg.get("seed", 0)))
    x = ref.quantize(ds.x_test[0])
    boards: dict[str, Any] = {}
    for key in keys:
        boards["qemu_" + key] = measure_board(key, model_dir, x, args.repeats, split, args.build_dir)
    methods: dict[str, dict[str, Any]] = {}
    T, M = args.mc_samples, args.ensemble
    for b, r in boards.items():
        ins, fl = r["instructions"], r["flash"]
        bb_i, bb_f = ins["backbone"], fl["backbone_alone"]
        wb = split["backbone_weight_bytes"]
        methods.setdefault("backbone", {})[b] = {"instructions": bb_i, "flash": bb_f, "source": "measured"}
        methods.setdefault("snap", {})[b] = {
            "instructions": ins["total"], "flash": fl["total"], "source": "measured",
            "overhead_instructions_frac": (ins["snap_heads"] + ins["snap_score"]) / bb_i if bb_i else None,
            "overhead_flash_frac": (fl["total"] - bb_f) / bb_f if bb_f else None}
        for name in ("msp", "entropy", "temp_scaling", "energy"):
            methods.setdefault(name, {})[b] = {"instructions": bb_i, "flash": bb_f,
                                               "source": "derived: backbone + O(C) host-side formula"}
        methods.setdefault("mc_dropout", {})[b] = {
            "instructions": T * bb_i, "flash": bb_f, "source": f"derived: {T} backbone passes (T={T})"}
        methods.setdefault("deep_ensemble", {})[b] = {
            "instructions": M * bb_i, "flash": bb_f + (M - 1) * wb,
            "source": f"derived: {M} members, each the backbone's instructions and weights (M={M})"}
    report = {"model": str(model_dir), "split": split, "boards": boards, "methods": methods}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(report, indent=2) + "\n")
    for b, r in boards.items():
        ins, fl = r["instructions"], r["flash"]
        frac = methods["snap"][b]["overhead_instructions_frac"] * 100
        print(f"{b}: backbone {ins['backbone']:.0f} instr, +SNAP heads {ins['snap_heads']:.0f} "
              f"+ score {ins['snap_score']:.0f} ({frac:.2f} %); "
              f"flash {fl['backbone_alone']} -> {fl['total']} B; RAM peak {r['ram']['peak']} B")
    print(f"bench: wrote {args.out}")
    return 0
