"""snapuq bench --kernels: MAC counts (nominal and without padding taps) and the per-operator /
SNAP-head report built from per-board profiles (no emulator needed here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from snapuq.bench.board import graph_split
from snapuq.bench.kernels import _valid_taps, kernel_report, markdown, op_macs, read_graph

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "digits" / "model_int8.tflite"


def test_valid_taps_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, s, d = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        n_in = int(rng.integers(1, 12))
        pad = int(rng.integers(0, k))
        n_out = max(1, (n_in + 2 * pad - (k - 1) * d - 1) // s + 1)
        brute = sum(1 for o in range(n_out) for t in range(k) if 0 <= o * s - pad + d * t < n_in)
        assert _valid_taps(n_out, s, pad, d, k, n_in) == brute


@pytest.mark.skipif(not MODEL.exists(), reason="models/digits not exported")
def test_report_rows_and_head_split() -> None:
    tfl = MODEL.read_bytes()
    g = read_graph(tfl)
    split = graph_split(tfl)
    conv0 = op_macs(g, g.operators[0])  # 8x8x1 -> 16, 3x3 SAME
    assert conv0["macs"] == 8 * 8 * 16 * 9 and conv0["macs_valid"] == 22 * 22 * 16
    # a fake profile: 100 instructions per operator, 500 for the score
    prof = [{"op": op.index, "instructions": 100} for op in g.operators]
    boards = {"qemu_m4": {"per_op_profiled": prof, "instructions": {"snap_score": 500.0, "model": 1.0}}}
    rep = kernel_report(g, split, boards)
    assert len(rep["rows"]) == len(g.operators)
    s = rep["summary"]["qemu_m4"]
    n_heads = len(split["head_ops"])
    assert s["backbone_profiled"] == 100 * len(split["backbone_ops"])
    h = s["snap_heads_split"]
    assert h["MEAN"] + h["FULLY_CONNECTED"] + h["other"] == 100 * n_heads
    assert s["snap_overhead_pct"] == pytest.approx(100.0 * (100 * n_heads + 500) / s["backbone_profiled"])
    row0 = rep["rows"][0]
    assert row0["smlad_limit_pct"]["qemu_m4"] == pytest.approx(100.0 * conv0["macs_valid"] / 2 / 100)
    md = markdown("digits", rep)
    assert md.count("\n| ") >= len(g.operators) + 2 and "SNAP heads vs backbone" in md


@pytest.mark.skipif(not MODEL.exists(), reason="models/digits not exported")
def test_kernel_per_layer_is_reported() -> None:
    """`bench --kernels` names the kernel each layer runs in the board's kernel set, from the C core
    built with that set: the digits CNN's first conv (in_c = 1) takes the DSP patch path, the others
    the GEMM path; the reference set runs the reference kernel everywhere."""
    from snapuq.bench.kernels import SMALL_CORE_DEFS, op_kernels

    tfl = MODEL.read_bytes()
    g = read_graph(tfl)
    dsp, ref = op_kernels(tfl, "dsp"), op_kernels(tfl, "ref")
    assert len(dsp) == len(ref) == len(g.operators) and set(ref) == {"ref"}
    convs = [k for op, k in zip(g.operators, dsp) if op.name == "CONV_2D"]
    assert convs[0] == "dsp-patch" and set(convs[1:]) == {"dsp-gemm"}
    # the Small-MCU image (qemu_m4 at its budget) runs its 3x3 convolutions on the direct path (no scratch)
    small = op_kernels(tfl, "dsp", SMALL_CORE_DEFS["qemu_m4"])
    small_convs = [k for op, k in zip(g.operators, small) if op.name == "CONV_2D"]
    assert small_convs[1:] == ["dsp-direct"] * (len(convs) - 1)
    makefile = (ROOT / "firmware" / "Makefile").read_text()
    assert f"SMALL_CORE_DEFS := {' '.join(SMALL_CORE_DEFS['qemu_m4'])}" in makefile
    assert all(k == "dsp" for op, k in zip(g.operators, dsp) if op.name in ("FULLY_CONNECTED", "MEAN"))
    prof = [{"op": op.index, "instructions": 100} for op in g.operators]
    boards = {"qemu_m4": {"per_op_profiled": prof, "instructions": {"snap_score": 500.0, "model": 1.0}}}
    rep = kernel_report(g, graph_split(tfl), boards, {"qemu_m4": dsp})
    assert rep["rows"][0]["kernel"] == {"qemu_m4": "dsp-patch"}
    assert "| dsp-patch |" in markdown("digits", rep)
