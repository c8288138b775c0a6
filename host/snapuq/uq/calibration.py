"""Fit the SNAP scoring constants and the map to U on the dev split (see snapuq.uq.score for the formulas and
the calib.json layout).

- "best" (default, DESIGN §4; calib version 2): per-tap two-sided standardized NLL (ID mean/sd from clean
  dev), uniform weights, hinge F = max(0, (S - q)/sd) with q the conformal 99.9th percentile of the clean
  reference S (correct dev inputs + correct train inputs, at most `REF_MAX` of them), and two outputs:
  p_err, a calibrated strictly increasing function of the confidence term m(x) (a non-negative
  logistic on [ln(m + 1/512), m], fitted unweighted on dev correct (0) / wrong (1), tabulated on 257 knots),
  and alarm = F / (F + k), k fitted by likelihood on dev correct/wrong plus one held-out synthetic shift
  family (1) disjoint from the evaluated corruptions (`holdout_shift`). U = p_err + alarm (1 - p_err).
  U equals p_err while S <= q, so on inputs without surprisal it ranks exactly like m(x) (= MSP for
  alpha = 1, the default), and the surprisal can only raise it.
- "literal" (the paper's recipe, kept for the ablation): s_l = ebar_l, inverse-variance weights,
  unconstrained logistic on S and m fitted on dev correct/wrong.

`dev_check` is the one guard train, `snapuq calibrate` and `snapuq eval` run: the dev-set AUROC of U on
correct/wrong must not fall below MSP's. The fit raises q (the quantiles of `HINGE_STEPS`, ending at the
largest clean reference S, at or above the largest S of a correct dev input, where the guarantee holds by
construction) until it passes.
"""

from __future__ import annotations

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.options import CalibOptions
from snapuq.uq.fitting import (
    INTAP_WEIGHT,
    _auroc,
    _ece,
    clean_mean_sd,
    conformal_quantile,
    fit_alarm_k,
    fit_input_tap,
    fit_logistic,
    fit_perr,
    tail_quantile,
)
from snapuq.uq.score import (
    SnapScorer,
    class_probs,
    confidence_proxy,
    one_minus_max,
    per_tap_stat,
    perr_map,
    tap_stats,
)


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


DEV_CHECK_TOL = 0.0
HINGE_STEPS = (0.995, 0.999, 1.0)
HINGE_Q_DEFAULT = 0.999
# `--alarm-rate` default: 0 = the hinge quantile alone (conformal, about 1e-3 false alarms per clean input);
# a lower rate (e.g. 1e-6) extrapolates the tail of the reference S (`tail_quantile`, SNAP_STUDY.md §8.6)
ALARM_RATE_DEFAULT = 0.0
REF_MAX = 5000  # clean train inputs at most in the hinge reference (a seeded subsample beyond)


def best_variant(calib: dict | None) -> dict:
    """The "best" calibration of a calib.json: the top level when it is the default, else its entry under
    "variants" ({} when there is none)."""
    c = calib or {}
    return c if c.get("variant") == "best" else ((c.get("variants") or {}).get("best") or {})


def check_alarm_rate(rate: float | None) -> float | None:
    """`--alarm-rate` as fit_calibration takes it: None for off (None or 0), else a rate in (0, 0.5)."""
    if rate is None or float(rate) == 0.0:
        return None
    if not 0.0 < float(rate) < 0.5:
        raise SnapuqError(f"--alarm-rate must be in [0, 0.5) (0: the hinge quantile alone), got {rate}")
    return float(rate)


def dev_check(u_dev: np.ndarray, msp_u: np.ndarray, err_dev: np.ndarray, tol: float = DEV_CHECK_TOL) -> dict:
    """The dev-set guard (DESIGN §4, one implementation for train, calibrate and eval): AUROC of U on
    correct (0) / wrong (1) minus MSP's must be >= tol. The hint names the knobs that move it."""
    err = np.asarray(err_dev, bool)
    a_u, a_m = _auroc(u_dev, err), _auroc(msp_u, err)
    delta = a_u - a_m
    ok = not (delta < tol - 1e-12)  # nan (no dev errors) passes
    out = {
        "auroc_ok_vs_err_snap": a_u,
        "auroc_ok_vs_err_msp": a_m,
        "delta": delta,
        "tolerance": tol,
        "n_dev": int(len(err)),
        "n_dev_errors": int(err.sum()),
        "ok": bool(ok),
    }
    if not ok:
        out["hint"] = (
            f"dev-set U-MSP AUROC on correct/wrong is {delta:+.4f} < {tol}: recalibrate with a higher hinge "
            "quantile (`snapuq calibrate DIR --hinge-q 1.0`) and/or the plain MSP confidence term "
            "(`--alpha 1`)"
        )
    return out


