"""`snapuq eval` on your own data: a small 1-D conv model the project did not write, trained from an .npz
without OOD inputs by `snapuq train --model`, then evaluated. The baselines are announced with an estimate
before they start (their training itself is replaced by a recorder here: it is minutes of work and has its
own tests); the eval scores SNAP and MSP on the test split, skips the ID-vs-OOD metrics with a note (no OOD
source), and builds its shift stream from the sensor corruptions (Sensor-C) because the inputs are 1-D
windows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from snapuq.cli import main

pytestmark = pytest.mark.slow  # ~30-60 s: one TensorFlow training + conversion, the eval's plots


def _tiny_sensor_model():
    import keras
    from keras import layers

    keras.utils.set_random_seed(0)
    i = keras.Input((64, 3), name="accel")
    x = layers.Conv1D(8, 5, strides=2, padding="same", activation="relu", name="c1")(i)
    x = layers.Conv1D(12, 3, padding="same", activation="relu", name="c2")(x)
    x = layers.MaxPooling1D(2, name="p")(x)
    x = layers.Conv1D(12, 3, padding="same", activation="relu", name="c3")(x)
    x = layers.GlobalAveragePooling1D(name="gap")(x)
    m = keras.Model(i, layers.Dense(4, name="logits")(x), name="tiny_har")
    m.compile(optimizer=keras.optimizers.Adam(5e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    return m


def test_eval_on_own_sensor_data_without_ood(tmp_path, capsys, monkeypatch):
    import snapuq.commands.train_user
    from snapuq.data.accel import make_accel
    from snapuq.data.corruptions_sensor import sensor_corruption_names

    d = make_accel(80, seed=1)
    np.savez(tmp_path / "acc.npz", **d)   # x_train, y_train, x_test, y_test, class_names: no x_ood
    m = _tiny_sensor_model()
    m.fit(d["x_train"], d["y_train"], epochs=12, batch_size=32, verbose=0)
    m.save(tmp_path / "har.keras")

    calls: list[dict] = []

    def record(ds, cfg, out, **kw):  # what train_baselines was given, and what was printed before it
        calls.append({"out": out, "printed_before": capsys.readouterr().out, **kw})

    monkeypatch.setattr(snapuq.commands.train_user, "train_baselines", record)
    out = tmp_path / "har"
    rc = main(["train", "--model", str(tmp_path / "har.keras"), "--data", str(tmp_path / "acc.npz"),
               "--out", str(out), "--epochs", "1", "--rank", "8", "--baseline-epochs", "3",
               "--no-progress"])  # fmt: skip
    assert rc == 0 and len(calls) == 1
    # announced (what, how many epochs, an estimate in seconds, how to skip) before the training is called
    line = next(s for s in calls[0]["printed_before"].splitlines() if "training the baselines" in s)
    assert "3 epochs" in line and "--no-baselines skips them" in line
    est = float(line.split("estimated ~")[1].split(" s")[0])
    assert 0 < est < 3600
    assert calls[0]["epochs"] == 3 and calls[0]["out"] == out
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["modality"] == "sensor" and cfg["backbone"] == "user"

    capsys.readouterr()
    rep = tmp_path / "R"
    rc = main(["eval", str(out), "--report", str(rep), "--methods", "snap,msp", "--limit", "40",
               "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0
    assert "note: no OOD inputs" in text
    mj = json.loads((rep / "metrics.json").read_text())
    assert list(mj["methods"]) == ["snap", "msp"] and mj["n_test"] == 40 and mj["n_ood"] == 0
    assert mj["ood_source"].startswith("no OOD inputs")
    for name in ("snap", "msp"):
        row = mj["methods"][name]
        assert row["auroc_id_vs_ood"] is None   # NaN, written as null
        assert 0.0 <= row["auroc_ok_vs_err"] <= 1.0 and 0.0 <= row["ece"] <= 1.0
        assert 0.0 <= row["cid_auprc"] <= 1.0
    assert mj["stream"]["corruptions"] == sensor_corruption_names()
    assert set(mj["stream"]["corruptions"]) >= {"gaussian_noise", "spikes", "drift", "axis_swap"}
    assert mj["accuracy"]["float"] > 0.4
    assert (rep / "report.md").is_file()

    # several seeds of your own model: seed 1 is rebuilt from DIR/backbone.keras on DIR's prepared splits
    # (new heads and calibration; the backbone and the split stay yours)
    capsys.readouterr()
    rc = main(["eval", str(out), "--seeds", "0,1", "--report", str(tmp_path / "R2"), "--methods", "snap,msp",
               "--limit", "40", "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0, text
    assert f"--model {out / 'backbone.keras'} --data {out}" in text
    s1 = tmp_path / "har_seed1"
    c1 = json.loads((s1 / "config.json").read_text())
    assert c1["backbone"] == "user" and c1["seed"] == 1 and c1["rank"] == 8
    assert [t["layer"] for t in c1["taps"]] == [t["layer"] for t in cfg["taps"]]
    import keras

    w0 = keras.saving.load_model(out / "backbone.keras", compile=False).get_weights()
    w1 = keras.saving.load_model(s1 / "backbone.keras", compile=False).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(w0, w1, strict=True))
    agg = json.loads((tmp_path / "R2" / "metrics.json").read_text())
    assert agg["seeds"] == [0, 1] and set(agg["checks"]) == {"0", "1"}
    assert agg["criteria"]["U_ge_msp_dev_every_seed"] is True
    head = (tmp_path / "R2" / "report.md").read_text().splitlines()[0]
    assert head == "# snapuq eval: har (your model and data), seeds 0,1 (mean ± sd over seeds)"


def test_baselines_of_your_own_model_train(tmp_path):
    """The deep ensemble and the early-exit model of your own model are fresh copies of its architecture that
    really train: the logits model saved in the model directory is the frozen one the SNAP heads trained on,
    and a copy of it kept the frozen flags (every member stayed at its random initialisation, at chance)."""
    import keras

    import snapuq
    from snapuq.baselines.train import train_baselines, user_backbone_factory
    from snapuq.data.accel import make_accel

    d = make_accel(60, seed=2)
    m = _tiny_sensor_model()
    m.fit(d["x_train"], d["y_train"], epochs=8, batch_size=32, verbose=0)
    snap = snapuq.attach(m, rank=8)
    snap.fit(d["x_train"][40:], d["y_train"][40:], epochs=1, progress=False)
    snap.calibrate(d["x_train"][:40], d["y_train"][:40])
    out = snap.save(tmp_path / "har", x_test=d["x_test"], y_test=d["y_test"])
    assert not keras.saving.load_model(out / "backbone.keras", compile=False).trainable_weights  # frozen
    copy = user_backbone_factory(out, {"backbone": "user"})("user", (64, 3), 4)
    assert len(copy.trainable_weights) == len(copy.weights) > 0
    from snapuq.data.user import load_npz

    cfg = json.loads((out / "config.json").read_text())
    info = train_baselines(load_npz(out / "data.npz"), cfg, out, epochs=12, members=2, batch_size=16,
                           progress=False)
    acc = info["ensemble"]["dev_accuracy"]
    assert min(acc) > 0.6, acc  # four classes: chance is 0.25
