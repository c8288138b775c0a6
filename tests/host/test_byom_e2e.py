"""Your own model, end to end: three models the project did not write (tests/host/byom_models.py) get SNAP
heads via the Python API and via `snapuq train --model` from an .npz and from a folder of PNGs, are exported
int8, verified element by element against TFLM (0 differing elements) and run on the emulated Cortex-M4
(20 inputs, 0 mismatches vs the host reference); the sensor model also runs in the MicroPython twin. Kept
cheap: small data, few epochs (the accuracy floors below are still far above chance), one firmware build
per model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.cli import main

sys.path.insert(0, str(Path(__file__).parent))
import byom_models as BM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HAVE_QEMU = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.slow


def _export_verify_harness(d: Path, tmp: Path) -> dict:
    from snapuq.commands.export import export_model

    man = export_model(d, n_rep=64, n_check=20, log=lambda *a: None)
    assert man["verify"]["differing_elements"] == 0
    assert main(["verify", str(d), "--n", "20", "--json", str(tmp / "verify.json")]) == 0
    v = json.loads((tmp / "verify.json").read_text())
    assert v["differing_total"] == 0 and v["n"] == 20
    assert man["input"]["normalization"]["kind"] in ("none", "scale", "standard", "model")
    if HAVE_QEMU:
        out = tmp / "R"
        cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--port", "qemu:m4", "--model", str(d),
               "--limit", "20", "--out", str(out), "--build-dir", str(tmp / "fw"),
               "--no-progress"]  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        s = json.loads((out / "summary.json").read_text())
        assert s["n"] == 20 and s["mismatches_vs_host"] == 0 and s["board"] == "qemu_m4"
    return man


def _twin_equals_host(d: Path, x: np.ndarray, tmp: Path) -> None:
    """The pure-MicroPython twin under MicroPython on the model's blob: every int8 output and the integer U
    equal the host C core's (skipped without the interpreter)."""
    import os

    from snapuq.commands.micropython import host_reference, load_model_files
    from snapuq.export.convert import quantize_input
    from snapuq.native.blob import write_blob

    mpy = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
    if not mpy.exists():
        return
    tfl, man = load_model_files(d)
    xq = quantize_input(x, float(man["input"]["scale"]), int(man["input"]["zero_point"])).reshape(len(x), -1)
    (tmp / "m.snapuq").write_bytes(write_blob(tfl, man))
    (tmp / "x.bin").write_bytes(xq.tobytes())
    env = dict(os.environ, MICROPYPATH=str(ROOT / "micropython_modules" / "twin"))
    cmd = [str(mpy), str(ROOT / "tests" / "micropython" / "twin_dump.py"), str(tmp / "m.snapuq"), "+",
           str(tmp / "x.bin"), str(len(xq))]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    codes, ref = host_reference(tfl, man, xq)
    assert len(rows) == len(xq)
    diff = sum(int(np.sum(np.asarray(r["outs"][n]) != codes[n][r["i"]]))
               for r in rows for n in man["outputs"])  # fmt: skip
    assert diff == 0 and [r["u_q16"] for r in rows] == [int(v) for v in ref["U16"]]


def test_sensor_cnn_via_api(tmp_path):
    import snapuq
    from snapuq.data.accel import make_accel
    from snapuq.nn.saved import load_model_dir

    d = make_accel(40, seed=0)
    model = BM.sensor_cnn()
    BM.fit_user_model(model, d["x_train"], d["y_train"], epochs=8, batch_size=8)
    snap = snapuq.attach(model, rank=16)
    assert snap.taps == ["c2b", "c3"] and snap.tap_prev == {"c2b": "c2", "c3": "cat_relu6"}
    assert set(snap.ops) == {"AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D",
                             "MEAN", "RELU", "RESHAPE"}  # fmt: skip
    n_dev = 40
    snap.fit(d["x_train"][n_dev:], epochs=1, progress=False)
    cal = snap.calibrate(d["x_train"][:n_dev], d["y_train"][:n_dev])
    assert len(cal["taps"]) == 2
    out = snap.save(tmp_path / "har", x_test=d["x_test"], y_test=d["y_test"],
                    class_names=[str(c) for c in d["class_names"]])  # fmt: skip
    md = load_model_dir(out)
    assert md.config["backbone"] == "user" and md.config["modality"] == "sensor"
    assert md.config["test_accuracy_float"] > 0.6
    man = _export_verify_harness(out, tmp_path)
    assert man["class_names"] == ["still", "walk", "run", "shake"]
    _twin_equals_host(out, d["x_test"][:3], tmp_path)  # CONCATENATION, RELU, 3-D MEAN in the twin too


def test_residual_image_via_cli_from_png_folder(tmp_path):
    import keras

    from snapuq.data import load_dataset

    ds = load_dataset("digits", seed=0)
    model = BM.residual_image()
    BM.fit_user_model(model, ds.x_train, ds.y_train, epochs=4)
    model.save(tmp_path / "res.keras")
    x = np.concatenate([ds.x_train, ds.x_test])[:400]
    y = np.concatenate([ds.y_train, ds.y_test])[:400]
    BM.write_png_folder(tmp_path / "pngs", x, y, ds.class_names)
    out = tmp_path / "res"
    rc = main(["train", "--model", str(tmp_path / "res.keras"), "--data", str(tmp_path / "pngs"), "--out",
               str(out), "--epochs", "1", "--rank", "16", "--no-baselines", "--no-progress"])  # fmt: skip
    assert rc == 0
    cfg = json.loads((out / "config.json").read_text())
    assert [t["layer"] for t in cfg["taps"]] == ["b_relu1", "head_conv"]
    assert cfg["data_meta"]["normalization"]["kind"] == "scale" and cfg["modality"] == "image"
    assert cfg["class_names"] == ds.class_names and cfg["test_accuracy_float"] > 0.5
    del keras
    _export_verify_harness(out, tmp_path)