def fit_calibration(
    outs_dev: dict,
    y_dev: np.ndarray,
    outs_shift: dict,
    *,
    eps: float,
    logvar_offset: float,
    taps_meta: list[dict],
    alpha: float = 1.0,
    quantile: float | None = None,
    u_flag_rate: float = 0.05,
    default_variant: str = "best",
    outs_ref: dict | None = None,
    y_ref: np.ndarray | None = None,
    x_dev: np.ndarray | None = None,
    x_shift: np.ndarray | None = None,
    x_ref: np.ndarray | None = None,
    input_tap: bool = True,
    alarm_rate: float | None = None,
) -> dict:
    """Return the calib.json dict (the default variant at top level, the other one under "variants").

    The hinge q is a quantile of the clean reference S: the S of the correct dev inputs together with, when
    given, the S of `outs_ref` (model outputs on held-in clean inputs, e.g. the train split; with labels
    `y_ref` only the correctly classified ones, labels < 0 = unlabelled, all kept). The quantile is conformal
    (`conformal_quantile`): a clean input like the reference ones raises an alarm with probability at most
    1 - quantile, and a larger reference estimates that tail from more than the few hundred dev inputs.
    quantile: the first hinge quantile tried (default 0.999); the fit raises it along `HINGE_STEPS` until
    `dev_check` passes (1.0 = the largest clean reference S, >= the largest S of a correct dev input:
    passes by construction for alpha = 1). alarm_rate (`--alarm-rate`; None or 0: the quantile alone): q is
    at least `tail_quantile` of the reference at that rate, i.e. beyond its largest S by the fitted tail when
    the rate is below 1 / (n + 1).

    Input tap (docs/FIXED_POINT.md step 4b; `input_tap` and the inputs x_dev, x_shift given): a diagonal
    Gaussian of the inputs' row / column statistics (`snapuq.uq.score.input_summary`) fitted on x_ref (the
    train inputs; the clean dev inputs when there are none), its mean squared z standardized on the clean
    dev inputs, enters S with weight 2 / (L + 2) beside the L taps' 1 / (L + 2) each (SNAP_STUDY.md §7.4)."""
    if not 0.0 <= alpha <= 1.0:
        raise SnapuqError(f"alpha must be in [0, 1], got {alpha}")
    q0 = HINGE_Q_DEFAULT if quantile is None else float(quantile)
    if not 0.5 <= q0 <= 1.0:
        raise SnapuqError(f"hinge quantile must be in [0.5, 1], got {q0}")
    rate = check_alarm_rate(alarm_rate)
    y_dev = np.asarray(y_dev).astype(np.int64)
    probs_dev = class_probs(outs_dev)
    err_dev = probs_dev.argmax(1) != y_dev
    ok = ~err_dev
    eb, lb = tap_stats(outs_dev)
    L = eb.shape[1]
    msp_u = one_minus_max(probs_dev)  # as eval's MSP baseline

    # ---- best: two-sided standardized per-tap NLL, uniform weights, hinge, p_err (m) + alarm (F)
    taps = []
    for k in range(L):
        t = {**taps_meta[k], "c_e": 0.5, "c_l": 0.5, "two_sided": True}
        y = per_tap_stat(eb[:, k : k + 1], lb[:, k : k + 1], [t])[:, 0]
        t["mean"], t["sd"] = clean_mean_sd(y, ok)
        taps.append(t)
    best: dict = {
        "variant": "best",
        "eps": eps,
        "logvar_offset": logvar_offset,
        "taps": taps,
        "weighting": "uniform",
        "weights": [1.0 / L] * L,
        "conf": {"kind": "msp_margin", "alpha": float(alpha)},
        "hinge": None,
        "nonneg": True,
    }
    use_in = bool(input_tap) and x_dev is not None and x_shift is not None
    if use_in:
        best["intap"] = fit_input_tap(x_dev, ok, x_ref, L)
        best["weights"] = [1.0 / (L + INTAP_WEIGHT)] * L
    xs_dev, xs_sh, xs_ref = (x_dev, x_shift, x_ref) if use_in else (None, None, None)
    sc = SnapScorer(best)
    f_dev = sc.features(outs_dev, xs_dev)
    S_clean = f_dev["S"][ok] if ok.sum() >= 10 else f_dev["S"]
    S_ref, n_ref = S_clean, 0
    if outs_ref is not None:
        S_tr = sc.features(outs_ref, xs_ref)["S"]
        if y_ref is not None:
            y_r = np.asarray(y_ref).astype(np.int64).reshape(-1)
            if len(y_r) != len(S_tr):
                raise SnapuqError(f"reference labels ({len(y_r)}) do not match its outputs ({len(S_tr)})")
            pr = class_probs(outs_ref)
            S_tr = S_tr[(y_r < 0) | (pr.argmax(1) == y_r)]
        n_ref = int(len(S_tr))
        S_ref = np.r_[S_clean, S_tr]
    perr = fit_perr(f_dev["m"], err_dev)
    best["perr"] = perr
    steps = [q0] + [v for v in HINGE_STEPS if v > q0]
    tried = []
    q_tail, tail = tail_quantile(S_ref, rate) if rate else (-np.inf, None)
    for qq in steps:
        q = max(conformal_quantile(S_ref, qq), q_tail)
        best["hinge"] = {
            "q": q,
            "sd": float(np.std(S_clean) + 1e-6),
            "quantile": qq,
            "reference": "dev+train" if n_ref else "dev",
            "n_ref": int(len(S_ref)),
            "alarm_rate": rate,
            "tail": tail,
            "q_over_largest_sd": float((q - np.max(S_ref)) / (np.std(S_clean) + 1e-6)),
        }
        f_dev = sc.features(outs_dev, xs_dev)
        f_sh = sc.features(outs_shift, xs_sh)
        pe_dev = perr_map(perr["knots"], f_dev["m"])
        pe_sh = perr_map(perr["knots"], f_sh["m"])
        k = fit_alarm_k(
            np.r_[pe_dev, pe_sh],
            np.r_[f_dev["F"], f_sh["F"]],
            np.r_[err_dev.astype(float), np.ones(len(pe_sh))],
        )
        best["alarm"] = {"k": k, "form": "F / (F + k)"}
        u_dev = sc.score(outs_dev, xs_dev)["U"]
        chk = dev_check(u_dev, msp_u, err_dev)
        tried.append({"quantile": qq, "q": q, "alarm_k": k, "dev_U_minus_msp": chk["delta"]})
        if chk["ok"]:
            break
    best["beta"] = [0.0, 0.0, 0.0]  # unused by version 2 (the logistic form is the literal variant's)
    best["u_threshold"] = _u_threshold(u_dev, ok, u_flag_rate)
    ones = np.ones(len(f_sh["S"]))
    zeros = np.zeros(len(u_dev))
    best["fit"] = {
        "n_dev": int(len(y_dev)),
        "n_dev_errors": int(err_dev.sum()),
        "n_shift": int(len(f_sh["F"])),
        "shift_family": "holdout_shift (permuted 2x2 tiles + uniform noise)",
        "alpha": float(alpha),
        "hinge_quantile_requested": q0,
        "alarm_rate": rate or 0.0,
        "hinge_reference": {"dev_clean": int(len(S_clean)), "train_clean": n_ref},
        "hinge_quantiles_tried": tried,
        "dev_check": chk,
        "dev_auroc_U_ok_vs_err": chk["auroc_ok_vs_err_snap"],
        "dev_auroc_msp_ok_vs_err": chk["auroc_ok_vs_err_msp"],
        "dev_U_minus_msp": chk["delta"],
        "dev_auroc_S_ok_vs_err": _auroc(f_dev["S"], err_dev),
        "shift_auroc_S": _auroc(np.r_[f_dev["S"], f_sh["S"]], np.r_[zeros, ones]),
        "per_tap_shift_auroc": [
            _auroc(np.r_[f_dev["s"][:, k], f_sh["s"][:, k]], np.r_[zeros, ones]) for k in range(L)
        ],
        "dev_ece_p_err": _ece(pe_dev, err_dev),
    }

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
        "conf": {"kind": "msp_margin", "alpha": 0.5},
        "hinge": None,
        "beta": [0.0, 1.0, 0.0],
        "nonneg": False,
    }
    fl = SnapScorer(lit).features(outs_dev)
    lit["beta"] = [
        float(v) for v in fit_logistic(np.c_[fl["S"], fl["m"]], err_dev.astype(float), nonneg=False)
    ]
    ul = SnapScorer(lit).score(outs_dev)["U"]
    lit["u_threshold"] = _u_threshold(ul, ok, u_flag_rate)
    lit["fit"] = {
        "dev_auroc_U_ok_vs_err": _auroc(ul, err_dev),
        "dev_auroc_S_ok_vs_err": _auroc(fl["S"], err_dev),
    }
    best["version"] = 2
    if default_variant == "literal":
        rest = {k: v for k, v in best.items() if k != "version"}
        return {**lit, "version": 2, "variants": {"best": rest}}
    if default_variant != "best":
        raise SnapuqError(f"unknown SNAP variant '{default_variant}' (best, literal)")
    best["variants"] = {"literal": lit}
    return best


