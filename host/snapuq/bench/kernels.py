"""`snapuq bench --kernels`: per-operator kernel cost of a model on the emulated boards.

For every operator of the model: its shapes, its multiply-accumulates (nominal, as TFLM / CMSIS-NN
count them, and valid: without the padding taps the project's kernels skip), the instructions it
took on each QEMU board (the firmware's per-operator profiler, `-icount shift=0`, SysTick
resolution 40 instructions), MACs per instruction and the percentage of the SMLAD limit (2 MACs per
instruction: one SMLAD does two int8 x int8 products), and which kernel it ran (the board's kernel
set, `ref` or `dsp`, as the firmware reports it; the kernel within that set, e.g. `dsp-gemm` /
`dsp-patch` for CONV_2D or `ref` where the DSP set has none for the shape, from the C core built
with that set on the host: the choice is made at model load from the model alone). The SNAP heads
are split into MEAN, FULLY_CONNECTED and other operators plus the integer SNAP score, and related
to the backbone. Writes JSON and a markdown table (same name, .md).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.bench.board import check_build_paths, graph_split, measure_board, parse_boards
from snapuq.data import dataset_of
from snapuq.errors import SnapuqError
from snapuq.harness.reference import HostReference
from snapuq.io import write_text
from snapuq.modeldir import ModelPaths
from snapuq.native import ccore
from snapuq.native.ccore import CoreModel
from snapuq.tflite_graph import Graph
from snapuq.tflite_graph import read_graph as read_tflite_graph

MAC_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def read_graph(tflite: bytes) -> Graph:
    """Operators (name, tensor indices, conv geometry) and tensor shapes of subgraph 0, after the C core's
    loader has validated the file (as graph_split does)."""
    CoreModel(tflite).close()
    return read_tflite_graph(tflite)


# prints the kernel set, then one line per operator: its index and the kernel it runs
_KERNEL_CHOICE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "snapuq_runtime.h"
static snapuq_model_t model;
int main(int argc, char **argv)
{
    static unsigned char buf[4 << 20];
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    size_t n;
    uint16_t i;
    if (f == NULL) {
        return 2;
    }
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (snapuq_model_init(&model, buf, n) != SNAPUQ_OK) {
        fprintf(stderr, "%s\n", snapuq_model_error(&model));
        return 1;
    }
    printf("%s\n", snapuq_kernels_name());
    for (i = 0; i < snapuq_model_op_count(&model); i++) {
        printf("%u %s\n", (unsigned)i, snapuq_model_op_kernel(&model, i));
    }
    {
        size_t need = 0;
        if (snapuq_model_arena_size(&model, &need) != SNAPUQ_OK) {
            fprintf(stderr, "%s\n", snapuq_model_error(&model));
            return 1;
        }
        printf("arena %lu\n", (unsigned long)need);
    }
    return 0;
}
"""


# The core defines of the Small-MCU images at their board budget (firmware/Makefile SMALL_CORE_DEFS; a test
# keeps the two equal): their CONV_2D kernel choice differs from the other boards'.
SMALL_CORE_DEFS: dict[str, tuple[str, ...]] = {
    "qemu_m4": ("-DSNAPUQ_CONV_GEMM_MAX=0", "-DSNAPUQ_CONV_CHUNK=32")}


def op_kernels(tflite: bytes, kernel_set: str, core_defs: tuple[str, ...] = ()) -> list[str]:
    """The kernel each operator runs with the C core's `kernel_set` ("ref" or "dsp") and a board's core
    defines (SMALL_CORE_DEFS): the core built for the host with them (portable SIMD helpers, same choice
    as on the board) loads the model and reports snapuq_model_op_kernel() per operator."""
    return _kernel_choice(tflite, kernel_set, core_defs)[0]


def planned_arena(tflite: bytes, kernel_set: str, core_defs: tuple[str, ...] = ()) -> int:
    """The arena bytes a board's image plans for the model (its kernels' scratch included), from the same
    host build as op_kernels."""
    return _kernel_choice(tflite, kernel_set, core_defs)[1]


