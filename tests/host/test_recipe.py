"""The training recipe as data (TrainOptions), its augmentation and schedule, the per-epoch checkpoint and
`--resume`, and the model directory written as one unit (ModelStage)."""

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from snapuq.cli import main
from snapuq.errors import SnapuqError
from snapuq.nn import recipe as R


def test_options_round_trip_and_refuse_bad_values():
    o = R.TrainOptions.for_dataset("cifar10")
    assert o.augment == "crop-flip" and o.optimizer == "sgd" and o.schedule == "cosine"
    assert R.TrainOptions.from_dict(o.to_dict()) == o
    for bad in ({"lr": float("inf")}, {"lr": -1.0}, {"epochs": 0}, {"augment": "mixup"},
                {"batch_size": 2.5}, {"warmup_epochs": 99}, {"head_epochs": 0}):  # fmt: skip
        with pytest.raises(SnapuqError):
            R.TrainOptions(**bad)
    with pytest.raises(SnapuqError, match="unknown keys colour"):
        R.TrainOptions.from_dict({"colour": 1})


def test_cosine_schedule_warms_up_then_decays_to_zero():
    o = R.TrainOptions(epochs=10, lr=0.1, schedule="cosine", warmup_epochs=2)
    lrs = [o.lr_at(e) for e in range(10)]
    assert lrs[0] < lrs[1] < lrs[2] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(lrs[2:], lrs[3:])) and lrs[-1] < 0.01
    assert R.TrainOptions(lr=0.3).lr_at(7) == 0.3  # constant


def test_augment_crops_and_flips_within_the_padded_image():
    rng = np.random.default_rng(0)
    x = rng.random((64, 8, 8, 3)).astype(np.float32)
    a = R.augment_batch(x, "crop-flip", np.random.default_rng(1))
    b = R.augment_batch(x, "crop-flip", np.random.default_rng(1))
    assert a.shape == x.shape and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)  # deterministic per generator
    assert not np.array_equal(a, x)
    # with reflection padding every crop keeps pixels of the image only
    assert a.min() >= x.min() and a.max() <= x.max()
    s = R.augment_batch(np.ones((16, 6, 6, 1), np.float32), "shift", np.random.default_rng(2))
    assert (s == 0).any() and s.max() == 1.0  # zero padding shows at shifted borders
    assert R.augment_batch(x, "none", rng) is x


