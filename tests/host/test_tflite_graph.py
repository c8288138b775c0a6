"""snapuq.tflite_graph, the one Python reader of a .tflite graph (capacity checks, the RELU6 rewrite, bench,
the firmware's caps tool): it agrees with the C core's loader and refuses damaged bytes in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapuq.errors import ModelFormatError
from snapuq.native.ccore import CoreModel
from snapuq.tflite_graph import read_graph

MODELS = Path(__file__).resolve().parents[2] / "models"


def _shipped() -> list[Path]:
    return sorted(MODELS.glob("*/model_int8.tflite"))


def test_graph_matches_the_c_core_on_every_shipped_model() -> None:
    files = _shipped()
    assert len(files) >= 4, "the shipped models are part of the checkout"
    for f in files:
        b = f.read_bytes()
        g, core = read_graph(b), CoreModel(b)
        assert g.op_names() == core.op_names(), f
        assert g.counts()["tensors"] == core.n_tensors, f
        assert [g.tensors[t].shape for t in g.inputs] == [s.shape for s in core.inputs], f
        # outputs in file order (the core names them from the signature, not the tensor names)
        assert [g.tensors[t].shape for t in g.outputs] == [s.shape for s in core.outputs], f
        out = g.tensors[g.outputs[0]]
        want = (core.outputs[0].scale, core.outputs[0].zero_point)
        assert (out.scales[0], out.zero_points[0]) == pytest.approx(want), f
        # every edge names a tensor; every operator's output is produced once
        assert all(-1 <= t < len(g.tensors) for op in g.operators for t in op.inputs + op.outputs)
        assert len(g.producers()) == sum(len(op.outputs) for op in g.operators)
        convs = [op for op in g.operators if op.name == "CONV_2D"]
        assert all({"stride_w", "stride_h", "padding"} <= set(op.options) for op in convs), f


@pytest.mark.parametrize("cut", [0, 4, 7, 40, 200])
def test_truncated_or_garbage_bytes_are_one_line_errors(cut: int) -> None:
    b = _shipped()[0].read_bytes()
    for bad in (b[:cut], b"\xff" * max(cut, 8)):
        with pytest.raises(ModelFormatError) as e:
            read_graph(bad)
        assert "\n" not in str(e.value) and "tflite" in str(e.value)
