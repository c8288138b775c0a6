"""SNAP scoring on model outputs (float): per-tap surprisal, the SNAP score S(x), the confidence proxy m(x)
and U(x) = sigmoid(b0 + b1 F(S) + b2 m).

Per tap l with a, mu, log sigma^2 in R^d (GAP tap vectors):
    ebar_l = (1/d) sum_i (a_i - mu_i)^2 exp(-logvar_i)          (standardized error, DESIGN §4)
    lbar_l = (1/d) sum_i logvar_i
    y_l    = c_e ebar_l + c_l lbar_l                             (c_e = c_l = 1/2: per-dim Gaussian NLL
                                                                  without 1/2 log 2pi)
    s_l    = |y_l - mean_l| / sd_l    if two_sided ("best": ID mean/sd from the clean dev split)
           = ebar_l                   ("literal": c_e = 1, c_l = 0, no standardization)
    S      = sum_l w_l s_l            (w uniform, or proportional to 1/Var_ID[s_l], summing to 1)
    F      = max(0, (S - q) / sd_S)   ("best": hinge at the q-quantile of clean dev S)
           = S                        ("literal")
  with the input tap (calib "intap", docs/FIXED_POINT.md step 4b), one more term of S:
    f      = input_summary(x)         per-row / per-column means and mean |neighbour differences| of the input
    y_in   = (1/J) sum_j ((f_j - mu_j) / sigma_j)^2    (diagonal Gaussian of f fitted on the train split)
    s_in   = |y_in - mean_in| / sd_in (clean dev), S += w_in s_in
    m      = alpha (1 - p1) + (1 - alpha)(1 - (p1 - p2))  (p1 >= p2 the two largest softmax probs)
  "best" (calib version 2, when calib.json has "perr" and "alarm"):
    p_err  = PL(m)                    piecewise-linear in m on the 257 knots m = i/256, strictly increasing:
                                      the calibrated P(prediction wrong) on in-distribution inputs
    alarm  = F / (F + k)              0 while S <= q (in-distribution), -> 1 as the surprisal grows
    U      = 1 - (1 - p_err)(1 - alarm) = p_err + alarm (1 - p_err)   (P(wrong or shifted), noisy-OR)
  "literal" (and version-1 calib files):
    z      = b0 + b1 F + b2 m,  U = 1 / (1 + exp(-z)),  p_err = U, alarm = 0

calib.json (written by `snapuq calibrate`, read by `SnapScorer.from_calib`, turned into fixed point by the
int8 export — docs/FIXED_POINT.md):
    {"version": 1, "variant": "best" | "literal",
     "eps": float, "logvar_offset": float (= 2 ln eps: log sigma^2 = int8 value of tap{k}_lvr + offset),
     "taps": [{"name": "tap0", "layer": str, "prev": str, "d": int, "c_e": float, "c_l": float,
               "two_sided": bool, "mean": float, "sd": float}],
     "weighting": "uniform" | "inverse_variance", "weights": [float per tap],
     "intap": {"rows": R, "cols": K, "mu": [J], "sigma": [J], "mean": float, "sd": float, "weight": w_in}
              | absent (no input tap),
     "hinge": {"q": float, "sd": float, "quantile": float} | null,
     "conf": {"kind": "msp_margin", "alpha": float},
     "beta": [b0, b1, b2], "nonneg": bool, "u_threshold": float,
     "perr": {"knots": [257 floats, p_err at m = i/256], ...fit details} (version 2, "best"),
     "alarm": {"k": float, ...} (version 2, "best"),
     "fit": {...what the coefficients were fitted on, dev AUROCs...},
     "variants": {"literal": {... the same keys for the paper's literal recipe ...}}}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.formats import validate_calib


def input_view(shape) -> tuple[int, int]:
    """(R, K): how the input tap views one input of this shape (without the batch axis): an image or
    MFCC map (H, W, C) as H x (W C), a window (T, C) as T x C, a vector (D,) as 1 x D."""
    shape = tuple(int(d) for d in shape)
    if not shape or min(shape) < 1:
        raise SnapuqError(f"input tap: bad input shape {shape}")
    if len(shape) == 1:
        return 1, shape[0]
    return shape[0], int(np.prod(shape[1:]))


def input_summary(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The input tap's statistics of each input viewed as rows x cols: the mean of every column, the mean
    of every row, the mean |x[r+1, k] - x[r, k]| of every column and the mean |x[r, k+1] - x[r, k]| of
    every row, in that order (N, J) float64. Sums of codes and of absolute code differences on the device."""
    x = np.asarray(x, np.float64).reshape(len(x), rows, cols)
    parts = [x.mean(1), x.mean(2)]
    if rows > 1:
        parts.append(np.abs(np.diff(x, axis=1)).mean(1))
    if cols > 1:
        parts.append(np.abs(np.diff(x, axis=2)).mean(2))
    return np.concatenate(parts, 1)


