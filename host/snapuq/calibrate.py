"""Fit the SNAP scoring constants and the logistic map U on the dev split (see snapuq.score for the
formulas and the calib.json layout).

- "best" (default, DESIGN §4): per-tap two-sided standardized NLL (ID mean/sd from clean dev), uniform
  weights, hinge F = max(0, (S - q)/sd) with q the 99.5th percentile of clean dev S, coefficients b1, b2 >= 0
  fitted on dev correct (0) / wrong (1) plus one held-out synthetic shift family (1) disjoint from the
  evaluated corruptions (`holdout_shift`).
- "literal" (the paper's recipe, kept for the ablation): s_l = ebar_l, inverse-variance weights,
  unconstrained logistic on S and m fitted on dev correct/wrong.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from snapuq.score import SnapScorer, confidence_proxy, per_tap_stat, sigmoid, softmax, tap_stats


def holdout_shift(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """The calibration-only shift family: tiles of the image (2x2 pixel blocks, a 4x4 grid on 8x8 inputs)
    are permuted at random and mixed with uniform noise. No evaluated corruption (noise, blur, affine,
    contrast, weather, ...) permutes spatial blocks, so the evaluated shifts stay unseen by the fit."""
    rng = np.random.default_rng(seed + 104729)
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        return _holdout_shift_1d(x, rng)
    n, h, w, c = x.shape
    b = 2 if min(h, w) <= 16 else 4
    gh, gw = h // b, w // b
    out = x.copy()
    for i in range(n):
        t = (
            out[i, : gh * b, : gw * b]
            .reshape(gh, b, gw, b, c)
            .transpose(0, 2, 1, 3, 4)
            .reshape(gh * gw, b, b, c)
        )
        t = t[rng.permutation(gh * gw)]
        out[i, : gh * b, : gw * b] = (
            t.reshape(gh, gw, b, b, c).transpose(0, 2, 1, 3, 4).reshape(gh * b, gw * b, c)
        )
    lam = 0.3
    out = (1 - lam) * out + lam * rng.uniform(0, 1, size=out.shape).astype(np.float32)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _holdout_shift_1d(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The same family for sensor windows (N, T, C) and feature vectors (N, F): blocks of the time (feature)
    axis (8 blocks) permuted at random and mixed with uniform noise over each channel's range. No sensor
    corruption (noise, spikes, drift, gain, dropout, warp, axis rotation) permutes time blocks."""
    shape = x.shape
    x3 = x.reshape(shape[0], shape[1], -1)
    n, t, _ = x3.shape
    nb = max(2, min(8, t // 2))
    b = t // nb
    out = x3.copy()
    for i in range(n):
        blocks = out[i, : nb * b].reshape(nb, b, -1)[rng.permutation(nb)]
        out[i, : nb * b] = blocks.reshape(nb * b, -1)
    lo, hi = x3.min(axis=(0, 1)), x3.max(axis=(0, 1))
    lam = 0.3
    out = (1 - lam) * out + lam * rng.uniform(lo, hi, size=out.shape)
    return out.reshape(shape).astype(np.float32)


def fit_logistic(X: np.ndarray, y: np.ndarray, nonneg: bool, l2: float = 1e-3) -> np.ndarray:
    """Weighted (balanced) logistic regression by L-BFGS-B; X (N, k) without intercept. Returns [b0, b...];
    with nonneg the slopes are bounded below by 0."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    mu, sd = X.mean(0), X.std(0) + 1e-12
    Xs = (X - mu) / sd
    pos = max(y.sum(), 1.0)
    neg = max(len(y) - y.sum(), 1.0)
    wts = np.where(y > 0, 0.5 / pos, 0.5 / neg)

    def f(b):
        z = b[0] + Xs @ b[1:]
        lz = np.logaddexp(0, z)
        loss = np.sum(wts * (lz - y * z)) + l2 * np.sum(b[1:] ** 2)
        p = sigmoid(z)
        g = np.r_[np.sum(wts * (p - y)), Xs.T @ (wts * (p - y)) + 2 * l2 * b[1:]]
        return loss, g

    k = X.shape[1]
    bounds = [(None, None)] + [((0.0, None) if nonneg else (None, None))] * k
    r = minimize(f, np.zeros(k + 1), jac=True, method="L-BFGS-B", bounds=bounds)
    b = r.x
    slopes = b[1:] / sd
    return np.r_[b[0] - np.sum(slopes * mu), slopes]


def _auroc(score: np.ndarray, pos: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    pos = np.asarray(pos, bool)
    if pos.all() or not pos.any():
        return float("nan")
    return float(roc_auc_score(pos, score))


def fit_calibration(
    outs_dev: dict,
    y_dev: np.ndarray,
    outs_shift: dict,
    *,
    eps: float,
    logvar_offset: float,
    taps_meta: list[dict],
    alpha: float = 0.5,
    quantile: float = 0.995,
    u_flag_rate: float = 0.05,
) -> dict:
    """Return the calib.json dict (best variant at top level, literal under "variants")."""
    y_dev = np.asarray(y_dev).astype(np.int64)
    probs_dev = outs_dev["probs"] if "probs" in outs_dev else softmax(outs_dev["logits"])
    err_dev = probs_dev.argmax(1) != y_dev
    ok = ~err_dev
    eb, lb = tap_stats(outs_dev)
    L = eb.shape[1]
    msp_u = 1.0 - probs_dev.max(1)

    # ---- best: two-sided standardized per-tap NLL, uniform weights, hinge, non-negative logistic
    taps = []
    for k in range(L):
        t = {**taps_meta[k], "c_e": 0.5, "c_l": 0.5, "two_sided": True}
        y = per_tap_stat(eb[:, k : k + 1], lb[:, k : k + 1], [t])[:, 0]
        ref = y[ok] if ok.sum() >= 10 else y
        t["mean"] = float(np.mean(ref))
        t["sd"] = float(np.std(ref) + 1e-6)
        taps.append(t)
    best = {
        "variant": "best",
        "eps": eps,
        "logvar_offset": logvar_offset,
        "taps": taps,
        "weighting": "uniform",
        "weights": [1.0 / L] * L,
        "conf": {"kind": "msp_margin", "alpha": alpha},
        "hinge": None,
        "beta": [0.0, 1.0, 0.0],
        "nonneg": True,
    }
    sc = SnapScorer(best)
    f_dev = sc.features(outs_dev)
    S_clean = f_dev["S"][ok] if ok.sum() >= 10 else f_dev["S"]
    # DESIGN §4: U must not fall below MSP on dev correct/wrong; if it does by more than 0.005, raise q
    auroc_msp = _auroc(msp_u, err_dev)
    tried = []
    for qq in [quantile] + [v for v in (0.999, 1.0) if v > quantile]:
        q = float(np.quantile(S_clean, qq))
        best["hinge"] = {"q": q, "sd": float(np.std(S_clean) + 1e-6), "quantile": qq}
        f_dev = sc.features(outs_dev)
        f_sh = sc.features(outs_shift)
        X = np.r_[np.c_[f_dev["F"], f_dev["m"]], np.c_[f_sh["F"], f_sh["m"]]]
        yb = np.r_[err_dev.astype(float), np.ones(len(f_sh["F"]))]
        best["beta"] = [float(v) for v in fit_logistic(X, yb, nonneg=True)]
        u_dev = sc.score(outs_dev)["U"]
        gap = _auroc(u_dev, err_dev) - auroc_msp
        tried.append({"quantile": qq, "q": q, "dev_U_minus_msp": gap})
        if not gap < -0.005:  # nan (no dev errors) also stops here
            break
    best["u_threshold"] = float(np.quantile(u_dev[ok] if ok.any() else u_dev, 1.0 - u_flag_rate))
    best["fit"] = {
        "n_dev": int(len(y_dev)),
        "n_dev_errors": int(err_dev.sum()),
        "n_shift": int(len(f_sh["F"])),
        "shift_family": "holdout_shift (permuted 2x2 tiles + uniform noise)",
        "hinge_quantiles_tried": tried,
        "dev_auroc_U_ok_vs_err": _auroc(u_dev, err_dev),
        "dev_auroc_msp_ok_vs_err": _auroc(msp_u, err_dev),
        "dev_auroc_S_ok_vs_err": _auroc(f_dev["S"], err_dev),
        "shift_auroc_S": _auroc(
            np.r_[f_dev["S"], f_sh["S"]], np.r_[np.zeros(len(u_dev)), np.ones(len(f_sh["S"]))]
        ),
        "per_tap_shift_auroc": [
            _auroc(
                np.r_[f_dev["s"][:, k], f_sh["s"][:, k]], np.r_[np.zeros(len(u_dev)), np.ones(len(f_sh["S"]))]
            )
            for k in range(L)
        ],
    }
    best["fit"]["dev_U_minus_msp"] = (
        best["fit"]["dev_auroc_U_ok_vs_err"] - best["fit"]["dev_auroc_msp_ok_vs_err"]
    )

    # ---- literal: ebar, inverse-variance weights, unconstrained logistic on dev correct/wrong
    ltaps = [
        {**taps_meta[k], "c_e": 1.0, "c_l": 0.0, "two_sided": False, "mean": 0.0, "sd": 1.0} for k in range(L)
    ]
    var = np.var(eb[ok] if ok.sum() >= 10 else eb, axis=0) + 1e-12
    w = (1.0 / var) / np.sum(1.0 / var)
    lit = {
        "variant": "literal",
        "eps": eps,
        "logvar_offset": logvar_offset,
        "taps": ltaps,
        "weighting": "inverse_variance",
        "weights": [float(v) for v in w],
        "conf": {"kind": "msp_margin", "alpha": alpha},
        "hinge": None,
        "beta": [0.0, 1.0, 0.0],
        "nonneg": False,
    }
    fl = SnapScorer(lit).features(outs_dev)
    lit["beta"] = [
        float(v) for v in fit_logistic(np.c_[fl["S"], fl["m"]], err_dev.astype(float), nonneg=False)
    ]
    ul = SnapScorer(lit).score(outs_dev)["U"]
    lit["u_threshold"] = float(np.quantile(ul[ok] if ok.any() else ul, 1.0 - u_flag_rate))
    lit["fit"] = {
        "dev_auroc_U_ok_vs_err": _auroc(ul, err_dev),
        "dev_auroc_S_ok_vs_err": _auroc(fl["S"], err_dev),
    }
    best["version"] = 1
    best["variants"] = {"literal": lit}
    return best


__all__ = ["fit_calibration", "fit_logistic", "holdout_shift", "confidence_proxy"]
