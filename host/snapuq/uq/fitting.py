"""The fitting primitives of the SNAP calibration (snapuq.uq.calibration): the logistic fit, the conformal
and tail quantiles of the hinge, p_err, the alarm's k and the input tap's statistics."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from snapuq.errors import SnapuqError
from snapuq.uq import metrics as M
from snapuq.uq.score import alarm_map, input_summary, input_view, intap_stat, sigmoid

TAIL_FRAC = 0.02  # the top 2 % (at least 20) of the reference S fit the tail
PERR_DELTA = 1.0 / 512
PERR_RAMP = 1e-4
ALARM_K_GRID = tuple(float(v) for v in np.geomspace(0.05, 50.0, 61))
INTAP_WEIGHT = 2.0  # the input tap's weight in S relative to one SNAP tap (docs/SNAP_STUDY.md §7.4)


def fit_logistic(
    X: np.ndarray, y: np.ndarray, nonneg: bool, l2: float = 1e-3, balanced: bool = True
) -> np.ndarray:
    """Logistic regression by L-BFGS-B, class-balanced weights (balanced) or plain likelihood (a calibrated
    probability); X (N, k) without intercept. Returns [b0, b...]; with nonneg the slopes are >= 0."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    mu, sd = X.mean(0), X.std(0) + 1e-12
    Xs = (X - mu) / sd
    pos = max(y.sum(), 1.0)
    neg = max(len(y) - y.sum(), 1.0)
    wts = np.where(y > 0, 0.5 / pos, 0.5 / neg) if balanced else np.full(len(y), 1.0 / max(len(y), 1))

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


def conformal_quantile(s: np.ndarray, level: float) -> float:
    """The ceil((n + 1) level)-th smallest of n scores (the largest when that exceeds n): a fresh score
    exchangeable with them exceeds it with probability at most 1 - level (or 1 / (n + 1) at the top)."""
    v = np.sort(np.asarray(s, np.float64).reshape(-1))
    if v.size == 0:
        raise SnapuqError("no clean reference scores for the hinge")
    k = min(v.size, max(1, int(np.ceil((v.size + 1) * float(level) - 1e-9))))
    return float(v[k - 1])


def tail_quantile(s: np.ndarray, rate: float) -> tuple[float, dict]:
    """(q, record): the level a fresh score exchangeable with the n scores `s` exceeds with probability
    `rate`. For rate >= 1 / (n + 1) it is the conformal quantile 1 - rate (distribution-free). Below, no
    reference score is that rare: the excesses of the top k (TAIL_FRAC of them, at least 20) over the
    (k + 1)-th largest u are fitted with an exponential tail (peaks over threshold, mean excess beta) and
    extrapolated, q = u + beta ln(k / (n rate)), never below the largest score."""
    v = np.sort(np.asarray(s, np.float64).reshape(-1))[::-1]
    n = v.size
    if n == 0:
        raise SnapuqError("no clean reference scores for the hinge")
    if not 0.0 < rate < 1.0:
        raise SnapuqError(f"alarm rate must be in (0, 1), got {rate}")
    if rate >= 1.0 / (n + 1) or n < 2:
        return conformal_quantile(v, 1.0 - rate), {"rule": "conformal", "n": int(n)}
    k = min(n - 1, max(20, int(np.ceil(TAIL_FRAC * n))))
    u = float(v[k])
    beta = float(np.mean(v[:k] - u))
    q = max(u + beta * float(np.log(k / (n * rate))), float(v[0]))
    return q, {"rule": "exponential tail", "n": int(n), "k": int(k), "u": u, "beta": beta}


def fit_perr(m: np.ndarray, err: np.ndarray, l2: float = 1e-3) -> dict:
    """p_err as a strictly increasing, calibrated function of m: a logistic with non-negative slopes on
    [ln(m + 1/512), m], fitted by plain likelihood on dev correct/wrong, tabulated at m = i/256 (257
    knots, linear in between); a 1e-4 ramp keeps it strictly increasing when the slopes are 0."""
    m = np.clip(np.asarray(m, np.float64), 0.0, 1.0)
    y = np.asarray(err, np.float64)
    if y.sum() == 0 or y.sum() == len(y):
        r = min(max(y.mean(), 1e-4), 1 - 1e-4)
        b = np.array([np.log(r / (1 - r)), 0.0, 0.0])
    else:
        b = fit_logistic(np.c_[np.log(m + PERR_DELTA), m], y, nonneg=True, l2=l2, balanced=False)
    grid = np.linspace(0.0, 1.0, 257)
    sig = sigmoid(b[0] + b[1] * np.log(grid + PERR_DELTA) + b[2] * grid)
    knots = (1.0 - PERR_RAMP) * sig + PERR_RAMP * grid
    return {"knots": [float(v) for v in knots], "form": "logistic on [ln(m + 1/512), m]", "coef": b.tolist()}


def fit_alarm_k(pe: np.ndarray, F: np.ndarray, y: np.ndarray) -> float:
    """k of alarm = F / (F + k) by likelihood of U = p_err + alarm (1 - p_err) as P(wrong or shifted)."""
    pe, y = np.asarray(pe, np.float64), np.asarray(y, np.float64)
    best, best_ll = ALARM_K_GRID[len(ALARM_K_GRID) // 2], -np.inf
    for k in ALARM_K_GRID:
        u = np.clip(pe + alarm_map(F, k) * (1.0 - pe), 1e-6, 1 - 1e-6)
        ll = float(np.mean(y * np.log(u) + (1 - y) * np.log1p(-u)))
        if ll > best_ll:
            best, best_ll = k, ll
    return float(best)


def clean_mean_sd(y: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Mean and sd (+ 1e-6) of a statistic on the correct dev inputs (all of them when under 10 are)."""
    ref = y[ok] if ok.sum() >= 10 else y
    return float(np.mean(ref)), float(np.std(ref) + 1e-6)


def fit_input_tap(x_dev: np.ndarray, ok_dev: np.ndarray, x_ref: np.ndarray | None, n_taps: int) -> dict:
    """calib.json "intap": the diagonal Gaussian (mu, sigma per statistic) of `input_summary` on x_ref (else
    the clean dev inputs), sigma floored at 1e-3 of the inputs' overall sd; the mean / sd of its mean
    squared z on the clean dev inputs; the weight INTAP_WEIGHT / (n_taps + INTAP_WEIGHT)."""
    xd = np.asarray(x_dev, np.float32)
    rows, cols = input_view(xd.shape[1:])
    on_ref = x_ref is not None and len(x_ref) >= 10
    base = np.asarray(x_ref, np.float32) if on_ref else xd[ok_dev]
    if len(base) < 2:
        raise SnapuqError("input tap: needs at least 2 clean inputs to fit its statistics")
    f = input_summary(base, rows, cols)
    floor = 1e-3 * float(np.std(base)) + 1e-9
    it = {"rows": rows, "cols": cols, "mu": f.mean(0).tolist(), "sigma": (f.std(0) + floor).tolist(),
          "n_fit": int(len(base)), "fit_on": "train" if on_ref else "dev clean",
          "weight": INTAP_WEIGHT / (n_taps + INTAP_WEIGHT)}  # fmt: skip
    it["mean"], it["sd"] = clean_mean_sd(intap_stat(xd, it), ok_dev)
    return it


def _ece(p_err: np.ndarray, err: np.ndarray) -> float:
    return float(M.ece(1.0 - np.asarray(p_err, np.float64), ~np.asarray(err, bool)))