def intap_stat(x: np.ndarray, it: dict) -> np.ndarray:
    """y_in = mean_j ((f_j - mu_j) / sigma_j)^2 of the input tap (N,)."""
    f = input_summary(x, int(it["rows"]), int(it["cols"]))
    mu, sd = np.asarray(it["mu"], np.float64), np.asarray(it["sigma"], np.float64)
    if f.shape[1] != len(mu):
        raise SnapuqError(f"input tap: {f.shape[1]} input statistics, calib.json has {len(mu)}")
    return np.mean(np.square((f - mu) / sd), axis=1)


def tap_ebar(a: np.ndarray, mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """ebar = (1/d) ||(a - mu) * sigma^-1||^2, per sample; arrays (N, d) -> (N,)."""
    a, mu, lv = (np.asarray(t, np.float64) for t in (a, mu, logvar))
    return np.mean(np.square(a - mu) * np.exp(-lv), axis=-1)


def tap_nll(a: np.ndarray, mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """Per-sample diagonal Gaussian NLL, summed over dims, with the 0.5 log 2pi constant: (N,)."""
    a, mu, lv = (np.asarray(t, np.float64) for t in (a, mu, logvar))
    d = a.shape[-1]
    return 0.5 * np.sum(np.square(a - mu) * np.exp(-lv) + lv, axis=-1) + 0.5 * d * np.log(2 * np.pi)


def one_minus_max(probs: np.ndarray) -> np.ndarray:
    """1 - max_j p_j as the sum of the other probabilities, smallest first: no cancellation when max p is
    within an ulp of 1 (so 1 - 1e-9 and 1 - 1e-12 stay apart). The MSP baseline and SNAP's m(x) both use
    it, so that U = p_err(m) ranks exactly like MSP wherever no alarm fires."""
    p = np.sort(np.asarray(probs, np.float64), axis=1)
    return p[:, :-1].sum(1) if p.shape[1] > 1 else np.zeros(len(p))


def confidence_proxy(probs: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """m(x) = alpha (1 - p1) + (1 - alpha)(1 - (p1 - p2)); in [0, 1], higher = less confident."""
    p = np.sort(np.asarray(probs, np.float64), axis=1)
    rest = one_minus_max(p)  # 1 - p1
    return alpha * rest + (1.0 - alpha) * (rest + p[:, -2])


def class_probs(outs: dict) -> np.ndarray:
    """The class probabilities the host scores use: softmax of the logits in float64 (the model's float32
    "probs" output rounds every p1 above 1 - 6e-8 to 1.0, which ties the confident inputs), "probs" only
    when there are no logits."""
    return softmax(outs["logits"]) if "logits" in outs else np.asarray(outs["probs"], np.float64)


def softmax(z: np.ndarray, t: float = 1.0) -> np.ndarray:
    """softmax(z / t) along axis 1, in float64."""
    z = np.asarray(z, np.float64) / t
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, np.float64)))


def n_taps(outs: dict) -> int:
    k = 0
    while f"tap{k}_a" in outs:
        k += 1
    return k


def tap_lowrank_stats(a, mu, logvar, B) -> tuple[np.ndarray, np.ndarray]:
    """Low-rank + diagonal covariance Sigma = diag(exp(logvar)) + B B^T (B: (N, d, k)):
    ebar = (1/d) r^T Sigma^-1 r and lbar = (1/d) log det Sigma, by Woodbury / the determinant lemma."""
    a, mu, lv, B = (np.asarray(t, np.float64) for t in (a, mu, logvar, B))
    r = a - mu
    dinv = np.exp(-lv)
    dB = B * dinv[..., None]
    cap = np.eye(B.shape[-1]) + np.einsum("ndk,ndl->nkl", B, dB)
    u = np.einsum("ndk,nd->nk", dB, r)
    sol = np.linalg.solve(cap, u[..., None])[..., 0]
    d = r.shape[-1]
    maha = np.sum(r * r * dinv, axis=-1) - np.sum(u * sol, axis=-1)
    logdet = np.sum(lv, axis=-1) + np.linalg.slogdet(cap)[1]
    return maha / d, logdet / d


def tap_stats(outs: dict) -> tuple[np.ndarray, np.ndarray]:
    """(ebar, lbar), each (N, L), from a model-output dict with tap{k}_a / _mu / _logvar (and, for the
    low-rank covariance option, tap{k}_B: then ebar and lbar use the full covariance)."""
    L = n_taps(outs)
    if L == 0:
        raise SnapuqError("model outputs have no SNAP taps (tap0_a, tap0_mu, tap0_logvar)")
    st = [
        tap_lowrank_stats(outs[f"tap{k}_a"], outs[f"tap{k}_mu"], outs[f"tap{k}_logvar"], outs[f"tap{k}_B"])
        if f"tap{k}_B" in outs
        else (tap_ebar(outs[f"tap{k}_a"], outs[f"tap{k}_mu"], outs[f"tap{k}_logvar"]),
              np.mean(np.asarray(outs[f"tap{k}_logvar"], np.float64), axis=-1))  # fmt: skip
        for k in range(L)
    ]
    return np.stack([s[0] for s in st], 1), np.stack([s[1] for s in st], 1)


