"""SNAP losses, variance floor, detach, and the scoring identities of DESIGN §4."""

import math

import numpy as np
import pytest
from scipy.spatial.distance import mahalanobis
from scipy.stats import norm

from snapuq.uq import score


def test_gaussian_nll_matches_closed_form():
    from snapuq.nn.heads import gaussian_nll

    rng = np.random.default_rng(0)
    a, mu = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    lv = rng.normal(size=(5, 7))
    got = np.asarray(gaussian_nll(a, mu, lv))
    ref = -norm.logpdf(a, mu, np.exp(0.5 * lv)).sum(1) - 0.5 * 7 * np.log(2 * np.pi)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    np.testing.assert_allclose(
        score.tap_nll(a, mu, lv), -norm.logpdf(a, mu, np.exp(0.5 * lv)).sum(1), rtol=1e-10
    )


def test_student_t_and_huber_reduce_sensibly():
    from snapuq.nn.heads import gaussian_nll, huber_nll, student_t_nll

    a = np.zeros((1, 3), np.float32)
    mu = np.array([[0.1, -0.2, 5.0]], np.float32)
    lv = np.zeros((1, 3), np.float32)
    # small residuals: Huber == Gaussian; the outlier costs Huber and Student-t less than Gaussian
    g, h, t = (float(np.asarray(f(a, mu, lv))[0]) for f in (gaussian_nll, huber_nll, student_t_nll))
    assert h < g and t < g
    small = np.asarray(huber_nll(a[:, :2], mu[:, :2], lv[:, :2]))
    np.testing.assert_allclose(small, np.asarray(gaussian_nll(a[:, :2], mu[:, :2], lv[:, :2])), rtol=1e-6)


@pytest.mark.parametrize("floor", ["hard", "softplus"])
def test_variance_floor(floor):
    from snapuq.nn.heads import floor_logvar

    eps = 0.05
    raw = np.linspace(-50, 5, 200).astype(np.float32)
    lv = np.asarray(floor_logvar(raw, eps, floor))
    assert np.all(lv >= 2 * math.log(eps) - 1e-5)
    assert lv[0] == pytest.approx(2 * math.log(eps), abs=1e-4)
    assert np.all(np.diff(lv) >= -1e-6)  # monotone in the raw output
    with pytest.raises(ValueError):
        floor_logvar(raw, eps, "nope")


def _tiny_snap(detach):
    import keras

    from snapuq.nn import heads as snap
    from snapuq.nn.backbones.cnn import TAP_PREV, build_cnn4

    keras.utils.set_random_seed(0)
    bb = build_cnn4((8, 8, 1), 10, width=4, feat_dim=8)
    m = snap.add_heads(bb, ["relu1", "relu3"], TAP_PREV, rank=4, detach=detach)
    return bb, m, snap.SnapTrainer(m, 2, lambda_ss=1.0, lambda_reg=0.0, detach=detach, ce_weight=0.0)


@pytest.mark.parametrize("detach", [True, False])
def test_detach_stops_the_gradient_into_the_backbone(detach):
    import tensorflow as tf

    bb, m, tr = _tiny_snap(detach)
    x = np.random.default_rng(1).uniform(size=(6, 8, 8, 1)).astype(np.float32)
    y = np.arange(6) % 10
    conv = bb.get_layer("conv3").kernel  # feeds only the second tap's target (relu3) and the classifier
    with tf.GradientTape() as tape:
        total, ce, nll, _ = tr.losses_for(x, y, True)
    g = tape.gradient(total, conv)
    if detach:
        assert g is None or float(tf.reduce_max(tf.abs(g))) == 0.0
    else:
        assert g is not None and float(tf.reduce_max(tf.abs(g))) > 0.0
    # the heads always get a gradient
    hk = m.get_layer("tap1_mu").kernel
    with tf.GradientTape() as tape:
        total, *_ = tr.losses_for(x, y, True)
    assert float(tf.reduce_max(tf.abs(tape.gradient(total, hk)))) > 0.0


