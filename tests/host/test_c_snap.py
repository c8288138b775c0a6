"""SNAP core (firmware/core/snapuq_snap.c) vs the fixed-point spec docs/FIXED_POINT.md v2:
integer scoring bit for bit on random constants and inputs, the logistic fit against a float64
solution of the same objective, Welford weights and the drift monitor."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402
from fixtures.outputs_model import outputs_model  # noqa: E402
from oracles.snap_spec import spec_snap_int  # noqa: E402

from snapuq.native.blob import write_blob  # noqa: E402
from snapuq.native.ccore import CoreSnap  # noqa: E402


@pytest.fixture(scope="module")
def snapbin() -> Path:
    return ccore.build_binary("run_snap", ["run_snap.c"])


def sigmoid_lut() -> list[int]:
    return [int(math.floor(65536 / (1 + math.exp(-k / 32)) + 0.5)) for k in range(513)]


def random_mn(rng: np.random.Generator, lo: int, hi: int, signed: bool = False) -> tuple[int, int]:
    m = int(rng.integers(2**30, 2**31))
    if signed and rng.random() < 0.5:
        m = -m
    return m, int(rng.integers(lo, hi))


def random_snap(seed: int) -> tuple[dict[str, Any], int]:
    rng = np.random.default_rng(seed)
    n_taps = int(rng.integers(1, 4))
    n_classes = int(rng.integers(2, 11))
    best = bool(seed % 2)
    taps = []
    for k in range(n_taps):
        d = int(rng.integers(1, 80))
        big = 2**20
        small = int(rng.integers(0, 2**20 + 1))
        k_a, k_mu = (big, small) if rng.random() < 0.5 else (small, big)
        # realistic magnitudes: t = |a - mu| / sigma * 2^12 of order 2^12 (FIXED_POINT.md step 2)
        r = int(rng.integers(16, 38))
        lut = np.minimum(np.floor(rng.uniform(0.02, 4, size=256) * 2.0 ** (r - 11)), 2**30 - 1)
        lut = lut.astype(np.int64).tolist()
        pm, pn = random_mn(rng, 29, 34)
        qm, qn = random_mn(rng, 36, 44, signed=True)
        taps.append({"name": f"tap{k}", "d": d, "a": f"tap{k}_a", "mu": f"tap{k}_mu",
                     "logvar": f"tap{k}_logvar",
                     "z_a": int(rng.integers(-128, 128)), "z_mu": int(rng.integers(-128, 128)),
                     "z_v": int(rng.integers(-128, 128)), "k_a": k_a, "k_mu": k_mu, "lut_shift": r,
                     "inv_sigma_lut": lut, "p_m": pm if best else 2**30, "p_n": pn if best else 30,
                     "q_m": qm if best else 0, "q_n": qn if best else 0,
                     "r_q16": int(rng.integers(-2**18, 2**18)) if best else 0,
                     "w_q16": int(rng.integers(0, 2**16))})
    b1 = random_mn(rng, 38, 44, signed=not best)
    b2 = random_mn(rng, 27, 32, signed=not best)
    hm, hn = random_mn(rng, 29, 33)
    perr = best and (seed // 2) % 2 == 0
    plut = np.sort(rng.integers(0, 65537, size=257)).tolist()
    snap = {"spec_version": 2, "variant": "best" if best else "literal", "taps": taps,
            "combine": "perr_alarm" if perr else "logistic",
            "perr": {"lut": plut, "step_shift": 8} if perr else None,
            "alarm": {"k_q16": int(rng.integers(1, 2**22))} if perr else None,
            "hinge": {"q_q16": int(rng.integers(0, 2**19)), "m": hm, "n": hn} if best else None,
            "conf": {"kind": "msp_margin", "alpha": 0.5, "a_q16": int(rng.integers(0, 65537)),
                     "probs": "probs"},
            "logistic": {"b0_q16": int(rng.integers(-2**18, 2**18)), "b1_m": b1[0], "b1_n": b1[1],
                         "b2_m": b2[0], "b2_n": b2[1], "z_clamp_q16": 2**20 - 1, "lut_step_shift": 11,
                         "sigmoid_lut": sigmoid_lut()},
            "u_threshold_q16": int(rng.integers(0, 65537))}
    snap["intap"] = random_intap(rng) if best and seed % 3 != 2 else None
    if snap["intap"]:
        snap["spec_version"] = 3
    return snap, n_classes


def random_intap(rng: np.random.Generator) -> dict[str, Any]:
    """Step 4b constants: a rows x cols input (1 x K, R x 1 and R x K views) with z of order 2^12."""
    rows, cols = [(1, int(rng.integers(2, 40))), (int(rng.integers(2, 30)), 1),
                  (int(rng.integers(2, 20)), int(rng.integers(2, 20)))][int(rng.integers(0, 3))]
    nf = cols + rows + (cols if rows > 1 else 0) + (rows if cols > 1 else 0)
    g = [random_mn(rng, 30, 40) for _ in range(nf)]
    pm, pn = random_mn(rng, 29, 34)
    return {"rows": rows, "cols": cols, "n_feat": nf, "z_x": int(rng.integers(-128, 128)),
            "g_m": [m for m, _ in g], "g_n": [n for _, n in g],
            "h_q12": rng.integers(-2**16, 2**16, size=nf).tolist(), "p_m": pm, "p_n": pn,
            "r_q16": int(rng.integers(-2**18, 2**18)), "w_q16": int(rng.integers(0, 2**17))}


def random_records(snap: dict[str, Any], n_classes: int, n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    recs = []
    for r in range(n):
        def gen(size: int, extreme: bool = r % 10 == 0) -> np.ndarray:
            if extreme:   # extremes exercise the caps
                return np.full(size, rng.choice([-128, 127]), dtype=np.int8)
            return rng.integers(-128, 128, size=size, dtype=np.int8)
        out = {"logits": gen(n_classes), "probs": gen(n_classes)}
        for tp in snap["taps"]:
            for k in ("a", "mu", "logvar"):
                out[tp[k]] = gen(tp["d"])
        if snap.get("intap"):
            out["input"] = gen(snap["intap"]["rows"] * snap["intap"]["cols"])
        recs.append(out)
    return recs


def run_score(binary: Path, snap: dict[str, Any], n_classes: int, recs: list[dict[str, np.ndarray]],
              tmp: Path) -> list[dict[str, Any]]:
    outputs = snap_outputs(snap, n_classes)
    blob = write_blob(model_for(snap, outputs), {"outputs": outputs, "snap": snap})
    (tmp / "model.snapuq").write_bytes(blob)
    body = [struct.pack("<i", len(recs))]
    for out in recs:
        body.append(out["logits"].tobytes() + out["probs"].tobytes())
        for tp in snap["taps"]:
            body.append(b"".join(out[tp[k]].tobytes() for k in ("a", "mu", "logvar")))
        if snap.get("intap"):
            body.append(out["input"].tobytes())
    (tmp / "rec.bin").write_bytes(b"".join(body))
    args = ["score", str(tmp / "model.snapuq"), str(tmp / "rec.bin"), str(tmp / "out.bin")]
    subprocess.run([str(binary), *args], check=True, capture_output=True)
    nt = len(snap["taps"])
    rows = np.frombuffer((tmp / "out.bin").read_bytes(), dtype="<i4").reshape(len(recs), 2 * nt + 9)
    keys = ["S16", "F16", "m16", "P16", "A16", "Z16", "U16", "pred", "flag"]
    return [{"ebar16": row[:nt].tolist(), "s16": row[nt:2 * nt].tolist(),
             **dict(zip(keys, map(int, row[2 * nt:])))} for row in rows]


@pytest.mark.parametrize("seed", range(6))
def test_score_matches_spec(snapbin: Path, tmp_path: Path, seed: int) -> None:
    snap, n_classes = random_snap(seed)
    recs = random_records(snap, n_classes, 60, seed + 1000)
    ours = run_score(snapbin, snap, n_classes, recs, tmp_path)
    expected = [spec_snap_int(o, snap) for o in recs]
    assert [r.pop("s_in16") > 0 for r in expected].count(True) >= (50 if snap.get("intap") else 0)
    assert ours == expected   # run_snap's rows carry S16, which holds s_in16 (step 5)
    assert len({r["S16"] for r in ours}) > 10 and len({r["U16"] for r in ours}) > 3   # not a constant path


def model_for(snap: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> bytes:
    it = snap.get("intap")
    if not it:
        return outputs_model(outputs)
    return outputs_model(outputs, input_shape=[1, it["rows"] * it["cols"]], input_zero_point=it["z_x"])


def snap_outputs(snap: dict[str, Any], n_classes: int) -> dict[str, dict[str, Any]]:
    """A model output map (name -> index, shape) for a random SNAP section's records."""
    names = [("logits", n_classes), ("probs", n_classes)]
    names += [(tp[k], tp["d"]) for tp in snap["taps"] for k in ("a", "mu", "logvar")]
    return {n: {"index": i, "shape": [1, d]} for i, (n, d) in enumerate(names)}


