"""Backbones: shapes, the tap naming contract and int8-deployable layer types."""

import importlib

import keras
import numpy as np
import pytest

from snapuq.nn.backbones import build_backbone

ALLOWED = (
    keras.layers.InputLayer, keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.Dense,
    keras.layers.MaxPooling2D, keras.layers.AveragePooling2D, keras.layers.GlobalAveragePooling2D,
    keras.layers.Add, keras.layers.ReLU, keras.layers.BatchNormalization, keras.layers.Dropout,
)  # fmt: skip


@pytest.mark.parametrize(
    "name, shape, params_max", [("cnn4", (8, 8, 1), 70_000), ("cnn4", (28, 28, 1), 70_000),
                                ("resnet8", (32, 32, 3), 90_000)]  # fmt: skip
)
def test_backbone_contract(name, shape, params_max):
    from snapuq.nn.backbones import BACKBONES

    mod = importlib.import_module(BACKBONES[name].split(":")[0])
    m = build_backbone(name, shape, 10)
    assert m.output.shape[-1] == 10 and m.count_params() < params_max
    for lay in m.layers:
        assert isinstance(lay, ALLOWED), (name, type(lay).__name__)
    names = {lay.name for lay in m.layers}
    assert set(mod.TAP_LAYERS) <= names and set(mod.DEFAULT_TAPS) <= set(mod.TAP_PREV)
    assert "feat" in names and "logits" in names and any(n.startswith("drop") for n in names)
    out = m(np.zeros((2, *shape), np.float32))
    assert tuple(out.shape) == (2, 10)
