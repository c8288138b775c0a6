"""Datasets. `load_dataset(name, data_dir=None, seed=0)` returns a `Dataset`; each loader lives in its own
module (imported lazily) and registers here by name. A name that is a path (an .npz file or a folder, e.g. a
model directory's data.npz) loads the user's own data (snapuq.data.user)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

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


# name -> "module:function"; function(data_dir: str | None, seed: int) -> Dataset
LOADERS: dict[str, str] = {
    "digits": "snapuq.data.vision:load_digits",
    "mnist": "snapuq.data.vision:load_mnist",
    "fashion_mnist": "snapuq.data.vision:load_fashion_mnist",
    "cifar10": "snapuq.data.vision:load_cifar10",
    "keywords": "snapuq.data.keywords:load_keywords",
    "speech_commands": "snapuq.data.speech_commands:load_speech_commands",
}

# name -> "module:function"; function(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray
# (OOD inputs with the same shape/preprocessing as the ID inputs)
OOD_LOADERS: dict[str, str] = {
    "digits": "snapuq.data.vision:ood_digits",
    "mnist": "snapuq.data.vision:ood_mnist",
    "fashion_mnist": "snapuq.data.vision:ood_fashion_mnist",
    "cifar10": "snapuq.data.vision:ood_cifar10",
    "keywords": "snapuq.data.keywords:ood_keywords",
    "speech_commands": "snapuq.data.speech_commands:ood_speech_commands",
}


SPLITS = ("train", "dev", "test")


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
    from dataclasses import replace

    check_labels(ds, n_classes, where, splits)
    names = [str(c) for c in ds.class_names]
    if len(names) > n_classes:
        raise DatasetError(f"{where}: {len(names)} class names, the model's logits are {n_classes} wide")
    if len(names) == n_classes:
        return ds
    return replace(ds, class_names=names + [str(i) for i in range(len(names), n_classes)])


def _resolve(spec: str):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def dataset_names() -> list[str]:
    return sorted(LOADERS)


def load_dataset(name: str, data_dir: str | None = None, seed: int = 0) -> Dataset:
    if name not in LOADERS:
        from snapuq.data.user import is_data_path, load_user_data

        if is_data_path(name):
            from pathlib import Path

            # a moved model directory: --data-dir points at the new data.npz (or the folder holding it)
            if data_dir and not Path(name).exists():
                name = data_dir
            return load_user_data(name, seed)
        raise DatasetError(f"unknown dataset '{name}' (known: {', '.join(dataset_names())})")
    return _resolve(LOADERS[name])(data_dir, seed)


def load_ood(name: str, ds: Dataset, data_dir: str | None = None, n: int = 500, seed: int = 0) -> np.ndarray:
    """OOD inputs for a dataset. User data: its x_ood (at most n, drawn by seed), or an empty (0, ...) array
    when it has none (callers skip the ID-vs-OOD metrics then)."""
    if name not in OOD_LOADERS and (ds.x_ood is not None or "modality" in ds.meta):
        x = ds.x_ood if ds.x_ood is not None else np.zeros((0, *ds.input_shape), np.float32)
        if len(x) > n:
            x = x[np.sort(np.random.default_rng(seed).choice(len(x), n, replace=False))]
        return np.asarray(x, np.float32)
    if name not in OOD_LOADERS:
        raise DatasetError(f"no OOD source for dataset '{name}'")
    return _resolve(OOD_LOADERS[name])(data_dir, n, seed, ds)


# name -> "module:function"; function(data_dir, n, seed, ds) -> {label: inputs}: sets with several OOD sets
# ("far:<name>" / "near:<name>"), each reported on its own row by `snapuq eval`
OOD_SETS: dict[str, str] = {
    "cifar10": "snapuq.data.vision:ood_sets_cifar10",
}


def load_ood_sets(name: str, ds: Dataset, data_dir: str | None = None, n: int = 500,
                  seed: int = 0) -> dict[str, np.ndarray]:  # fmt: skip
    """Every OOD set of a data set by label; one ("ood") for the sets with a single source."""
    if name in OOD_SETS:
        return _resolve(OOD_SETS[name])(data_dir, n, seed, ds)
    return {"ood": load_ood(name, ds, data_dir, n, seed)}