@pytest.mark.parametrize("seed", [11, 12, 13, 15])
def test_host_library_matches_spec(seed: int) -> None:
    """snapuq.native.ccore (the core as a shared library; the constants packed into a model blob and read
    by the core's blob reader against a model with that output table) == the spec."""
    snap, n_classes = random_snap(seed)
    recs = random_records(snap, n_classes, 40, 7)
    batch = {k: np.stack([r[k].ravel() for r in recs]) for k in recs[0]}
    outputs = snap_outputs(snap, n_classes)
    ours = CoreSnap(model_for(snap, outputs), {"outputs": outputs, "snap": snap}).score(batch)
    for i, rec in enumerate(recs):
        exp = spec_snap_int(rec, snap)
        got = {k: (v[i].tolist() if v.ndim == 2 else int(v[i])) for k, v in ours.items()}
        assert got == exp


def _fit_float64(s: np.ndarray, m: np.ndarray, y: np.ndarray, l2: float, nonneg: bool) -> np.ndarray:
    from scipy.optimize import minimize
    x = np.stack([np.ones_like(s), s, m], 1).astype(np.float64)

    def f(b: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ b
        val = np.sum(np.logaddexp(0, z) - y * z) + 0.5 * l2 * (b[1] ** 2 + b[2] ** 2)
        p = 1 / (1 + np.exp(-z))
        g = x.T @ (p - y) + l2 * np.array([0, b[1], b[2]])
        return float(val), g
    bounds = [(None, None), (0, None), (0, None)] if nonneg else None
    res = minimize(f, np.zeros(3), jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 1000})
    return res.x


