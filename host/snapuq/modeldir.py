"""A model directory: the one place that names its files (layout in docs/ARCHITECTURE.md).

ModelPaths(d).int8          # d/model_int8.tflite ... every artifact by role
load_model_dir(d)           # the trained Keras model + config + calibration (ModelDir)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snapuq.errors import ModelFormatError, SnapuqError


@dataclass(frozen=True)
class ModelPaths:
    """Every file of a model directory, by role. `snapuq train` writes config, keras, calib and
    baselines; `snapuq export` writes int8, float_tflite, manifest, c_source and c_header;
    `snapuq micropython blob` writes blob."""

    root: Path

    CONFIG = "config.json"
    KERAS = "model.keras"
    CALIB = "calib.json"
    BASELINES = "baselines"
    INT8 = "model_int8.tflite"
    FLOAT = "model_float.tflite"
    MANIFEST = "snapuq.json"
    C_SOURCE = "snapuq_model.c"
    C_HEADER = "snapuq_model.h"
    BLOB = "model.snapuq"

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", Path(root))

    config = property(lambda self: self.root / self.CONFIG)
    keras = property(lambda self: self.root / self.KERAS)
    calib = property(lambda self: self.root / self.CALIB)
    baselines = property(lambda self: self.root / self.BASELINES)
    int8 = property(lambda self: self.root / self.INT8)
    float_tflite = property(lambda self: self.root / self.FLOAT)
    manifest = property(lambda self: self.root / self.MANIFEST)
    c_source = property(lambda self: self.root / self.C_SOURCE)
    c_header = property(lambda self: self.root / self.C_HEADER)
    blob = property(lambda self: self.root / self.BLOB)

    def need_export(self) -> None:
        """One-line error unless `snapuq export` has written the int8 model and the manifest."""
        for p in (self.int8, self.manifest):
            if not p.is_file():
                raise SnapuqError(f"{p}: missing (run `snapuq export {self.root}` first)")


@dataclass
class ModelDir:
    path: Path
    config: dict
    model: object
    calib: dict | None = None
    _export: object = field(default=None, repr=False)

    @property
    def files(self) -> ModelPaths:
        return ModelPaths(self.path)

    def predict(self, x: np.ndarray, batch_size: int = 256) -> dict[str, np.ndarray]:
        """Float outputs (dict of numpy arrays) for NHWC float32 inputs."""
        x = np.asarray(x, np.float32)
        if x.ndim == len(self.config["input_shape"]):
            x = x[None]
        if tuple(x.shape[1:]) != tuple(self.config["input_shape"]):
            raise SnapuqError(
                f"input shape {tuple(x.shape[1:])} != model input {tuple(self.config['input_shape'])}"
            )
        parts = []
        for i in range(0, len(x), batch_size):
            out = self.model(x[i : i + batch_size], training=False)
            parts.append({k: np.asarray(v) for k, v in out.items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def export_model(self):
        """The Keras model the int8 export converts (fixed batch 1 is the converter's business):
        outputs "logits", "probs", and per tap "tap{k}_a", "tap{k}_mu", "tap{k}_logvar" where the exported
        "tap{k}_logvar" is the head's ReLU output (the `tap{k}_lvr` tensor): its real value plus
        config["logvar_offset"] (= 2 ln eps) is log sigma^2. No "feat" (host-only)."""
        import keras

        if self._export is None:
            out = self.model.output
            keep = {"logits": out["logits"], "probs": out["probs"]}
            for k in range(len(self.config["taps"])):
                keep[f"tap{k}_a"] = out[f"tap{k}_a"]
                keep[f"tap{k}_mu"] = out[f"tap{k}_mu"]
                keep[f"tap{k}_logvar"] = out[f"tap{k}_lvr"]
            self._export = keras.Model(self.model.input, keep, name="snapuq_export")
        return self._export


def load_model_dir(d: str | Path, calib: bool = True) -> ModelDir:
    """The model, its config.json and (with `calib`, when present) its calib.json, both validated by
    snapuq.formats before the model is loaded (a bad file is one line, not a traceback later)."""
    from snapuq.formats import read_calib, read_config

    d = Path(d)
    if not d.is_dir():
        raise SnapuqError(f"{d}: no such model directory")
    paths = ModelPaths(d)
    cfg = read_config(paths.config, need=("dataset", "input_shape", "taps"))
    cal = read_calib(paths.calib, cfg) if calib and paths.calib.exists() else None
    mp = paths.keras
    if not mp.is_file():
        raise SnapuqError(f"{mp}: missing (not a model directory written by `snapuq train`)")
    import keras

    import snapuq.snap  # noqa: F401  (registers the custom layers)

    try:
        model = keras.saving.load_model(mp, compile=False)
    except Exception as e:
        raise ModelFormatError(f"{mp}: cannot load ({type(e).__name__}: {str(e)[:160]})") from e
    return ModelDir(d, cfg, model, cal)


# what `snapuq train` makes; anything else a user keeps in --out (a README, notes) moves to the new directory
TRAIN_ARTIFACTS = frozenset({
    ModelPaths.CONFIG, ModelPaths.KERAS, ModelPaths.CALIB, ModelPaths.BASELINES, ModelPaths.INT8,
    ModelPaths.FLOAT, ModelPaths.MANIFEST, ModelPaths.C_SOURCE, ModelPaths.C_HEADER, ModelPaths.BLOB,
    "backbone.keras", "data.npz", "eval", "variants", "checkpoint", "MANIFEST.sha256",
})  # fmt: skip


class ModelStage:
    """A model directory built as one unit: everything is written into the staging folder `.NAME.train`
    beside NAME (locked against a second run), and `commit()` swaps it in whole, so a failed, killed or
    concurrent run never leaves a new model.keras beside an old calibration or a stale export. The
    checkpoint of an interrupted run stays in the staging folder for `--resume`."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.path = self.out.parent / f".{self.out.name}.train"
        self._lock = None

    def open(self, resume: bool) -> Path:
        import fcntl

        from snapuq.io import check_out_dir

        check_out_dir(self.out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        ck = self.path / "checkpoint" / "state.json"
        if self.path.exists() and not resume:
            if ck.is_file():
                raise SnapuqError(
                    f"{self.path}: holds an interrupted run's checkpoint; add --resume to continue it, or "
                    f"remove the folder to start over"
                )
        self.path.mkdir(exist_ok=True)
        lock = open(self.path / ".lock", "w")  # noqa: SIM115 (held until close)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise SnapuqError(
                f"{self.out}: another `snapuq train` is writing it (lock {self.path}/.lock)"
            ) from None
        self._lock = lock
        if not resume:  # a fresh run: nothing of an earlier failed run may leak in
            for p in self.path.iterdir():
                if p.name != ".lock":
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
        return self.path

    def commit(self) -> Path:
        """Swap the staged directory in as `out` (the checkpoint is dropped; the user's own files kept)."""
        shutil.rmtree(self.path / "checkpoint", ignore_errors=True)
        if self.out.exists():
            for p in self.out.iterdir():
                if p.name not in TRAIN_ARTIFACTS and not (self.path / p.name).exists():
                    os.replace(p, self.path / p.name)
            old = self.out.parent / f".{self.out.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.out, old)
            self._unlock()
            os.replace(self.path, self.out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            self._unlock()
            os.replace(self.path, self.out)
        with contextlib.suppress(OSError):
            (self.out / ".lock").unlink()
        return self.out

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def close(self) -> None:
        self._unlock()
