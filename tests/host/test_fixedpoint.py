"""Integer SNAP (docs/FIXED_POINT.md): constant encoding, the C core's score (snapuq.native.ccore) ==
the spec transcription (tests/oracles/snap_spec.py), and the stated error bound against the
float equivalent on random int8 tap tensors."""

from __future__ import annotations

import numpy as np
import pytest
from fixtures.outputs_model import outputs_model
from oracles.snap_spec import snap_float, spec_snap_int

from snapuq.errors import ModelFormatError
from snapuq.export.fixedpoint import FixedPointError, build_snap, encode_multiplier, sigmoid_lut
from snapuq.native.ccore import CoreSnap


def _outputs(d=(16, 24), rng=None):
    rng = rng or np.random.default_rng(0)
    outs = {
        "logits": {"index": 0, "scale": 0.1, "zero_point": 3, "shape": [1, 10]},
        "probs": {"index": 1, "scale": 1 / 256, "zero_point": -128, "shape": [1, 10]},
    }
    for k, dk in enumerate(d):
        outs[f"tap{k}_a"] = {
            "index": 2 + 3 * k,
            "scale": float(rng.uniform(0.01, 0.1)),
            "zero_point": -128,
            "shape": [1, dk],
        }
        outs[f"tap{k}_mu"] = {
            "index": 3 + 3 * k,
            "scale": float(rng.uniform(0.01, 0.1)),
            "zero_point": int(rng.integers(-20, 20)),
            "shape": [1, dk],
        }
        outs[f"tap{k}_lvr"] = {
            "index": 4 + 3 * k,
            "scale": float(rng.uniform(0.01, 0.05)),
            "zero_point": -128,
            "shape": [1, dk],
        }
    return outs


def _calib(variant="best", d=(16, 24)):
    if variant == "best_perr":  # calib version 2: p_err table + alarm
        c = _calib("best", d)
        g = np.linspace(0.0, 1.0, 257)
        c.update(version=2, perr={"knots": (1.0 / (1.0 + np.exp(4.0 - 6.0 * g))).tolist()}, alarm={"k": 0.7})
        return c
    taps = [
        {
            "name": f"tap{k}",
            "d": dk,
            "c_e": 0.5,
            "c_l": 0.5,
            "two_sided": True,
            "mean": -1.5 + k,
            "sd": 0.7 + 0.2 * k,
        }
        for k, dk in enumerate(d)
    ]
    c = {
        "version": 1,
        "variant": variant,
        "eps": 0.01,
        "logvar_offset": -2.0,
        "taps": taps,
        "weights": [0.5, 0.5],
        "hinge": {"q": 2.0, "sd": 0.8, "quantile": 0.995},
        "conf": {"kind": "msp_margin", "alpha": 0.5},
        "beta": [-3.0, 1.7, 6.5],
        "u_threshold": 0.5,
    }
    if variant == "literal":
        c["taps"] = [{**t, "c_e": 1.0, "c_l": 0.0, "two_sided": False} for t in taps]
        c.update(weights=[0.8, 0.2], hinge=None, beta=[-2.0, -0.02, 5.0])
    return c


def _random_codes(outputs, n, rng):
    codes = {}
    for name, o in outputs.items():
        codes[name] = rng.integers(-128, 128, size=(n, o["shape"][-1])).astype(np.int8)
    # realistic probs: a peaked distribution
    p = rng.dirichlet(np.full(10, 0.3), size=n)
    codes["probs"] = np.clip(np.round(p * 256) - 128, -128, 127).astype(np.int8)
    # half of the batch in distribution: mu close to a, moderate log-variances; the rest random
    h = n // 2
    for k in range(2):
        oa, om = outputs[f"tap{k}_a"], outputs[f"tap{k}_mu"]
        a = (codes[f"tap{k}_a"][:h].astype(float) - oa["zero_point"]) * oa["scale"]
        mu = a + rng.normal(0, 0.2, size=a.shape)
        qm = np.round(mu / om["scale"]) + om["zero_point"]
        codes[f"tap{k}_mu"][:h] = np.clip(qm, -128, 127).astype(np.int8)
        codes[f"tap{k}_lvr"][:h] = rng.integers(-128, -60, size=a.shape).astype(np.int8)
    return codes


def test_encode_multiplier():
    for c in (1.0, 0.5, 3.25, -0.001, 1234.5, 2.0**-30, 7e-9):
        m, n = encode_multiplier(c, "c")
        assert 0 <= n <= 62 and (1 << 30) <= abs(m) < (1 << 31)
        assert abs(m / 2.0**n - c) <= abs(c) * 2.0**-30
    assert encode_multiplier(0.0, "c") == (0, 0)
    assert encode_multiplier(1e-12, "c") == (0, 0)
    with pytest.raises(FixedPointError):
        encode_multiplier(2.0**31, "c")
    with pytest.raises(FixedPointError):
        encode_multiplier(float("nan"), "c")


def test_sigmoid_lut():
    t = sigmoid_lut()
    assert len(t) == 513 and t[0] == 32768 and t[-1] == 65536
    assert all(b >= a for a, b in zip(t, t[1:]))