@pytest.mark.parametrize("nonneg", [False, True])
def test_logistic_fit_matches_float64(snapbin: Path, tmp_path: Path, nonneg: bool) -> None:
    rng = np.random.default_rng(5)
    n = 800
    s = np.abs(rng.normal(size=n)) * 2
    m = rng.uniform(0, 1, size=n)
    # true model: S matters, m matters, and (for the nonneg case) a negative true b1 must clamp
    b_true = np.array([-2.0, -0.7 if nonneg else 0.9, 3.0])
    z_true = b_true[0] + b_true[1] * s + b_true[2] * m
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z_true))).astype(np.int32)
    l2 = 1e-3
    blob = struct.pack("<iiffi", n, 50, l2, 1e-5, int(nonneg))
    blob += b"".join(struct.pack("<ffi", a, b, c) for a, b, c in zip(s, m, y))
    (tmp_path / "fit.bin").write_bytes(blob)
    p = subprocess.run([str(snapbin), "fit", str(tmp_path / "fit.bin")], check=True, capture_output=True,
                       text=True)
    res = json.loads(p.stdout)
    ref = _fit_float64(s.astype(np.float32).astype(np.float64), m.astype(np.float32).astype(np.float64),
                       y.astype(np.float64), l2, nonneg)
    assert res["status"] == "ok", res
    # stated tolerance: |beta_c - beta_float64| <= 2e-3 * (1 + |beta|) per coefficient
    assert np.all(np.abs(np.array(res["beta"]) - ref) <= 2e-3 * (1 + np.abs(ref))), (res, ref)
    if nonneg:
        assert res["beta"][1] == 0.0
    assert res["iters"] < 50
    b0q, b1m, b1n, b2m, b2n = res["beta_q"]
    assert abs(b0q / 65536 - res["beta"][0]) <= 1 / 65536
    assert b1m / 2.0**b1n == pytest.approx(res["beta"][1], rel=1e-6, abs=1e-12)
    assert b2m / 2.0**b2n == pytest.approx(res["beta"][2], rel=1e-6)


