"""Integer SNAP-UQ exactly as docs/FIXED_POINT.md specifies it (the C core and the MicroPython
twin compute the same integers), its float equivalent, and the host-side derivation of every
fixed-point constant from calib.json and the int8 model's output quantization.

    snap = build_snap(calib, outputs)                  # the manifest's "snap" section
    r = snap_int(outs_int8, snap)        # ebar16, s16, S16, F16, m16, P16, A16, Z16, U16 (Q16), flag
    f = snap_float(outs_int8, snap, outputs)           # the same formulas in float64
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from snapuq.errors import ModelFormatError

SPEC_VERSION = 2
T_MAX = (1 << 24) - 1
EBAR_CAP = (1 << 31) - 1
S_CAP_TAP = (1 << 30) - 1
S_CAP = (1 << 31) - 1
Z_CLAMP = (1 << 20) - 1
SIG_STEP_SHIFT = 11
MAX_TAPS = 8
MAX_D = 16384
PERR_LUT_LEN = 257
PERR_STEP_SHIFT = 8
COMBINE_LOGISTIC = "logistic"
COMBINE_PERR_ALARM = "perr_alarm"


class FixedPointError(ModelFormatError):
    """The calibration constants or output quantization do not fit the fixed-point formats."""


# ----------------------------------------------------------------------------------------------
# constant encoding


def encode_multiplier(c: float, what: str) -> tuple[int, int]:
    """Real c -> (M, n) with c ≈ M / 2^n, |M| in [2^30, 2^31), n in [0, 62]; (0, 0) for |c| < 2^-32."""
    c = float(c)
    if not math.isfinite(c):
        raise FixedPointError(f"{what}: constant {c} is not finite")
    if c == 0.0 or abs(c) < 2.0**-32:
        return 0, 0
    f, e = math.frexp(abs(c))  # |c| = f * 2^e, f in [0.5, 1)
    m = int(round(f * (1 << 31)))
    n = 31 - e
    if m == 1 << 31:
        m >>= 1
        n -= 1
    if n < 0:
        raise FixedPointError(f"{what}: constant {c} is too large for the (M, n) format (>= 2^31)")
    if n > 62:
        return 0, 0
    return (m if c > 0 else -m), n


def q16(v: float, what: str, lo: int = -(1 << 31), hi: int = (1 << 31) - 1) -> int:
    if not math.isfinite(float(v)):
        raise FixedPointError(f"{what}: value {v} is not finite")
    r = int(round(float(v) * 65536.0))
    if not lo <= r <= hi:
        raise FixedPointError(f"{what}: {v} is out of range for Q16 [{lo / 65536}, {hi / 65536}]")
    return r


def sigmoid_lut() -> list[int]:
    return [int(round(65536.0 / (1.0 + math.exp(-k / 32.0)))) for k in range(513)]


def inv_sigma_lut(s_c: float, s_v: float, z_v: int, offset: float) -> tuple[list[int], int, float]:
    """The 256-entry σ⁻¹ LUT (index code + 128), its shift R and the relative error bound eps_rel."""
    codes = np.arange(-128, 128, dtype=np.float64)
    val = s_c * 4096.0 * np.exp(-(s_v * (codes - z_v) + offset) / 2.0)
    vmax = float(val.max())
    if not math.isfinite(vmax) or vmax <= 0:
        raise FixedPointError("σ⁻¹ LUT: log-variance range gives no finite positive entries")
    r = min(62, int(math.floor(math.log2((2**30 - 1) / vmax))) + 1)
    while r >= 0 and int(np.round(val * 2.0**r).max()) >= 2**30:
        r -= 1
    if r < 0:
        raise FixedPointError("σ⁻¹ LUT: entries too large for the int32 format (σ too small)")
    lut = [int(v) for v in np.round(val * 2.0**r)]
    nz = [v for v in lut if v > 0]
    eps_rel = 2.0**-20 + (0.5 / min(nz) if nz else 1.0)
    return lut, r, eps_rel


# ----------------------------------------------------------------------------------------------
# manifest "snap" section


def build_snap(
    calib: dict[str, Any], outputs: dict[str, dict[str, Any]], variant: str | None = None
) -> dict[str, Any]:
    """Fixed-point constants (docs/FIXED_POINT.md) from calib.json and the int8 output map
    (name -> {"index", "scale", "zero_point", "shape"})."""
    p = calib
    if variant is not None and variant != calib.get("variant"):
        vs = calib.get("variants") or {}
        if variant not in vs:
            raise FixedPointError(f"calib.json has no variant '{variant}'")
        p = {**calib, **vs[variant]}
    name = p.get("variant", variant or "best")
    taps_c = p.get("taps")
    weights = p.get("weights")
    beta = p.get("beta")
    if not taps_c or weights is None or beta is None or len(beta) != 3:
        raise FixedPointError("calib.json: needs 'taps', 'weights' and a 3-element 'beta'")
    if len(taps_c) > MAX_TAPS or len(weights) != len(taps_c):
        raise FixedPointError(
            f"calib.json: {len(taps_c)} taps and {len(weights)} weights (at most {MAX_TAPS})"
        )
    offset = float(calib.get("logvar_offset", 0.0))
    taps = []
    for k, tc in enumerate(taps_c):
        tname = tc.get("name", f"tap{k}")
        names = {
            "a": f"{tname}_a",
            "mu": f"{tname}_mu",
            "logvar": f"{tname}_lvr" if f"{tname}_lvr" in outputs else f"{tname}_logvar",
        }
        for on in names.values():
            if on not in outputs:
                raise FixedPointError(f"int8 model has no output '{on}' for {tname}")
        oa, om, ov = (outputs[names[r]] for r in ("a", "mu", "logvar"))
        d = int(oa["shape"][-1])
        if not (1 <= d <= MAX_D) or om["shape"][-1] != d or ov["shape"][-1] != d or int(tc.get("d", d)) != d:
            raise FixedPointError(f"{tname}: tap dimensions a/mu/logvar/calib disagree")
        s_a, s_mu, s_v = float(oa["scale"]), float(om["scale"]), float(ov["scale"])
        off = offset  # calib's logvar_offset always refers to the exported int8 log-variance tensor
        s_c = max(s_a, s_mu) / 2.0**20
        lut, r, eps_rel = inv_sigma_lut(s_c, s_v, int(ov["zero_point"]), off)
        ce, cl = float(tc["c_e"]), float(tc["c_l"])
        if tc.get("two_sided"):
            sd = float(tc["sd"])
            if not sd > 0:
                raise FixedPointError(f"{tname}: sd must be > 0")
            P, Q, R = ce / sd, 65536.0 * cl * s_v / (d * sd), (cl * off - float(tc["mean"])) / sd
        else:
            if cl != 0.0 or ce < 0:
                raise FixedPointError(f"{tname}: a one-sided per-tap score must be c_e * ebar with c_e >= 0")
            P, Q, R = ce, 0.0, 0.0
        w = float(weights[k])
        if not 0.0 <= w < 2.0**14:
            raise FixedPointError(f"{tname}: weight {w} outside [0, 2^14)")
        pm, pn = encode_multiplier(P, f"{tname}.P")
        qm, qn = encode_multiplier(Q, f"{tname}.Q")
        taps.append(
            {
                "name": tname,
                "d": d,
                **names,
                "z_a": int(oa["zero_point"]),
                "z_mu": int(om["zero_point"]),
                "z_v": int(ov["zero_point"]),
                "k_a": int(round(s_a / s_c)),
                "k_mu": int(round(s_mu / s_c)),
                "lut_shift": r,
                "inv_sigma_lut": lut,
                "eps_rel": eps_rel,
                "p_m": pm,
                "p_n": pn,
                "q_m": qm,
                "q_n": qn,
                "r_q16": q16(R, f"{tname}.r"),
                "w_q16": int(round(w * 65536.0)),
            }
        )
    hinge = p.get("hinge")
    hsec = None
    if hinge:
        if not float(hinge["sd"]) > 0:
            raise FixedPointError("hinge.sd must be > 0")
        hm, hn = encode_multiplier(1.0 / float(hinge["sd"]), "hinge 1/sd")
        hsec = {"q_q16": q16(hinge["q"], "hinge.q"), "m": hm, "n": hn}
    conf = p.get("conf") or {"kind": "msp_margin", "alpha": 0.5}
    if conf.get("kind", "msp_margin") != "msp_margin":
        raise FixedPointError(f"confidence proxy '{conf.get('kind')}' has no fixed-point form")
    alpha = float(conf.get("alpha", 0.5))
    if not 0.0 <= alpha <= 1.0:
        raise FixedPointError(f"conf.alpha {alpha} outside [0, 1]")
    if "probs" not in outputs:
        raise FixedPointError("int8 model has no 'probs' output (SOFTMAX) for the confidence proxy")
    po = outputs["probs"]
    if int(po["zero_point"]) != -128 or abs(float(po["scale"]) - 1 / 256) > 1e-9:
        raise FixedPointError("int8 'probs' must have scale 1/256 and zero point -128")
    b0, b1, b2 = (float(b) for b in beta)
    b1m, b1n = encode_multiplier(b1, "beta1")
    b2m, b2n = encode_multiplier(b2, "beta2")
    u_thr = float(p.get("u_threshold", calib.get("u_threshold", 0.5)))
    perr, alarm = p.get("perr"), p.get("alarm")
    psec = asec = None
    knots: list[float] | None = None
    k_alarm: float | None = None
    if perr and alarm:
        knots = [float(v) for v in perr.get("knots", [])]
        if len(knots) != PERR_LUT_LEN or not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in knots):
            raise FixedPointError(f"calib.json: perr.knots must be {PERR_LUT_LEN} values in [0, 1]")
        k_alarm = float(alarm.get("k", 0.0))
        if not (math.isfinite(k_alarm) and 2.0**-16 <= k_alarm < 2.0**14):
            raise FixedPointError(f"calib.json: alarm.k {k_alarm} outside [2^-16, 2^14)")
        psec = {"lut": [int(round(v * 65536.0)) for v in knots], "step_shift": PERR_STEP_SHIFT}
        asec = {"k_q16": int(round(k_alarm * 65536.0))}
    return {
        "spec_version": SPEC_VERSION,
        "variant": name,
        "combine": COMBINE_PERR_ALARM if psec else COMBINE_LOGISTIC,
        "perr": psec,
        "alarm": asec,
        "taps": taps,
        "t_max": T_MAX,
        "ebar_cap": EBAR_CAP,
        "s_cap": S_CAP_TAP,
        "S_cap": S_CAP,
        "hinge": hsec,
        "conf": {
            "kind": "msp_margin",
            "alpha": alpha,
            "a_q16": int(round((1.0 - alpha) * 65536)),
            "probs": "probs",
        },
        "logistic": {
            "b0_q16": q16(b0, "beta0"),
            "b1_m": b1m,
            "b1_n": b1n,
            "b2_m": b2m,
            "b2_n": b2n,
            "z_clamp_q16": Z_CLAMP,
            "lut_step_shift": SIG_STEP_SHIFT,
            "sigmoid_lut": sigmoid_lut(),
        },
        "u_threshold_q16": q16(u_thr, "u_threshold", 0, 65536),
        "float": {
            "logvar_offset": offset,
            "taps": [dict(t) for t in taps_c],
            "weights": [float(w) for w in weights],
            "hinge": dict(hinge) if hinge else None,
            "alpha": alpha,
            "beta": [b0, b1, b2],
            "perr_knots": knots,
            "alarm_k": k_alarm,
            "u_threshold": u_thr,
            "scales": {
                t["name"]: {
                    "a": float(outputs[t["a"]]["scale"]),
                    "mu": float(outputs[t["mu"]]["scale"]),
                    "logvar": float(outputs[t["logvar"]]["scale"]),
                }
                for t in taps
            },
        },
    }


# ----------------------------------------------------------------------------------------------
# the integer path (vectorized over a batch; int64 numpy, every intermediate within int64 by spec)


def mul_shift(x: np.ndarray, m: int, n: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    if n == 0:
        return x * np.int64(m)
    return (x * np.int64(m) + np.int64(1 << (n - 1))) >> np.int64(n)


def _codes(outs: dict[str, np.ndarray], name: str, n: int | None = None) -> np.ndarray:
    if name not in outs:
        raise FixedPointError(f"missing int8 output '{name}'")
    v = np.asarray(outs[name])
    if v.dtype != np.int8:
        raise FixedPointError(f"output '{name}' must be int8 codes, got {v.dtype}")
    v = v.reshape(v.shape[0] if v.ndim > 1 else 1, -1).astype(np.int64)
    if n is not None and v.shape[1] != n:
        raise FixedPointError(f"output '{name}' has {v.shape[1]} values, the manifest says {n}")
    return v


def confidence_q16(probs: np.ndarray, a_q16: int) -> np.ndarray:
    p = np.sort(probs + 128, axis=1)
    p1, p2 = p[:, -1], p[:, -2]
    return 65536 - 256 * p1 + ((a_q16 * p2 + 128) >> 8)


def sigmoid_q16(z16: np.ndarray, lut: list[int] | np.ndarray) -> np.ndarray:
    t = np.asarray(lut, dtype=np.int64)
    a = np.abs(z16)
    i = a >> SIG_STEP_SHIFT
    f = a & ((1 << SIG_STEP_SHIFT) - 1)
    v = t[i] + (((t[i + 1] - t[i]) * f + (1 << (SIG_STEP_SHIFT - 1))) >> SIG_STEP_SHIFT)
    return np.where(z16 >= 0, v, 65536 - v)


def perr_q16(m16: np.ndarray, lut: list[int] | np.ndarray) -> np.ndarray:
    """Step 8a: p_err (Q16) by linear interpolation of the 257-entry table at m16 (0..65536)."""
    t = np.asarray(lut, dtype=np.int64)
    m16 = np.asarray(m16, dtype=np.int64)
    i = np.minimum(m16 >> PERR_STEP_SHIFT, PERR_LUT_LEN - 2)
    f = m16 - (i << PERR_STEP_SHIFT)
    return t[i] + (((t[i + 1] - t[i]) * f + (1 << (PERR_STEP_SHIFT - 1))) >> PERR_STEP_SHIFT)


def alarm_q16(F16: np.ndarray, k_q16: int) -> np.ndarray:
    """Step 8b: alarm = F / (F + k) in Q16, floor division (F16 >= 0, k_q16 >= 1)."""
    F16 = np.asarray(F16, dtype=np.int64)
    return (F16 << 16) // (F16 + np.int64(k_q16))


def snap_int(outs: dict[str, np.ndarray], snap: dict[str, Any]) -> dict[str, np.ndarray]:
    """Integer ē_ℓ (Q16), s_ℓ, S, F, m, z and U (all Q16 int64 arrays) and the abstain flag,
    for a batch of int8 output codes (name -> (N, ...) int8)."""
    taps = snap["taps"]
    acc = None
    ebars, ss = [], []
    for tp in taps:
        d = int(tp["d"])
        qa, qm, qv = (_codes(outs, tp[r], d) for r in ("a", "mu", "logvar"))
        lut = np.asarray(tp["inv_sigma_lut"], dtype=np.int64)
        r = int(tp["lut_shift"])
        delta = np.abs((qa - tp["z_a"]) * tp["k_a"] - (qm - tp["z_mu"]) * tp["k_mu"])
        p = delta * lut[qv + 128]
        t = np.minimum((p + (1 << (r - 1))) >> r if r else p, T_MAX)
        e = np.sum(t * t, axis=1)
        lam = np.sum(qv - tp["z_v"], axis=1)
        ebar16 = np.minimum(e // (256 * d), EBAR_CAP)
        s16 = np.abs(
            mul_shift(ebar16, tp["p_m"], tp["p_n"]) + mul_shift(lam, tp["q_m"], tp["q_n"]) + tp["r_q16"]
        )
        s16 = np.minimum(s16, S_CAP_TAP)
        term = s16 * np.int64(tp["w_q16"])
        acc = term if acc is None else acc + term
        ebars.append(ebar16)
        ss.append(s16)
    S16 = np.minimum((acc + (1 << 15)) >> 16, S_CAP)
    h = snap.get("hinge")
    if h:
        dd = np.minimum(S16 - h["q_q16"], (1 << 31) - 1)
        F16 = np.where(dd <= 0, 0, np.minimum(mul_shift(np.maximum(dd, 0), h["m"], h["n"]), (1 << 31) - 1))
    else:
        F16 = S16
    probs = _codes(outs, snap["conf"].get("probs", "probs"))
    m16 = confidence_q16(probs, int(snap["conf"]["a_q16"]))
    if snap.get("combine", COMBINE_LOGISTIC) == COMBINE_PERR_ALARM:
        p16 = perr_q16(m16, snap["perr"]["lut"])
        a16 = alarm_q16(F16, int(snap["alarm"]["k_q16"]))
        u16 = p16 + ((a16 * (65536 - p16) + 32768) >> 16)
        z16 = np.zeros_like(u16)
    else:
        lg = snap["logistic"]
        z16 = lg["b0_q16"] + mul_shift(F16, lg["b1_m"], lg["b1_n"]) + mul_shift(m16, lg["b2_m"], lg["b2_n"])
        z16 = np.clip(z16, -Z_CLAMP, Z_CLAMP)
        u16 = sigmoid_q16(z16, lg["sigmoid_lut"])
        p16, a16 = u16, np.zeros_like(u16)
    return {
        "ebar16": np.stack(ebars, 1),
        "s16": np.stack(ss, 1),
        "S16": S16,
        "F16": F16,
        "m16": m16,
        "P16": p16,
        "A16": a16,
        "Z16": z16,
        "U16": u16,
        "flag": u16 >= int(snap["u_threshold_q16"]),
    }


def snap_int_scalar(outs: dict[str, list[int]], snap: dict[str, Any]) -> dict[str, Any]:
    """The same integers for one sample with plain Python ints and loops (the form the
    MicroPython twin and the C core follow); used by the tests to pin the vectorized path."""

    def ms(x: int, m: int, n: int) -> int:
        return x * m if n == 0 else (x * m + (1 << (n - 1))) >> n

    acc = 0
    ebars = []
    for tp in snap["taps"]:
        qa, qm, qv = (list(outs[tp[r]]) for r in ("a", "mu", "logvar"))
        lut, r = tp["inv_sigma_lut"], tp["lut_shift"]
        e = lam = 0
        for i in range(tp["d"]):
            delta = abs((qa[i] - tp["z_a"]) * tp["k_a"] - (qm[i] - tp["z_mu"]) * tp["k_mu"])
            p = delta * lut[qv[i] + 128]
            t = min((p + (1 << (r - 1))) >> r if r else p, T_MAX)
            e += t * t
            lam += qv[i] - tp["z_v"]
        ebar16 = min(e // (256 * tp["d"]), EBAR_CAP)
        ebars.append(ebar16)
        s16 = abs(ms(ebar16, tp["p_m"], tp["p_n"]) + ms(lam, tp["q_m"], tp["q_n"]) + tp["r_q16"])
        acc += min(s16, S_CAP_TAP) * tp["w_q16"]
    S16 = min((acc + (1 << 15)) >> 16, S_CAP)
    h = snap.get("hinge")
    if h:
        dd = S16 - h["q_q16"]
        F16 = 0 if dd <= 0 else min(ms(min(dd, (1 << 31) - 1), h["m"], h["n"]), (1 << 31) - 1)
    else:
        F16 = S16
    pr = sorted(int(q) + 128 for q in outs[snap["conf"].get("probs", "probs")])
    m16 = 65536 - 256 * pr[-1] + ((snap["conf"]["a_q16"] * pr[-2] + 128) >> 8)
    if snap.get("combine", COMBINE_LOGISTIC) == COMBINE_PERR_ALARM:
        pl = snap["perr"]["lut"]
        i = min(m16 >> 8, 255)
        f = m16 - (i << 8)
        pe = pl[i] + (((pl[i + 1] - pl[i]) * f + 128) >> 8)
        al = (F16 << 16) // (F16 + snap["alarm"]["k_q16"])
        u = pe + ((al * (65536 - pe) + 32768) >> 16)
        z = 0
    else:
        lg = snap["logistic"]
        z = lg["b0_q16"] + ms(F16, lg["b1_m"], lg["b1_n"]) + ms(m16, lg["b2_m"], lg["b2_n"])
        z = max(-Z_CLAMP, min(Z_CLAMP, z))
        t = lg["sigmoid_lut"]
        a = abs(z)
        i, f = a >> 11, a & 2047
        v = t[i] + (((t[i + 1] - t[i]) * f + 1024) >> 11)
        u = v if z >= 0 else 65536 - v
        pe, al = u, 0
    return {
        "ebar16": ebars,
        "S16": S16,
        "F16": F16,
        "m16": m16,
        "P16": pe,
        "A16": al,
        "Z16": z,
        "U16": u,
        "flag": u >= snap["u_threshold_q16"],
    }


# ----------------------------------------------------------------------------------------------
# float equivalent on the dequantized int8 tensors


def snap_float(
    outs: dict[str, np.ndarray], snap: dict[str, Any], outputs: dict[str, dict[str, Any]]
) -> dict[str, np.ndarray]:
    fl = snap["float"]
    off = float(fl["logvar_offset"])

    def deq(name: str) -> np.ndarray:
        o = outputs[name]
        return (_codes(outs, name).astype(np.float64) - o["zero_point"]) * float(o["scale"])

    S = 0.0
    ebars = []
    for k, tp in enumerate(snap["taps"]):
        tc = fl["taps"][k]
        a, mu = deq(tp["a"]), deq(tp["mu"])
        lv = deq(tp["logvar"]) + off
        eb = np.mean((a - mu) ** 2 * np.exp(-lv), axis=1)
        lb = np.mean(lv, axis=1)
        y = tc["c_e"] * eb + tc["c_l"] * lb
        s = np.abs(y - tc["mean"]) / tc["sd"] if tc.get("two_sided") else y
        S = S + fl["weights"][k] * s
        ebars.append(eb)
    h = fl["hinge"]
    F = np.maximum(0.0, (S - h["q"]) / h["sd"]) if h else S
    p = np.sort((_codes(outs, "probs").astype(np.float64) + 128) / 256.0, axis=1)
    alpha = fl["alpha"]
    m = alpha * (1 - p[:, -1]) + (1 - alpha) * (1 - (p[:, -1] - p[:, -2]))
    res = {"ebar": np.stack(ebars, 1), "S": S, "F": F, "m": m}
    if snap.get("combine", COMBINE_LOGISTIC) == COMBINE_PERR_ALARM:
        pe = np.interp(m, np.linspace(0.0, 1.0, PERR_LUT_LEN), np.asarray(fl["perr_knots"], np.float64))
        al = F / (F + float(fl["alarm_k"]))
        res.update(p_err=pe, alarm=al, z=np.zeros_like(pe), U=pe + al * (1.0 - pe))
        return res
    b0, b1, b2 = fl["beta"]
    z = b0 + b1 * F + b2 * m
    u = 1.0 / (1.0 + np.exp(-z))
    res.update(z=z, U=u, p_err=u, alarm=np.zeros_like(u))
    return res
