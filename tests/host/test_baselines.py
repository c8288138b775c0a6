"""Every baseline on a tiny Keras model (and the closed-form ones against hand-computed values)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from snapuq.baselines import methods as B
from snapuq.errors import SnapuqError
from snapuq.uq.score import softmax


def _ctx_for_logits(z, y=None):
    """A context whose 'model' is the identity on logits (inputs are the logits themselves)."""
    z = np.asarray(z, np.float64)
    y = np.zeros(len(z), int) if y is None else np.asarray(y)
    return B.EvalContext(model=None, n_classes=z.shape[1], x_train=z, y_train=y, x_dev=z, y_dev=y,
                         predict=lambda x: {"logits": np.asarray(x)})


def test_closed_form_methods_hand():
    z = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    ctx = _ctx_for_logits(z)
    outs = {"logits": z}
    e2 = math.exp(2)
    r = B.MSP().score(ctx, None, outs)
    np.testing.assert_allclose(r.u, [1 - e2 / (e2 + 2), 2 / 3])
    assert r.pred.tolist() == [0, 0]
    r = B.Entropy().score(ctx, None, outs)
    p = np.array([e2, 1, 1]) / (e2 + 2)
    np.testing.assert_allclose(r.u, [-(p * np.log(p)).sum(), math.log(3)])
    r = B.Energy().score(ctx, None, outs)
    np.testing.assert_allclose(r.u, [-math.log(e2 + 2), -math.log(3)])
    r = B.Dirichlet().score(ctx, None, outs)
    a0 = math.log1p(e2) + 1  # softplus(2) + 1
    a1 = math.log(2) + 1
    np.testing.assert_allclose(r.u, [3 / (a0 + 2 * a1), 3 / (3 * a1)])
    np.testing.assert_allclose(r.conf, [a0 / (a0 + 2 * a1), 1 / 3])


def test_temperature_recovered():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, (4000, 4))
    p = softmax(z, 2.5)
    y = np.array([rng.choice(4, p=row) for row in p])
    assert B.fit_temperature(z, y) == pytest.approx(2.5, rel=0.08)
    ts = B.TempScaling()
    ts.fit(_ctx_for_logits(z, y))
    r = ts.score(None, None, {"logits": z})
    np.testing.assert_allclose(r.conf, softmax(z, ts.t).max(1))


def test_mahalanobis_hand():
    # 1-D features, classes at -1 and +1, within-class variance 1/4 (tied)
    f = np.array([[-1.5], [-0.5], [0.5], [1.5]])
    y = np.array([0, 0, 1, 1])
    z = np.zeros((4, 2))
    ctx = B.EvalContext(model=None, n_classes=2, x_train=f, y_train=y, x_dev=f, y_dev=y)
    ctx._cache["train"] = {"logits": z, "feat": f}
    m = B.Mahalanobis(ridge=0.0)
    m.fit(ctx)
    np.testing.assert_allclose(m.mu[:, 0], [-1, 1])
    r = m.score(ctx, None, {"logits": np.zeros((2, 2)), "feat": np.array([[0.0], [3.0]])})
    np.testing.assert_allclose(r.u, [1 / 0.25, 4 / 0.25])  # min over classes of d^2 / var


def test_ash_features_hand():
    f = np.array([[4.0, 3.0, 2.0, 1.0]])
    np.testing.assert_allclose(B.ash_features(f, 50, "p"), [[4, 3, 0, 0]])
    np.testing.assert_allclose(B.ash_features(f, 50, "s"), np.array([[4, 3, 0, 0]]) * np.exp(10 / 7))
    np.testing.assert_allclose(B.ash_features(f, 50, "b"), [[5, 5, 0, 0]])
    with pytest.raises(SnapuqError):
        B.ash_features(f, 50, "x")


# --------------------------------------------------------------------------- a tiny trained model


def _build_tiny(input_shape=(8, 8, 1), n_classes=3, dropout=0.3, **_kw):
    import keras

    inp = keras.Input(input_shape)
    h = keras.layers.Conv2D(8, 3, padding="same", name="c1")(inp)
    h = keras.layers.BatchNormalization(momentum=0.8, name="bn1")(h)
    h = keras.layers.ReLU(name="block1")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", name="c2")(h)
    h = keras.layers.ReLU(name="block2")(h)
    f = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    d = keras.layers.Dropout(dropout, name="drop1")(f)
    z = keras.layers.Dense(n_classes, name="logits")(d)
    return keras.Model(inp, z)


def _blobs(n, rng):
    """3 classes: a horizontal, vertical or diagonal bright bar at a random place in an 8x8 noisy image."""
    y = rng.integers(0, 3, n)
    x = rng.random((n, 8, 8, 1)).astype(np.float32) * 0.4
    for i, c in enumerate(y):
        r, q = rng.integers(0, 4, 2)
        for k in range(4):
            rr, qq = [(r, q + k), (r + k, q), (r + k, q + k)][c]
            x[i, rr, qq, 0] += 0.6
    return x, y


class _DS:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.x_train, self.y_train = _blobs(300, rng)
        self.x_dev, self.y_dev = _blobs(120, rng)
        self.x_test, self.y_test = _blobs(120, rng)
        self.class_names = ["a", "b", "c"]
        self.input_shape = (8, 8, 1)
        self.n_classes = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import keras

    import snapuq.baselines.train as models  # what train_baselines builds its members with
    from snapuq.baselines import train_baselines

    keras.utils.set_random_seed(0)
    ds = _DS()
    base = _build_tiny()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    base.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
    base.fit(ds.x_train, ds.y_train, epochs=8, batch_size=32, verbose=0)
    model = keras.Model(base.input, {"logits": base.output, "feat": base.get_layer("gap").output})
    d = tmp_path_factory.mktemp("tiny")
    orig = models.build_backbone
    models.build_backbone = lambda name, shape, n, **kw: _build_tiny(shape, n)
    try:
        info = train_baselines(ds, {"backbone": "tiny", "input_shape": [8, 8, 1], "n_classes": 3}, d,
                               seed=0, epochs=5, members=2, lr=0.005, progress=False)
    finally:
        models.build_backbone = orig
    ctx = B.EvalContext(model=model, n_classes=3, x_train=ds.x_train, y_train=ds.y_train, x_dev=ds.x_dev,
                        y_dev=ds.y_dev, baselines_dir=d / "baselines", seed=0)
    return ds, model, ctx, info, d


def test_train_baselines_writes_models(tiny):
    ds, model, ctx, info, d = tiny
    files = sorted(p.name for p in (d / "baselines").iterdir())
    assert files == ["baselines.json", "early_exit.keras", "ensemble_0.keras", "ensemble_1.keras"]
    meta = json.loads((d / "baselines" / "baselines.json").read_text())
    assert meta["ensemble"]["members"] == 2 and len(set(meta["ensemble"]["seeds"])) == 2
    assert meta["early_exit"]["exits_after"] == ["block1"]
    assert meta["early_exit"]["outputs"] == ["exit0", "final"]
    assert info == meta


@pytest.mark.parametrize("name", [m for m in B.METHODS if m != "snap"])
def test_every_baseline_on_tiny_model(tiny, name):
    ds, model, ctx, _, _ = tiny
    m = B.make_method(name)
    m.fit(ctx)
    outs = ctx.run(ds.x_test)
    r = m.score(ctx, ds.x_test, outs)
    assert r.u.shape == (len(ds.x_test),) and np.all(np.isfinite(r.u))
    assert r.pred.shape == r.u.shape and set(np.unique(r.pred)) <= {0, 1, 2}
    assert np.all((r.conf >= 0) & (r.conf <= 1))
    ok = r.pred == ds.y_test
    assert ok.mean() > 0.6  # the tiny task is learnable; every method's own prediction is sensible
    json.dumps(m.params())
    # shifted inputs (inverted images) should look more uncertain than clean ones for most methods;
    # at least the score must not be constant
    assert np.std(r.u) > 0


def test_mc_dropout_samples_and_keeps_base(tiny):
    ds, model, ctx, _, _ = tiny
    from snapuq.baselines.kerasutil import mc_dropout_clone
    from snapuq.nn.saved import predict_batched

    clone, n = mc_dropout_clone(model)
    assert n == 1
    a, b = predict_batched(clone, ds.x_test[:16]), predict_batched(clone, ds.x_test[:16])
    assert not np.allclose(a, b)  # dropout is on at inference
    base1 = predict_batched(model, ds.x_test[:16])["logits"]
    base2 = predict_batched(model, ds.x_test[:16])["logits"]
    np.testing.assert_array_equal(base1, base2)  # the original model is untouched
    # the mean over many samples approaches the deterministic model (dropout is unbiased in expectation)
    mean = np.mean([predict_batched(clone, ds.x_test[:16]) for _ in range(200)], axis=0)
    assert np.abs(mean - base1).mean() < 0.25 * np.abs(base1).mean()


def test_odin_perturbation_raises_confidence(tiny):
    ds, model, ctx, _, _ = tiny
    o = B.ODIN(eps=0.0)
    o.fit(ctx)
    outs = ctx.run(ds.x_test)
    u0 = o.score(ctx, ds.x_test, outs).u
    np.testing.assert_allclose(u0, -softmax(outs["logits"], 1000.0).max(1), rtol=1e-5)
    o.eps = 0.01
    u1 = o.score(ctx, ds.x_test, outs).u
    assert np.mean(u1 < u0) > 0.9  # the gradient step increases the top tempered softmax
    tuned = B.ODIN()
    tuned.fit(ctx)
    assert tuned.eps in B.ODIN.EPS_GRID and len(tuned.dev_auroc) == len(B.ODIN.EPS_GRID)


def test_react_ash_use_final_dense(tiny):
    ds, model, ctx, _, _ = tiny
    outs = ctx.run(ds.x_test)
    r = B.ReAct(percentile=100.0)
    r.fit(ctx)
    # clipping at the maximum train feature changes (almost) nothing: ReAct == energy
    np.testing.assert_allclose(r.score(ctx, None, outs).u, -np.log(np.exp(outs["logits"]).sum(1)), rtol=1e-4,
                               atol=1e-4)
    a = B.ASH(percentile=0.0, mode="p")
    a.fit(ctx)
    np.testing.assert_allclose(a.score(ctx, None, outs).u, -np.log(np.exp(outs["logits"]).sum(1)), rtol=1e-4,
                               atol=1e-4)


def test_missing_baselines_unavailable(tiny, tmp_path):
    ds, model, ctx, _, _ = tiny
    bad = B.EvalContext(model=model, n_classes=3, x_train=ds.x_train, y_train=ds.y_train, x_dev=ds.x_dev,
                        y_dev=ds.y_dev, baselines_dir=tmp_path)
    for cls in (B.DeepEnsemble, B.EEEnsemble):
        with pytest.raises(B.MethodUnavailable):
            cls().fit(bad)
    (tmp_path / "ensemble_0.keras").write_bytes(b"not a zip")
    with pytest.raises(SnapuqError, match="not a loadable Keras model"):
        B.DeepEnsemble().fit(bad)
    with pytest.raises(B.MethodUnavailable):
        B.SNAP().fit(bad)
    with pytest.raises(SnapuqError):
        B.make_method("nope")