def test_fit_rejects_one_class(snapbin: Path, tmp_path: Path) -> None:
    blob = struct.pack("<iiffi", 10, 20, 1e-3, 1e-5, 0)
    blob += b"".join(struct.pack("<ffi", i, 0.5, 0) for i in range(10))
    (tmp_path / "fit.bin").write_bytes(blob)
    p = subprocess.run([str(snapbin), "fit", str(tmp_path / "fit.bin")], check=True, capture_output=True,
                       text=True)
    assert json.loads(p.stdout)["status"] == "numeric failure"


def test_welford_weights(snapbin: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vals = np.stack([rng.normal(3, 0.5, 2000), rng.normal(10, 2.0, 2000), rng.normal(1, 1.0, 2000)], 1)
    vals = vals.astype(np.float32)
    (tmp_path / "w.bin").write_bytes(struct.pack("<ii", 3, len(vals)) + vals.tobytes())
    p = subprocess.run([str(snapbin), "welford", str(tmp_path / "w.bin")], check=True, capture_output=True,
                       text=True)
    res = json.loads(p.stdout)
    v64 = vals.astype(np.float64)
    assert np.allclose(res["mean"], v64.mean(0), rtol=1e-5)
    assert np.allclose(res["var"], v64.var(0, ddof=1), rtol=1e-4)
    inv = 1 / v64.var(0, ddof=1)
    assert np.all(np.abs(np.array(res["w_q16"]) - inv / inv.sum() * 65536) <= 2)


def test_monitor_window_and_cusum(snapbin: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    clean = rng.integers(0, 20000, 300)
    shifted = rng.integers(30000, 65536, 100)
    u = np.concatenate([clean, shifted]).astype(np.int32)
    window, thr, ref, h = 20, 30000, 15000, 200000
    (tmp_path / "m.bin").write_bytes(struct.pack("<5i", window, thr, ref, h, len(u)) + u.tobytes())
    p = subprocess.run([str(snapbin), "monitor", str(tmp_path / "m.bin")], check=True, capture_output=True,
                       text=True)
    res = json.loads(p.stdout)
    bits = [int(c) for c in res["alarms"]]
    # python reference of the same rule
    exp, c, first = [], 0, 0
    for i, x in enumerate(u.tolist()):
        a = 0
        if i + 1 >= window and sum(u[i + 1 - window:i + 1].tolist()) >= thr * window:
            a |= 1
        c = max(0, c + x - ref)
        if c >= h:
            a |= 2
        exp.append(a)
        if a and not first:
            first = i + 1
    assert bits == exp
    assert res["first_alarm"] == first and 300 < first <= 320
    assert res["q990"] == int(np.sort(u)[math.ceil(0.99 * len(u)) - 1])


def test_input_tap_constants_are_checked_at_load() -> None:
    """A shift outside 0..62 or a table of the wrong length is refused when the blob is read (once, at
    load: the per-statistic shifts are not re-checked on every score)."""
    from snapuq.errors import ModelFormatError

    snap, n_classes = random_snap(13)
    assert snap["intap"]
    outputs = snap_outputs(snap, n_classes)
    bad = json.loads(json.dumps(snap))
    bad["intap"]["g_n"][-1] = 63
    with pytest.raises(ModelFormatError, match="constants out of range"):
        CoreSnap(model_for(bad, outputs), {"outputs": outputs, "snap": bad})
    short = json.loads(json.dumps(snap))
    short["intap"]["h_q12"] = short["intap"]["h_q12"][:-1]
    with pytest.raises(ModelFormatError, match="n_feat"):
        CoreSnap(model_for(short, outputs), {"outputs": outputs, "snap": short})
