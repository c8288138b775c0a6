"""`snapuq train` + `snapuq eval` on the embedded digits set (short training): every contract key, SNAP
scored from calib.json, its variants and all plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snapuq import cli
from snapuq.evaluation.report import CONTRACT_KEYS

METHODS = ["snap", "msp", "entropy", "temp_scaling", "mc_dropout", "deep_ensemble", "ee_ensemble", "odin",
           "energy", "mahalanobis", "react", "ash", "dirichlet"]


ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "digits"


@pytest.fixture(scope="module")
def digits_eval(tmp_path_factory):
    """Eval of the shipped digits model directory (trained by `snapuq train --dataset digits`), or of a
    short fresh training run when the checkout has none."""
    base = tmp_path_factory.mktemp("digits")
    d, r = SHIPPED, base / "R"
    if not (d / "baselines" / "ensemble_0.keras").exists():
        d = base / "D"
        assert cli.main(["train", "--dataset", "digits", "--out", str(d), "--epochs", "3", "--seed", "0",
                         "--no-progress"]) == 0
    assert cli.main(["eval", str(d), "--report", str(r), "--limit", "200", "--n-ood", "200", "--segment",
                     "100", "--no-progress"]) == 0
    return d, r, json.loads((r / "metrics.json").read_text())


def test_digits_contract(digits_eval):
    d, r, m = digits_eval
    assert m["dataset"] == "digits" and m["n_test"] == 200 and m["n_ood"] == 200
    assert set(m["accuracy"]) == {"float", "int8"} and m["accuracy"]["float"] > 0.5
    assert list(m["methods"]) == METHODS
    for name, vals in m["methods"].items():
        assert set(vals) == set(CONTRACT_KEYS), name
        for k in ("auroc_ok_vs_err", "auroc_id_vs_ood", "aupr_ok_vs_err", "aurc", "ece"):
            assert isinstance(vals[k], float) and 0.0 <= vals[k] <= 1.0, (name, k)
        # every score ranks: a constant or random scorer has AUROC 0.5 (shipped model, 200 + 200 inputs:
        # the weakest method, dirichlet, measured 0.76 / 0.74; snap 0.96 / 1.00)
        assert vals["auroc_ok_vs_err"] > 0.65 and vals["auroc_id_vs_ood"] > 0.65, (name, vals)
    snap, err = m["methods"]["snap"], 1.0 - max(m["accuracy"].values())
    assert snap["auroc_id_vs_ood"] > 0.9 and snap["auroc_ok_vs_err"] > 0.8, snap
    assert snap["aurc"] < 0.5 * err, (snap["aurc"], err)  # a scorer that ranks nothing: AURC ~ the error rate
    assert "notes" not in m  # every method ran, the trained baselines included
    assert len(m["stream"]["corruptions"]) >= 5
    assert m["stream"]["event_frames"] > 0


def test_digits_snap_variants_and_checks(digits_eval):
    d, r, m = digits_eval
    sv = m["snap_variants"]
    assert sv["default"] == m["details"]["snap"]["params"]["variant"]
    others = [v for v in sv if v != "default"]
    assert others, "calib.json should carry the literal variant for the ablation"
    for v in others:
        assert set(CONTRACT_KEYS) <= set(sv[v]), v
    dc = m["dev_check"]
    assert dc["ok"] == (dc["delta"] >= -1e-12)
    assert bool(m["flags"]) == (not dc["ok"])
    # the shared check: eval's dev check equals what calibration recorded (same split, same function)
    calib = json.loads((d / "calib.json").read_text())
    if calib.get("version", 1) >= 2:
        assert dc["ok"] and abs(dc["delta"] - calib["fit"]["dev_check"]["delta"]) < 1e-9
    assert set(m["test_check"]) >= {"delta", "auroc_ok_vs_err_snap", "auroc_ok_vs_err_msp"}
    sd = m["details"]["snap"]
    assert 0 <= sd["ece_p_err"] <= 1 and 0 <= sd["ece_U"] <= 1
    assert m["methods"]["snap"]["ece"] == sd["ece_p_err"]
    for name in ("snap", "msp"):
        assert 0 <= m["details"][name]["cid_false_alarm_rate"] <= 1
    for png in ("roc.png", "risk_coverage.png", "stream.png", "tap_surprisal.png", "reliability.png"):
        assert (r / png).stat().st_size > 1000, png
    rep = (r / "report.md").read_text()
    assert "| **snap** |" in rep and "SNAP variants" in rep and "CID false alarm" in rep
    h = (calib if calib.get("variant") == "best" else calib["variants"]["best"])["hinge"]
    assert sd["hinge"]["n_ref"] == h["n_ref"] and sd["hinge"]["quantile"] == h["quantile"]
    assert f"- SNAP alarm hinge: quantile {h['quantile']} of the S of {h['n_ref']} clean references" in rep


def test_digits_corrupt_model_file(digits_eval, tmp_path, capsys):
    import shutil

    d = tmp_path / "D"
    shutil.copytree(digits_eval[0], d, ignore=shutil.ignore_patterns("baselines", "*.tflite", "*.c", "*.h"))
    (d / "model.keras").write_bytes(b"PK\x03\x04 truncated")
    assert cli.main(["eval", str(d), "--report", str(tmp_path / "R")]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and err.count("\n") == 1
