"""Datasets. `load_dataset(name, data_dir=None, seed=0)` returns a `Dataset`; each loader lives in its own
module (imported lazily) and registers here by name. A name that is a path (an .npz file or a folder, e.g. a
model directory's data.npz) loads the user's own data (snapuq.data.user)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np

from snapuq.data import audio
from snapuq.data.dataset import SPLIT_ARRAYS, SPLITS, Dataset, check_labels, with_model_classes
from snapuq.data.user import is_data_path, load_user_data
from snapuq.errors import DatasetError

__all__ = ["SPLITS", "SPLIT_ARRAYS", "Dataset", "check_labels", "with_model_classes", "dataset_names",
           "load_dataset", "dataset_of", "load_ood", "load_ood_sets", "frontend_of", "build_of", "reading",
           "read_by", "build_options"]


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


# name -> "module:function"; function(build: dict) -> keyword arguments of the set's loader: for the sets that
# are made in more than one way, the options a build records in its meta (so a model's config.json
# data_meta) that select it. A model reads the build it was trained on, whatever the set's default is now
BUILD_OPTIONS: dict[str, str] = {"keywords12": "snapuq.data.keywords12:build_options"}


def _resolve(spec: str):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def dataset_names() -> list[str]:
    return sorted(LOADERS)


# name -> "module:function"; function(ds: Dataset, frontend: dict) -> Dataset: the set through another audio
# front end (sets whose cache keeps what every front end starts from)
REFRAMERS: dict[str, str] = {"keywords12": "snapuq.data.keywords12:with_frontend"}


def frontend_of(cfg: dict | None) -> dict | None:
    """The front end a model was trained with (its config.json `data_meta.frontend`; None when not audio or
    not recorded)."""
    return ((cfg or {}).get("data_meta") or {}).get("frontend")


def build_of(cfg: dict | None) -> dict | None:
    """The build of its set a model was trained on (its config.json `data_meta`; None when not recorded)."""
    return (cfg or {}).get("data_meta")


def _config_at(model_dir) -> dict | None:
    p = Path(model_dir) / "config.json"
    try:
        return json.loads(p.read_text()) if p.is_file() else None
    except (OSError, ValueError):
        return None  # the commands that need config.json say what is wrong with it


def reading(cfg: dict | None) -> dict:
    """How a model reads its set: `load_dataset`'s keyword arguments `frontend` and `build` from its
    config.json (None each when not recorded)."""
    return {"frontend": frontend_of(cfg), "build": build_of(cfg)}


def read_by(model_dir) -> dict:
    """`reading` of the config.json in a model directory, read once (None each when there is none: a bare
    .tflite)."""
    return reading(_config_at(model_dir))


def load_dataset(name: str, data_dir: str | None = None, seed: int = 0, frontend: dict | None = None,
                 build: dict | None = None) -> Dataset:  # fmt: skip
    """`frontend`: the front end of the model that will read the set (`frontend_of(config)`): an audio set
    made by another one is given through the model's where it can be (REFRAMERS), else refused in one line
    (a model trained before a set changed its front end keeps reading what it was trained on). `build`: the
    build options of the set to make (`build_of(config)`: the one a model was trained on; BUILD_OPTIONS);
    None: the set's default build."""
    ds = _load(name, data_dir, seed, build)
    return ds if frontend is None else _through(name, ds, frontend)


def dataset_of(cfg: dict, data_dir: str | None = None) -> Dataset:
    """The set a model was trained on (its config.json: dataset, seed, build and front end); `data_dir`: where
    its files are now (a moved model directory's data.npz, a set's --data-dir)."""
    return load_dataset(cfg.get("dataset", "digits"), data_dir, int(cfg.get("seed", 0)), **reading(cfg))


def _through(name: str, ds: Dataset, frontend: dict) -> Dataset:
    have = (ds.meta or {}).get("frontend")
    if have is None:
        return ds
    want = audio.known_frontend(frontend)
    if want is not None and want == audio.known_frontend(have):
        return ds
    if want is not None and name in REFRAMERS:
        return _resolve(REFRAMERS[name])(ds, want)
    if want is not None and audio.known_frontend(have) == audio.frontend() and _plain_features(ds):
        return _finish_set(ds, want)
    names = {k: audio.frontend_name(v) or "another" for k, v in (("model", frontend), ("set", have))}
    raise DatasetError(f"{name}: the model's front end (config.json data_meta.frontend: {names['model']}) is "
                       f"not the set's ({names['set']}) and cannot be made from it; retrain the model on "
                       "this set")  # fmt: skip


def _plain_features(ds: Dataset) -> bool:
    """The set's inputs are the MFCC as computed (no normalization moved out of a user's model applied)."""
    return ((ds.meta or {}).get("normalization") or {"kind": "none"}).get("kind", "none") == "none"


def _finish_set(ds: Dataset, fe: dict) -> Dataset:
    """A plain-MFCC set through front end `fe`'s remaining step (CMN is a function of the MFCC alone)."""
    import dataclasses

    arrays = {k: audio.finish(getattr(ds, k), fe) for k in SPLIT_ARRAYS if k.startswith("x_")}
    if ds.x_ood is not None:
        arrays["x_ood"] = audio.finish(ds.x_ood, fe)
    return dataclasses.replace(ds, **arrays, meta={**(ds.meta or {}), "frontend": fe})


def _load(name: str, data_dir: str | None, seed: int, build: dict | None = None) -> Dataset:
    if name not in LOADERS:
        if is_data_path(name):
            # a moved model directory: --data-dir points at the new data.npz (or the folder holding it)
            if data_dir and not Path(name).exists():
                name = data_dir
            return load_user_data(name, seed)
        raise DatasetError(f"unknown dataset '{name}' (known: {', '.join(dataset_names())})")
    return _resolve(LOADERS[name])(data_dir, seed, **build_options(name, build))


def build_options(name: str, build: dict | None) -> dict:
    """The loader's keyword arguments for a recorded build of set `name` (BUILD_OPTIONS; {} for the sets made
    one way, and for None: the set's default build). `snapuq train` takes each as --<name with dashes>."""
    return _resolve(BUILD_OPTIONS[name])(build) if build is not None and name in BUILD_OPTIONS else {}


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
