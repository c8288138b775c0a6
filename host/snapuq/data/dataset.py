"""The Dataset record every loader returns (splits, class names, OOD, meta) and its label checks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from snapuq.errors import DatasetError


@dataclass
class Dataset:
    """Inputs are float32 NHWC (vision: [0, 1]; audio: MFCC features, layout (49, 10, 1)).
    Splits are deterministic for a given seed. `meta` carries loader-specific facts
    (source, preprocessing, normalization, modality). `x_ood` holds out-of-distribution inputs that came
    with the data (user data sets only; the built-in sets have OOD loaders)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_dev: np.ndarray
    y_dev: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list[str]
    meta: dict = field(default_factory=dict)
    x_ood: np.ndarray | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.x_train.shape[1:])

    @property
    def n_classes(self) -> int:
        return len(self.class_names)


SPLITS = ("train", "dev", "test")
SPLIT_ARRAYS = tuple(f"{a}_{s}" for s in SPLITS for a in ("x", "y"))  # x_train, y_train, ..., y_test


def check_labels(ds: Dataset, n_classes: int, where: str, splits: tuple[str, ...] = SPLITS) -> None:
    """DatasetError (one line) when a label of `splits` is outside the model's classes 0..n_classes-1 (the
    width of its logits; -1 marks an unlabelled training sample)."""
    for s in splits:
        y = np.asarray(getattr(ds, f"y_{s}")).reshape(-1)
        if y.size and int(y.max()) >= n_classes:
            raise DatasetError(
                f"{where}: y_{s} has label {int(y.max())}, outside the model's {n_classes} classes "
                f"(its logits are {n_classes} wide: labels 0..{n_classes - 1})"
            )


def with_model_classes(ds: Dataset, n_classes: int, where: str, splits: tuple[str, ...] = SPLITS) -> Dataset:
    """`ds` with exactly `n_classes` class names, n_classes being the model's logits width, never the labels
    that happen to be present: a class no split has (the top one, say) is still one of the model's outputs.
    Names the data lack are numbered ("9", ...). DatasetError (one line) for a label of `splits` outside the
    model's classes or more class names than the model has outputs."""

    check_labels(ds, n_classes, where, splits)
    names = [str(c) for c in ds.class_names]
    if len(names) > n_classes:
        raise DatasetError(f"{where}: {len(names)} class names, the model's logits are {n_classes} wide")
    if len(names) == n_classes:
        return ds
    return replace(ds, class_names=names + [str(i) for i in range(len(names), n_classes)])


def split_waves(ds, split: str = "test") -> np.ndarray:
    """int16 waves (N, 16000) of a Dataset split, aligned with ds.x_<split> (memory-mapped from the cache)."""
    waves = (ds.meta or {}).get("waves")
    if not waves or split not in waves:
        raise DatasetError(
            f"dataset '{ds.name}' keeps no raw waves for split '{split}' (audio datasets only)"
        )
    src = waves[split]
    try:
        arr = np.load(src, mmap_mode="r") if isinstance(src, str) else np.asarray(src)
    except (OSError, ValueError) as e:
        raise DatasetError(f"{ds.name}: cannot read raw waves {src}: {e}") from e
    ref = getattr(ds, f"x_{split}")
    if arr.ndim != 2 or arr.shape[0] != ref.shape[0]:
        raise DatasetError(f"{ds.name}: raw waves {src} have shape {arr.shape}, expected ({ref.shape[0]}, T)")
    return arr
