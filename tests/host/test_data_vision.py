import numpy as np
import pytest
from scipy import ndimage

from snapuq.data import load_dataset, load_ood
from snapuq.data.corruptions import CIFAR10_C, CORRUPTIONS, MNIST_C, corrupt, corruption_names
from snapuq.errors import DatasetError


def test_digits_split_is_deterministic_and_disjoint():
    a, b = load_dataset("digits", seed=0), load_dataset("digits", seed=0)
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert a.input_shape == (8, 8, 1) and a.n_classes == 10
    n = len(a.x_train) + len(a.x_dev) + len(a.x_test)
    assert n == 1797 and len(a.x_test) == 450
    assert a.x_train.dtype == np.float32 and 0 <= a.x_train.min() and a.x_train.max() <= 1
    c = load_dataset("digits", seed=1)
    assert not np.array_equal(a.x_test, c.x_test)


def test_digits_ood_natural_patches():
    ds = load_dataset("digits")
    o = load_ood("digits", ds, n=40, seed=0)
    assert o.shape == (40, 8, 8, 1) and o.dtype == np.float32
    assert o.min() >= 0 and o.max() <= 1
    np.testing.assert_array_equal(o, load_ood("digits", ds, n=40, seed=0))


def test_unknown_dataset_is_a_one_line_error():
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_dataset("nope")


def test_corruption_lists():
    assert len(MNIST_C) == 15 and len(CIFAR10_C) == 19
    assert corruption_names("digits") == MNIST_C and corruption_names("cifar10") == CIFAR10_C
    assert set(MNIST_C) | set(CIFAR10_C) == set(CORRUPTIONS)


def _images():
    x8 = load_dataset("digits").x_test[:20]
    xc = ndimage.gaussian_filter(np.random.default_rng(0).uniform(size=(6, 32, 32, 3)), (0, 2, 2, 0))
    xc = ((xc - xc.min()) / (xc.max() - xc.min())).astype(np.float32)
    return x8, xc


@pytest.mark.parametrize("which", ["mnist", "cifar"])
def test_corruptions_shape_range_determinism(which):
    """On the 8x8 digits and 32x32 textures. Growth with severity is tested at the reference sizes, where
    the references' own tables order it (tests/host/test_corruptions_published.py)."""
    x8, xc = _images()
    names, x = (MNIST_C, x8) if which == "mnist" else (CIFAR10_C, xc)
    for nm in names:
        mse = []
        for s in range(1, 6):
            y = corrupt(x, nm, s, seed=1)
            assert y.shape == x.shape and y.dtype == np.float32
            assert y.min() >= 0 and y.max() <= 1
            mse.append(float(np.mean((y - x) ** 2)))
        np.testing.assert_array_equal(corrupt(x, nm, 3, seed=1), corrupt(x, nm, 3, seed=1))
        assert mse[0] > 0, nm


def test_corrupt_rejects_bad_arguments():
    x = np.zeros((1, 8, 8, 1), np.float32)
    with pytest.raises(DatasetError):
        corrupt(x, "nope", 1)
    with pytest.raises(DatasetError):
        corrupt(x, "fog", 6)
    with pytest.raises(DatasetError):
        corrupt(x[0], "fog", 1)