def per_tap_stat(eb: np.ndarray, lb: np.ndarray, taps: list[dict]) -> np.ndarray:
    """y_l = c_e ebar + c_l lbar (N, L)."""
    ce = np.array([t["c_e"] for t in taps])
    cl = np.array([t["c_l"] for t in taps])
    return eb * ce + lb * cl


def per_tap_score(eb: np.ndarray, lb: np.ndarray, taps: list[dict]) -> np.ndarray:
    y = per_tap_stat(eb, lb, taps)
    s = np.empty_like(y)
    for k, t in enumerate(taps):
        s[:, k] = np.abs(y[:, k] - t["mean"]) / t["sd"] if t.get("two_sided") else y[:, k]
    return s


@dataclass
class SnapScorer:
    params: dict

    @classmethod
    def from_calib(cls, calib: dict, variant: str | None = None, where: str = "calib.json") -> SnapScorer:
        """The scorer of `variant` (default: the one calib.json selects), after snapuq.formats.validate_calib:
        a calibration the int8 export refuses is refused here too, in one line."""
        validate_calib(calib, where)
        if variant is None or variant == calib.get("variant"):
            p = calib
        else:
            vs = calib.get("variants") or {}
            if variant not in vs:
                raise SnapuqError(f"calib.json has no SNAP variant '{variant}' (has: {', '.join(vs)})")
            p = vs[variant]
        return cls(p)

    def features(self, outs: dict, x: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """x: the model inputs of `outs` (float, as the model takes them); needed with an input tap."""
        p = self.params
        eb, lb = tap_stats(outs)
        if eb.shape[1] != len(p["taps"]):
            raise SnapuqError(f"model has {eb.shape[1]} taps, calib.json describes {len(p['taps'])}")
        s = per_tap_score(eb, lb, p["taps"])
        S = s @ np.asarray(p["weights"], np.float64)
        it = p.get("intap")
        s_in = None
        if it:
            if x is None:
                raise SnapuqError("this calibration has an input tap: score it with the model inputs")
            s_in = np.abs(intap_stat(x, it) - it["mean"]) / it["sd"]
            S = S + float(it["weight"]) * s_in
        h = p.get("hinge")
        F = np.maximum(0.0, (S - h["q"]) / h["sd"]) if h else S
        m = confidence_proxy(class_probs(outs), (p.get("conf") or {}).get("alpha", 0.5))  # as build_snap
        f = {"ebar": eb, "lbar": lb, "s": s, "S": S, "F": F, "m": m}
        if s_in is not None:
            f["s_in"] = s_in
        return f

    def score(self, outs: dict, x: np.ndarray | None = None) -> dict[str, np.ndarray]:
        f = self.features(outs, x)
        return combine(self.params, f)


PERR_KNOTS = 257


def perr_map(knots, m: np.ndarray) -> np.ndarray:
    """p_err = the piecewise-linear map through (i/256, knots[i]), i = 0..256 (m in [0, 1])."""
    k = np.asarray(knots, np.float64)
    if k.shape != (PERR_KNOTS,):
        raise SnapuqError(f"calib.json: perr.knots must have {PERR_KNOTS} values, got {k.shape}")
    return np.interp(np.clip(np.asarray(m, np.float64), 0.0, 1.0), np.linspace(0.0, 1.0, PERR_KNOTS), k)


def alarm_map(F: np.ndarray, k: float) -> np.ndarray:
    """alarm = F / (F + k): 0 at F = 0, increasing, below 1."""
    F = np.maximum(np.asarray(F, np.float64), 0.0)
    return F / (F + float(k))


def combine(params: dict, f: dict) -> dict:
    """Add p_err, alarm, U (and z for the logistic form) to the feature dict f of `SnapScorer.features`."""
    if params.get("perr") and params.get("alarm"):
        pe = perr_map(params["perr"]["knots"], f["m"])
        al = alarm_map(f["F"], params["alarm"]["k"])
        f["p_err"] = pe
        f["alarm"] = al
        f["U"] = pe + al * (1.0 - pe)
        return f
    b0, b1, b2 = params["beta"]
    z = b0 + b1 * f["F"] + b2 * f["m"]
    f["z"] = z
    f["U"] = sigmoid(z)
    f["p_err"] = f["U"]
    f["alarm"] = np.zeros_like(f["U"])
    return f