@pytest.mark.parametrize("variant", ["best", "literal", "best_perr"])
def test_c_core_equals_spec_and_bound(variant):
    rng = np.random.default_rng(5)
    outputs = _outputs()
    codes = _random_codes(outputs, 400, rng)
    calib = _calib(variant)
    if variant != "literal":  # standardize on the in-distribution half, as calibration does
        f0 = snap_float({k: v[:200] for k, v in codes.items()}, build_snap(calib, outputs), outputs)
        lb = [
            np.mean(
                (codes[f"tap{k}_lvr"][:200].astype(float) + 128) * outputs[f"tap{k}_lvr"]["scale"] - 2.0,
                axis=1,
            )
            for k in range(2)
        ]
        for k, t in enumerate(calib["taps"]):
            y = 0.5 * f0["ebar"][:, k] + 0.5 * lb[k]
            t["mean"], t["sd"] = float(y.mean()), float(y.std())
        S0 = snap_float({k: v[:200] for k, v in codes.items()}, build_snap(calib, outputs), outputs)["S"]
        calib["hinge"] = {"q": float(np.quantile(S0, 0.9)), "sd": float(S0.std()), "quantile": 0.9}
    snap = build_snap(calib, outputs)
    r = CoreSnap(outputs_model(outputs), {"outputs": outputs, "snap": snap}).score(codes)
    for i in range(0, 400, 37):
        s = spec_snap_int({k: v[i] for k, v in codes.items()}, snap)
        assert s["ebar16"] == r["ebar16"][i].tolist()
        for key in ("S16", "F16", "m16", "P16", "A16", "Z16", "U16", "flag", "pred"):
            assert s[key] == r[key][i], key
    f = snap_float(codes, snap, outputs)
    eb = r["ebar16"] / 65536.0
    inside = f["ebar"] < 32768
    assert np.all(np.abs(eb - f["ebar"])[inside] <= 2.0**-10 * (1 + f["ebar"][inside]))
    ok = np.abs(f["z"]) < 16
    assert np.all(np.abs(r["U16"] / 65536.0 - f["U"])[ok] <= 2.0**-10)
    assert np.all(np.abs(r["m16"] / 65536.0 - f["m"]) <= 2.0**-16)
    assert np.array_equal(r["flag"], r["U16"] >= snap["u_threshold_q16"])
    assert np.all(np.abs(r["P16"] / 65536.0 - f["p_err"]) <= 2.0**-10)
    assert np.all(np.abs(r["A16"] / 65536.0 - f["alarm"]) <= 2.0**-10)
    if variant == "best_perr":
        assert snap["combine"] == "perr_alarm" and np.all(r["Z16"] == 0)
        assert (r["A16"] > 0).sum() > 20 and (r["A16"] == 0).sum() > 20  # the hinge gates the alarm
        # U = p_err exactly where there is no surprisal, and never below it
        assert np.array_equal(r["U16"][r["A16"] == 0], r["P16"][r["A16"] == 0])
        assert np.all(r["U16"] >= r["P16"])
    else:
        assert snap["combine"] == "logistic" and np.array_equal(r["P16"], r["U16"])
    # U spans a useful range on this data (the test would not notice a constant otherwise)
    assert r["U16"].min() < 20000 and r["U16"].max() > 45000


def test_manifest_mismatch_errors():
    outputs = _outputs()
    bad = dict(outputs)
    bad["probs"] = {**outputs["probs"], "scale": 0.01}
    with pytest.raises(FixedPointError, match="probs"):
        build_snap(_calib(), bad)
    missing = {k: v for k, v in outputs.items() if k != "tap1_mu"}
    with pytest.raises(FixedPointError, match="tap1_mu"):
        build_snap(_calib(), missing)
    wrong_d = _calib()
    wrong_d["taps"][0]["d"] = 99
    with pytest.raises(FixedPointError, match="dimensions"):
        build_snap(wrong_d, outputs)
    snap = build_snap(_calib(), outputs)
    codes = _random_codes(outputs, 4, np.random.default_rng(0))
    codes["tap0_a"] = codes["tap0_a"][:, :5]
    with pytest.raises(ModelFormatError, match="tap0_a"):
        CoreSnap(outputs_model(outputs), {"outputs": outputs, "snap": snap}).score(codes)


def test_extra_variant_is_built_from_its_own_calibration_only():
    """snapuq.json's extra variants: the literal variant of a p_err/alarm calibration is the logistic
    it was fitted as, in int8 as in float (nothing of the default's perr, alarm or hinge leaks into it),
    and scoring it through the C core equals the spec."""
    outputs = _outputs()
    calib = _calib("best_perr")
    calib["variants"] = {"literal": _calib("literal")}
    best = build_snap(calib, outputs)
    lit = build_snap(calib, outputs, variant="literal")
    assert best["combine"] == "perr_alarm" and best["perr"] and best["alarm"] and best["hinge"]
    assert lit["variant"] == "literal" and lit["combine"] == "logistic"
    assert lit["perr"] is None and lit["alarm"] is None and lit["hinge"] is None and lit["intap"] is None
    codes = _random_codes(outputs, 40, np.random.default_rng(3))
    ours = CoreSnap(outputs_model(outputs), {"outputs": outputs, "snap": lit}).score(codes)
    rows = [spec_snap_int({k: v[i] for k, v in codes.items()}, lit) for i in range(40)]
    assert ours["U16"].tolist() == [r["U16"] for r in rows]
    with pytest.raises(FixedPointError, match="no variant 'odds'"):
        build_snap(calib, outputs, variant="odds")
