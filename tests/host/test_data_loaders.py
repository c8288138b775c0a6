"""MNIST / Fashion-MNIST (IDX) and CIFAR-10 (python batch) loaders on small fake files, their error
paths and the OOD pairings."""

import gzip
import pickle

import numpy as np
import pytest

from snapuq.cli import main
from snapuq.data import load_dataset, load_ood
from snapuq.data.vision import read_cifar_batch, read_idx
from snapuq.errors import DatasetError


def _idx(arr: np.ndarray) -> bytes:
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def _write_idx_set(d, n_train=60, n_test=20, seed=0, gz=True, hw=28):
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    parts = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, hw, hw)),
        "train-labels-idx1-ubyte": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, hw, hw)),
        "t10k-labels-idx1-ubyte": np.arange(n_test) % 10,
    }
    for name, arr in parts.items():
        b = _idx(np.asarray(arr))
        if gz:
            (d / f"{name}.gz").write_bytes(gzip.compress(b))
        else:
            (d / name).write_bytes(b)
    return parts


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_loader_parses_gz_and_raw(tmp_path, gz):
    parts = _write_idx_set(tmp_path / "mnist", gz=gz)
    ds = load_dataset("mnist", str(tmp_path), seed=0)
    assert ds.input_shape == (28, 28, 1) and ds.n_classes == 10
    assert len(ds.x_train) + len(ds.x_dev) == 60 and len(ds.x_test) == 20 and len(ds.x_dev) == 10
    assert ds.x_test.dtype == np.float32 and 0 <= ds.x_test.min() and ds.x_test.max() <= 1
    np.testing.assert_allclose(ds.x_test[..., 0] * 255, parts["t10k-images-idx3-ubyte"], atol=1e-3)
    np.testing.assert_array_equal(ds.y_test, parts["t10k-labels-idx1-ubyte"])
    ds2 = load_dataset("mnist", str(tmp_path), seed=0)
    np.testing.assert_array_equal(ds.x_dev, ds2.x_dev)


def test_fashion_loader_and_the_mnist_fashion_ood_pairing(tmp_path):
    _write_idx_set(tmp_path / "mnist", seed=1)
    fm = _write_idx_set(tmp_path / "fashion_mnist", seed=2)
    ds = load_dataset("mnist", str(tmp_path / "mnist"))
    o = load_ood("mnist", ds, str(tmp_path / "mnist"), n=8, seed=0)  # found in the sibling folder
    assert o.shape == (8, 28, 28, 1) and o.dtype == np.float32
    assert np.isin(np.round(o[0, ..., 0] * 255), fm["t10k-images-idx3-ubyte"]).all()
    f = load_dataset("fashion_mnist", str(tmp_path))
    assert f.class_names[0] == "t-shirt"
    assert load_ood("fashion_mnist", f, str(tmp_path), n=5).shape == (5, 28, 28, 1)


def test_ood_missing_is_a_clear_error(tmp_path):
    _write_idx_set(tmp_path / "mnist")
    ds = load_dataset("mnist", str(tmp_path / "mnist"))
    with pytest.raises(DatasetError, match="t10k-images-idx3-ubyte"):
        load_ood("mnist", ds, str(tmp_path / "mnist"), n=4)


def test_idx_error_paths(tmp_path):
    with pytest.raises(DatasetError, match="needs --data-dir"):
        load_dataset("mnist", None) if not _has_tfds() else pytest.skip("tfds installed")
    with pytest.raises(DatasetError, match="no such dataset folder"):
        load_dataset("mnist", str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"empty.*train-images-idx3-ubyte"):
        load_dataset("fashion_mnist", str(tmp_path / "empty"))
    bad = tmp_path / "bad.idx"
    bad.write_bytes(b"\x01\x02\x03")
    with pytest.raises(DatasetError, match="bad magic"):
        read_idx(bad)
    trunc = tmp_path / "trunc.idx"
    trunc.write_bytes(_idx(np.zeros((4, 5, 5)))[:-3])
    with pytest.raises(DatasetError, match="IDX body has"):
        read_idx(trunc)
    gzbad = tmp_path / "x.gz"
    gzbad.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(DatasetError, match="cannot read IDX"):
        read_idx(gzbad)
    d = tmp_path / "mismatch"
    _write_idx_set(d, n_train=30)
    (d / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(np.zeros(29))))
    with pytest.raises(DatasetError, match="do not match"):
        load_dataset("mnist", str(d))


def _has_tfds() -> bool:
    try:
        import tensorflow_datasets  # noqa: F401
    except ImportError:
        return False
    return True


