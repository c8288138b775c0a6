"""Datasets. `load_dataset(name, data_dir=None, seed=0)` returns a `Dataset`; each loader lives in its own
module (imported lazily) and registers here by name. A name that is a path (an .npz file or a folder, e.g. a
model directory's data.npz) loads the user's own data (snapuq.data.user)."""

from __future__ import annotations

import importlib

import numpy as np

from snapuq.data.dataset import SPLIT_ARRAYS, SPLITS, Dataset, check_labels, with_model_classes
from snapuq.data.user import is_data_path, load_user_data
from snapuq.errors import DatasetError

__all__ = ["SPLITS", "SPLIT_ARRAYS", "Dataset", "check_labels", "with_model_classes", "dataset_names",
           "load_dataset", "load_ood", "load_ood_sets"]


# name -> "module:function"; function(data_dir: str | None, seed: int) -> Dataset
LOADERS: dict[str, str] = {
    "digits": "snapuq.data.vision:load_digits",
    "mnist": "snapuq.data.vision:load_mnist",
    "fashion_mnist": "snapuq.data.vision:load_fashion_mnist",
    "cifar10": "snapuq.data.vision:load_cifar10",
    "keywords": "snapuq.data.keywords:load_keywords",
    "keywords12": "snapuq.data.keywords12:load_keywords12",
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
    "keywords12": "snapuq.data.keywords12:ood_keywords12",
    "speech_commands": "snapuq.data.speech_commands:ood_speech_commands",
}


def _resolve(spec: str):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def dataset_names() -> list[str]:
    return sorted(LOADERS)


def load_dataset(name: str, data_dir: str | None = None, seed: int = 0) -> Dataset:
    if name not in LOADERS:
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
