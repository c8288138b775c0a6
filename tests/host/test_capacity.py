"""The core's capacities (SNAPUQ_MAX_TENSORS / _OPS / _IO) are checked at `snapuq.attach` / `snapuq train
--model` with the SNAP heads counted, before any training: a model that only exceeds them once export has
added the heads is refused in one line naming the limit and the count, not at export after training."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import snapuq.api as A
import snapuq.export.capacity as K
import snapuq.nn.graph as G
from snapuq.cli import main

L = keras.layers


def _cnn():
    i = keras.Input((16, 16, 3))
    x = L.Conv2D(8, 3, activation="relu", name="c1")(i)
    x = L.MaxPooling2D(name="p1")(x)
    x = L.Conv2D(16, 3, activation="relu", name="c2")(x)
    x = L.Conv2D(16, 3, activation="relu", name="c3")(x)
    return keras.Model(i, L.Dense(5, name="logits")(L.GlobalAveragePooling2D(name="gap")(x)))


def _seq1d():
    i = keras.Input((20, 3))
    x = L.Conv1D(8, 3, activation="relu", name="c1")(i)
    x = L.Conv1D(8, 3, activation="relu", name="c2")(x)
    return keras.Model(i, L.Dense(3, name="logits")(L.GlobalAveragePooling1D(name="gap")(x)))


def _mlp():
    i = keras.Input((20,))
    x = L.Dense(12, activation="relu", name="d1")(i)
    x = L.Dense(12, activation="relu", name="d2")(x)
    x = L.Dense(6, activation="relu", name="d3")(x)
    return keras.Model(i, L.Dense(4, name="logits")(x))


@pytest.mark.parametrize("make, taps", [(_cnn, None), (_cnn, ["c1", "c2", "c3"]), (_seq1d, ["c1"]),
                                        (_mlp, None)])  # fmt: skip
def test_head_counts_are_what_export_converts_after_training(make, taps):
    """export_counts on the untrained heads == the graph of the trained heads as export converts it, and it
    lies within head_count_bounds (exactly the lower bound for vector taps)."""
    from snapuq.nn.saved import ModelDir

    keras.utils.set_random_seed(0)
    snap = A.attach(make(), taps=taps, rank=8, check_ops=False)
    n = len(snap.taps)
    base = K.graph_counts(K._convert(snap.backbone))
    exact = K.export_counts(snap.model, n)
    lo, hi = K.head_count_bounds(n)
    for k in exact:
        assert base[k] + lo[k] <= exact[k] <= base[k] + hi[k], (k, base, exact)
    if make is _mlp:
        assert exact == {k: base[k] + lo[k] for k in base}
    shape = snap.input_shape
    rng = np.random.default_rng(0)
    snap.fit(rng.normal(size=(64, *shape)).astype(np.float32), rng.integers(0, snap.n_classes, 64), epochs=1,
             batch_size=32, progress=False)  # fmt: skip
    trained = ModelDir(None, {"taps": [None] * n}, snap.model).export_model()  # what export converts
    assert K.graph_counts(K._convert(trained)) == exact


def _limits(**kw) -> dict[str, int]:
    return {"SNAPUQ_MAX_TENSORS": 96, "SNAPUQ_MAX_OPS": 48, "SNAPUQ_MAX_IO": 16, **kw}


def test_core_limits_are_the_headers():
    assert K.core_limits() == _limits()


def test_attach_refuses_a_model_that_only_the_heads_push_over(monkeypatch):
    keras.utils.set_random_seed(0)
    m = _mlp()
    base = K.graph_counts(K._convert(G.logits_backbone(m)[0]))  # 9 tensors, 4 operators, 1 input, 1 output
    lo, _ = K.head_count_bounds(2)
    A.attach(m, rank=8)  # the default capacities: fits
    # the backbone alone fits the lowered limit; with the heads of its 2 default taps it does not
    monkeypatch.setattr(K, "core_limits", lambda: _limits(SNAPUQ_MAX_TENSORS=base["tensors"] + 5))
    with pytest.raises(G.UnsupportedModelError) as e:
        A.attach(m, rank=8)
    n = base["tensors"] + lo["tensors"]
    assert str(e.value) == (
        f"with its SNAP heads (2 taps) the int8 model has {n} tensors (backbone {base['tensors']} + heads "
        f"{lo['tensors']}), more than the core's SNAPUQ_MAX_TENSORS = {base['tensors'] + 5}: use fewer taps "
        "(taps=...), or a core built with a larger SNAPUQ_MAX_TENSORS"
    )
    monkeypatch.setattr(K, "core_limits", lambda: _limits(SNAPUQ_MAX_OPS=base["operators"] + 6))
    with pytest.raises(G.UnsupportedModelError, match=f"has {base['operators'] + 9} operators .*_OPS = 10:"):
        A.attach(m, rank=8)
    monkeypatch.setattr(K, "core_limits", lambda: _limits(SNAPUQ_MAX_IO=4))  # logits, probs + 3 per tap
    with pytest.raises(G.UnsupportedModelError, match="has 8 outputs .*SNAPUQ_MAX_IO = 4"):
        A.attach(m, rank=8)
    monkeypatch.setattr(K, "core_limits", lambda: _limits(SNAPUQ_MAX_IO=5))
    assert A.attach(m, taps=["d3"], rank=8).taps == ["d3"]  # one tap: 5 outputs


def test_train_model_refuses_before_training(monkeypatch, tmp_path, capsys):
    keras.utils.set_random_seed(0)
    _mlp().save(tmp_path / "m.keras")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x_train=rng.normal(size=(40, 20)), y_train=rng.integers(0, 4, 40),
             x_test=rng.normal(size=(12, 20)), y_test=rng.integers(0, 4, 12))  # fmt: skip
    monkeypatch.setattr(K, "core_limits", lambda: _limits(SNAPUQ_MAX_TENSORS=20))
    fit = []
    monkeypatch.setattr(A.Snap, "fit", lambda *a, **k: fit.append(1))
    rc = main(["train", "--model", str(tmp_path / "m.keras"), "--data", str(tmp_path / "d.npz"), "--out",
               str(tmp_path / "o"), "--epochs", "1", "--no-baselines", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and not fit, err
    assert "the int8 model has 34 tensors (backbone 9 + heads 25)" in err[0]
    assert "SNAPUQ_MAX_TENSORS = 20" in err[0]
