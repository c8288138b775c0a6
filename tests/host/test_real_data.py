"""The real data sets in ../shared/data (official files), read through the product's loaders: counts, shapes
and the published md5s. Skipped, with the reason shown, where the folder is absent (a user's clone)."""

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from snapuq.data import load_dataset, load_ood

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SNAPUQ_DATA_DIR", ROOT.parent / "shared" / "data"))
MD5 = {
    "mnist/train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "mnist/train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "mnist/t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "mnist/t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
    "fashion_mnist/t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "fashion_mnist/t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
    "cifar-10-batches-bin/data_batch_1.bin": "5dd7e06a14cb22eb9f671a540d1b7c25",
    "cifar-10-batches-bin/data_batch_2.bin": "5ea93a67294ea407fff1d09f752e9692",
    "cifar-10-batches-bin/data_batch_3.bin": "942cd6a4bcdd0dd3c604fbe906cb4421",
    "cifar-10-batches-bin/data_batch_4.bin": "ae636b3ba5c66a11e91e8cb52e771fcb",
    "cifar-10-batches-bin/data_batch_5.bin": "53f37980c15c3d472c316c40844f3f0d",
    "cifar-10-batches-bin/test_batch.bin": "803d5f7f4d78ea53de84dbe85f74fb6d",
}

needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"real data sets not present at {DATA} (set SNAPUQ_DATA_DIR to run these)"
)


@needs_data
@pytest.mark.parametrize("rel", sorted(MD5))
def test_real_file_is_the_published_one(rel):
    assert hashlib.md5((DATA / rel).read_bytes()).hexdigest() == MD5[rel]


@needs_data
def test_real_mnist_and_its_fashion_ood():
    ds = load_dataset("mnist", str(DATA), seed=0)
    assert len(ds.x_train) + len(ds.x_dev) == 60000 and len(ds.x_test) == 10000
    assert ds.input_shape == (28, 28, 1) and ds.x_test.dtype == np.float32
    assert 0.0 <= ds.x_test.min() and ds.x_test.max() == 1.0
    assert np.bincount(ds.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    o = load_ood("mnist", ds, str(DATA), n=300, seed=0)
    assert o.shape == (300, 28, 28, 1) and 0 <= o.min() and o.max() <= 1


@needs_data
def test_real_cifar10_binary_version():
    ds = load_dataset("cifar10", str(DATA), seed=0)
    assert len(ds.x_train) + len(ds.x_dev) == 50000 and len(ds.x_test) == 10000
    assert ds.input_shape == (32, 32, 3) and "binary" in ds.meta["source"]
    assert np.bincount(ds.y_test).tolist() == [1000] * 10
    assert np.bincount(np.concatenate([ds.y_train, ds.y_dev])).tolist() == [5000] * 10
    assert ds.y_test[:10].tolist() == [3, 8, 8, 0, 6, 6, 1, 6, 3, 1]  # cat ship ship airplane frog ...
