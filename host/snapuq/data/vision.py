"""Vision datasets: the embedded `digits` set (sklearn's 8x8 handwritten digits, offline), MNIST and
Fashion-MNIST (IDX files, gzip or raw) and CIFAR-10 (binary version or python batches) read from --data-dir,
with tensorflow_datasets as an optional source when the files are absent; and their OOD sources.

digits: stratified 60 / 15 / 25 % train / dev / test, deterministic for a seed.
mnist / fashion_mnist / cifar10: the official test split is the test split; the dev split is a
stratified 10 % of the official training split (deterministic for a seed).

OOD pairings:
- digits: 8x8 patches cut from the two photographs sklearn ships (`load_sample_images`: a temple in
  China and a flower), converted to grey, area-downsampled and min-max scaled to [0, 1] like the
  digits. Real natural-image inputs, available offline, that contain no digit.
- mnist -> Fashion-MNIST test images, fashion_mnist -> MNIST test images (the other set's files,
  looked up in --data-dir, --data-dir/<name> and its sibling folder <parent>/<name>).
- cifar10 -> SVHN test (`test_32x32.mat`, in --data-dir/svhn or beside the CIFAR folder) when
  present; otherwise the documented substitute: 32x32 RGB patches of sklearn's two sample photographs
  (area-downsampled from 64x64 crops), i.e. natural images of none of the ten CIFAR classes.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

from snapuq.data.dataset import Dataset
from snapuq.errors import DatasetError


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


def natural_patches(
    n: int, size: tuple[int, int], seed: int = 0, patch: int = 32, channels: int = 1
) -> np.ndarray:
    """n patches (about patch x patch pixels of sklearn's sample photos) area-downsampled to `size`,
    grey (channels=1) or RGB (channels=3), min-max scaled per patch to [0, 1]; float32 (n, h, w, c)."""
    from sklearn.datasets import load_sample_images

    if channels == 1:
        imgs = [im.astype(np.float32).mean(axis=2, keepdims=True) for im in load_sample_images().images]
    else:
        imgs = [im.astype(np.float32) for im in load_sample_images().images]
    rng = np.random.default_rng(seed)
    h, w = size
    ph = max(1, patch // h) * h
    pw = max(1, patch // w) * w
    out = np.empty((n, h, w, channels), np.float32)
    for k in range(n):
        im = imgs[k % len(imgs)]
        r = rng.integers(0, im.shape[0] - ph)
        c = rng.integers(0, im.shape[1] - pw)
        p = im[r : r + ph, c : c + pw].reshape(h, ph // h, w, pw // w, channels).mean(axis=(1, 3))
        lo, hi = float(p.min()), float(p.max())
        out[k] = (p - lo) / (hi - lo) if hi > lo else 0.0
    return out


def ood_digits(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    h, w = ds.input_shape[:2]
    return natural_patches(n, (h, w), seed=seed + 7919)


# ---------------------------------------------------------------------------------------------------
# MNIST / Fashion-MNIST (IDX)

IDX_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}
FASHION_CLASSES = [
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
]  # fmt: skip
CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
# folders (relative to --data-dir) searched for each dataset, in order
SUBDIRS = {
    "mnist": [".", "mnist", "MNIST", "MNIST/raw", "mnist/raw"],
    "fashion_mnist": [".", "fashion_mnist", "fashion-mnist", "FashionMNIST", "FashionMNIST/raw"],
    "cifar10": [".", "cifar-10-batches-py", "cifar10/cifar-10-batches-py", "cifar10"],
    "cifar10_bin": [".", "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin", "cifar10"],
    "svhn": [".", "svhn", "SVHN"],
}


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzip or raw) as a numpy array; DatasetError on a malformed or truncated file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as e:
        raise DatasetError(f"{path}: cannot read IDX file ({e})") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DatasetError(f"{path}: not an IDX file (bad magic)")
    if raw[2] != 0x08:
        raise DatasetError(f"{path}: IDX element type 0x{raw[2]:02x} is not unsigned byte (0x08)")
    nd = raw[3]
    if not 1 <= nd <= 4 or len(raw) < 4 + 4 * nd:
        raise DatasetError(f"{path}: IDX header truncated or with {nd} dimensions")
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(nd)]
    n = int(np.prod(dims))
    body = raw[4 + 4 * nd :]
    if len(body) != n:
        raise DatasetError(f"{path}: IDX body has {len(body)} bytes, header {dims} says {n}")
    return np.frombuffer(body, np.uint8).reshape(dims)


def _find_file(root: Path, subdirs: list[str], base: str) -> Path | None:
    for sd in subdirs:
        for name in (base, base + ".gz", base.replace("-idx", ".idx"), base.replace("-idx", ".idx") + ".gz"):
            p = root / sd / name
            if p.is_file():
                return p
    return None


def _need_dir(name: str, data_dir: str | None, expected: str) -> Path:
    if data_dir is None:
        raise DatasetError(f"dataset '{name}' needs --data-dir (a folder with {expected})")
    root = Path(data_dir)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder (expected {expected})")
    return root


def _split_dev(x, y, seed: int, frac: float = 0.1):
    from sklearn.model_selection import train_test_split

    n_dev = max(len(np.unique(y)), int(round(frac * len(y))))
    return train_test_split(x, y, test_size=n_dev, random_state=seed, stratify=y)


def _tfds(name: str, data_dir: str | None):
    """(x_train, y_train, x_test, y_test) uint8 from tensorflow_datasets without downloading, or None."""
    try:
        import tensorflow_datasets as tfds  # optional
    except ImportError:
        return None
    try:
        parts = []
        for split in ("train", "test"):
            ds = tfds.as_numpy(tfds.load(name, split=split, batch_size=-1, data_dir=data_dir, download=False))
            parts += [np.asarray(ds["image"]), np.asarray(ds["label"])]
        return tuple(parts)
    except Exception:
        return None


def _read_idx_set(name: str, data_dir: str | None) -> tuple[np.ndarray, ...]:
    expected = ", ".join(f"{f}[.gz]" for f in IDX_FILES.values())
    if data_dir is None:
        t = _tfds(name, None)
        if t is not None:
            return t
    root = _need_dir(name, data_dir, expected)
    found = {k: _find_file(root, SUBDIRS[name], f) for k, f in IDX_FILES.items()}
    missing = [IDX_FILES[k] for k, p in found.items() if p is None]
    if missing:
        t = _tfds(name, str(root))
        if t is not None:
            return t
        raise DatasetError(f"{root}: {name} files missing: {', '.join(missing)} (expected {expected})")
    xtr, ytr, xte, yte = (read_idx(found[k]) for k in ("train_x", "train_y", "test_x", "test_y"))
    for xs, ys, part in ((xtr, ytr, "train"), (xte, yte, "t10k")):
        if xs.ndim != 3 or ys.ndim != 1 or len(xs) != len(ys):
            raise DatasetError(
                f"{root}: {name} {part} images {xs.shape} and labels {ys.shape} do not match (N,H,W)/(N,)"
            )
        if ys.size and ys.max() > 9:
            raise DatasetError(f"{root}: {name} {part} labels outside 0..9")
    return xtr, ytr, xte, yte


def _official_dataset(name: str, xtr, ytr, xte, yte, seed: int, class_names: list[str], source: str,
                      shape: str) -> Dataset:  # fmt: skip
    """uint8 images / 255 (NHWC), the official test split; dev = a stratified 10 % of the training split."""
    xtr, xte = np.asarray(xtr, np.float32) / 255.0, np.asarray(xte, np.float32) / 255.0
    ytr, yte = np.asarray(ytr, np.int64).reshape(-1), np.asarray(yte, np.int64).reshape(-1)
    x_tr, x_dv, y_tr, y_dv = _split_dev(xtr, ytr, seed)
    return Dataset(
        name, x_tr, y_tr, x_dv, y_dv, xte, yte, class_names,
        meta={
            "source": source,
            "preprocessing": f"x / 255, float32, NHWC {shape}",
            "split": "official test; dev = stratified 10 % of the official training split",
        },
    )  # fmt: skip


def _idx_dataset(name: str, data_dir: str | None, seed: int, class_names: list[str]) -> Dataset:
    xtr, ytr, xte, yte = _read_idx_set(name, data_dir)
    source = f"IDX files in {data_dir}" if data_dir else "tensorflow_datasets"
    return _official_dataset(name, xtr.reshape(*xtr.shape[:3], 1), ytr, xte.reshape(*xte.shape[:3], 1), yte,
                             seed, class_names, source, "(H, W, 1)")  # fmt: skip


def load_mnist(data_dir: str | None = None, seed: int = 0) -> Dataset:
    return _idx_dataset("mnist", data_dir, seed, [str(i) for i in range(10)])


def load_fashion_mnist(data_dir: str | None = None, seed: int = 0) -> Dataset:
    return _idx_dataset("fashion_mnist", data_dir, seed, list(FASHION_CLASSES))


# ---------------------------------------------------------------------------------------------------
# CIFAR-10 (python batches or the binary version)

CIFAR_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
CIFAR_BIN_FILES = [f + ".bin" for f in CIFAR_FILES]
CIFAR_RECORD = 1 + 3072  # label byte, then 1,024 R, 1,024 G, 1,024 B bytes (row-major)


def read_cifar_bin(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One file of CIFAR-10's binary version -> (uint8 NHWC (N, 32, 32, 3), labels (N,))."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{path}: cannot read CIFAR-10 binary batch ({e.strerror})") from e
    if len(raw) == 0 or len(raw) % CIFAR_RECORD:
        raise DatasetError(
            f"{path}: {len(raw)} bytes is not a whole number of {CIFAR_RECORD}-byte CIFAR-10 records"
        )
    rec = np.frombuffer(raw, np.uint8).reshape(-1, CIFAR_RECORD)
    labels = rec[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise DatasetError(f"{path}: CIFAR-10 labels outside 0..9 (not the 10-class binary version?)")
    x = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), labels


def _read_cifar_files(dirs: list[Path], files: list[str], reader) -> tuple[np.ndarray, ...] | None:
    base = next((b for b in dirs if all((b / f).is_file() for f in files)), None)
    if base is None:
        return None
    parts = [reader(base / f) for f in files]
    return (np.concatenate([p[0] for p in parts[:5]]), np.concatenate([p[1] for p in parts[:5]]),
            parts[5][0], parts[5][1])  # fmt: skip


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch -> (uint8 NHWC (N, 32, 32, 3), labels (N,)). The batches are pickles:
    only read files you trust (the official archive)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            d = pickle.load(f, encoding="bytes")
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as e:
        raise DatasetError(f"{path}: not a CIFAR-10 python batch ({type(e).__name__})") from e
    if not isinstance(d, dict):
        raise DatasetError(f"{path}: not a CIFAR-10 python batch (expected a dict)")
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise DatasetError(f"{path}: CIFAR-10 batch without 'data' / 'labels'")
    data = np.asarray(data)
    labels = np.asarray(labels, np.int64).reshape(-1)
    if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise DatasetError(
            f"{path}: CIFAR-10 batch data {data.shape}, labels {labels.shape} (want (N, 3072), (N,))"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise DatasetError(f"{path}: CIFAR-10 labels outside 0..9")
    x = data.astype(np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return x, labels


def load_cifar10(data_dir: str | None = None, seed: int = 0) -> Dataset:
    expected = (
        "cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin (binary version) or "
        "cifar-10-batches-py/{data_batch_1..5,test_batch} (python version)"
    )
    t = _tfds("cifar10", None) if data_dir is None else None
    source = "tensorflow_datasets"
    if t is None:
        root = _need_dir("cifar10", data_dir, expected)
        t = _read_cifar_files([root / sd for sd in SUBDIRS["cifar10_bin"]], CIFAR_BIN_FILES, read_cifar_bin)
        source = f"CIFAR-10 binary version in {data_dir}"
        if t is None:
            t = _read_cifar_files([root / sd for sd in SUBDIRS["cifar10"]], CIFAR_FILES, read_cifar_batch)
            source = f"CIFAR-10 python batches in {data_dir}"
        if t is None:
            t = _tfds("cifar10", str(root))
            source = "tensorflow_datasets"
        if t is None:
            cands = [root / sd for sd in SUBDIRS["cifar10"] + SUBDIRS["cifar10_bin"]]
            tests = ("test_batch", "test_batch.bin")
            have = next((b for b in cands if any((b / f).is_file() for f in tests)), None)
            if have is None:
                raise DatasetError(f"{root}: no CIFAR-10 files (expected {expected})")
            names = CIFAR_BIN_FILES if (have / "test_batch.bin").is_file() else CIFAR_FILES
            missing = ", ".join(f for f in names if not (have / f).is_file())
            raise DatasetError(f"{have}: cifar10 files missing: {missing} (expected {expected})")
    return _official_dataset("cifar10", *t, seed, list(CIFAR10_CLASSES), source, "(32, 32, 3)")


# ---------------------------------------------------------------------------------------------------
# OOD sources


def _candidate_roots(data_dir: str | None) -> list[Path]:
    if data_dir is None:
        return []
    root = Path(data_dir)
    return [root, root.parent]


def _sample(x: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), size=min(n, len(x)), replace=False)
    return x[np.sort(idx)]


def _other_idx_test(other: str, data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    tried = []
    for root in _candidate_roots(data_dir):
        # never "." here: the ID folder itself holds the ID set's files under the same names
        xp = _find_file(root, [sd for sd in SUBDIRS[other] if sd != "."], IDX_FILES["test_x"])
        tried.append(str(root))
        if xp is not None:
            x = read_idx(xp)
            if x.ndim != 3 or tuple(x.shape[1:]) != tuple(ds.input_shape[:2]):
                raise DatasetError(f"{xp}: OOD images {x.shape[1:]} do not match the ID {ds.input_shape}")
            return (_sample(x, n, seed).astype(np.float32) / 255.0)[..., None]
    raise DatasetError(
        f"OOD set {other} not found (looked for {IDX_FILES['test_x']}[.gz] under "
        f"{', '.join(tried) or 'no --data-dir'} in {', '.join(SUBDIRS[other][1:])})"
    )


def ood_mnist(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    return _other_idx_test("fashion_mnist", data_dir, n, seed, ds)


def ood_fashion_mnist(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    return _other_idx_test("mnist", data_dir, n, seed, ds)


def _grey_to_rgb32(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(N, h, w) uint8 greyscale -> float32 (N, H, W, 3) in [0, 1]: zero-padded to the ID size when smaller
    (28 -> 32: 2 pixels each side, as MNIST is usually fitted to 32x32 models), centre-cropped if larger."""
    h, w = size
    n, hh, ww = x.shape
    out = np.zeros((n, h, w), np.float32)
    dy, dx = (h - hh) // 2, (w - ww) // 2
    src = x[:, max(0, -dy) : max(0, -dy) + min(h, hh), max(0, -dx) : max(0, -dx) + min(w, ww)]
    out[:, max(0, dy) : max(0, dy) + src.shape[1], max(0, dx) : max(0, dx) + src.shape[2]] = src / 255.0
    return np.repeat(out[..., None], 3, axis=3)


def ood_sets_cifar10(data_dir: str | None, n: int, seed: int, ds: Dataset) -> dict[str, np.ndarray]:
    """Every OOD set for CIFAR-10 that can be found, by label "far:<name>" / "near:<name>": Fashion-MNIST and
    MNIST test images at 32x32x3 (far: greyscale objects / digits on black), SVHN test when present (near:
    natural photographs of digits), and the natural-photo patches (near: natural textures of none of the
    classes, always available)."""
    out: dict[str, np.ndarray] = {}
    for name in ("fashion_mnist", "mnist"):
        for root in _candidate_roots(data_dir):
            xp = _find_file(root, [sd for sd in SUBDIRS[name] if sd != "."], IDX_FILES["test_x"])
            if xp is not None:
                x = read_idx(xp)
                if x.ndim == 3:
                    out[f"far:{name}"] = _grey_to_rgb32(_sample(x, n, seed), ds.input_shape[:2])
                break
    x = ood_cifar10(data_dir, n, seed, ds)
    label = "near:svhn" if _svhn_path(data_dir) else "near:photo_patches"
    out[label] = x
    return out


def _svhn_path(data_dir: str | None) -> Path | None:
    for root in _candidate_roots(data_dir):
        for sd in SUBDIRS["svhn"]:
            p = root / sd / "test_32x32.mat"
            if p.is_file():
                return p
    return None


def ood_cifar10(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    """SVHN test images when test_32x32.mat is present, else 32x32 RGB sample-photo patches."""
    p = _svhn_path(data_dir)
    if p is not None:
        from scipy.io import loadmat

        try:
            x = np.asarray(loadmat(p)["X"])  # (32, 32, 3, N)
        except Exception as e:
            raise DatasetError(f"{p}: not an SVHN .mat file ({type(e).__name__})") from e
        if x.ndim != 4 or x.shape[:3] != (32, 32, 3):
            raise DatasetError(f"{p}: SVHN 'X' has shape {x.shape}, expected (32, 32, 3, N)")
        x = x.transpose(3, 0, 1, 2)
        return _sample(x, n, seed).astype(np.float32) / 255.0
    h, w = ds.input_shape[:2]
    return natural_patches(n, (h, w), seed=seed + 7919, patch=2 * h, channels=int(ds.input_shape[2]))
