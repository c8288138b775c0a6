"""One board's deployment cost: the backbone/head split of a .tflite, and a QEMU measurement of an image."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.bench.table import make_safe_path
from snapuq.errors import SnapuqError
from snapuq.harness import cycles as cyc
from snapuq.harness.protocol import Device
from snapuq.harness.qemu import INSTR_PER_TICK_ICOUNT, QemuProcess, board_spec, build_firmware, open_serial
from snapuq.native.ccore import CoreModel
from snapuq.tflite_graph import read_graph

BOARDS = ("m4", "m7")


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
    not take them (white space, ...; snapuq.bench.table.make_safe_path)."""

    make_safe_path(model_dir, "--model")
    if build_dir is not None:
        make_safe_path(build_dir, "--build-dir")


def graph_split(tflite: bytes) -> dict[str, Any]:
    """Operators and constant bytes of the backbone (ancestors of logits/probs) vs the heads.

    The C core's loader validates the file first (bounds, vtables, shapes); the graph edges are
    then read with the `tflite` schema package."""
    names = CoreModel(tflite).output_names
    g = read_graph(tflite)
    want = {t for n, t in zip(names, g.outputs) if n in ("logits", "probs")}
    if not want:
        raise SnapuqError("model has no 'logits' output")
    producer = g.producers()
    backbone: set[int] = set()
    stack = list(want)
    while stack:
        t = stack.pop()
        if t in producer and producer[t] not in backbone:
            backbone.add(producer[t])
            stack.extend(i for i in g.operators[producer[t]].inputs if i >= 0)
    heads = set(range(len(g.operators))) - backbone

    def nbytes(t: int) -> int:
        return g.tensors[t].buffer_bytes

    def const_bytes(sel: set[int]) -> set[int]:
        return {i for o in sel for i in g.operators[o].inputs if i >= 0 and nbytes(i) > 0}

    cb, ch = const_bytes(backbone), const_bytes(heads)
    return {"backbone_ops": sorted(backbone), "head_ops": sorted(heads),
            "backbone_weight_bytes": sum(nbytes(i) for i in cb),
            "head_only_weight_bytes": sum(nbytes(i) for i in ch - cb),
            "n_ops": len(g.operators)}


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
    core = resources.core_dir()
    text = "".join(p.read_text() for p in sorted(core.glob("snapuq_snap*.c")))  # score, calib, monitor
    sizes = _symbol_sizes(elf)
    return sum(v for k, v in sizes.items() if (k.startswith("snapuq_snap_") or k.startswith("snapuq_fit_")
               or k.startswith("snapuq_welford_") or k.startswith("snapuq_monitor_")
               or k.startswith("snapuq_quantile")) and k in text)


def measure_board(key: str, model_dir: Path, x_int8: np.ndarray, repeats: int,
                  split: dict[str, Any], build_dir: Path | None) -> dict[str, Any]:
    spec = board_spec("qemu:" + key)
    elf = build_firmware(spec, model_dir, build_dir)
    silicon = cyc.silicon_for(spec.name)
    counts = elf.parent / "insn_counts.txt"
    counts.unlink(missing_ok=True)
    # the timed inferences run first and are the ones modelled (the first `repeats` invokes); the profiled
    # one comes after them: the per-operator profiler runs inside invoke
    plugin = cyc.plugin_arg(cyc.plugin_library(), elf, silicon, counts.resolve(), max_windows=repeats)
    with QemuProcess(spec, elf, icount=True, plugin=plugin) as q:
        dev = Device(open_serial(q.url), timeout=60)
        try:
            dev.wait_boot(timeout=30)
            # direct-input builds (the input tensor is the upload buffer): one load per inference
            direct = int(dev.stats().get("direct_input", 0))
            dev.load_input(x_int8.tobytes())
            if direct:
                inf = {"model_ticks": 0, "snap_ticks": 0}
                for _ in range(repeats):
                    dev.load_input(x_int8.tobytes())
                    r1 = dev.infer(1, 0, timeout=120)
                    for key in inf:
                        inf[key] += int(r1.get(key, 0))
            else:
                inf = dev.infer(repeats, 1, timeout=120)
            dev.load_input(x_int8.tobytes())
            dev.prof(True)
            dev.infer(1, 0 if direct else 1)
            per_op = dev.prof()
            dev.prof(False)
            stats = dev.stats()
            prof = dev.profile()
        finally:
            dev.close()
    cm = cyc.estimate(*cyc.read_counts(counts), silicon)
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
        "cycles_modelled": cm["cycles_modelled"], "ms_modelled": cm["ms_modelled"], "cycle_model": cm,
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
