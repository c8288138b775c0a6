import numpy as np
import pytest

from snapuq import calibrate, score
from snapuq.errors import SnapuqError


def test_fit_logistic_recovers_signs_and_respects_bounds():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    z = 0.5 + 2.0 * X[:, 0] - 1.5 * X[:, 1]
    y = (rng.uniform(size=2000) < score.sigmoid(z)).astype(float)
    b = calibrate.fit_logistic(X, y, nonneg=False)
    assert b[1] > 1.0 and b[2] < -0.8
    bn = calibrate.fit_logistic(X, y, nonneg=True)
    assert bn[1] > 1.0 and bn[2] >= 0.0 and abs(bn[2]) < 1e-6


def _outs(n, rng, shift=0.0, L=2, d=6, C=4):
    o = {"logits": rng.normal(size=(n, C)) * 3}
    for k in range(L):
        o[f"tap{k}_mu"] = rng.normal(size=(n, d))
        o[f"tap{k}_logvar"] = np.full((n, d), -0.5)
        o[f"tap{k}_a"] = o[f"tap{k}_mu"] + rng.normal(size=(n, d)) * np.exp(-0.25) * (1 + shift)
    o["probs"] = score.softmax(o["logits"])
    return o


def test_calibration_best_and_literal_variants():
    rng = np.random.default_rng(1)
    od = _outs(400, rng)
    y = od["logits"].argmax(1).copy()
    y[:60] = (y[:60] + 1) % 4  # some errors
    osh = _outs(200, rng, shift=1.5)
    meta = [{"name": f"tap{k}", "layer": f"l{k}", "prev": f"p{k}", "d": 6, "d_prev": 6} for k in range(2)]
    cal = calibrate.fit_calibration(od, y, osh, eps=0.01, logvar_offset=2 * np.log(0.01), taps_meta=meta)
    assert cal["variant"] == "best" and "literal" in cal["variants"]
    assert cal["beta"][1] >= 0 and cal["beta"][2] >= 0
    sc = score.SnapScorer.from_calib(cal)
    r_id, r_sh = sc.score(od), sc.score(osh)
    # the held-out shift is detected and the hinge keeps most clean S at F = 0
    assert np.mean(r_sh["U"]) > np.mean(r_id["U"])
    assert np.mean(r_id["F"] == 0) > 0.9
    # the hinge rule: U is not more than 0.005 below MSP on dev correct/wrong, or q went up to the maximum
    last = cal["fit"]["hinge_quantiles_tried"][-1]
    assert last["quantile"] == cal["hinge"]["quantile"] and last["q"] == cal["hinge"]["q"]
    assert last["dev_U_minus_msp"] >= -0.005 or last["quantile"] == 1.0
    assert abs(cal["fit"]["dev_U_minus_msp"] - last["dev_U_minus_msp"]) < 1e-12
    lit = score.SnapScorer.from_calib(cal, "literal").score(od)
    assert lit["U"].shape == (400,)
    np.testing.assert_allclose(np.sum(cal["variants"]["literal"]["weights"]), 1.0)
    with pytest.raises(SnapuqError):
        score.SnapScorer.from_calib(cal, "nope")


def test_holdout_shift_is_deterministic_and_in_range():
    x = np.random.default_rng(0).uniform(size=(5, 8, 8, 1)).astype(np.float32)
    a, b = calibrate.holdout_shift(x, 3), calibrate.holdout_shift(x, 3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == x.shape and a.min() >= 0 and a.max() <= 1
    assert not np.allclose(a, x)
