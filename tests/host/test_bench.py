"""snapuq bench: the backbone / SNAP-head split of the shipped model's graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapuq.bench.board import graph_split

MODEL = Path(__file__).resolve().parents[2] / "models" / "digits" / "model_int8.tflite"


@pytest.mark.skipif(not MODEL.exists(), reason="models/digits not exported")
def test_graph_split_partitions_the_operators() -> None:
    s = graph_split(MODEL.read_bytes())
    bb, hd = set(s["backbone_ops"]), set(s["head_ops"])
    assert bb and hd and not bb & hd
    assert bb | hd == set(range(s["n_ops"]))
    assert s["backbone_weight_bytes"] > s["head_only_weight_bytes"] > 0
