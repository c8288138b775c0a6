"""The host side of the integer SNAP score (docs/FIXED_POINT.md): every fixed-point constant of
the manifest's "snap" section, derived from calib.json and the int8 model's output quantization.
The score itself is computed by the C core (snapuq_snap.c; on the host through snapuq.native.ccore)
and by the MicroPython twin; tests/oracles/snap_spec.py transcribes the spec independently.

    snap = build_snap(calib, outputs)                  # the manifest's "snap" section
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from snapuq.errors import ModelFormatError
from snapuq.formats import (
    INTAP_MAX_SIDE,
    MAX_D,
    input_summary_len,
    validate_calib,
)

SPEC_VERSION = 3  # 3 = 2 + the input tap (step 4b)
T_MAX = (1 << 24) - 1
EBAR_CAP = (1 << 31) - 1
S_CAP_TAP = (1 << 30) - 1
S_CAP = (1 << 31) - 1
Z_CLAMP = (1 << 20) - 1
SIG_STEP_SHIFT = 11
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


def build_intap(it: dict[str, Any], inp: dict[str, Any] | None) -> dict[str, Any]:
    """Step 4b constants (docs/FIXED_POINT.md) from calib.json "intap" and the int8 input
    {"scale", "zero_point", "shape"}."""
    if inp is None:
        raise FixedPointError("calib.json has an input tap: build_snap needs the int8 input quantization")
    rows, cols = int(it["rows"]), int(it["cols"])
    n_in = int(np.prod([int(v) for v in inp["shape"]][1:] if len(inp["shape"]) > 1 else inp["shape"]))
    if rows * cols != n_in or not (1 <= rows <= INTAP_MAX_SIDE and 1 <= cols <= INTAP_MAX_SIDE):
        raise FixedPointError(f"input tap: {rows} x {cols} does not match the {n_in}-element int8 input")
    mu, sig = [float(v) for v in it["mu"]], [float(v) for v in it["sigma"]]
    J = input_summary_len(rows, cols)  # mu and sigma have J values (validate_calib)
    counts = [rows] * cols + [cols] * rows + ([rows - 1] * cols if rows > 1 else []) + (
        [cols - 1] * rows if cols > 1 else []
    )
    s_x = float(inp["scale"])
    g_m, g_n, h = [], [], []
    for j in range(J):
        m_, n_ = encode_multiplier(4096.0 * s_x / (counts[j] * sig[j]), f"intap.g[{j}]")
        g_m.append(m_)
        g_n.append(n_)
        h.append(q16(mu[j] / sig[j] / 16.0, f"intap.h[{j}]"))  # Q12 = round(2^16 v / 16)
    sd, w = float(it["sd"]), float(it["weight"])
    pm, pn = encode_multiplier(1.0 / sd, "intap.P")
    return {"rows": rows, "cols": cols, "n_feat": J, "z_x": int(inp["zero_point"]), "g_m": g_m, "g_n": g_n,
            "h_q12": h, "p_m": pm, "p_n": pn, "r_q16": q16(-float(it["mean"]) / sd, "intap.r"),
            "w_q16": int(round(w * 65536.0))}  # fmt: skip


def build_snap(
    calib: dict[str, Any], outputs: dict[str, dict[str, Any]], variant: str | None = None,
    inp: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fixed-point constants (docs/FIXED_POINT.md) from calib.json and the int8 output map
    (name -> {"index", "scale", "zero_point", "shape"}); `inp` (the int8 input's "scale", "zero_point",
    "shape") for a calibration with an input tap. `calib` passes snapuq.formats.validate_calib first (the
    checks eval and every other reader share); what is left here needs the int8 model."""
    validate_calib(calib, "calib.json")
    p = calib
    if variant is not None and variant != calib.get("variant"):
        vs = calib.get("variants") or {}
        if variant not in vs:
            raise FixedPointError(f"calib.json has no variant '{variant}'")
        p = vs[variant]  # a variant is a whole calibration: nothing of the default's leaks into it
    name = p.get("variant", variant or "best")
    taps_c, weights, beta = p["taps"], p["weights"], p["beta"]
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
            P, Q, R = ce / sd, 65536.0 * cl * s_v / (d * sd), (cl * off - float(tc["mean"])) / sd
        else:  # one-sided: c_e * ebar (c_l = 0, c_e >= 0: validate_calib)
            P, Q, R = ce, 0.0, 0.0
        w = float(weights[k])
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
        hm, hn = encode_multiplier(1.0 / float(hinge["sd"]), "hinge 1/sd")
        hsec = {"q_q16": q16(hinge["q"], "hinge.q"), "m": hm, "n": hn}
    alpha = float((p.get("conf") or {}).get("alpha", 0.5))  # the msp_margin proxy (validate_calib)
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
    if perr and alarm:  # 257 knots in [0, 1], k in [2^-16, 2^14) (validate_calib)
        knots = [float(v) for v in perr["knots"]]
        k_alarm = float(alarm["k"])
        psec = {"lut": [int(round(v * 65536.0)) for v in knots], "step_shift": PERR_STEP_SHIFT}
        asec = {"k_q16": int(round(k_alarm * 65536.0))}
    it = p.get("intap")
    isec = build_intap(it, inp) if it else None
    return {
        "spec_version": SPEC_VERSION,
        "variant": name,
        "combine": COMBINE_PERR_ALARM if psec else COMBINE_LOGISTIC,
        "perr": psec,
        "alarm": asec,
        "taps": taps,
        "intap": isec,
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
            "intap": None
            if not it
            else {**{k: it[k] for k in ("rows", "cols", "mu", "sigma", "mean", "sd", "weight")},
                  "input_scale": float(inp["scale"])},  # fmt: skip
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
