"""Your own data: an `.npz` of arrays or a folder of class subfolders (PNG/JPEG images or 16 kHz WAV clips).

`load_user_data(path, seed, input_shape=None, normalize="auto")` returns a `snapuq.data.Dataset`:

- ``DATA.npz`` with ``x_train, y_train, x_test, y_test`` and optionally ``x_dev, y_dev`` (else 15 % of the
  training set, per class, by seed), ``x_ood`` (out-of-distribution inputs for `snapuq eval`) and
  ``class_names``. Labels are integers 0..C-1 (or one-hot rows). Inputs are (N, F) vectors, (N, T, C) sensor
  windows or (N, H, W, C) images.
- a folder ``ROOT/<class>/<file>`` (or ``ROOT/train/<class>/...`` + ``ROOT/test/<class>/...``): images are
  decoded with Pillow, converted to the model's channel count, resized to its input size and scaled to
  [0, 1]; WAV clips (resampled to 16 kHz mono when recorded otherwise, cut or zero-padded to 1 s) go
  through the MFCC front end of `snapuq.data.audio` (49x10x1) and their int16 waves are kept for the audio
  corruptions. Without train/test folders the files of each class are split 70/15/15 (train/dev/test) by
  seed. Class names are the sorted folder names.

Normalisation (``normalize``): "auto" scales integer arrays (uint8 images) by 1/255 and leaves float arrays
as they are; "none" keeps the values; "standard" subtracts the per-channel training mean and divides by the
per-channel standard deviation (sensor data in physical units). What was applied is recorded in
``Dataset.meta["normalization"]`` as ``x_model = x_raw * scale + offset`` per channel: `snapuq export` copies
it into the manifest so the device and the harness turn raw readings into model inputs the same way.

A model directory keeps the prepared splits in ``DIR/data.npz`` (`save_cache`): `export`, `verify`, `eval`,
the harness and the MicroPython tools read the same arrays through `load_dataset(<path of data.npz>)`.

Refused in one line naming the file (DatasetError), before anything is trained: an .npz that is not a readable
zip of arrays (zero bytes, damaged, object arrays that would need pickle), complex, NaN or infinite inputs,
images over ``MAX_IMAGE_PIXELS`` (4096 x 4096; checked from the header, before decoding: no decompression
bomb is ever decoded), WAV files with a damaged header and float WAV samples that are NaN or infinite.
`snapuq train` also refuses model inputs (after normalisation) beyond ``MAX_ABS_INPUT`` (1e6; see
`check_input_range`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.data import audio
from snapuq.data.dataset import SPLIT_ARRAYS, SPLITS, Dataset, split_waves
from snapuq.data.user_normalization import (  # noqa: F401 (re-exported)
    _normalization,
    apply_normalization,
    normalization_channels,
    with_preprocessing,
)
from snapuq.data.user_readers import (
    MAX_IMAGE_PIXELS,  # noqa: F401 (re-exported)
    _class_dirs,
    _files,
    _kind,
    _read_files,
)
from snapuq.errors import DatasetError
from snapuq.io import save_arrays

NPZ_REQUIRED = ("x_train", "y_train", "x_test", "y_test")
DEV_FRAC = 0.15
# the largest |model input| `snapuq train` accepts (after normalisation): beyond it activations, their
# squares in the heads' NLL and the gradients overflow float32 (training ends in NaN)
MAX_ABS_INPUT = 1e6


def modality_of(input_shape: tuple[int, ...], meta: dict | None = None) -> str:
    """ "audio" (MFCC features with raw waves kept), "image" (H, W, C), "sensor" (T, C) or "vector" (F,)."""
    if (meta or {}).get("waves"):
        return "audio"
    return {3: "image", 2: "sensor", 1: "vector"}.get(len(input_shape), "unknown")


def is_data_path(name: str) -> bool:
    """True when a dataset name is a path to user data (an .npz file or a folder), not a built-in name."""
    return name.endswith(".npz") or "/" in name or "\\" in name or Path(name).is_dir()


# ---------------------------------------------------------------------------------------------- helpers
def _labels(y: np.ndarray, where: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] > 1:
        y = y.argmax(1)
    y = y.reshape(len(y)) if y.ndim == 2 and y.shape[1] == 1 else y
    if y.ndim != 1:
        raise DatasetError(f"{where}: labels must be (N,) integers or (N, C) one-hot, got shape {y.shape}")
    if y.dtype == np.bool_:  # a binary task's True / False
        y = y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating):
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise DatasetError(f"{where}: labels must be integers 0..C-1")
    elif not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"{where}: labels must be integers 0..C-1, got dtype {y.dtype}")
    y = y.astype(np.int64)
    if len(y) and y.min() < 0:
        raise DatasetError(f"{where}: negative label {int(y.min())}")
    return y


def _split_dev(x: np.ndarray, y: np.ndarray, seed: int, frac: float = DEV_FRAC):
    """Per-class random split of (x, y) into train and dev (at least one dev sample per class with >= 2)."""
    rng = np.random.default_rng([int(seed), 15])
    dev = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        k = int(round(frac * len(idx)))
        if len(idx) >= 2:
            k = max(1, min(k, len(idx) - 1))
        dev.extend(idx[:k].tolist())
    dmask = np.zeros(len(y), bool)
    dmask[np.asarray(dev, np.int64)] = True
    return x[~dmask], y[~dmask], x[dmask], y[dmask]




def _fit_shape(x: np.ndarray, shape: tuple[int, ...] | None, where: str) -> np.ndarray:
    """Reshape (N, *s) to (N, *shape) when they differ only by trailing 1s (e.g. (N, 28, 28) images for a
    (28, 28, 1) model input)."""
    if shape is None or tuple(x.shape[1:]) == tuple(shape):
        return x
    if int(np.prod(x.shape[1:])) == int(np.prod(shape)) and [d for d in x.shape[1:] if d != 1] == [
        d for d in shape if d != 1
    ]:
        return x.reshape(len(x), *shape)
    raise DatasetError(f"{where}: inputs are {tuple(x.shape[1:])}, the model takes {tuple(shape)}")


# ---------------------------------------------------------------------------------------------- npz
def _read_npz(p: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz, without pickle; one line for a file that is no readable zip of arrays (zero
    bytes, damaged, a lone .npy, object arrays)."""
    import struct
    import zipfile
    import zlib

    bad = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, struct.error)
    if p.stat().st_size == 0:
        raise DatasetError(f"{p}: not a readable .npz (the file is empty: 0 bytes)")
    try:
        z = np.load(p, allow_pickle=False)
    except bad as e:
        raise DatasetError(f"{p}: not a readable .npz ({type(e).__name__}: {e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise DatasetError(f"{p}: not an .npz archive (a single .npy array); save it with numpy.savez")
    out: dict[str, np.ndarray] = {}
    with z:
        for k in z.files:
            try:
                out[k] = z[k]
            except ValueError as e:
                if "allow_pickle" in str(e):
                    raise DatasetError(f"{p}: {k} is an object array (loading it would need pickle, which "
                                       "snapuq never does); save numeric arrays") from None  # fmt: skip
                raise DatasetError(f"{p}: {k}: not a readable array ({e})") from None
            except bad as e:
                raise DatasetError(f"{p}: {k}: not a readable array ({type(e).__name__}: {e})") from None
    return out


def _check_x(a: np.ndarray, where: str) -> None:
    """Inputs: a real numeric (N, ...) array of finite values that float32 holds."""
    if np.issubdtype(a.dtype, np.complexfloating):
        raise DatasetError(
            f"{where}: complex values ({a.dtype}): the imaginary part would be dropped; give real arrays "
            "(the magnitude, say, or real and imaginary parts as channels)"
        )
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or a.ndim < 2:
        raise DatasetError(f"{where} must be a numeric array (N, ...), got {a.dtype} {a.shape}")
    if np.issubdtype(a.dtype, np.floating) and a.size:
        if not np.all(np.isfinite(a)):
            raise DatasetError(f"{where} contains NaN or inf")
        top = float(np.abs(a).max())
        if top > float(np.finfo(np.float32).max):
            raise DatasetError(f"{where}: values up to {top:.3g}, beyond float32 (the model's inputs)")


def _check_npz(p: Path, raw: dict[str, np.ndarray]) -> None:
    """The keys, the input arrays and the labels of a user .npz (everything that needs no model)."""
    missing = [k for k in NPZ_REQUIRED if k not in raw]
    if missing:
        raise DatasetError(
            f"{p}: missing {', '.join(missing)} (needs x_train, y_train, x_test, y_test; "
            f"optional x_dev, y_dev, x_ood, class_names)"
        )
    if ("x_dev" in raw) != ("y_dev" in raw):
        raise DatasetError(f"{p}: x_dev and y_dev go together")
    for k in ("x_train", "x_test", "x_dev", "x_ood"):
        if k in raw:
            _check_x(raw[k], f"{p}: {k}")
    for k in ("y_train", "y_test", "y_dev"):
        if k in raw:
            _labels(raw[k], f"{p}: {k}")


def _file_key(p: Path) -> tuple[str, int, int]:
    st = p.stat()
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


# the arrays of the last .npz `precheck_user_data` read and checked, taken (once) by the load that follows
_PRECHECKED: dict[tuple[str, int, int], dict[str, np.ndarray]] = {}


def precheck_user_data(path: str | Path) -> None:
    """The checks on DATA that need no model, before TensorFlow loads (`snapuq train --model`): an .npz is
    read (kept for the `load_user_data` that follows: read once) and its arrays and labels are checked. A
    folder's files are checked as they are read (once the model gives the input size), a missing path when
    it is loaded (after the model's own checks)."""
    p = Path(path)
    if not p.is_file():
        return
    raw = _read_npz(p)
    if "meta_json" not in raw:
        _check_npz(p, raw)
    _PRECHECKED.clear()
    _PRECHECKED[_file_key(p)] = raw


def load_npz(path: str | Path, seed: int = 0, input_shape: tuple[int, ...] | None = None,
             normalize: str = "auto") -> Dataset:  # fmt: skip
    """A Dataset from an .npz of arrays (see the module doc); a model directory's data.npz loads as stored."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    raw = _PRECHECKED.pop(_file_key(p), None) or _read_npz(p)
    if "meta_json" in raw:  # a model directory's prepared splits
        return _load_cache(p, raw)
    _check_npz(p, raw)
    ytr, yte = _labels(raw["y_train"], f"{p}: y_train"), _labels(raw["y_test"], f"{p}: y_test")
    xtr, xte = raw["x_train"], raw["x_test"]
    if len(xtr) != len(ytr) or len(xte) != len(yte):
        raise DatasetError(f"{p}: x_train/y_train or x_test/y_test lengths differ")
    if xtr.shape[1:] != xte.shape[1:]:
        raise DatasetError(f"{p}: x_train is {xtr.shape[1:]} per sample, x_test {xte.shape[1:]}")
    n_classes = int(max(ytr.max(initial=0), yte.max(initial=0))) + 1
    if "class_names" in raw:
        names = [str(s) for s in np.asarray(raw["class_names"]).reshape(-1)]
        if len(names) < n_classes:
            raise DatasetError(f"{p}: {len(names)} class_names for labels up to {n_classes - 1}")
    else:
        names = [str(i) for i in range(n_classes)]
    if len(names) < 2:
        raise DatasetError(f"{p}: needs at least two classes")
    if "x_dev" in raw:
        xdv, ydv = raw["x_dev"], _labels(raw["y_dev"], f"{p}: y_dev")
        if len(xdv) != len(ydv) or xdv.shape[1:] != xtr.shape[1:]:
            raise DatasetError(f"{p}: x_dev/y_dev do not match x_train")
        dev_note = "x_dev/y_dev from the file"
    else:
        xtr, ytr, xdv, ydv = _split_dev(xtr, ytr, seed)
        dev_note = f"{DEV_FRAC:.0%} of x_train per class (seed {seed})"
    norm = _normalization(np.asarray(xtr), xtr.dtype, normalize)

    def prep(a: np.ndarray, what: str) -> np.ndarray:
        return _fit_shape(apply_normalization(a, norm), input_shape, f"{p}: {what}")

    ood = prep(raw["x_ood"], "x_ood") if "x_ood" in raw else None
    ood_note = {"ood": f"x_ood of {p.name}"} if ood is not None else {}
    ds = Dataset(
        name=p.stem,
        x_train=prep(xtr, "x_train"),
        y_train=ytr,
        x_dev=prep(xdv, "x_dev"),
        y_dev=ydv,
        x_test=prep(xte, "x_test"),
        y_test=yte,
        class_names=names,
        meta={
            "source": f"npz {p.resolve()}",
            "dev": dev_note,
            "normalization": norm,
            "preprocessing": f"arrays of {p.name}, {norm['formula']}",
            **ood_note,
        },  # fmt: skip
        x_ood=ood,
    )
    ds.meta["modality"] = modality_of(ds.input_shape)
    return ds


# ---------------------------------------------------------------------------------------------- folders
def load_folder(path: str | Path, seed: int = 0, input_shape: tuple[int, ...] | None = None,
                normalize: str = "auto") -> Dataset:  # fmt: skip
    """A Dataset from a folder of class subfolders (see the module doc)."""

    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such folder")
    split_dirs = {s: root / s for s in ("train", "dev", "test") if (root / s).is_dir()}
    if "train" in split_dirs and "test" in split_dirs:
        names = [d.name for d in _class_dirs(split_dirs["train"])]
        parts = {s: split_dirs[s] for s in split_dirs}
    else:
        names = [d.name for d in _class_dirs(root)]
        parts = {"all": root}
    if len(names) < 2:
        raise DatasetError(f"{root}: needs at least two class subfolders (found {len(names)})")
    files: dict[str, list[tuple[Path, int]]] = {}
    for s, d in parts.items():
        files[s] = []
        for c, name in enumerate(names):
            cd = d / name
            fs = _files(cd) if cd.is_dir() else []
            if not fs and s in ("all", "train"):
                raise DatasetError(f"{cd}: no PNG/JPEG images or WAV clips")
            files[s] += [(f, c) for f in fs]
        extra = sorted(set(x.name for x in _class_dirs(d)) - set(names))
        if extra:
            raise DatasetError(f"{d}: class folder(s) {', '.join(extra)} not in the training classes")
    kind = _kind([f for v in files.values() for f, _ in v], root)
    if kind == "audio" and input_shape is not None and tuple(input_shape) != tuple(audio.FEATURE_SHAPE):
        raise DatasetError(
            f"{root}: WAV clips become MFCC features {audio.FEATURE_SHAPE}; "
            f"the model takes {tuple(input_shape)}"
        )
    rng = np.random.default_rng([int(seed), 16])
    if "all" in files:
        tr, dv, te = [], [], []
        for c in range(len(names)):
            fs = [f for f, cc in files["all"] if cc == c]
            order = rng.permutation(len(fs))
            n_te = n_dv = max(1, int(round(0.15 * len(fs)))) if len(fs) >= 3 else 0
            te += [(fs[i], c) for i in order[:n_te]]
            dv += [(fs[i], c) for i in order[n_te : n_te + n_dv]]
            tr += [(fs[i], c) for i in order[n_te + n_dv :]]
        split = {"train": tr, "dev": dv, "test": te}
        dev_note = "70/15/15 per class by seed"
    else:
        split = {"train": files["train"], "test": files["test"], "dev": files.get("dev", [])}
        dev_note = "dev/ folder" if split["dev"] else None
    if not split["test"]:
        raise DatasetError(f"{root}: too few files for a test split (needs >= 3 per class)")
    arrays = {s: (_read_files([f for f, _ in v], kind, input_shape) if v else None,
                  np.asarray([c for _, c in v], np.int64)) for s, v in split.items()}  # fmt: skip
    xtr, ytr = arrays["train"]
    if arrays["dev"][0] is None:
        xtr, ytr, xdv, ydv = _split_dev(xtr, ytr, seed)
        dev_note = f"{DEV_FRAC:.0%} of train per class (seed {seed})"
        arrays["dev"] = (xdv, ydv)
    meta: dict[str, Any] = {"source": f"folder {root.resolve()}", "dev": dev_note, "kind": kind}
    if kind == "audio":
        waves = {s: arrays[s][0] for s in ("train", "dev", "test")}
        x = {s: audio.mfcc(w) for s, w in waves.items()}
        norm = {"kind": "none", "scale": [1.0], "offset": [0.0], "formula": "x_model = mfcc(wave)"}
        meta.update({"waves": {"dev": waves["dev"], "test": waves["test"]}, "frontend": audio.FRONTEND,
                     "preprocessing": "16 kHz mono wav, 1 s, MFCC 49x10x1 (data.audio.mfcc)"})  # fmt: skip
    else:
        norm = _normalization(arrays["train"][0], np.dtype(np.uint8), normalize)
        x = {s: apply_normalization(arrays[s][0], norm) for s in ("train", "dev", "test")}
        meta["preprocessing"] = f"image decoded, {'resized, ' if input_shape else ''}{norm['formula']}"
    meta["normalization"] = norm
    ds = Dataset(name=root.name, class_names=names, meta=meta,
                 **{f"x_{s}": _fit_shape(x[s], input_shape, f"{root}") for s in SPLITS},
                 **{f"y_{s}": arrays[s][1] for s in SPLITS})
    ds.meta["modality"] = modality_of(ds.input_shape, ds.meta)
    return ds


def load_user_data(path: str | Path, seed: int = 0, input_shape: tuple[int, ...] | None = None,
                   normalize: str = "auto") -> Dataset:  # fmt: skip
    """An .npz file or a folder of class subfolders (see the module doc)."""
    p = Path(path)
    if p.is_dir():
        if (p / "data.npz").is_file() and (p / "config.json").is_file():  # a model directory
            return load_npz(p / "data.npz", seed, input_shape)
        return load_folder(p, seed, input_shape, normalize)
    if p.suffix.lower() == ".npz" or p.is_file():
        return load_npz(p, seed, input_shape, normalize)
    raise DatasetError(f"{p}: no such .npz file or folder")


def load_ood_path(path: str | Path, ds: Dataset, n: int | None = None, seed: int = 0) -> np.ndarray:
    """OOD inputs prepared like `ds`: an .npz (x_ood, or x), a folder of images / WAV clips (any layout) or
    one file. Clips through ds.meta["frontend"], then normalised with ds.meta["normalization"]; at most n,
    drawn by seed."""

    p = Path(path)
    norm = (ds.meta or {}).get("normalization") or {"kind": "none"}
    shape = ds.input_shape
    if p.is_file() and p.suffix.lower() == ".npz":
        z = _read_npz(p)
        key = "x_ood" if "x_ood" in z else "x" if "x" in z else None
        if key is None:
            raise DatasetError(f"{p}: no x_ood (or x) array")
        _check_x(z[key], f"{p}: {key}")
        x = _fit_shape(apply_normalization(z[key], norm), shape, f"{p}: {key}")
        if x.size and not np.all(np.isfinite(x)):
            raise DatasetError(f"{p}: {key}: NaN or inf once normalised like the training data")
    else:
        files = [p] if p.is_file() else (_files(p) if p.is_dir() else [])
        if not files:
            raise DatasetError(f"{p}: no such .npz, image/WAV file or folder of them")
        kind = _kind(files, p)
        raw = _read_files(files, kind, shape if kind == "image" else None)
        fe = (ds.meta or {}).get("frontend")
        x = apply_normalization(audio.features(raw, fe) if kind == "audio" else raw, norm)
        x = _fit_shape(np.asarray(x, np.float32), shape, str(p))
    if n is not None and len(x) > n:
        x = x[np.sort(np.random.default_rng(seed).choice(len(x), n, replace=False))]
    return np.asarray(x, np.float32)


# ---------------------------------------------------------------------------------------------- cache
def _jsonable_meta(meta: dict) -> dict:
    out = {}
    for k, v in meta.items():
        if k == "waves":
            continue
        try:
            json.dumps(v)
        except TypeError:
            continue
        out[k] = v
    return out




def save_cache(ds: Dataset, path: str | Path) -> Path:
    """Write the prepared splits (+ x_ood, the audio waves of dev/test) to an .npz that `load_npz` reads
    back unchanged (written to a temporary name and renamed)."""
    p = Path(path)
    arrays = {k: np.asarray(getattr(ds, k), np.float32 if k[0] == "x" else np.int64) for k in SPLIT_ARRAYS}
    if ds.x_ood is not None:
        arrays["x_ood"] = np.asarray(ds.x_ood, np.float32)

    if (ds.meta or {}).get("waves"):
        for s in ("dev", "test"):
            arrays[f"waves_{s}"] = np.asarray(split_waves(ds, s), np.int16)
    arrays["class_names"] = np.asarray(ds.class_names, dtype=str)
    arrays["meta_json"] = np.asarray(json.dumps({"name": ds.name, **_jsonable_meta(ds.meta or {})}))
    return save_arrays(p, **arrays)


def _load_cache(p: Path, z) -> Dataset:
    try:
        meta = json.loads(str(z["meta_json"]))
        arr = {k: z[k] for k in z}
    except (ValueError, KeyError) as e:
        raise DatasetError(f"{p}: damaged data cache ({e})") from None
    missing = [k for k in (*SPLIT_ARRAYS, "class_names") if k not in arr]
    if missing or not isinstance(meta, dict):
        what = f"missing {', '.join(missing)}" if missing else "meta_json is not a JSON object"
        raise DatasetError(f"{p}: damaged data cache ({what})")
    name = meta.pop("name", p.parent.name)
    if "waves_test" in arr:
        meta["waves"] = {"dev": arr["waves_dev"], "test": arr["waves_test"]}
    meta["cache"] = str(p.resolve())
    return Dataset(name=name, **{k: arr[k] for k in SPLIT_ARRAYS},
                   class_names=[str(s) for s in arr["class_names"]], meta=meta, x_ood=arr.get("x_ood"))
