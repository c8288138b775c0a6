"""Oracles for the integer SNAP score: docs/FIXED_POINT.md transcribed step by step in plain
Python (independent of the C core and of the twin), and its float64 equivalent on dequantized
int8 outputs (the bound the fixed-point path must stay within).

    spec_snap_int(outs, snap)          # one record: name -> int8 codes (+ "input" for step 4b)
    spec_snap_batch(codes, snap)       # name -> (N, ...) codes; int64 arrays like snapuq.native.ccore
    snap_float(codes, snap, outputs)   # float64 ebar, S, F, m, z, p_err, alarm, U
"""

from __future__ import annotations

from typing import Any

import numpy as np

T_MAX = 2**24 - 1


def mul_shift(x: int, m: int, n: int) -> int:
    return x * m if n == 0 else (x * m + (1 << (n - 1))) >> n


def spec_snap_int(out: dict[str, np.ndarray], snap: dict[str, Any]) -> dict[str, Any]:
    """FIXED_POINT.md v2 transcribed step by step (independent of the C code)."""
    acc = 0
    ebar, s_l = [], []
    for tp in snap["taps"]:
        qa, qm, qv = (out[tp[k]].astype(int).ravel() for k in ("a", "mu", "logvar"))
        r, lut = tp["lut_shift"], tp["inv_sigma_lut"]
        e = 0
        lam = 0
        for i in range(tp["d"]):
            delta = abs((qa[i] - tp["z_a"]) * tp["k_a"] - (qm[i] - tp["z_mu"]) * tp["k_mu"])
            p = delta * lut[qv[i] + 128]
            t = min((p + (1 << (r - 1))) >> r if r else p, T_MAX)
            e += t * t
            lam += qv[i] - tp["z_v"]
        eb = min(e // (256 * tp["d"]), 2**31 - 1)
        s16 = abs(mul_shift(eb, tp["p_m"], tp["p_n"]) + mul_shift(lam, tp["q_m"], tp["q_n"]) + tp["r_q16"])
        s16 = min(s16, 2**30 - 1)
        ebar.append(eb)
        s_l.append(s16)
        acc += s16 * tp["w_q16"]
    s_in = 0
    it = snap.get("intap")
    if it:  # step 4b: the input tap, from the int8 input codes out["input"] (row-major rows x cols)
        q = out["input"].astype(int).ravel()
        rows, cols, zx = it["rows"], it["cols"], it["z_x"]
        v = [sum(q[r * cols + k] - zx for r in range(rows)) for k in range(cols)]
        v += [sum(q[r * cols + k] - zx for k in range(cols)) for r in range(rows)]
        g = q.reshape(rows, cols)
        if rows > 1:
            v += [sum(abs(g[r + 1, k] - g[r, k]) for r in range(rows - 1)) for k in range(cols)]
        if cols > 1:
            v += [sum(abs(g[r, k + 1] - g[r, k]) for k in range(cols - 1)) for r in range(rows)]
        assert len(v) == it["n_feat"]
        e = 0
        for j, vj in enumerate(v):
            z = mul_shift(vj, it["g_m"][j], it["g_n"][j]) - it["h_q12"][j]
            z = max(min(z, T_MAX), -T_MAX)
            e += z * z
        y = min(e // (256 * it["n_feat"]), 2**31 - 1)
        s_in = min(abs(mul_shift(y, it["p_m"], it["p_n"]) + it["r_q16"]), 2**30 - 1)
        acc += s_in * it["w_q16"]
    s_big = min((acc + (1 << 15)) >> 16, 2**31 - 1)
    h = snap["hinge"]
    if h is None:
        f16 = s_big
    else:
        d = s_big - h["q_q16"]
        f16 = 0 if d <= 0 else min(mul_shift(min(d, 2**31 - 1), h["m"], h["n"]), 2**31 - 1)
    probs = sorted((out[snap["conf"]["probs"]].astype(int).ravel() + 128).tolist(), reverse=True)
    m16 = 65536 - 256 * probs[0] + ((snap["conf"]["a_q16"] * probs[1] + 128) >> 8)
    if snap.get("combine") == "perr_alarm":   # step 8, v2: p_err table, alarm F / (F + k), noisy-OR
        plut = snap["perr"]["lut"]
        j = min(m16 // 256, 255)
        fr = m16 - 256 * j
        pe = plut[j] + (((plut[j + 1] - plut[j]) * fr + 128) >> 8)
        al = (f16 * 65536) // (f16 + snap["alarm"]["k_q16"])
        u = pe + ((al * (65536 - pe) + 32768) >> 16)
        z = 0
    else:
        lg = snap["logistic"]
        z = lg["b0_q16"] + mul_shift(f16, lg["b1_m"], lg["b1_n"]) + mul_shift(m16, lg["b2_m"], lg["b2_n"])
        z = max(min(z, 2**20 - 1), -(2**20 - 1))
        a = abs(z)
        i, f = a >> 11, a & 2047
        sl = lg["sigmoid_lut"]
        v = sl[i] + (((sl[i + 1] - sl[i]) * f + 1024) >> 11)
        u = v if z >= 0 else 65536 - v
        pe, al = u, 0
    logits = out["logits"].astype(int).ravel()
    return {"ebar16": ebar, "s16": s_l, "S16": s_big, "F16": f16, "m16": m16, "P16": pe, "A16": al, "Z16": z,
            "U16": u, "pred": int(np.argmax(logits)), "flag": int(u >= snap["u_threshold_q16"]),
            "s_in16": s_in}


def spec_snap_batch(codes: dict[str, np.ndarray], snap: dict[str, Any]) -> dict[str, np.ndarray]:
    """spec_snap_int over a batch, stacked into int64 arrays (ebar16, s16: (N, taps))."""
    n = len(np.asarray(codes["logits"]).reshape(-1, np.asarray(codes["logits"]).shape[-1]))
    rows = [spec_snap_int({k: np.asarray(v).reshape(n, -1)[i] for k, v in codes.items()}, snap)
            for i in range(n)]
    out = {k: np.asarray([r[k] for r in rows], dtype=np.int64) for k in rows[0]}
    out["flag"] = out["flag"].astype(bool)
    return out


def _codes(outs: dict[str, np.ndarray], name: str) -> np.ndarray:
    v = np.asarray(outs[name])
    assert v.dtype == np.int8, f"output '{name}' must be int8 codes, got {v.dtype}"
    return v.reshape(v.shape[0] if v.ndim > 1 else 1, -1).astype(np.int64)


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
    fi = fl.get("intap")
    if fi:
        from snapuq.uq.score import intap_stat

        it = snap["intap"]
        xin = (_codes(outs, "input").astype(np.float64) - it["z_x"]) * float(fi["input_scale"])
        S = S + float(fi["weight"]) * np.abs(intap_stat(xin, fi) - fi["mean"]) / fi["sd"]
    h = fl["hinge"]
    F = np.maximum(0.0, (S - h["q"]) / h["sd"]) if h else S
    p = np.sort((_codes(outs, "probs").astype(np.float64) + 128) / 256.0, axis=1)
    alpha = fl["alpha"]
    m = alpha * (1 - p[:, -1]) + (1 - alpha) * (1 - (p[:, -1] - p[:, -2]))
    res = {"ebar": np.stack(ebars, 1), "S": S, "F": F, "m": m}
    if snap.get("combine") == "perr_alarm":
        pe = np.interp(m, np.linspace(0.0, 1.0, 257), np.asarray(fl["perr_knots"], np.float64))
        al = F / (F + float(fl["alarm_k"]))
        res.update(p_err=pe, alarm=al, z=np.zeros_like(pe), U=pe + al * (1.0 - pe))
        return res
    b0, b1, b2 = fl["beta"]
    z = b0 + b1 * F + b2 * m
    u = 1.0 / (1.0 + np.exp(-z))
    res.update(z=z, U=u, p_err=u, alarm=np.zeros_like(u))
    return res
