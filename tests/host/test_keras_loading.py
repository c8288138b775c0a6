"""Keras loading quirks (snapuq.api.load_keras_model): a legacy Keras 2 .h5 whose DepthwiseConv2D layers carry
`groups: 1` loads (weights included); other load errors name their whole cause on one line; a TensorFlow
SavedModel folder is refused with the routes to convert it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snapuq.errors import SnapuqError

keras = pytest.importorskip("keras")
h5py = pytest.importorskip("h5py")


def _legacy_h5(path: Path, groups: int = 1) -> keras.Model:
    """A small model saved as .h5, its DepthwiseConv2D config given `groups` as tf.keras 2 wrote it."""
    m = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, name="c"),
                          keras.layers.DepthwiseConv2D(3, name="dw"), keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(3, name="d")])
    m.save(path)
    with h5py.File(path, "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        for lay in cfg["config"]["layers"]:
            if lay["class_name"] == "DepthwiseConv2D":
                lay["config"]["groups"] = groups
        f.attrs["model_config"] = json.dumps(cfg)
    return m


def test_legacy_h5_with_depthwise_groups_1_loads_with_its_weights(tmp_path: Path, capsys) -> None:
    from snapuq.api import load_keras_model

    p = tmp_path / "legacy.h5"
    ref = _legacy_h5(p)
    with pytest.raises(TypeError, match="groups"):  # what Keras 3 alone says about such a file
        keras.saving.load_model(p, compile=False)
    m = load_keras_model(p)
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    assert type(m.get_layer("dw")) is keras.layers.DepthwiseConv2D
    assert "without Keras 2's groups=1" in capsys.readouterr().err


def test_grouped_depthwise_is_refused_with_the_layer_and_the_whole_cause(tmp_path: Path) -> None:
    from snapuq.api import load_keras_model

    p = tmp_path / "grouped.h5"
    _legacy_h5(p, groups=2)
    with pytest.raises(SnapuqError) as e:
        load_keras_model(p)
    msg = str(e.value)
    assert "'dw' has groups=2" in msg and "Unrecognized keyword arguments passed to DepthwiseConv2D" in msg
    assert "\n" not in msg


def test_a_load_error_keeps_its_whole_cause(tmp_path: Path) -> None:
    from snapuq.api import load_error_cause

    long = "x" * 400
    e = TypeError(f"Error when deserializing class 'Foo' using config={{'a': 1}}.\n\nException encountered: "
                  f"Unknown layer: 'Foo' {long} end")
    cause = load_error_cause(e)
    assert cause.startswith("Unknown layer: 'Foo'") and cause.endswith("end") and len(cause) > 400


def test_saved_model_folder_is_refused_with_the_routes_to_convert(tmp_path: Path) -> None:
    from snapuq.api import load_keras_model

    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    d = tmp_path / "sm"
    m.export(d)  # a TensorFlow SavedModel folder
    assert (d / "saved_model.pb").is_file()
    with pytest.raises(SnapuqError) as e:
        load_keras_model(d)
    msg = str(e.value)
    assert "SavedModel folder" in msg and "save('model.keras')" in msg and "from_saved_model" in msg
    assert "snapuq verify / bench / harness --model FILE.tflite" in msg and "\n" not in msg
    with pytest.raises(SnapuqError, match="a folder, not a model file"):
        load_keras_model(tmp_path)
