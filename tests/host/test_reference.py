"""The numpy int8 reference equals TFLM element for element (tiny CNNs and a ResNet-8-style
model with ADD, random inputs), plus the fixed-point primitives on hand-checked values."""

from __future__ import annotations

import numpy as np
import pytest
from export_models import int8_model, random_inputs
from oracles.int8_reference import Int8Model, mbqm, quantize_multiplier, rdbpot, srdhm
from oracles.tflite_reader import read_tflite

from snapuq.export.tflm import TFLMInterpreter


@pytest.mark.parametrize("name", ["a", "b", "resnet8"])
def test_reference_matches_tflm(name):
    b = int8_model(name)
    ref = Int8Model(b)
    ip = TFLMInterpreter(b)
    ops = {op.name for op in read_tflite(b).operators}
    if name == "resnet8":
        assert "ADD" in ops and "MEAN" in ops
    diffs = 0
    for x in random_inputs(b, 25, seed=hash(name) % 1000):
        r = ref.invoke(x)
        t = ip.invoke(x)
        assert len(t) == len(r)
        for k, v in enumerate(r.values()):
            assert v.dtype == np.int8 and t[k].dtype == np.int8
            diffs += int(np.count_nonzero(v.reshape(-1) != t[k].reshape(-1)))
    assert diffs == 0


def test_output_names_follow_the_signature():
    b = int8_model("a")
    ref = Int8Model(b)
    assert set(ref.output_names) == {"logits", "probs", "tap0_a", "tap0_mu"}
    det = ref.output_details()
    ip = TFLMInterpreter(b)
    for d in det.values():
        assert list(ip.output_details(d["index"])["shape"]) == d["shape"]


def test_quantize_multiplier():
    assert quantize_multiplier(0.0) == (0, 0)
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    m, s = quantize_multiplier(0.3)
    assert abs(m * 2.0 ** (s - 31) - 0.3) < 1e-9 and (1 << 30) <= m < (1 << 31)
    assert quantize_multiplier(1e-12) == (0, 0)  # shift < -31 flushes to zero


def test_fixed_point_primitives():
    imin = -(1 << 31)
    assert int(srdhm(imin, imin)) == (1 << 31) - 1
    assert int(srdhm(1 << 30, 1 << 30)) == 1 << 29
    assert int(srdhm(-3, 1 << 30)) == -1  # -1.5 rounds away from zero
    assert [int(rdbpot(v, 1)) for v in (3, -3, 5, -5, 4)] == [2, -2, 3, -3, 2]
    m, s = quantize_multiplier(0.25)
    assert int(mbqm(1000, m, s)) == 250
    m, s = quantize_multiplier(3.0)
    assert int(mbqm(-7, m, s)) == -21
