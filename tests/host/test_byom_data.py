"""Your own data: .npz and folder loaders (images, 16 kHz WAV), normalisation recorded for the device, the
model directory's data cache, OOD from a path, and the Sensor-C corruptions (7 x 5 severities, nested)."""

from __future__ import annotations

import numpy as np
import pytest

from snapuq.data import load_dataset, load_ood
from snapuq.data.accel import CLASSES, make_accel
from snapuq.data.corruptions_sensor import SEVERITIES, corrupt_sensor, sensor_corruption_names
from snapuq.data.user import apply_normalization, load_folder, load_npz, load_ood_path, save_cache
from snapuq.errors import DatasetError


def _npz(path, **kw):
    rng = np.random.default_rng(0)
    d = {"x_train": rng.normal(size=(40, 16, 3)), "y_train": np.arange(40) % 4,
         "x_test": rng.normal(size=(12, 16, 3)), "y_test": np.arange(12) % 4}  # fmt: skip
    d.update(kw)
    np.savez(path, **d)
    return path


def test_npz_splits_dev_per_class_and_records_normalisation(tmp_path):
    ds = load_npz(_npz(tmp_path / "a.npz"), seed=0)
    assert ds.input_shape == (16, 3) and ds.n_classes == 4 and ds.meta["modality"] == "sensor"
    assert len(ds.x_train) + len(ds.x_dev) == 40 and sorted(set(ds.y_dev)) == [0, 1, 2, 3]
    assert ds.meta["normalization"]["kind"] == "none" and ds.x_ood is None
    np.testing.assert_array_equal(load_npz(tmp_path / "a.npz", seed=0).x_dev, ds.x_dev)
    raw = np.random.default_rng(1).normal(5.0, 3.0, size=(40, 16, 3))
    st = load_npz(_npz(tmp_path / "s.npz", x_train=raw, x_ood=raw[:5]), normalize="standard")
    n = st.meta["normalization"]
    assert n["kind"] == "standard" and len(n["scale"]) == 3
    allx = np.concatenate([st.x_train, st.x_dev])
    np.testing.assert_allclose(allx.reshape(-1, 3).mean(0), 0, atol=0.3)
    np.testing.assert_allclose(st.x_ood, apply_normalization(raw[:5], n), rtol=1e-6)
    u8 = load_npz(_npz(tmp_path / "u.npz", x_train=np.full((40, 4, 4, 1), 255, np.uint8),
                       x_test=np.zeros((12, 4, 4, 1), np.uint8)))  # fmt: skip
    assert u8.meta["normalization"]["kind"] == "scale" and u8.x_train.max() == 1.0
    assert u8.meta["modality"] == "image"


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"y_train": np.arange(39)}, "lengths differ"),
        ({"x_test": np.zeros((12, 15, 3))}, "per sample"),
        ({"y_train": np.full(40, 0.5)}, "integers"),
        ({"x_dev": np.zeros((3, 16, 3))}, "go together"),
        ({"x_train": np.full((40, 16, 3), np.nan)}, "NaN"),
    ],
)
def test_bad_npz_is_one_line(tmp_path, kw, msg):
    with pytest.raises(DatasetError, match=msg) as e:
        load_npz(_npz(tmp_path / "b.npz", **kw))
    assert "\n" not in str(e.value)


