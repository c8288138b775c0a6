"""A model directory: the one place that names its files (layout in docs/ARCHITECTURE.md).

    ModelPaths(d).int8          # d/model_int8.tflite ... every artifact by role
    load_model_dir(d)           # the trained Keras model + config + calibration (ModelDir)
"""

from __future__ import annotations

import json
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


def _read_json(p: Path) -> dict:
    try:
        d = json.loads(p.read_text())
    except FileNotFoundError:
        raise SnapuqError(f"{p}: missing (not a model directory written by `snapuq train`)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFormatError(f"{p}: not valid JSON ({e})") from e
    if not isinstance(d, dict):
        raise ModelFormatError(f"{p}: expected a JSON object")
    return d


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


def load_model_dir(d: str | Path) -> ModelDir:
    d = Path(d)
    if not d.is_dir():
        raise SnapuqError(f"{d}: no such model directory")
    paths = ModelPaths(d)
    cfg = _read_json(paths.config)
    for key in ("dataset", "input_shape", "taps"):
        if key not in cfg:
            raise ModelFormatError(f"{paths.config}: missing '{key}'")
    mp = paths.keras
    if not mp.is_file():
        raise SnapuqError(f"{mp}: missing (not a model directory written by `snapuq train`)")
    import keras

    import snapuq.snap  # noqa: F401  (registers the custom layers)

    try:
        model = keras.saving.load_model(mp, compile=False)
    except Exception as e:
        raise ModelFormatError(f"{mp}: cannot load ({type(e).__name__}: {str(e)[:160]})") from e
    calib = _read_json(paths.calib) if paths.calib.exists() else None
    return ModelDir(d, cfg, model, calib)