def _write_cifar(d, n=20, seed=0):
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        with open(d / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": list(np.arange(n) % 10)}, f)


def test_cifar10_batches_parse_and_ood_substitute(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py")
    x, y = read_cifar_batch(tmp_path / "cifar-10-batches-py" / "test_batch")
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "rb") as f:
        raw = pickle.load(f)[b"data"]
    np.testing.assert_array_equal(x[3, :, :, 1], raw[3, 1024:2048].reshape(32, 32))  # channel-major -> NHWC
    ds = load_dataset("cifar10", str(tmp_path))
    assert ds.input_shape == (32, 32, 3) and len(ds.x_train) + len(ds.x_dev) == 100 and len(ds.x_test) == 20
    o = load_ood("cifar10", ds, str(tmp_path), n=6, seed=0)  # no SVHN: sample-photo patches
    assert o.shape == (6, 32, 32, 3) and 0 <= o.min() and o.max() <= 1
    np.testing.assert_array_equal(o, load_ood("cifar10", ds, str(tmp_path), n=6, seed=0))


def test_cifar10_error_paths(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    _write_cifar(d)
    (d / "data_batch_3").unlink()
    with pytest.raises(DatasetError, match="data_batch_3"):
        load_dataset("cifar10", str(tmp_path))
    (d / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="not a CIFAR-10 python batch"):
        load_dataset("cifar10", str(tmp_path))
    with open(d / "data_batch_3", "wb") as f:
        pickle.dump({b"data": np.zeros((3, 100), np.uint8), b"labels": [0, 1, 2]}, f)
    with pytest.raises(DatasetError, match="3072"):
        load_dataset("cifar10", str(tmp_path))


def test_train_cli_on_a_missing_dataset_dir_is_one_line(tmp_path, capsys):
    rc = main(["train", "--dataset", "cifar10", "--data-dir", str(tmp_path / "none"),
               "--out", str(tmp_path / "o"), "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and str(tmp_path / "none") in err


def _write_cifar_bin(d, n=20, seed=0):
    """CIFAR-10's binary version: per record 1 label byte + 1,024 R + 1,024 G + 1,024 B bytes."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    recs = {}
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = (np.arange(n) % 10).astype(np.uint8)
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        (d / name).write_bytes(np.concatenate([labels[:, None], data], axis=1).tobytes())
        recs[name] = (labels, data)
    return recs


def test_cifar10_binary_version_parses_channel_planes_and_labels(tmp_path):
    from snapuq.data.vision import read_cifar_bin

    recs = _write_cifar_bin(tmp_path / "cifar-10-batches-bin")
    x, y = read_cifar_bin(tmp_path / "cifar-10-batches-bin" / "test_batch.bin")
    labels, data = recs["test_batch.bin"]
    np.testing.assert_array_equal(y, labels)
    for c in range(3):  # plane c of record 3 is channel c of image 3, row-major
        np.testing.assert_array_equal(x[3, :, :, c], data[3, 1024 * c : 1024 * (c + 1)].reshape(32, 32))
    ds = load_dataset("cifar10", str(tmp_path))
    assert ds.input_shape == (32, 32, 3) and len(ds.x_train) + len(ds.x_dev) == 100 and len(ds.x_test) == 20
    assert "binary" in ds.meta["source"]
    np.testing.assert_allclose(ds.x_test[3], x[3] / 255.0)


def test_cifar10_binary_version_damage_is_one_line(tmp_path):
    d = tmp_path / "cifar-10-batches-bin"
    _write_cifar_bin(d)
    (d / "data_batch_2.bin").unlink()
    with pytest.raises(DatasetError, match=r"data_batch_2\.bin"):
        load_dataset("cifar10", str(tmp_path))
    (d / "data_batch_2.bin").write_bytes(b"\x01" * 3000)  # a truncated record
    with pytest.raises(DatasetError, match="3073-byte"):
        load_dataset("cifar10", str(tmp_path))
    (d / "data_batch_2.bin").write_bytes(bytes([42]) + bytes(3072))  # a CIFAR-100-style label
    with pytest.raises(DatasetError, match="labels outside"):
        load_dataset("cifar10", str(tmp_path))


def test_cifar10_ood_sets_far_and_near(tmp_path):
    from snapuq.data import load_ood_sets

    _write_cifar_bin(tmp_path / "cifar-10-batches-bin")
    (tmp_path / "fashion_mnist").mkdir()
    imgs = np.full((7, 28, 28), 255, np.uint8)
    (tmp_path / "fashion_mnist" / "t10k-images-idx3-ubyte").write_bytes(
        bytes([0, 0, 8, 3]) + b"".join(int(d).to_bytes(4, "big") for d in imgs.shape) + imgs.tobytes()
    )
    ds = load_dataset("cifar10", str(tmp_path))
    sets = load_ood_sets("cifar10", ds, str(tmp_path), n=5, seed=0)
    assert set(sets) == {"far:fashion_mnist", "near:photo_patches"}
    far = sets["far:fashion_mnist"]
    assert far.shape == (5, 32, 32, 3) and far.dtype == np.float32
    assert far[:, 2:30, 2:30].min() == 1.0 and far[:, :2].max() == 0.0  # 28x28 padded to 32x32, grey -> RGB
    assert list(load_ood_sets("digits", load_dataset("digits"), None, n=4)) == ["ood"]
