"""The embedded `digits` set (sklearn's 8x8 handwritten digits, offline) and its OOD source.

Split: stratified 60 / 15 / 25 % train / dev / test, deterministic for a seed.
OOD for digits: 8x8 patches cut from the two photographs sklearn ships (`load_sample_images`: a
temple in China and a flower), converted to grey, area-downsampled and min-max scaled to [0, 1] like
the digits. These are real natural-image inputs, available offline, that contain no digit.
"""

from __future__ import annotations

import numpy as np

from snapuq.data import Dataset


def load_digits(data_dir: str | None = None, seed: int = 0) -> Dataset:
    from sklearn.datasets import load_digits as _ld
    from sklearn.model_selection import train_test_split

    d = _ld()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    x_tr, x_dv, y_tr, y_dv = train_test_split(x_tr, y_tr, test_size=0.2, random_state=seed, stratify=y_tr)
    return Dataset(
        "digits",
        x_tr,
        y_tr,
        x_dv,
        y_dv,
        x_te,
        y_te,
        [str(i) for i in range(10)],
        meta={
            "source": "sklearn.datasets.load_digits",
            "preprocessing": "x / 16, float32, NHWC (8, 8, 1)",
            "split": "stratified 60/15/25 train/dev/test",
        },
    )


def natural_patches(n: int, size: tuple[int, int], seed: int = 0, patch: int = 32) -> np.ndarray:
    """n grey patches (patch x patch pixels of sklearn's sample photos) area-downsampled to `size`,
    min-max scaled per patch to [0, 1]; float32 (n, h, w, 1)."""
    from sklearn.datasets import load_sample_images

    imgs = [im.astype(np.float32).mean(axis=2) for im in load_sample_images().images]
    rng = np.random.default_rng(seed)
    h, w = size
    ph = (patch // h) * h
    pw = (patch // w) * w
    out = np.empty((n, h, w, 1), np.float32)
    for k in range(n):
        im = imgs[k % len(imgs)]
        r = rng.integers(0, im.shape[0] - ph)
        c = rng.integers(0, im.shape[1] - pw)
        p = im[r : r + ph, c : c + pw].reshape(h, ph // h, w, pw // w).mean(axis=(1, 3))
        lo, hi = float(p.min()), float(p.max())
        out[k, :, :, 0] = (p - lo) / (hi - lo) if hi > lo else 0.0
    return out


def ood_digits(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    h, w = ds.input_shape[:2]
    return natural_patches(n, (h, w), seed=seed + 7919)
