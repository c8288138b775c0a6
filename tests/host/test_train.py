"""`snapuq train` end to end on digits (few epochs) and its error paths."""

import json

import numpy as np
import pytest

from snapuq.cli import main


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("m") / "digits"
    rc = main(["train", "--dataset", "digits", "--out", str(d), "--epochs", "3", "--rank", "16",
               "--no-baselines", "--no-progress"])  # fmt: skip
    assert rc == 0
    return d


def test_train_writes_a_complete_model_dir(tiny_dir):
    cfg = json.loads((tiny_dir / "config.json").read_text())
    for k in (
        "dataset",
        "backbone",
        "input_shape",
        "n_classes",
        "class_names",
        "taps",
        "rank",
        "detach",
        "frozen_backbone",
        "lambda_ss",
        "lambda_reg",
        "eps",
        "qat_frac",
        "logvar_offset",
        "timings_s",
    ):
        assert k in cfg, k
    assert [t["layer"] for t in cfg["taps"]] == ["relu1", "relu3"]
    assert cfg["qat_epochs"] == 1 and cfg["test_accuracy_float"] > 0.5
    cal = json.loads((tiny_dir / "calib.json").read_text())
    assert cal["variant"] == "best" and len(cal["taps"]) == 2 and "literal" in cal["variants"]


def test_model_dir_predict_and_export_model(tiny_dir):
    from snapuq.data import load_dataset
    from snapuq.nn.saved import load_model_dir
    from snapuq.uq.score import SnapScorer

    md = load_model_dir(tiny_dir)
    x = load_dataset("digits").x_test[:16]
    o = md.predict(x)
    for k in ("logits", "probs", "feat", "tap0_a", "tap0_mu", "tap0_logvar", "tap1_a"):
        assert k in o
    assert o["tap0_logvar"].min() >= md.config["logvar_offset"] - 1e-5
    r = SnapScorer.from_calib(md.calib).score(o, x)
    assert r["U"].shape == (16,) and np.all((r["U"] >= 0) & (r["U"] <= 1))
    em = md.export_model()
    eo = em(x[:2])
    lv = np.asarray(eo["tap0_logvar"]) + md.config["logvar_offset"]
    np.testing.assert_allclose(lv, o["tap0_logvar"][:2], atol=1e-5)
    assert "feat" not in eo


def test_train_is_reproducible_by_seed(tiny_dir, tmp_path):
    from snapuq.nn.saved import load_model_dir

    d2 = tmp_path / "again"
    assert main(["train", "--dataset", "digits", "--out", str(d2), "--epochs", "3", "--rank", "16",
                 "--no-baselines", "--no-progress"]) == 0  # fmt: skip
    x = np.random.default_rng(0).uniform(size=(4, 8, 8, 1)).astype(np.float32)
    a = load_model_dir(tiny_dir).predict(x)["logits"]
    b = load_model_dir(d2).predict(x)["logits"]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--dataset", "nope"], "unknown dataset"),
        (["--dataset", "mnist", "--data-dir", "/nonexistent/dir"], "/nonexistent/dir"),
        (["--dataset", "digits", "--taps", "relu9"], "invalid --taps"),
        (["--dataset", "digits", "--rank", "0"], "--rank"),
        (["--dataset", "digits", "--qat-frac", "2"], "--qat-frac"),
    ],
)
def test_train_cli_errors_are_one_line_messages(argv, msg, tmp_path, capsys):
    rc = main(["train", "--out", str(tmp_path / "o"), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert msg in err and len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_load_model_dir_errors(tmp_path):
    from snapuq.errors import SnapuqError
    from snapuq.nn.saved import load_model_dir

    with pytest.raises(SnapuqError, match="no such model directory"):
        load_model_dir(tmp_path / "missing")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(SnapuqError, match="not valid JSON"):
        load_model_dir(tmp_path)


def test_calibrate_refits_without_retraining(tiny_dir, capsys):
    """`snapuq calibrate DIR --hinge-q Q` (the knob the dev check names); train's and calibrate's checks
    agree."""
    before = json.loads((tiny_dir / "calib.json").read_text())
    assert before["version"] == 2 and before["fit"]["dev_check"]["ok"]
    keras_mtime = (tiny_dir / "model.keras").stat().st_mtime
    assert main(["calibrate", str(tiny_dir), "--hinge-q", "0.999", "--no-export"]) == 0
    out = capsys.readouterr().out
    assert "dev check U-MSP AUROC ok/err" in out and ": ok" in out
    after = json.loads((tiny_dir / "calib.json").read_text())
    assert after["fit"]["hinge_quantile_requested"] == 0.999
    assert after["fit"]["hinge_quantiles_tried"][0]["quantile"] == 0.999
    assert after["hinge"]["quantile"] >= 0.999 and after["fit"]["dev_check"]["ok"]
    assert (tiny_dir / "model.keras").stat().st_mtime == keras_mtime  # no retraining
    # the same split and function: the default refit reproduces train's check exactly
    assert main(["calibrate", str(tiny_dir), "--no-export"]) == 0
    again = json.loads((tiny_dir / "calib.json").read_text())
    assert again["fit"]["dev_check"]["delta"] == pytest.approx(before["fit"]["dev_check"]["delta"], abs=1e-12)
    # the input tap (default on): 8 x 8 digits -> 32 statistics, weight 2 / (2 taps + 2); --no-input-tap
    it = again["intap"]
    assert (it["rows"], it["cols"], len(it["mu"]), it["weight"], it["fit_on"]) == (8, 8, 32, 0.5, "train")
    assert min(it["sigma"]) > 0 and again["weights"] == [0.25, 0.25]
    assert main(["calibrate", str(tiny_dir), "--no-export", "--no-input-tap"]) == 0
    plain = json.loads((tiny_dir / "calib.json").read_text())
    assert "intap" not in plain and plain["weights"] == [0.5, 0.5] and plain["fit"]["dev_check"]["ok"]
    # --alarm-rate below 1 / (n + 1): the hinge beyond every clean reference, by the fitted tail
    assert main(["calibrate", str(tiny_dir), "--no-export", "--alarm-rate", "1e-6"]) == 0
    assert "alarm rate 1e-06" in capsys.readouterr().out
    rare = json.loads((tiny_dir / "calib.json").read_text())
    h = rare["hinge"]
    assert h["alarm_rate"] == 1e-6 and h["tail"]["rule"] == "exponential tail" and h["q_over_largest_sd"] >= 0
    assert h["q"] >= again["hinge"]["q"] and rare["fit"]["alarm_rate"] == 1e-6
    assert rare["fit"]["dev_check"]["ok"]
    assert main(["calibrate", str(tiny_dir), "--no-export", "--alarm-rate", "0.7"]) == 1
    assert "--alarm-rate must be a finite number in [0, 0.5)" in capsys.readouterr().err
    assert main(["calibrate", str(tiny_dir), "--no-export"]) == 0   # leave the fixture as train wrote it


def test_calibrate_bad_input(tmp_path, capsys):
    assert main(["calibrate", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