# ----------------------------------------------------------------------------------------------
# `snapuq calibrate DIR`: refit calib.json on the dev split without retraining


def _u_threshold(u: np.ndarray, ok: np.ndarray, rate: float) -> float:
    """The U above which a `rate` share of the correct dev inputs (all dev inputs when none is) is flagged."""
    return float(np.quantile(u[ok] if ok.any() else u, 1.0 - rate))


def reference_split(x, y=None, seed: int = 0, n_max: int = REF_MAX):
    """The clean train inputs (and labels) of the hinge reference: all of them, or a seeded subsample of
    n_max. (None, None) when there are none."""
    if x is None or len(x) == 0:
        return None, None
    x = np.asarray(x, np.float32)
    y = None if y is None else np.asarray(y).astype(np.int64).reshape(-1)
    if len(x) > n_max:
        idx = np.sort(np.random.default_rng(seed + 7).choice(len(x), n_max, replace=False))
        x, y = x[idx], (None if y is None else y[idx])
    return x, y


def calibrate(predict, cfg: dict, x_dev: np.ndarray, y_dev: np.ndarray, opts: CalibOptions | None = None, *,
              seed: int = 0, x_ref: np.ndarray | None = None, y_ref: np.ndarray | None = None) -> dict:
    """The SNAP constants (calib.json) fitted on the dev split and the held-out synthetic shift of it, with
    the clean inputs x_ref (the train split; labels y_ref) in the hinge reference. `predict(x) -> dict of
    float outputs` (snapuq.nn.saved.ModelDir.predict, Snap's); cfg: the model's config.json (eps,
    logvar_offset, taps). The one fit `snapuq train`, `snapuq calibrate` and `Snap.calibrate` run."""
    opts = opts or CalibOptions()
    eps = float(cfg.get("eps", 1e-2))
    xdv = np.asarray(x_dev, np.float32)
    od = predict(xdv)
    xsh = holdout_shift(xdv, seed=seed)
    osh = predict(xsh)
    xr, yr = reference_split(x_ref, y_ref, seed)
    return fit_calibration(
        od, np.asarray(y_dev).astype(np.int64), osh, eps=eps,
        logvar_offset=float(cfg.get("logvar_offset", 2.0 * np.log(eps))), taps_meta=cfg["taps"],
        alpha=opts.alpha, quantile=opts.quantile, default_variant=opts.variant,
        outs_ref=None if xr is None else predict(xr), y_ref=yr, x_dev=xdv, x_shift=xsh, x_ref=xr,
        input_tap=opts.input_tap, alarm_rate=opts.alarm_rate,
    )  # fmt: skip


def check_line(chk: dict) -> str:
    """One line for a dev_check result."""
    d = chk.get("delta")
    txt = "n/a (no dev errors)" if d is None or not np.isfinite(d) else f"{d:+.4f}"
    return (
        f"dev check U-MSP AUROC ok/err {txt} (U {chk.get('auroc_ok_vs_err_snap', float('nan')):.4f}, "
        f"MSP {chk.get('auroc_ok_vs_err_msp', float('nan')):.4f}): {'ok' if chk.get('ok') else 'FAILED'}"
    )


__all__ = ["confidence_proxy", "dev_check", "fit_calibration", "fit_logistic", "fit_perr", "holdout_shift"]