def test_snap_score_is_affine_in_the_gaussian_nll():
    """Prop 2.1: for fixed sigma, d * ebar = 2 NLL - sum log sigma^2 - d log 2pi."""
    rng = np.random.default_rng(2)
    d = 9
    mu, lv = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    a = rng.normal(size=(50, d))
    eb = score.tap_ebar(a, np.repeat(mu, 50, 0), np.repeat(lv, 50, 0))
    nll = score.tap_nll(a, np.repeat(mu, 50, 0), np.repeat(lv, 50, 0))
    slope, icpt = np.polyfit(nll, eb, 1)
    np.testing.assert_allclose(eb, slope * nll + icpt, atol=1e-10)
    assert slope == pytest.approx(2.0 / d)
    assert icpt == pytest.approx(-(lv.sum() + d * np.log(2 * np.pi)) / d)


def test_snap_score_is_a_diagonal_mahalanobis_distance():
    """Prop 2.2: d * ebar = (a - mu)^T diag(sigma^2)^-1 (a - mu)."""
    rng = np.random.default_rng(3)
    a, mu, lv = rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    eb = score.tap_ebar(a, mu, lv)
    for i in range(4):
        vi = np.diag(np.exp(-lv[i]))
        assert 6 * eb[i] == pytest.approx(mahalanobis(a[i], mu[i], vi) ** 2)


def test_snap_score_is_invariant_to_per_channel_rescaling():
    """Prop 2.3: a BN-style per-channel rescaling a -> D a with the head refitted (mu -> D mu,
    sigma -> D sigma, i.e. log sigma^2 -> log sigma^2 + 2 log D) leaves ebar unchanged."""
    rng = np.random.default_rng(4)
    a, mu, lv = rng.normal(size=(10, 5)), rng.normal(size=(10, 5)), rng.normal(size=(10, 5))
    D = rng.uniform(0.1, 10, size=5)
    np.testing.assert_allclose(score.tap_ebar(D * a, D * mu, lv + 2 * np.log(D)), score.tap_ebar(a, mu, lv))


def test_confidence_proxy():
    p = np.array([[0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3]])
    m = score.confidence_proxy(p, 0.5)
    assert m[0] == pytest.approx(0.5 * 0.3 + 0.5 * 0.5)
    assert m[1] == pytest.approx(0.5 * (2 / 3) + 0.5 * 1.0)
    np.testing.assert_allclose(score.confidence_proxy(p, 1.0), 1 - p.max(1))


def test_m_ranks_like_msp_on_confident_inputs():
    """SNAP's m(x) and the MSP baseline use the same float64 1 - p1 (sum of the other probabilities from the
    logits): inputs at MSP 1 - 1e-9 and 1 - 1e-12 stay apart (the float32 "probs" output rounds both to 1),
    so U = p_err(m) has exactly MSP's correct-vs-wrong AUROC where no alarm fires (the dev check's
    guarantee, identical in train, calibrate and eval)."""
    from snapuq.baselines.methods import MSP
    from snapuq.uq.calibration import dev_check

    rng = np.random.default_rng(0)
    n = 400
    logits = rng.normal(size=(n, 5))
    logits[:, 0] += rng.uniform(15, 30, n)  # p1 between 1 - 1e-6 and 1 - 1e-13
    probs32 = score.softmax(logits).astype(np.float32)
    assert (probs32.max(1) == 1.0).mean() > 0.5  # float32 ties most of them
    outs = {"logits": logits, "probs": probs32}
    m = score.confidence_proxy(score.class_probs(outs), 1.0)
    assert len(np.unique(m)) == n
    msp = MSP().score(None, None, outs).u
    np.testing.assert_array_equal(m, msp)
    err = rng.uniform(size=n) < 1 / (1 + np.exp(np.log(m) + 20))  # errors likelier at larger m
    err[:3] = True
    knots = np.linspace(0.01, 0.9, 257)  # any strictly increasing p_err map
    chk = dev_check(score.perr_map(knots, m), msp, err)
    assert chk["ok"] and chk["delta"] == 0.0
