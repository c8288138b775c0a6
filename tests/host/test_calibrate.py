import numpy as np
import pytest

from snapuq.errors import SnapuqError
from snapuq.uq import calibration as calibrate
from snapuq.uq import score


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
    assert cal["variant"] == "best" and "literal" in cal["variants"] and cal["version"] == 2
    knots = np.asarray(cal["perr"]["knots"])
    assert knots.shape == (257,) and np.all(np.diff(knots) > 0) and 0 <= knots[0] and knots[-1] <= 1
    assert cal["alarm"]["k"] > 0
    sc = score.SnapScorer.from_calib(cal)
    r_id, r_sh = sc.score(od), sc.score(osh)
    # the held-out shift is detected and the hinge keeps most clean S at F = 0
    assert np.mean(r_sh["U"]) > np.mean(r_id["U"]) and np.mean(r_sh["alarm"]) > 0.5
    assert np.mean(r_id["F"] == 0) > 0.9
    # U = p_err + alarm (1 - p_err): equal to p_err without surprisal, never below it
    np.testing.assert_array_equal(r_id["U"][r_id["F"] == 0], r_id["p_err"][r_id["F"] == 0])
    assert np.all(r_sh["U"] >= r_sh["p_err"]) and np.all(r_sh["alarm"][r_sh["F"] > 0] > 0)
    # the shared dev check passes (by construction for alpha = 1) and is what the fit recorded
    last = cal["fit"]["hinge_quantiles_tried"][-1]
    assert last["quantile"] == cal["hinge"]["quantile"] and last["q"] == cal["hinge"]["q"]
    chk = calibrate.dev_check(r_id["U"], 1 - od["probs"].max(1), od["probs"].argmax(1) != y)
    assert chk["ok"] and chk["delta"] >= 0 and cal["fit"]["dev_check"]["ok"]
    assert abs(cal["fit"]["dev_U_minus_msp"] - chk["delta"]) < 1e-12
    # p_err ranks dev inputs exactly like MSP (a strictly increasing map of 1 - MSP)
    err = od["probs"].argmax(1) != y
    assert calibrate._auroc(r_id["p_err"], err) == calibrate._auroc(1 - od["probs"].max(1), err)
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


def test_dev_check_guarantee_at_the_top_quantile():
    """Even when S flags many correct dev inputs (S unrelated to errors), raising q to the largest S of a
    correct dev input makes U - MSP >= 0 on dev; the steps tried are recorded and the knob is --hinge-q."""
    rng = np.random.default_rng(4)
    od = _outs(300, rng)
    y = od["logits"].argmax(1).copy()
    y[:40] = (y[:40] + 1) % 4
    for k in range(2):  # heavy-tailed surprisal on correct inputs only
        od[f"tap{k}_a"][40:80] += rng.normal(size=(40, 6)) * 6
    osh = _outs(100, rng, shift=1.5)
    meta = [{"name": f"tap{k}", "layer": f"l{k}", "prev": f"p{k}", "d": 6, "d_prev": 6} for k in range(2)]
    cal = calibrate.fit_calibration(
        od, y, osh, eps=0.01, logvar_offset=2 * np.log(0.01), taps_meta=meta, quantile=0.9
    )
    tried = cal["fit"]["hinge_quantiles_tried"]
    assert tried[0]["quantile"] == 0.9 and tried[0]["dev_U_minus_msp"] < 0
    assert cal["fit"]["dev_check"]["ok"] and tried[-1]["dev_U_minus_msp"] >= 0
    lab = np.r_[[1] * 5, [0] * 5] == 0
    bad = calibrate.dev_check(np.r_[np.ones(5), np.zeros(5)], np.r_[np.zeros(5), np.ones(5)], lab)
    assert not bad["ok"] and "--hinge-q" in bad["hint"] and "--alpha" in bad["hint"]
    with pytest.raises(SnapuqError):
        calibrate.fit_calibration(od, y, osh, eps=0.01, logvar_offset=0.0, taps_meta=meta, quantile=0.2)


