"""Low-rank + diagonal covariance (Woodbury) against the dense Gaussian, in Keras and numpy, and the
--cov-rank training option end to end."""

import json

import numpy as np

from snapuq.nn.heads import lowrank_gaussian_nll
from snapuq.uq.score import tap_lowrank_stats, tap_stats


def _case(seed=0, n=5, d=6, k=2):
    rng = np.random.default_rng(seed)
    a, mu = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    lv = rng.normal(scale=0.5, size=(n, d))
    B = rng.normal(scale=0.7, size=(n, d, k))
    return a, mu, lv, B


def _dense(a, mu, lv, B):
    maha, logdet = [], []
    for i in range(len(a)):
        S = np.diag(np.exp(lv[i])) + B[i] @ B[i].T
        r = a[i] - mu[i]
        maha.append(r @ np.linalg.solve(S, r))
        logdet.append(np.linalg.slogdet(S)[1])
    return np.array(maha), np.array(logdet)


def test_numpy_woodbury_matches_the_dense_covariance():
    a, mu, lv, B = _case()
    eb, lb = tap_lowrank_stats(a, mu, lv, B)
    maha, logdet = _dense(a, mu, lv, B)
    d = a.shape[1]
    np.testing.assert_allclose(eb, maha / d, rtol=1e-9)
    np.testing.assert_allclose(lb, logdet / d, rtol=1e-9)
    # B = 0 reduces to the diagonal surprisal
    eb0, lb0 = tap_lowrank_stats(a, mu, lv, np.zeros_like(B))
    np.testing.assert_allclose(eb0, np.mean((a - mu) ** 2 * np.exp(-lv), 1), rtol=1e-12)
    outs = {"tap0_a": a, "tap0_mu": mu, "tap0_logvar": lv, "tap0_B": B}
    np.testing.assert_allclose(tap_stats(outs)[0][:, 0], eb)


def test_keras_woodbury_nll_matches_the_dense_covariance():
    a, mu, lv, B = _case(seed=3)
    got = np.asarray(lowrank_gaussian_nll(*(x.astype(np.float32) for x in (a, mu, lv, B))))
    maha, logdet = _dense(a, mu, lv, B)
    np.testing.assert_allclose(got, 0.5 * (maha + logdet), rtol=2e-4, atol=2e-4)


def test_train_with_low_rank_covariance(tmp_path):
    from snapuq.cli import main
    from snapuq.nn.saved import load_model_dir

    d = tmp_path / "lr"
    rc = main(["train", "--dataset", "digits", "--out", str(d), "--epochs", "2", "--rank", "8",
               "--cov-rank", "2", "--no-baselines", "--no-progress"])  # fmt: skip
    assert rc == 0
    assert json.loads((d / "config.json").read_text())["cov_rank"] == 2
    md = load_model_dir(d)
    o = md.predict(np.zeros((3, 8, 8, 1), np.float32))
    assert o["tap0_B"].shape == (3, md.config["taps"][0]["d"], 2)
    assert "tap0_B" not in md.export_model().output