def _kernel_choice(tflite: bytes, kernel_set: str, core_defs: tuple[str, ...]) -> tuple[list[str], int]:

    if kernel_set not in ("ref", "dsp"):
        raise SnapuqError(f"unknown kernel set {kernel_set!r} (ref or dsp)")
    srcs = ccore.core_sources(ccore.CORE_DIR)
    flags = ["-std=c99", "-O1", f"-DSNAPUQ_KERNELS_DSP={1 if kernel_set == 'dsp' else 0}", *core_defs]
    h = hashlib.sha256(repr(flags).encode() + _KERNEL_CHOICE_C.encode())
    for src in srcs + sorted(ccore.CORE_DIR.rglob("*.h")):
        h.update(str(src.relative_to(ccore.CORE_DIR)).encode() + b"\0" + src.read_bytes())
    out_dir = ccore._build_dir()
    exe = out_dir / f"kernel_choice_{kernel_set}-{h.hexdigest()[:16]}"
    if not exe.is_file():
        out_dir.mkdir(parents=True, exist_ok=True)
        main_c = out_dir / f"{exe.name}.c"
        main_c.write_text(_KERNEL_CHOICE_C)
        tmp = f"{exe}.{os.getpid()}.tmp"
        cmd = [ccore._compiler(), *flags, *[f"-I{d}" for d in ccore._include_dirs(ccore.CORE_DIR)],
               *map(str, srcs), str(main_c), "-o", tmp, "-lm"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SnapuqError(f"building the kernel report helper failed: {p.stderr.strip()[-300:]}")
        os.replace(tmp, exe)
    with tempfile.TemporaryDirectory() as td:
        m = Path(td) / "m.tflite"
        m.write_bytes(tflite)
        p = subprocess.run([str(exe), str(m)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SnapuqError(f"kernel report: the C core refused the model: {p.stderr.strip()}")
    lines = [ln for ln in p.stdout.split("\n") if ln]
    if lines[0] != kernel_set or not lines[-1].startswith("arena "):
        raise SnapuqError(f"kernel report: helper built for {lines[0]!r}, wanted {kernel_set!r}")
    return [ln.split(" ", 1)[1] for ln in lines[1:-1]], int(lines[-1].split()[1])


def _valid_taps(out_n: int, stride: int, pad: int, dil: int, k: int, in_n: int) -> int:
    """Sum over output positions of the kernel taps that land inside the input (one axis)."""
    total = 0
    for o in range(out_n):
        i0 = o * stride - pad
        total += sum(1 for t in range(k) if 0 <= i0 + dil * t < in_n)
    return total


def _same_pad(in_n: int, out_n: int, stride: int, dil: int, k: int) -> int:
    eff = (k - 1) * dil + 1
    return max(0, ((out_n - 1) * stride + eff - in_n) // 2)


def op_macs(g: Any, op: Any) -> dict[str, int]:
    """Nominal and valid (padding taps excluded) MACs of one operator; element counts otherwise."""
    name = op.name
    ins = [g.tensors[i] for i in op.inputs if i >= 0]
    out = g.tensors[op.outputs[0]]
    elems = int(np.prod(ins[0].shape)) if ins else 0
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        o = op.options or {}
        b, ih, iw, ic = (list(ins[0].shape) + [1, 1, 1, 1])[:4]
        _, oh, ow, oc = (list(out.shape) + [1, 1, 1, 1])[:4]
        fshape = list(ins[1].shape)
        kh, kw = int(fshape[1]), int(fshape[2])
        sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
        dh, dw = int(o.get("dilation_h", 1) or 1), int(o.get("dilation_w", 1) or 1)
        same = int(o.get("padding", 0)) == 0  # tflite Padding: SAME = 0, VALID = 1
        ph = _same_pad(ih, oh, sh, dh, kh) if same else 0
        pw = _same_pad(iw, ow, sw, dw, kw) if same else 0
        per_tap = ic * oc if name == "CONV_2D" else oc
        nominal = b * oh * ow * kh * kw * per_tap
        valid = b * _valid_taps(oh, sh, ph, dh, kh, ih) * _valid_taps(ow, sw, pw, dw, kw, iw) * per_tap
        return {"macs": int(nominal), "macs_valid": int(valid), "elements": elems}
    if name == "FULLY_CONNECTED":
        depth = int(ins[1].shape[-1])
        rows = int(np.prod(out.shape)) // int(out.shape[-1])
        n = rows * int(out.shape[-1]) * depth
        return {"macs": n, "macs_valid": n, "elements": elems}
    return {"macs": 0, "macs_valid": 0, "elements": elems}


def _input(model_dir: Path, ref: Any, data_dir: str | None = None) -> np.ndarray:
    """The first test input of the model's dataset (--data-dir for a moved one), quantized; random int8
    when it cannot load."""

    try:
        cfg_path = ModelPaths(model_dir).config
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}

        ds = dataset_of(cfg, data_dir)
        return np.asarray(ref.quantize(ds.x_test[0]))
    except Exception:  # noqa: BLE001 - any dataset problem: counts do not depend on the data much
        g = read_graph(ref.tflite)
        shape = g.tensors[g.inputs[0]].shape
        return np.random.default_rng(0).integers(-128, 128, size=tuple(shape), dtype=np.int8)


def kernel_report(g: Any, split: dict[str, Any], boards: dict[str, dict[str, Any]],
                  kernels: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Rows per operator and the SNAP head split from the per-board measurements; `kernels`: board ->
    the kernel of each operator (op_kernels for the board's kernel set)."""
    rows: list[dict[str, Any]] = []
    kernels = kernels or {}
    per_board = {b: {int(d["op"]): int(d["instructions"]) for d in r["per_op_profiled"]}
                 for b, r in boards.items()}
    heads = set(split["head_ops"])
    for op in g.operators:
        m = op_macs(g, op)
        row: dict[str, Any] = {
            "op": op.index, "name": op.name, "part": "snap_heads" if op.index in heads else "backbone",
            "inputs": [list(g.tensors[i].shape) for i in op.inputs if i >= 0],
            "output": list(g.tensors[op.outputs[0]].shape), **m, "instructions": {},
            "macs_per_instruction": {}, "smlad_limit_pct": {}, "instructions_per_element": {},
            "kernel": {b: k[op.index] for b, k in kernels.items() if op.index < len(k)}}
        for b, counts in per_board.items():
            n = counts.get(op.index)
            row["instructions"][b] = n
            if n:
                if m["macs"]:
                    row["macs_per_instruction"][b] = m["macs"] / n
                    row["smlad_limit_pct"][b] = 100.0 * (m["macs_valid"] / 2.0) / n
                elif m["elements"]:
                    row["instructions_per_element"][b] = n / m["elements"]
        rows.append(row)
    summary: dict[str, Any] = {}
    for b, r in boards.items():
        counts = per_board[b]
        backbone = sum(counts.get(o, 0) for o in split["backbone_ops"])
        by_kind: dict[str, int] = {}
        for o in split["head_ops"]:
            kind = g.operators[o].name
            kind = kind if kind in ("MEAN", "FULLY_CONNECTED") else "other"
            by_kind[kind] = by_kind.get(kind, 0) + counts.get(o, 0)
        score = float(r["instructions"]["snap_score"])
        head_total = sum(by_kind.values())
        macs_bb = sum(row["macs"] for row in rows if row["part"] == "backbone")
        summary[b] = {
            "backbone_profiled": backbone, "snap_heads_profiled": head_total,
            "snap_heads_split": {"MEAN": by_kind.get("MEAN", 0),
                                 "FULLY_CONNECTED": by_kind.get("FULLY_CONNECTED", 0),
                                 "other": by_kind.get("other", 0), "integer_score": score},
            "snap_overhead_pct": 100.0 * (head_total + score) / backbone if backbone else None,
            "backbone_macs": macs_bb,
            "backbone_macs_per_instruction": macs_bb / backbone if backbone else None,
            "model_instructions_unprofiled": r["instructions"]["model"],
        }
    return {"rows": rows, "summary": summary}


def _fmt(v: Any, nd: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def markdown(model: str, rep: dict[str, Any]) -> str:
    boards = list(rep["summary"])
    head = ["#", "op", "kernel", "part", "input", "output", "MACs", "valid MACs"]
    for b in boards:
        head += [f"instr {b}", f"MAC/instr {b}", f"% SMLAD {b}"]
    lines = [f"# Kernel cost per operator: {model}", "",
             "Instructions: QEMU `-icount shift=0`, firmware per-operator profiler (resolution 40). "
             "Kernel: the one the board's kernel set runs for the operator (chosen at model load). "
             "% SMLAD: valid MACs / 2 per instruction (one SMLAD = 2 MACs). MEAN / pooling / ADD rows "
             "give instructions per input element in the MAC/instr column.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rep["rows"]:
        shape_in = "x".join(map(str, r["inputs"][0])) if r["inputs"] else "-"
        kern = " / ".join(dict.fromkeys(r.get("kernel", {}).values())) or "-"
        cells = [str(r["op"]), r["name"], kern, r["part"], shape_in, "x".join(map(str, r["output"])),
                 _fmt(r["macs"]), _fmt(r["macs_valid"])]
        for b in boards:
            cells.append(_fmt(r["instructions"].get(b)))
            if r["macs"]:
                cells += [_fmt(r["macs_per_instruction"].get(b)), _fmt(r["smlad_limit_pct"].get(b), 1)]
            else:
                ipe = r["instructions_per_element"].get(b)
                cells += [f"{_fmt(ipe)} /elem" if ipe is not None else "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## SNAP heads vs backbone", "",
              "| board | backbone | heads MEAN | heads FC | heads other | integer score | overhead |",
              "|---|---|---|---|---|---|---|"]
    for b, s in rep["summary"].items():
        h = s["snap_heads_split"]
        lines.append(f"| {b} | {s['backbone_profiled']:,} | {h['MEAN']:,} | {h['FULLY_CONNECTED']:,} | "
                     f"{h['other']:,} | {h['integer_score']:,.0f} | {_fmt(s['snap_overhead_pct'])} % |")
    return "\n".join(lines) + "\n"


def run_kernels(args: Any) -> int:
    model_dir = Path(args.model)
    if not model_dir.is_dir():
        raise SnapuqError(f"--model: no model directory {model_dir}")
    keys = parse_boards(args.boards)
    check_build_paths(model_dir, args.build_dir)
    ref = HostReference(model_dir)
    g = read_graph(ref.tflite)
    split = graph_split(ref.tflite)
    x = _input(model_dir, ref, getattr(args, "data_dir", None))
    boards: dict[str, Any] = {}
    for key in keys:
        boards["qemu_" + key] = measure_board(key, model_dir, x, max(1, args.repeats), split, args.build_dir)
    kernels = {b: op_kernels(ref.tflite, str(r.get("kernels") or "ref"), SMALL_CORE_DEFS.get(b, ()))
               for b, r in boards.items()}
    rep = kernel_report(g, split, boards, kernels)
    out = Path(args.out) if args.out else Path("build") / "bench" / f"kernels_{model_dir.name}.json"
    report = {"model": str(model_dir), "split": split, **rep,
              "boards": {b: {k: v for k, v in r.items() if k in ("board", "cpu", "kernels", "instructions")}
                         for b, r in boards.items()}}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(report, indent=2) + "\n")
    write_text(out.with_suffix(".md"), markdown(str(model_dir), rep))
    for b, s in rep["summary"].items():
        h = s["snap_heads_split"]
        mpi = _fmt(s["backbone_macs_per_instruction"])
        print(f"{b}: backbone {s['backbone_profiled']:,} instr ({mpi} MAC/instr); "
              f"SNAP heads MEAN {h['MEAN']:,} + FC {h['FULLY_CONNECTED']:,} + other {h['other']:,} "
              f"+ score {h['integer_score']:,.0f} = {_fmt(s['snap_overhead_pct'])} % of the backbone")
    print(f"bench: wrote {out} and {out.with_suffix('.md')}")
    return 0