def test_hinge_reference_pools_clean_train_inputs():
    """The hinge sits at the largest S of the clean reference (correct dev + correct train inputs): with a
    train reference it is at least the dev-only hinge, misclassified train inputs are left out, unlabelled
    ones (label < 0) kept, and the dev check still holds by construction."""
    rng = np.random.default_rng(5)
    od = _outs(300, rng)
    y = od["logits"].argmax(1).copy()
    y[:30] = (y[:30] + 1) % 4
    osh = _outs(100, rng, shift=1.5)
    otr = _outs(600, rng)
    ytr = otr["logits"].argmax(1).copy()
    for k in range(2):  # three far-out train inputs: one misclassified, one unlabelled, one correct
        otr[f"tap{k}_a"][:3] += np.array([[30.0], [20.0], [10.0]])
    ytr[0] = (ytr[0] + 1) % 4
    ytr[1] = -1
    meta = [{"name": f"tap{k}", "layer": f"l{k}", "prev": f"p{k}", "d": 6, "d_prev": 6} for k in range(2)]
    kw = {"eps": 0.01, "logvar_offset": 2 * np.log(0.01), "taps_meta": meta}
    kw["quantile"] = 1.0
    dev_only = calibrate.fit_calibration(od, y, osh, **kw)
    pooled = calibrate.fit_calibration(od, y, osh, **kw, outs_ref=otr, y_ref=ytr)
    assert dev_only["hinge"]["reference"] == "dev" and pooled["hinge"]["reference"] == "dev+train"
    assert dev_only["hinge"]["quantile"] == pooled["hinge"]["quantile"] == 1.0
    S_tr = score.SnapScorer.from_calib(pooled).features(otr)["S"]
    assert pooled["hinge"]["q"] == pytest.approx(S_tr[1]) and S_tr[0] > S_tr[1] > S_tr[2]
    assert pooled["hinge"]["q"] > dev_only["hinge"]["q"]
    assert pooled["hinge"]["sd"] == dev_only["hinge"]["sd"]  # F's scale stays the clean dev spread
    assert pooled["fit"]["hinge_reference"]["train_clean"] == 599  # all but the misclassified one
    assert pooled["fit"]["dev_check"]["ok"]
    no_labels = calibrate.fit_calibration(od, y, osh, **kw, outs_ref=otr)
    assert no_labels["hinge"]["q"] == pytest.approx(S_tr[0])
    with pytest.raises(SnapuqError, match="reference labels"):
        calibrate.fit_calibration(od, y, osh, **kw, outs_ref=otr, y_ref=ytr[:10])
    default = calibrate.fit_calibration(od, y, osh, **{**kw, "quantile": None}, outs_ref=otr, y_ref=ytr)
    assert default["hinge"]["quantile"] == 0.999 and default["fit"]["dev_check"]["ok"]
    # conformal quantile: the ceil((n + 1) level)-th smallest, the largest beyond n
    v = np.arange(1.0, 101.0)[::-1]
    assert calibrate.conformal_quantile(v, 0.9) == 91.0 and calibrate.conformal_quantile(v, 0.995) == 100.0
    assert calibrate.conformal_quantile(v, 1.0) == 100.0 and calibrate.conformal_quantile(v, 0.0) == 1.0
    xr, yr = calibrate.reference_split(np.zeros((12, 2)), np.arange(12), seed=0, n_max=5)
    assert xr.shape == (5, 2) and list(yr) == sorted(yr) and calibrate.reference_split(None)[0] is None


def test_perr_is_calibrated_on_a_known_model():
    """p_err recovers P(wrong | m) when errors are drawn from a known increasing curve."""
    rng = np.random.default_rng(2)
    m = rng.beta(0.5, 6, size=20000)
    true = 1 / (1 + np.exp(-(-4.0 + 9.0 * m)))
    err = rng.uniform(size=m.size) < true
    fit = calibrate.fit_perr(m, err)
    pe = score.perr_map(fit["knots"], m)
    from snapuq.uq import metrics as M

    assert M.ece(1 - pe, ~err) < 0.01
    assert np.max(np.abs(pe - true)[m < 0.6]) < 0.05


def test_tail_quantile_extrapolates_below_one_over_n():
    """From 1/(n + 1) up the conformal quantile; below, the exponential tail of the top 2 % beyond the
    largest score, close to the true quantile of an exponential sample; monotone in the rate."""
    s = np.random.default_rng(0).exponential(1.0, size=5000)
    q, rec = calibrate.tail_quantile(s, 0.05)
    assert rec["rule"] == "conformal" and q == calibrate.conformal_quantile(s, 0.95)
    for rate in (1e-4, 1e-6):
        q, rec = calibrate.tail_quantile(s, rate)
        assert rec["rule"] == "exponential tail" and rec["k"] == 100 and q >= s.max()
        assert abs(q + np.log(rate)) < 0.1 * -np.log(rate)  # the exponential's own quantile: -ln(rate)
    qs = [calibrate.tail_quantile(s, r)[0] for r in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)]
    assert np.all(np.diff(qs) > 0)
    assert calibrate.tail_quantile(np.ones(100), 1e-6)[0] == 1.0  # no spread: the largest
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(SnapuqError, match="alarm rate"):
            calibrate.tail_quantile(s, bad)


def test_alarm_rate_sets_the_hinge_beyond_the_clean_reference():
    """alarm_rate below 1/n puts the hinge beyond the largest clean reference S (so the dev check holds at
    the first quantile tried, even 0.9 on heavy-tailed S); it is recorded; None keeps the quantile alone."""
    rng = np.random.default_rng(4)
    od = _outs(300, rng)
    y = od["logits"].argmax(1).copy()
    y[:40] = (y[:40] + 1) % 4
    for k in range(2):
        od[f"tap{k}_a"][40:80] += rng.normal(size=(40, 6)) * 6
    osh = _outs(100, rng, shift=3.0)
    meta = [{"name": f"tap{k}", "layer": f"l{k}", "prev": f"p{k}", "d": 6, "d_prev": 6} for k in range(2)]
    kw = {"eps": 0.01, "logvar_offset": 2 * np.log(0.01), "taps_meta": meta, "quantile": 0.9}
    off = calibrate.fit_calibration(od, y, osh, **kw)
    on = calibrate.fit_calibration(od, y, osh, **kw, alarm_rate=1e-6)
    assert off["hinge"]["alarm_rate"] is None and off["fit"]["alarm_rate"] == 0.0
    assert len(off["fit"]["hinge_quantiles_tried"]) > 1
    h = on["hinge"]
    assert h["alarm_rate"] == 1e-6 and on["fit"]["alarm_rate"] == 1e-6
    assert h["tail"]["rule"] == "exponential tail"
    S = score.SnapScorer.from_calib(on).features(od)["S"]
    assert h["q"] >= S[od["probs"].argmax(1) == y].max() and h["q_over_largest_sd"] >= 0
    assert [t["quantile"] for t in on["fit"]["hinge_quantiles_tried"]] == [0.9]
    assert on["fit"]["dev_check"]["ok"]
    far = _outs(100, rng, shift=30.0)  # a shift far beyond the clean tail still raises the alarm
    assert np.mean(score.SnapScorer.from_calib(on).score(far)["alarm"] > 0) > 0.5
    with pytest.raises(SnapuqError, match="--alarm-rate"):
        calibrate.fit_calibration(od, y, osh, **kw, alarm_rate=0.7)