def test_png_folder_classes_split_resize_and_cache(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("cat", "dog"):
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(10):
            a = rng.integers(0, 256, size=(12, 10, 3), dtype=np.uint8)
            Image.fromarray(a, "RGB").save(tmp_path / "imgs" / c / f"{i}.png")
    ds = load_folder(tmp_path / "imgs", seed=0, input_shape=(8, 8, 1))
    assert ds.class_names == ["cat", "dog"] and ds.input_shape == (8, 8, 1)
    assert len(ds.x_train) + len(ds.x_dev) + len(ds.x_test) == 20 and len(ds.x_test) == 4
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    assert ds.meta["normalization"]["formula"] == "x_model = x_raw / 255" and ds.meta["modality"] == "image"
    p = save_cache(ds, tmp_path / "data.npz")
    back = load_dataset(str(p))
    np.testing.assert_array_equal(back.x_test, ds.x_test)
    assert back.class_names == ds.class_names and back.meta["modality"] == "image"
    assert load_ood(str(p), back, n=5).shape == (0, 8, 8, 1)  # none given: empty, eval skips with a note
    o = load_ood_path(tmp_path / "imgs" / "cat", back, n=3)
    assert o.shape == (3, 8, 8, 1)
    (tmp_path / "one").mkdir()
    with pytest.raises(DatasetError, match="at least two class"):
        load_folder(tmp_path / "one")


def test_wav_folder_goes_through_the_mfcc_front_end(tmp_path):
    from scipy.io import wavfile

    from snapuq.data import audio

    rng = np.random.default_rng(0)
    for c, f in (("low", 300.0), ("high", 2000.0)):
        (tmp_path / "w" / c).mkdir(parents=True)
        for i in range(4):
            t = np.arange(16000) / 16000
            w = (0.3 * np.sin(2 * np.pi * f * (1 + 0.05 * i) * t) + 0.01 * rng.normal(size=16000)) * 32767
            wavfile.write(tmp_path / "w" / c / f"{i}.wav", 16000, w.astype(np.int16))
    ds = load_folder(tmp_path / "w", seed=0)
    assert ds.input_shape == audio.FEATURE_SHAPE and ds.meta["modality"] == "audio"
    assert ds.meta["waves"]["test"].shape == (len(ds.x_test), 16000)
    back = load_dataset(str(save_cache(ds, tmp_path / "data.npz")))
    assert back.meta["modality"] == "audio" and back.meta["waves"]["test"].shape[1] == 16000
    # a clip recorded at 8 kHz is resampled (one more "low" clip); below 8 kHz: one line naming the file
    phone = (0.3 * np.sin(np.arange(8000) * 0.3) * 32767).astype(np.int16)
    wavfile.write(tmp_path / "w" / "low" / "phone.wav", 8000, phone)
    more = load_folder(tmp_path / "w", seed=0)
    sizes = [len(getattr(d, f"x_{s}")) for d in (more, ds) for s in ("train", "dev", "test")]
    assert sum(sizes[:3]) == sum(sizes[3:]) + 1
    wavfile.write(tmp_path / "w" / "low" / "bad.wav", 4000, np.zeros(4000, np.int16))
    with pytest.raises(DatasetError, match=r"bad.wav: 4000 Hz; the front end needs at least 8000 Hz"):
        load_folder(tmp_path / "w")


def test_generated_accelerometer_set():
    d = make_accel(10, seed=0)
    assert d["x_train"].shape == (30, 64, 3) and d["x_test"].shape == (10, 64, 3)
    assert list(d["class_names"]) == CLASSES
    np.testing.assert_array_equal(make_accel(10, seed=0)["x_train"], d["x_train"])
    g = np.linalg.norm(d["x_train"].mean(axis=1), axis=1)  # gravity dominates the window mean
    assert np.all((g > 0.6) & (g < 1.4))


def test_sensor_corruptions_shape_determinism_and_monotone_severity():
    # random-walk windows (no period a warp could realign) with an offset, 3 channels
    x = (np.cumsum(np.random.default_rng(1).normal(size=(16, 64, 3)), axis=1) + 2.0).astype(np.float32)
    assert len(sensor_corruption_names()) == 7 and all(len(v) == 5 for v in SEVERITIES.values())
    for nm in sensor_corruption_names():
        mse = []
        for s in range(1, 6):
            y = corrupt_sensor(x, nm, s, seed=1)
            assert y.shape == x.shape and y.dtype == np.float32 and np.all(np.isfinite(y))
            mse.append(float(np.mean((y - x) ** 2)))
        np.testing.assert_array_equal(corrupt_sensor(x, nm, 3, seed=1), corrupt_sensor(x, nm, 3, seed=1))
        other = corrupt_sensor(x, nm, 3, seed=2)
        assert not np.array_equal(corrupt_sensor(x, nm, 3, seed=1), other) or nm in (
            "axis_swap",)  # fmt: skip
        assert mse[0] > 0, nm
        assert all(b > a for a, b in zip(mse, mse[1:])), (nm, mse)
    # vectors (N, F) and one-channel windows work too
    v = np.random.default_rng(0).normal(size=(4, 20)).astype(np.float32)
    for nm in sensor_corruption_names():
        assert corrupt_sensor(v, nm, 2).shape == (4, 20)


def test_sensor_corruptions_nest():
    """Severities of one seed nest: the spikes of severity s are a subset of those of s + 1, the dropout
    segment grows around the same centre."""
    x = np.zeros((3, 100, 2), np.float32) + np.sin(np.arange(100) / 5.0)[None, :, None]
    for s in range(1, 5):
        a = corrupt_sensor(x, "spikes", s, seed=0) != x
        b = corrupt_sensor(x, "spikes", s + 1, seed=0) != x
        assert np.all(b[a])
        da = corrupt_sensor(x, "dropout", s, seed=0) == 0
        db = corrupt_sensor(x, "dropout", s + 1, seed=0) == 0
        assert np.all(db[da])


def test_sensor_corrupt_rejects_bad_arguments():
    x = np.zeros((2, 8, 3), np.float32)
    with pytest.raises(DatasetError):
        corrupt_sensor(x, "nope", 1)
    with pytest.raises(DatasetError):
        corrupt_sensor(x, "drift", 6)
    with pytest.raises(DatasetError):
        corrupt_sensor(x[0, 0], "drift", 1)


def test_holdout_shift_for_windows_and_vectors():
    from snapuq.uq.calibration import holdout_shift

    x = make_accel(5, seed=0)["x_train"]
    h = holdout_shift(x, seed=0)
    assert h.shape == x.shape and h.dtype == np.float32 and not np.allclose(h, x)
    np.testing.assert_array_equal(h, holdout_shift(x, seed=0))
    assert holdout_shift(x.reshape(len(x), -1), seed=0).shape == (len(x), 192)
