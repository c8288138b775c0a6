"""The hierarchical spiking transformer (snapuq.tokens.hier): stages and downsampling, per-stage token
reduction, the training-free per-token classifier of every stage, SOPs, resumable training, and the
`snapuq tokens eval --arch hier` path — on a tiny model and the embedded 8×8 digits."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from snapuq.cli import main
from snapuq.data import load_dataset
from snapuq.errors import SnapuqError
from snapuq.options import TrainOptions
from snapuq.tokens.hier import (
    HierConfig,
    config_for,
    fit_stage_heads,
    hier_forward,
    hier_sops,
    hier_token_logits,
    project_tokens,
)
from snapuq.tokens.hier_eval import PRUNE_ROWS, make_stage_reducer, stage_scores, train_hier
from snapuq.tokens.model import lif_numpy


def _cfg(**kw) -> HierConfig:
    return config_for((8, 8, 1), 10, patch=2, dims=(8, 16), depths=(1, 1), heads=(2, 2), stem=4, **kw)


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits", None, 0)
    return ds.x_train[:256], ds.y_train[:256], ds.x_test[:48], ds.y_test[:48]


@pytest.fixture(scope="module")
def trained(digits, tmp_path_factory):
    x, y, _, _ = digits
    opts = TrainOptions(epochs=2, batch_size=32, lr=5e-3, schedule="cosine", augment="shift")
    model, hist = train_hier(_cfg(), x, y, opts, seed=0, ckpt_dir=str(tmp_path_factory.mktemp("ck")),
                             identity={"t": 1}, resume=False, log=lambda *_: None)
    return model


def test_config_grids_and_validation():
    assert config_for((32, 32, 3), 10).n_tokens_stages == [64, 16]
    assert config_for((28, 28, 1), 10).n_tokens_stages == [49, 16]
    assert config_for((32, 32, 3), 10, dims=(32, 64, 128), depths=(1, 1, 1),
                      heads=(1, 2, 4)).n_tokens_stages == [64, 16, 4]
    c = _cfg()
    assert HierConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(SnapuqError, match="divisible"):
        config_for((8, 8, 1), 10, patch=3)
    with pytest.raises(SnapuqError, match="one entry per stage"):
        config_for((8, 8, 1), 10, patch=2, dims=(8, 16), depths=(1,), heads=(2, 2))
    with pytest.raises(SnapuqError, match="divisible by its heads"):
        config_for((8, 8, 1), 10, patch=2, dims=(9, 16), heads=(2, 2))


def test_forward_shapes_and_a_full_keep_changes_nothing(trained, digits):
    _, _, xt, _ = digits
    cfg = trained.cfg
    o = hier_forward(trained, xt, record=True, batch=20)
    assert o["logits"].shape == (48, 10)
    assert [s.shape for s in o["stage_in"]] == [(48, 4, 16, 8), (48, 4, 4, 16)]
    np.testing.assert_allclose(o["logits"], np.asarray(trained(xt)), atol=1e-4)
    sp = hier_sops(o, cfg)
    assert sp["total"].shape == (48,) and sp["total"].mean() > 0 and sp["block_total"].mean() > 0
    # keep everything: the same logits and SOPs as no reduction
    o1 = hier_forward(trained, xt, make_stage_reducer("uncert", "prune", 1.0, 0.9), record=True)
    np.testing.assert_allclose(o1["logits"], o["logits"], atol=1e-5)
    np.testing.assert_array_equal(hier_sops(o1, cfg)["total"], sp["total"])
    # starting from the cached stage-0 tokens gives the same result
    o2 = hier_forward(trained, None, record=True, tokens0=o["stage_in"][0], stem_sops=sp["stem"])
    np.testing.assert_allclose(o2["logits"], o["logits"], atol=1e-5)
    np.testing.assert_array_equal(hier_sops(o2, cfg)["total"], sp["total"])


@pytest.mark.parametrize("mode", ["prune", "merge"])
def test_reduction_at_every_stage_keeps_k_and_saves_sops(trained, digits, mode):
    _, _, xt, _ = digits
    full = hier_sops(hier_forward(trained, xt, record=True), trained.cfg)
    o = hier_forward(trained, xt, make_stage_reducer("uncert", mode, 0.5, 0.9), record=True)
    assert [m.sum(1).tolist() for m in o["masks"]] == [[8] * 48, [2] * 48]
    sp = hier_sops(o, trained.cfg)
    assert sp["block_total"].mean() < full["block_total"].mean()
    if mode == "prune":  # a pruned token emits nothing: its state may be anything
        z = o["stage_in"][0].copy()
        m = o["masks"][0]
        red = make_stage_reducer("uncert", "prune", 0.5, 0.9)
        z2 = z + 50.0 * (1 - m)[:, None, :, None]  # blow up the dropped tokens only
        a = hier_forward(trained, None, lambda zz, mod, s: red(z if s == 0 else zz, mod, s), tokens0=z)
        b = hier_forward(trained, None, lambda zz, mod, s: (z2 * m[:, None, :, None], m) if s == 0
                         else red(zz, mod, s), tokens0=z2)
        np.testing.assert_allclose(a["logits"], b["logits"], atol=1e-5)


def test_every_criterion_scores_every_stage(trained, digits):
    x, y, xt, _ = digits
    st = hier_forward(trained, xt)["stage_in"]
    heads = fit_stage_heads(trained, hier_forward(trained, x)["stage_in"], y)
    for s, z in enumerate(st):
        for c in PRUNE_ROWS:
            sc = stage_scores(c, z, trained, s, 0.9, 0, heads)
            assert sc.shape == (48, z.shape[2]) and np.isfinite(sc).all(), c
        # the int8 device path ranks like the float criterion (per-sample Spearman)
        from scipy.stats import spearmanr

        f, q = stage_scores("uncert", z, trained, s, 0.9), stage_scores("uncert_int8", z, trained, s, 0.9)
        rs = [spearmanr(a, b).statistic for a, b in zip(f, q) if a.std() > 0 and b.std() > 0]
        assert rs and np.mean(rs) > 0.9
    with pytest.raises(SnapuqError, match="stage heads"):
        stage_scores("uncert_stagehead", st[0], trained, 0, 0.9)


def test_token_projection_is_the_downsampling_of_a_lone_token(trained):
    """project_tokens: a stage-0 token carried through its own 2×2 tap + BN equals the downsampling
    of a state in which it is the only spiking token; the last stage is left as it is."""
    cfg = trained.cfg
    rng = np.random.default_rng(0)
    z = np.full((3, cfg.T, 16, 8), -5.0, np.float32)  # silent everywhere
    i = 6  # grid (1, 2): window (0, 1), tap (1, 0)
    z[:, :, i] = rng.normal(1.5, 1.0, (3, cfg.T, 8))
    got = project_tokens(trained, z, 0)[:, :, i]
    want = np.asarray(trained.downs[0](z))[:, :, 1]  # parent of token 6 on the 2×2 grid
    np.testing.assert_allclose(got, want, atol=1e-4)
    z1 = rng.normal(size=(2, cfg.T, 4, 16)).astype(np.float32)
    np.testing.assert_array_equal(project_tokens(trained, z1, 1), z1)
    lg = hier_token_logits(trained, z1, 1)
    w, b = (np.asarray(v) for v in trained.head.weights)
    np.testing.assert_allclose(lg, lif_numpy(z1, cfg.tau, cfg.v_th) @ w + b, atol=1e-5)


def test_resume_gives_the_same_weights_as_an_unbroken_run(digits, tmp_path):
    x, y, _, _ = digits
    x, y = x[:96], y[:96]
    opts = TrainOptions(epochs=2, batch_size=32, lr=5e-3, schedule="cosine", augment="shift")
    quiet = {"log": lambda *_: None}
    a, ha = train_hier(_cfg(), x, y, opts, seed=0, ckpt_dir=str(tmp_path / "a"), identity={"t": 1},
                       resume=False, **quiet)
    b1, hb = train_hier(_cfg(), x, y, opts, seed=0, ckpt_dir=str(tmp_path / "b"), identity={"t": 1},
                        resume=False, stop_after=1, **quiet)
    assert len(hb) == 1
    logs = []
    b, hb = train_hier(_cfg(), x, y, opts, seed=0, ckpt_dir=str(tmp_path / "b"), identity={"t": 1},
                       resume=True, log=logs.append)
    assert "after epoch 1 of 2" in logs[0] and [r["epoch"] for r in hb] == [1, 2]
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    with pytest.raises(SnapuqError, match="another run"):
        train_hier(_cfg(), x, y, opts, seed=0, ckpt_dir=str(tmp_path / "b"), identity={"t": 2},
                   resume=True, **quiet)


def test_cli_hier_writes_the_report(tmp_path, capsys):
    out = tmp_path / "rep"
    args = ["tokens", "eval", "--arch", "hier", "--dataset", "digits", "--out", str(out), "--epochs", "2",
            "--dims", "8,16", "--depths", "1,1", "--stage-heads", "2,2", "--stem", "4", "--rhos", "1.0,0.5",
            "--random-seeds", "2", "--max-train", "192", "--max-test", "48", "--batch", "32"]
    assert main(args + ["--train-only", "--stop-after", "1"]) == 0
    assert "trained 1 epochs" in capsys.readouterr().out
    assert main(args + ["--resume"]) == 0  # goes on from epoch 1, then sweeps
    assert "Uncert prune ρ=0.8" not in capsys.readouterr().out
    rep = json.loads((out / "tokens.json").read_text())
    assert rep["arch"] == "hier" and rep["epochs_done"] == 2 and rep["tokens_per_stage"] == [16, 4]
    assert rep["keep_counts"] == {"1.0": [16, 4], "0.5": [8, 2]}
    for mode, rows in rep["results"].items():
        for c, r in rows.items():
            assert r["1.0"]["acc"] == rep["accuracy_full"] and 0 <= r["0.5"]["acc"] <= 1, (mode, c)
    assert set(rep["results"]["prune"]) == set(PRUNE_ROWS)
    assert rep["results"]["prune"]["random"]["0.5"]["n"] == 2
    assert rep["results"]["prune"]["uncert"]["0.5"]["block_sops"] < rep["block_sops_full"]
    for f in ("tokens.md", "accuracy_prune.png", "accuracy_merge.png", "sops.png", "ablation.png",
              "model.weights.h5", "checkpoint/state.json"):
        assert os.path.getsize(out / f) > 0, f
    assert "ρ=0.5 (K=8/2)" in (out / "tokens.md").read_text()
    # hier-only options without --arch hier, and --block with it, are one-line errors
    assert main(["tokens", "eval", "--dataset", "digits", "--out", str(out), "--dims", "8,16"]) == 1
    assert main(args + ["--block", "0"]) == 1
    assert "Traceback" not in capsys.readouterr().err
