"""`snapuq export` / `snapuq verify` / int8_predict on the shipped digits model directory
(models/digits: model.keras, config.json, calib.json from `snapuq train`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from snapuq.errors import ModelFormatError

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits"
TRAINED = ("model.keras", "config.json", "calib.json")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not all((DIGITS / f).exists() for f in TRAINED):
        pytest.fail("models/digits is not shipped (model.keras, config.json, calib.json)")
    from snapuq.commands.export import export_model

    d = tmp_path_factory.mktemp("digits") / "digits"
    d.mkdir()
    for f in TRAINED:
        shutil.copy(DIGITS / f, d / f)
    man = export_model(d, n_rep=200, n_check=5, log=lambda *_: None)
    return d, man


def test_export_writes_consistent_artifacts(exported):
    d, man = exported
    for f in ("model_int8.tflite", "model_float.tflite", "snapuq.json"):
        assert (d / f).stat().st_size > 0
    assert man["verify"]["differing_elements"] == 0
    outs = man["outputs"]
    k = len(man["taps"])
    assert {"logits", "probs"} <= set(outs) and all(
        f"tap{i}_{r}" in outs for i in range(k) for r in ("a", "mu", "logvar")
    )
    assert sorted(o["index"] for o in outs.values()) == list(range(len(outs)))
    assert all(o["dtype"] == "int8" for o in outs.values())
    assert man["model"]["arena_bytes_tflm"] > 0
    assert man["model"]["float_bytes"] > man["model"]["bytes"]
    assert len(man["snap"]["taps"][0]["inv_sigma_lut"]) == 256
    on_disk = json.loads((d / "snapuq.json").read_text())
    assert on_disk["model"]["sha256"] == man["model"]["sha256"]
    # what an image built for the model needs: its operators (SNAPUQ_MODEL_OPS too) and capacities
    assert man["model"]["ops"] == ["CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "MEAN", "SOFTMAX"]
    caps = man["model"]["capacities"]
    assert caps["SNAPUQ_MAX_OPS"] == man["model"]["n_ops"] and caps["SNAPUQ_MAX_IO"] == len(outs)
    assert caps["SNAPUQ_MAX_TENSORS"] > caps["SNAPUQ_MAX_OPS"]
    hdr = (d / "snapuq_model.h").read_text()
    assert "#define SNAPUQ_MODEL_OPS(X) \\\n    X(CONV_2D, conv_2d) \\\n" in hdr
    assert "X(SOFTMAX, softmax)\n" in hdr


def test_verify_reports_zero_differences(capsys):
    from snapuq.cli import main

    d = DIGITS  # the shipped, exported artifacts
    assert main(["verify", str(d), "--n", "30"]) == 0
    out = capsys.readouterr().out
    assert "total differing elements: 0" in out
    assert main(["verify", str(d), "--n", "10", "--random"]) == 0


def test_int8_predict_matches_float_model():
    from snapuq.data import load_dataset
    from snapuq.export import int8_predict
    from snapuq.export.manifest import load_manifest
    from snapuq.nn.saved import load_model_dir
    from snapuq.uq.score import SnapScorer

    d = DIGITS
    man = load_manifest(d)
    ds = load_dataset("digits", None, 0)
    x, y = ds.x_test[:120], ds.y_test[:120]
    r = int8_predict(d, x)
    md = load_model_dir(d)
    f = md.predict(x)
    acc8 = float(np.mean(r["pred"] == y))
    acc32 = float(np.mean(f["logits"].argmax(1) == y))
    assert acc8 > 0.8 and abs(acc8 - acc32) < 0.05
    assert float(np.mean(r["pred"] == f["logits"].argmax(1))) > 0.95
    u32 = SnapScorer.from_calib(md.calib).score(f, x)["U"]
    assert np.corrcoef(r["U"], u32)[0, 1] > 0.8
    assert r["ebar"].shape == (120, len(man["taps"]))
    lv = r[man["snap"]["taps"][0]["logvar"]]
    assert np.all(lv >= man["snap"]["float"]["logvar_offset"] - 1e-9)  # the variance floor holds


def test_manifest_that_does_not_match_the_model(tmp_path):
    from snapuq.cli import main
    from snapuq.export.manifest import check_manifest, load_manifest

    d = DIGITS
    b = (d / "model_int8.tflite").read_bytes()
    man = load_manifest(d)
    bad = json.loads(json.dumps(man))
    bad["outputs"]["logits"]["index"] = (bad["outputs"]["logits"]["index"] + 1) % len(bad["outputs"])
    bad["model"]["sha256"] = None
    with pytest.raises(ModelFormatError, match="logits"):
        check_manifest(bad, b)
    bad2 = json.loads(json.dumps(man))
    bad2["model"]["sha256"] = "0" * 64
    with pytest.raises(ModelFormatError, match="sha256"):
        check_manifest(bad2, b)
    e = tmp_path / "e"
    e.mkdir()
    (e / "model_int8.tflite").write_bytes(b)
    (e / "snapuq.json").write_text(json.dumps(bad2))
    assert main(["verify", str(e), "--n", "1", "--random"]) == 1
    (e / "snapuq.json").write_text("{not json")
    assert main(["verify", str(e), "--n", "1", "--random"]) == 1