def _tiny(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input((4, 4, 1))
    h = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(inp, keras.layers.Dense(3)(h))


def _data():
    rng = np.random.default_rng(0)
    x = rng.random((96, 4, 4, 1)).astype(np.float32)
    return x, (x.mean(axis=(1, 2, 3)) * 3).astype(np.int64).clip(0, 2)


def _killed_after(epoch: int, monkeypatch, model, x, y, o, ckpt_dir, ident) -> None:
    """fit_backbone_resumable killed (KeyboardInterrupt) right after epoch `epoch`'s checkpoint is written."""
    real_write = R.Checkpoint.write

    def dying(self, *a, **k):
        real_write(self, *a, **k)
        if a[2]["epoch"] == epoch:
            raise KeyboardInterrupt

    monkeypatch.setattr(R.Checkpoint, "write", dying)
    with pytest.raises(KeyboardInterrupt):
        R.fit_backbone_resumable(model, x, y, o, seed=0, ckpt_dir=ckpt_dir, identity=ident, progress=False)
    monkeypatch.setattr(R.Checkpoint, "write", real_write)


def test_resume_continues_from_the_last_epoch_and_matches_an_unbroken_run(tmp_path, monkeypatch):
    x, y = _data()
    o = R.TrainOptions(epochs=4, batch_size=16, lr=0.05, optimizer="sgd", schedule="cosine",
                       warmup_epochs=1, augment="shift")  # fmt: skip
    ident = {"dataset": "t", "seed": 0}
    full = _tiny()
    h_full = R.fit_backbone_resumable(full, x, y, o, seed=0, ckpt_dir=tmp_path / "a", identity=ident,
                                      progress=False)  # fmt: skip
    assert [r["epoch"] for r in h_full] == [1, 2, 3, 4]

    _killed_after(2, monkeypatch, _tiny(), x, y, o, tmp_path / "b", ident)  # right after epoch 2's checkpoint
    assert json.loads((tmp_path / "b" / "state.json").read_text())["epoch"] == 2
    logs = []
    resumed = _tiny(seed=5)  # other initial weights: the checkpoint must overwrite them
    h = R.fit_backbone_resumable(resumed, x, y, o, seed=0, ckpt_dir=tmp_path / "b", identity=ident,
                                 resume=True, progress=False, log=logs.append)  # fmt: skip
    assert "after epoch 2 of 4" in logs[0] and [r["epoch"] for r in h] == [1, 2, 3, 4]
    for a, b in zip(full.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert h[-1]["loss"] == pytest.approx(h_full[-1]["loss"], rel=1e-4)


def _tiny_bn(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input((4, 4, 1))
    h = keras.layers.Conv2D(4, 3, padding="same", use_bias=False)(inp)
    h = keras.layers.ReLU()(keras.layers.BatchNormalization(momentum=0.9)(h))
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(inp, keras.layers.Dense(3)(h))


def test_weight_averaging_after_the_schedule_resumes_like_an_unbroken_run(tmp_path, monkeypatch):
    """--swa-epochs 2 after a 3-epoch schedule: epochs 4 and 5 at a tenth of the peak rate, the trainable
    weights the mean of those after epochs 3, 4 and 5, the batch-norm statistics recomputed for them; a run
    killed during the averaging resumes to the same weights; the distillation targets beside the checkpoint
    are kept."""
    import keras

    x, y = _data()
    o = R.TrainOptions(epochs=3, batch_size=16, lr=0.05, optimizer="sgd", schedule="cosine", swa_epochs=2)
    ident = {"dataset": "t", "seed": 0}
    snaps, real_write = [], R.Checkpoint.write

    def spy(self, model, *a, **k):
        snaps.append([np.asarray(w) for w in model.trainable_weights])
        real_write(self, model, *a, **k)

    monkeypatch.setattr(R.Checkpoint, "write", spy)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "soft_targets.npz").write_bytes(b"kept")
    full = _tiny_bn()
    h = R.fit_backbone_resumable(full, x, y, o, seed=0, ckpt_dir=tmp_path / "a", identity=ident,
                                 progress=False)  # fmt: skip
    assert [r["epoch"] for r in h] == [1, 2, 3, 4, 5] and h[3]["lr"] == h[4]["lr"] == pytest.approx(0.005)
    for k, w in enumerate(full.trainable_weights):
        want = np.mean([s[k] for s in snaps[2:]], axis=0)
        np.testing.assert_allclose(np.asarray(w), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(full.trainable_weights[0]), snaps[-1][0])
    bn = next(la for la in full.layers if isinstance(la, keras.layers.BatchNormalization))
    stats = [np.asarray(bn.moving_mean), np.asarray(bn.moving_variance)]
    R.recompute_batchnorm(full, x, 0)  # the same statistics again: a function of the weights and the seed
    np.testing.assert_allclose(np.asarray(bn.moving_mean), stats[0], rtol=1e-5, atol=1e-6)
    assert bn.momentum == 0.9
    left = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert left == ["backbone.e5.weights.h5", "optimizer.e5.npz", "soft_targets.npz", "state.json",
                    "swa.e5.npz"]

    monkeypatch.setattr(R.Checkpoint, "write", real_write)
    _killed_after(4, monkeypatch, _tiny_bn(), x, y, o, tmp_path / "b", ident)  # one averaged epoch done
    resumed = _tiny_bn(seed=5)
    logs = []
    R.fit_backbone_resumable(resumed, x, y, o, seed=0, ckpt_dir=tmp_path / "b", identity=ident, resume=True,
                             progress=False, log=logs.append)  # fmt: skip
    assert "after epoch 4 of 5" in logs[0]
    for a, b in zip(full.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # a finished checkpoint resumed again gives the averaged weights again, not the last epoch's
    again = _tiny_bn(seed=7)
    R.fit_backbone_resumable(again, x, y, o, seed=0, ckpt_dir=tmp_path / "b", identity=ident, resume=True,
                             progress=False, log=logs.append)  # fmt: skip
    for a, b in zip(full.get_weights(), again.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_kill_between_an_epochs_files_and_its_state_leaves_the_previous_epoch_whole(tmp_path, monkeypatch):
    """Killed after epoch 3's weights and optimizer files are written but before state.json names them:
    the checkpoint is still epoch 2's (its own files, not epoch 3's weights), and the resumed run ends with
    the unbroken run's weights; older epochs' files are gone once a newer state.json names its own."""
    x, y = _data()
    o = R.TrainOptions(epochs=4, batch_size=16, lr=0.05, optimizer="sgd", schedule="cosine",
                       warmup_epochs=1, augment="shift")  # fmt: skip
    ident = {"dataset": "t", "seed": 0}
    full = _tiny()
    R.fit_backbone_resumable(full, x, y, o, seed=0, ckpt_dir=tmp_path / "a", identity=ident, progress=False)
    real = R.write_text

    def dying(path, text):
        if Path(path).name == "state.json" and json.loads(text)["epoch"] == 3:
            raise KeyboardInterrupt
        return real(path, text)

    monkeypatch.setattr(R, "write_text", dying)
    ck = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        R.fit_backbone_resumable(_tiny(), x, y, o, seed=0, ckpt_dir=ck, identity=ident, progress=False)
    monkeypatch.setattr(R, "write_text", real)
    st = json.loads((ck / "state.json").read_text())
    assert st["epoch"] == 2 and st["files"] == ["backbone.e2.weights.h5", "optimizer.e2.npz"]
    assert (ck / "backbone.e3.weights.h5").is_file()  # written, never committed
    resumed = _tiny(seed=5)
    R.fit_backbone_resumable(resumed, x, y, o, seed=0, ckpt_dir=ck, identity=ident, resume=True,
                             progress=False)  # fmt: skip
    for a, b in zip(full.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    left = sorted(p.name for p in ck.iterdir())
    assert left == ["backbone.e4.weights.h5", "optimizer.e4.npz", "state.json"]


def test_a_checkpoint_with_the_old_file_names_resumes(tmp_path):
    """A checkpoint written before the files carried their epoch (backbone.weights.h5, optimizer.npz, no
    `files` in state.json) is read and continued; a `files` entry that leaves the folder is refused."""
    x, y = _data()
    o = R.TrainOptions(epochs=3, batch_size=16, lr=0.05, optimizer="adam")
    ident = {"dataset": "t", "seed": 0}
    full = _tiny()
    R.fit_backbone_resumable(full, x, y, o, seed=0, ckpt_dir=tmp_path / "a", identity=ident, progress=False)
    ck = tmp_path / "b"
    R.fit_backbone_resumable(_tiny(), x, y, dataclasses.replace(o, epochs=2), seed=0, ckpt_dir=ck,
                             identity=ident, progress=False)  # fmt: skip
    st = json.loads((ck / "state.json").read_text())
    os.replace(ck / st.pop("files")[0], ck / "backbone.weights.h5")
    os.replace(ck / "optimizer.e2.npz", ck / "optimizer.npz")
    st["recipe"]["epochs"] = 3
    (ck / "state.json").write_text(json.dumps(st))
    resumed = _tiny(seed=5)
    R.fit_backbone_resumable(resumed, x, y, o, seed=0, ckpt_dir=ck, identity=ident, resume=True,
                             progress=False)  # fmt: skip
    for a, b in zip(full.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not (ck / "backbone.weights.h5").exists()
    st = json.loads((ck / "state.json").read_text())
    st["files"] = ["../x.h5", "optimizer.e3.npz"]
    (ck / "state.json").write_text(json.dumps(st))
    with pytest.raises(SnapuqError, match="not \\[weights, optimizer\\]"):
        R.Checkpoint(ck).read()


def test_resume_refuses_another_runs_checkpoint(tmp_path):
    x, y = _data()
    o = R.TrainOptions(epochs=1, batch_size=32)
    R.fit_backbone_resumable(
        _tiny(), x, y, o, seed=0, ckpt_dir=tmp_path, identity={"seed": 0}, progress=False
    )
    with pytest.raises(SnapuqError, match=r"another run .*recipe\.lr"):
        o2 = R.TrainOptions(epochs=1, batch_size=32, lr=0.1)
        R.fit_backbone_resumable(_tiny(), x, y, o2, seed=0, ckpt_dir=tmp_path, identity={"seed": 0},
                                 resume=True, progress=False)  # fmt: skip
    (tmp_path / "optimizer.e1.npz").unlink()
    with pytest.raises(SnapuqError, match="optimizer.e1.npz: missing"):
        R.fit_backbone_resumable(_tiny(), x, y, o, seed=0, ckpt_dir=tmp_path, identity={"seed": 0},
                                 resume=True, progress=False)  # fmt: skip


def test_train_writes_the_model_directory_as_one_unit(tmp_path, monkeypatch, capsys):
    out = tmp_path / "m"
    base = [
        "train",
        "--dataset",
        "digits",
        "--out",
        str(out),
        "--epochs",
        "2",
        "--no-baselines",
        "--no-progress",
    ]
    assert main(base) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert (
        cfg["recipe"]["epochs"] == 2
        and cfg["recipe"]["augment"] == "none"
        and len(cfg["backbone_history"]) == 2
    )
    (out / "NOTES.md").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    stage = tmp_path / ".m.train"
    assert not stage.exists()

    import snapuq.commands.train as T

    def boom(*a, **k):
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(T, "calibrate", boom)  # killed after training, before calibration
    assert main(base + ["--seed", "1"]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the old model is untouched
    assert (stage / "checkpoint" / "state.json").is_file()
    capsys.readouterr()
    assert main(base + ["--seed", "1"]) == 1  # a fresh run would drop the checkpoint: refused
    assert "--resume" in capsys.readouterr().err
    monkeypatch.undo()
    assert main(base + ["--seed", "2", "--resume"]) == 1  # another run's checkpoint
    assert "another run" in capsys.readouterr().err
    assert main(base + ["--seed", "1", "--resume"]) == 0
    assert json.loads((out / "config.json").read_text())["seed"] == 1
    assert (out / "NOTES.md").read_text() == "mine" and not stage.exists()
    assert not (out / "checkpoint").exists()


def test_baselines_train_by_the_backbones_recipe(tmp_path):
    out = tmp_path / "m"
    argv = ["train", "--dataset", "digits", "--out", str(out), "--epochs", "2", "--baseline-epochs", "2",
            "--augment", "shift", "--schedule", "cosine", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    info = json.loads((out / "baselines" / "baselines.json").read_text())
    assert info["epochs"] == 2 and info["recipe"]["augment"] == "shift"
    assert info["recipe"]["schedule"] == "cosine"
    assert len(info["ensemble"]["dev_accuracy"]) == 5 and not (out / "checkpoint").exists()


def test_baselines_only_adds_the_baselines_to_a_trained_directory(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["train", "--dataset", "digits", "--out", str(out), "--epochs", "2", "--no-baselines",
                 "--no-progress"]) == 0  # fmt: skip
    (out / "eval").mkdir()
    (out / "eval" / "metrics.json").write_text("{}")
    keras_bytes = (out / "model.keras").read_bytes()
    argv = ["train", "--out", str(out), "--baselines-only", "--baseline-epochs", "1", "--no-progress"]
    assert main(argv) == 0
    info = json.loads((out / "baselines" / "baselines.json").read_text())
    assert info["epochs"] == 1 and (out / "model.keras").read_bytes() == keras_bytes
    assert (out / "eval" / "metrics.json").is_file()
    assert json.loads((out / "config.json").read_text())["recipe"]["baseline_epochs"] == 1
    capsys.readouterr()
    assert main(["train", "--out", str(tmp_path / "none"), "--baselines-only"]) == 1
    assert "not a trained model directory" in capsys.readouterr().err


def test_the_deep_ensemble_can_be_the_other_seeds_backbones(tmp_path, capsys):
    """--baselines-only --ensemble-from: the seeds' own backbones become the ensemble members (their
    logits exactly), only the early-exit model trains; another recipe's directory, a repeated seed, a missing
    directory or one without its model is refused before anything trains."""
    import keras

    from snapuq.nn.saved import load_model_dir, predict_batched

    base = ["train", "--dataset", "digits", "--epochs", "2", "--head-epochs", "1", "--no-baselines",
            "--no-progress"]  # fmt: skip
    m0, m1, m2 = tmp_path / "m", tmp_path / "m_seed1", tmp_path / "other"
    assert main(base + ["--out", str(m0)]) == 0
    assert main(base + ["--out", str(m1), "--seed", "1"]) == 0
    assert main([*base[:3], "--epochs", "3", *base[5:], "--out", str(m2), "--seed", "2"]) == 0
    capsys.readouterr()
    bad = ["train", "--out", str(m0), "--baselines-only", "--baseline-epochs", "1", "--no-progress"]
    assert main(bad + ["--ensemble-from", f"{m0},{m2}"]) == 1
    assert "--ensemble-from" in capsys.readouterr().err and not (m0 / "baselines").exists()
    assert main(bad + ["--ensemble-from", f"{m0},{m0}"]) == 1
    assert "same seed" in capsys.readouterr().err
    assert main(bad + ["--ensemble-from", f"{m0},{tmp_path / 'none'}"]) == 1
    assert "no such model directory" in capsys.readouterr().err
    (tmp_path / "nomodel").mkdir()
    (tmp_path / "nomodel" / "config.json").write_bytes((m1 / "config.json").read_bytes())
    assert main(bad + ["--ensemble-from", f"{m0},{tmp_path / 'nomodel'}"]) == 1
    assert "model.keras: missing" in capsys.readouterr().err and not (m0 / "baselines").exists()
    assert main(base + ["--out", str(tmp_path / "x"), "--ensemble-from", str(m1)]) == 1
    assert "goes with --baselines-only" in capsys.readouterr().err
    assert main(bad + ["--ensemble-from", f"{m0},{m1}"]) == 0
    info = json.loads((m0 / "baselines" / "baselines.json").read_text())
    assert info["ensemble"]["members"] == 2 and info["ensemble"]["seeds"] == [0, 1]
    assert info["ensemble"]["from_model_dirs"] == [str(m0), str(m1)]
    assert sorted(p.name for p in (m0 / "baselines").glob("*.keras")) == [
        "early_exit.keras", "ensemble_0.keras", "ensemble_1.keras"]  # fmt: skip
    x = load_model_dir(m1).model.input_shape[1:]
    xs = np.random.default_rng(0).random((16, *x), dtype=np.float32)
    member = keras.saving.load_model(m0 / "baselines" / "ensemble_1.keras", compile=False)
    want = predict_batched(load_model_dir(m1).model, xs)["logits"]
    np.testing.assert_array_equal(predict_batched(member, xs), want)


def test_distillation_loss_closed_forms():
    """(1 - a) CE + a T^2 KL: a one-hot teacher at T = 1 is the cross-entropy itself; a teacher equal to the
    model at T leaves (1 - a) CE; a = 0 ignores the teacher."""
    from snapuq.nn import distill as D

    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 3, 1, 0])
    ce = -np.log(np.exp(z) / np.exp(z).sum(1, keepdims=True))[np.arange(6), y]

    def loss(alpha, temp, soft):
        return np.asarray(D.distill_loss(alpha, temp)(D.distill_targets(y, soft, 4), z))

    onehot = np.eye(4, dtype=np.float32)[y]
    np.testing.assert_allclose(loss(0.6, 1.0, onehot), ce, rtol=1e-5)
    np.testing.assert_allclose(loss(0.0, 3.0, rng.dirichlet(np.ones(4), 6)), ce, rtol=1e-5)
    same = np.exp(z / 3) / np.exp(z / 3).sum(1, keepdims=True)
    np.testing.assert_allclose(loss(0.7, 3.0, same), 0.3 * ce, rtol=1e-4, atol=1e-6)
    assert (loss(0.7, 3.0, np.roll(same, 1, axis=1)) > 0.3 * ce + 1e-3).all()


def test_soft_targets_average_the_members_at_the_temperature(tmp_path):
    from snapuq.nn import distill as D

    x, _ = _data()
    members = [_tiny(0), _tiny(1)]
    want = np.zeros((len(x), 3))
    for m in members:
        z = np.asarray(m.predict(x, verbose=0), np.float64) / 2.0
        want += np.exp(z) / np.exp(z).sum(1, keepdims=True) / 2
    np.testing.assert_allclose(D.soft_targets(members, x, 2.0, batch=40), want, rtol=1e-5, atol=1e-6)
    for k, m in enumerate(members):
        m.save(tmp_path / f"ensemble_{k}.keras")
    models, rec = D.load_teachers(tmp_path, (4, 4, 1), 3)
    assert len(models) == 2 and rec["files"] == ["ensemble_0.keras", "ensemble_1.keras"]
    assert len(rec["sha256"]) == 64
    with pytest.raises(SnapuqError, match=r"ensemble_0.keras maps \(4, 4, 1\) to \(3,\); the model maps"):
        D.load_teachers(tmp_path, (4, 4, 1), 10)
    (tmp_path / "ensemble_0.keras").write_bytes(b"not a zip")
    with pytest.raises(SnapuqError, match="ensemble_0.keras is not a Keras model"):
        D.load_teachers(tmp_path, (4, 4, 1), 3)
    with pytest.raises(SnapuqError, match="x is neither a folder nor a .keras file"):
        D.load_teachers(tmp_path / "x", (4,), 3)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SnapuqError, match="no teacher in"):
        D.teacher_files(tmp_path / "empty")


def test_soft_targets_are_kept_for_a_resumed_run(tmp_path, monkeypatch):
    from snapuq.nn import distill as D

    x, _ = _data()
    members = [_tiny(0), _tiny(1)]
    rec, f = {"sha256": "a" * 64}, tmp_path / "checkpoint" / "soft_targets.npz"
    first = D.cached_soft_targets(members, x, 2.0, rec, f)
    np.testing.assert_array_equal(first, D.soft_targets(members, x, 2.0))
    calls = []
    real = D.soft_targets
    monkeypatch.setattr(D, "soft_targets", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    np.testing.assert_array_equal(D.cached_soft_targets(members, x, 2.0, rec, f), first)  # read back
    assert calls == []
    # other teachers, another temperature or other inputs: computed again (and kept in their place)
    D.cached_soft_targets(members, x, 3.0, rec, f)
    D.cached_soft_targets(members, x, 3.0, {"sha256": "b" * 64}, f)
    D.cached_soft_targets(members, x[::-1], 3.0, {"sha256": "b" * 64}, f)
    assert calls == [3.0, 3.0, 3.0]
    f.write_bytes(b"truncated")  # an unreadable file is computed again, not an error
    np.testing.assert_array_equal(D.cached_soft_targets(members, x, 2.0, rec, f), first)
    assert len(calls) == 4


def test_train_distills_the_backbone_from_a_model_directorys_ensemble(tmp_path, capsys):
    """`snapuq train --distill-from DIR`: DIR's baselines are the teachers; config.json records them (files,
    digest, alpha 0.7 by default, T) and the recipe; the flags that cannot go together are refused in one
    line before anything trains; a second seed's command carries the teachers."""
    teacher = tmp_path / "t"
    assert main(["train", "--dataset", "digits", "--out", str(teacher), "--epochs", "2", "--baseline-epochs",
                 "1", "--no-progress"]) == 0  # fmt: skip
    out = tmp_path / "s"
    assert main(["train", "--dataset", "digits", "--out", str(out), "--epochs", "2", "--no-baselines",
                 "--no-progress", "--distill-from", str(teacher)]) == 0  # fmt: skip
    cfg = json.loads((out / "config.json").read_text())
    d = cfg["distill"]
    assert d["members"] == 5 and d["files"][0] == "ensemble_0.keras" and d["from"] == str(teacher)
    assert d["alpha"] == 0.7 == cfg["recipe"]["distill_alpha"] and d["temperature"] == 3.0
    assert 0.5 < d["teacher_train_accuracy"] <= 1.0
    assert [set(h) >= {"loss", "accuracy", "val_accuracy"} for h in cfg["backbone_history"]] == [True] * 2
    assert cfg["backbone_history"][-1]["val_accuracy"] > 0.5

    from snapuq.commands.multiseed import train_argv

    a = train_argv(out, cfg, None, 1, tmp_path / "s_seed1", None)
    assert a[a.index("--distill-from") + 1] == str(teacher) and a[a.index("--distill-alpha") + 1] == "0.7"
    capsys.readouterr()
    bad = [(["--distill-alpha", "0.5"], "--distill-alpha needs --distill-from"),
           (["--distill-alpha", "1.0", "--distill-from", str(teacher)], "--distill-alpha must be"),
           (["--distill-from", str(teacher), "--joint"], "not with --model, --baselines-only or --joint"),
           (["--distill-from", str(tmp_path)], "no teacher in")]  # fmt: skip
    for extra, msg in bad:
        argv = ["train", "--dataset", "digits", "--out", str(tmp_path / "x"), "--no-progress", "--epochs"]
        assert main(argv + ["1"] + extra) == 1, extra
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (extra, err)


def test_train_takes_the_baselines_of_the_model_it_distils_from(tmp_path, capsys):
    """`snapuq train --distill-from T --baselines-from T`: T's deep ensemble and early-exit model are this
    model's baselines (the bytes T has; config.json records where from and their digests), nothing of them
    trains again; a T of another seed, baseline recipe or set build is refused in one line before training."""
    import hashlib

    teacher = tmp_path / "t"
    common = ["--dataset", "digits", "--epochs", "2", "--baseline-epochs", "1", "--no-progress"]
    assert main(["train", "--out", str(teacher)] + common) == 0
    out = tmp_path / "s"
    assert main(["train", "--out", str(out), "--distill-from", str(teacher), "--baselines-from", str(teacher)]
                + common) == 0  # fmt: skip
    cfg = json.loads((out / "config.json").read_text())
    rec = cfg["baselines_from"]
    assert rec["from"] == str(teacher) and "early_exit.keras" in rec["sha256"]
    for f in ["baselines.json", "early_exit.keras"] + [f"ensemble_{k}.keras" for k in range(5)]:
        b = (out / "baselines" / f).read_bytes()
        assert b == (teacher / "baselines" / f).read_bytes()
        assert rec["sha256"][f] == hashlib.sha256(b).hexdigest()
    assert not (out / "checkpoint").exists()
    from snapuq.commands.multiseed import train_argv

    # its teachers are its own baselines/ (the same bytes): a second seed distils from the directory itself
    a = train_argv(out, cfg, None, 1, tmp_path / "s_seed1", None)
    assert a[a.index("--distill-from") + 1] == str(out) and "--baselines-from" not in a
    capsys.readouterr()
    bad = [(["--baseline-epochs", "2"], "trained by another recipe (epochs 1 vs 2)"),
           (["--baseline-epochs", "1", "--seed", "1"], "has seed 0, this run 1"),
           (["--baseline-epochs", "1", "--no-baselines"], "not with --model, --no-baselines"),
           (["--baseline-epochs", "1", "--baselines-from", str(tmp_path)], "no readable baselines/")]
    for extra, msg in bad:
        argv = ["train", "--dataset", "digits", "--out", str(tmp_path / "x"), "--no-progress", "--epochs"]
        argv += ["2"]
        extra = extra if "--baselines-from" in extra else extra + ["--baselines-from", str(teacher)]
        assert main(argv + extra) == 1, extra
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (extra, err)
    assert not (tmp_path / "x").exists()


def test_train_averages_the_weights_when_asked(tmp_path):
    out = tmp_path / "m"
    assert main(["train", "--dataset", "digits", "--out", str(out), "--epochs", "2", "--head-epochs", "1",
                 "--swa-epochs", "1", "--no-baselines", "--no-progress"]) == 0  # fmt: skip
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["recipe"]["swa_epochs"] == 1
    assert [h["epoch"] for h in cfg["backbone_history"]] == [1, 2, 3]
    assert cfg["backbone_history"][2]["lr"] == pytest.approx(0.1 * cfg["recipe"]["lr"])
    assert cfg["test_accuracy_float"] > 0.5
    from snapuq.commands.multiseed import train_argv

    a = train_argv(out, cfg, None, 1, tmp_path / "m_seed1", None)
    assert a[a.index("--swa-epochs") + 1] == "1"