def test_leading_rescaling_moves_into_the_data_path_via_cli(tmp_path, capsys):
    """A model that takes raw 0..255 pixels and starts with Rescaling(1/255) (MUL, which the int8 core does
    not have): `snapuq train --model` moves the layer into the data path (the PNGs go to it raw, the record
    in snapuq.json is its scale), and the int8 model agrees with TFLM and with the board."""
    from snapuq.data import load_dataset
    from snapuq.nn.saved import load_model_dir

    ds = load_dataset("digits", seed=0)
    model = BM.residual_image(rescale=True)
    raw = np.round(np.concatenate([ds.x_train, ds.x_test])[:400] * 255.0)
    y = np.concatenate([ds.y_train, ds.y_test])[:400]
    BM.fit_user_model(model, raw[:300], y[:300], epochs=4)
    model.save(tmp_path / "res.keras")
    BM.write_png_folder(tmp_path / "pngs", raw / 255.0, y, ds.class_names)
    out = tmp_path / "res"
    rc = main(["train", "--model", str(tmp_path / "res.keras"), "--data", str(tmp_path / "pngs"), "--out",
               str(out), "--epochs", "1", "--rank", "16", "--no-baselines", "--no-progress"])  # fmt: skip
    assert rc == 0
    assert "'rescale' (Rescaling), moved out of the int8 graph" in capsys.readouterr().out
    cfg = json.loads((out / "config.json").read_text())
    norm = cfg["data_meta"]["normalization"]
    assert norm["kind"] == "model" and norm["layers"] == ["rescale"]
    assert np.allclose(norm["scale"], 1 / 255) and np.allclose(norm["offset"], 0)
    md = load_model_dir(out)
    assert not any(type(lay).__name__ == "Rescaling" for lay in md.model.layers)
    # the model directory's inputs are the model's own after its Rescaling: the original model agrees
    x = np.asarray(load_dataset(cfg["dataset"]).x_test[:40])
    assert 0.0 <= x.min() and x.max() <= 1.0
    ref = np.asarray(model(x * 255.0, training=False)).argmax(1)
    assert (md.predict(x)["logits"].argmax(1) == ref).all()
    assert cfg["test_accuracy_float"] > 0.5
    man = _export_verify_harness(out, tmp_path)
    assert man["input"]["normalization"]["kind"] == "model"


def test_mlp_via_cli_from_npz(tmp_path):
    from snapuq.data import load_dataset

    ds = load_dataset("digits", seed=0)
    model = BM.mlp()
    BM.fit_user_model(model, ds.x_train.reshape(len(ds.x_train), -1), ds.y_train, epochs=5)
    model.save(tmp_path / "mlp.keras")
    npz = BM.digits_npz(tmp_path / "digits_flat.npz")
    out = tmp_path / "mlp"
    rc = main(["train", "--model", str(tmp_path / "mlp.keras"), "--data", str(npz), "--out", str(out),
               "--epochs", "1", "--rank", "16", "--no-baselines", "--no-progress"])  # fmt: skip
    assert rc == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["modality"] == "vector" and len(cfg["taps"]) >= 1
    assert cfg["test_accuracy_float"] > 0.8
    _export_verify_harness(out, tmp_path)


def test_binary_sigmoid_detector_via_cli_from_npz(tmp_path):
    """A binary detector with one sigmoid output (binary cross-entropy, labels 0/1) goes through `snapuq
    train --model` as two-class logits: the model directory predicts what the user's model predicts, and
    the int8 model agrees with TFLM, the board and the MicroPython twin."""
    from snapuq.data.accel import make_accel
    from snapuq.nn.saved import load_model_dir

    d = make_accel(40, seed=1)
    y = {k: (d[f"y_{k}"] >= 2).astype(np.int64) for k in ("train", "test")}  # moving fast or not
    model = BM.binary_sensor_cnn()
    BM.fit_binary_model(model, d["x_train"], y["train"], epochs=12, batch_size=8)
    model.save(tmp_path / "det.keras")
    # labels as a binary task keeps them: (N, 1) floats for training, booleans for testing
    np.savez(tmp_path / "det.npz", x_train=d["x_train"], y_train=y["train"][:, None].astype(np.float32),
             x_test=d["x_test"], y_test=y["test"].astype(bool),
             class_names=np.array(["calm", "moving"]))  # fmt: skip
    out = tmp_path / "det"
    rc = main(["train", "--model", str(tmp_path / "det.keras"), "--data", str(tmp_path / "det.npz"), "--out",
               str(out), "--epochs", "1", "--rank", "8", "--normalize", "none", "--no-baselines",
               "--no-progress"])  # fmt: skip
    assert rc == 0
    md = load_model_dir(out)
    cfg = md.config
    assert cfg["class_names"] == ["calm", "moving"] and cfg["test_accuracy_float"] > 0.7
    p = md.predict(d["x_test"][:40])["probs"][:, 1]
    assert np.allclose(p, np.asarray(model(d["x_test"][:40], training=False))[:, 0], atol=1e-5)
    man = _export_verify_harness(out, tmp_path)
    assert man["class_names"] == ["calm", "moving"]
    _twin_equals_host(out, d["x_test"][:3], tmp_path)
