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
from pathlib import Path
from typing import Any

from snapuq.bench.board import check_build_paths, graph_split, measure_board, parse_boards
from snapuq.bench.kernels import run_kernels
from snapuq.bench.table import METHODS, make_safe_path, run_table
from snapuq.bench.tflite import bench_tflite
from snapuq.bench.variants import export_variants
from snapuq.data import dataset_of
from snapuq.errors import SnapuqError
from snapuq.formats import read_config
from snapuq.harness.reference import HostReference
from snapuq.io import check_out_file, write_text
from snapuq.modeldir import ModelPaths, default_data_dir


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
    _table_arguments(p)
    _kernel_arguments(p)


def run(args: argparse.Namespace) -> int:
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
        if not args.tflite.is_file():
            raise SnapuqError(f"{args.tflite}: no such file")
        if args.out is None:
            raise SnapuqError("--out FILE.json is required")
        if args.build_dir is not None:
            make_safe_path(args.build_dir, "--build-dir")
        rep = bench_tflite(args.tflite, [b.strip() for b in args.boards.split(",") if b.strip()],
                           repeats=args.repeats, build=args.build_dir)  # fmt: skip
        write_text(args.out, json.dumps(rep, indent=1) + "\n")
        for b, r in rep["boards"].items():
            if r.get("fits"):
                cm = r.get("cycle_model") or {}
                if cm:
                    print(f"{b}: modelled {cm['cycles_modelled']:,} cycles = {cm['ms_modelled']:.3f} ms on "
                          f"{cm['silicon']} at {cm['clock_hz'] // 1_000_000} MHz ({cm['error_bar']})")
                print(f"{b}: {r['instructions']['total']:,.0f} instructions, flash {r['flash']:,} B, arena "
                      f"{r['ram']['arena']:,} B (TFLM {rep['arena_bytes']['tflm']:,} B), "
                      f"{r['mismatches_vs_tflm']} mismatches vs TFLM")  # fmt: skip
            else:
                print(f"{b}: does not fit ({'; '.join(r.get('link_error') or ['arena'])})")
        return 1 if any(r.get("mismatches_vs_tflm") for r in rep["boards"].values()) else 0
    if getattr(args, "export_variants", None):
        export_variants(Path(args.export_variants), args.data_dir)
        return 0
    if getattr(args, "kernels", False):
        return run_kernels(args)
    if getattr(args, "table", False):
        return run_table(args)
    if args.out is None:
        raise SnapuqError("--out FILE.json is required (or use --table)")
    keys = parse_boards(args.boards)  # before any model is read or firmware built
    check_build_paths(args.model, args.build_dir)

    model_dir = args.model
    ref = HostReference(model_dir)
    split = graph_split(ref.tflite)
    cfg_path = ModelPaths(model_dir).config

    cfg = read_config(cfg_path, need=()) if cfg_path.exists() else {}

    # --data-dir (else the one config.json records): a moved model directory's data.npz
    ds = dataset_of(cfg, args.data_dir)
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
        cm = r["cycle_model"]
        print(f"{b}: backbone {ins['backbone']:.0f} instr, +SNAP heads {ins['snap_heads']:.0f} "
              f"+ score {ins['snap_score']:.0f} ({frac:.2f} %); "
              f"flash {fl['backbone_alone']} -> {fl['total']} B; RAM peak {r['ram']['peak']} B; model invoke "
              f"modelled {cm['cycles_modelled']:,} cycles = {cm['ms_modelled']:.3f} ms on {cm['silicon']} "
              f"({cm['error_bar']})")
    print(f"bench: wrote {args.out}")
    return 0


def _table_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--table (the paper's deployment table)")
    g.add_argument(
        "--table", action="store_true", help="board x workload x method table as firmware (JSON + md)"
    )
    g.add_argument(
        "--workloads",
        default="digits,keywords",
        help="comma list of model names (models/NAME) or paths (default digits,keywords; cifar10 is "
        "the Small-MCU CIFAR-10 workload, the real ResNet-8)",
    )
    g.add_argument("--table-boards", default="big,small", help="comma list: big, small")
    g.add_argument("--methods", default=",".join(METHODS), help="comma list of base, snap, ee, deep")
    g.add_argument("--check-inputs", type=int, default=3, help="inputs checked device vs TFLM per image")
    g.add_argument(
        "--data-dir",
        default=None,
        help="dataset folder for the check inputs: DIR for every workload, or W=DIR[,W2=DIR2] per "
        "workload (default: the folder the model was trained from; seeded random int8 inputs without one)",
    )
    g.add_argument("--no-real-link", action="store_true", help="skip linking the real-board images")
    g.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="cells built and run at once (default: the CPU count, at most 4); QEMU's instruction "
        "counts do not depend on host load",
    )
    g.add_argument(
        "--export-variants",
        metavar="DIR",
        default=None,
        help="only convert DIR's base / ee / deep variants to int8 (D/variants/) and exit",
    )


def _kernel_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--kernels (per-operator kernel cost)")
    g.add_argument("--kernels", action="store_true",
                   help="per-operator rows (shapes, MACs, instructions per board, MACs/instruction, "
                        "%% of the SMLAD limit) and the SNAP head split; JSON + markdown")
