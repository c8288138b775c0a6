"""A trained model directory loaded with Keras (`load_model_dir`), and the one batched predictor of the
host's float models (`predict_batched`): SNAP models, baselines and `snapuq.Snap` all run through it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.formats import read_calib, read_config
from snapuq.modeldir import ModelPaths


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
        return predict_batched(self.model, x, batch_size, traced=False)

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


def model_dir_config(d: str | Path) -> dict:
    """The validated config.json of model directory D, once D is a folder with its model file: the checks
    load_model_dir makes before it loads the model, in the same one-line errors, without loading Keras."""

    d = Path(d)
    if not d.is_dir():
        raise SnapuqError(f"{d}: no such model directory")
    paths = ModelPaths(d)
    cfg = read_config(paths.config, need=("dataset", "input_shape", "taps"))
    if not paths.keras.is_file():
        raise SnapuqError(f"{paths.keras}: missing (not a model directory written by `snapuq train`)")
    return cfg


def load_model_dir(d: str | Path, calib: bool = True) -> ModelDir:
    """The model, its config.json and (with `calib`, when present) its calib.json, both validated by
    snapuq.formats before the model is loaded (a bad file is one line, not a traceback later)."""

    d = Path(d)
    paths = ModelPaths(d)
    cfg = model_dir_config(d)
    cal = read_calib(paths.calib, cfg) if calib and paths.calib.exists() else None
    mp = paths.keras
    import keras

    from snapuq.nn import heads  # noqa: F401  (registers the custom layers)

    try:
        model = keras.saving.load_model(mp, compile=False)
    except Exception as e:
        raise ModelFormatError(f"{mp}: cannot load ({type(e).__name__}: {str(e)[:160]})") from e
    return ModelDir(d, cfg, model, cal)


_COMPILED: dict[int, object] = {}


def _compiled(model):
    """model(x, training=False) as one traced tf.function per model (eager Keras calls are slow on CPU)."""
    key = id(model)
    fn = _COMPILED.get(key)
    if fn is None or fn[0] is not model:
        import tensorflow as tf

        fn = (model, tf.function(lambda x: model(x, training=False), reduce_retracing=True))
        _COMPILED[key] = fn
    return fn[1]


def release(model) -> None:
    """Forget `model`'s traced function (predict_batched keeps one per model, and with it the model): for a
    model that is done with, so that dropping it frees it."""
    fn = _COMPILED.get(id(model))
    if fn is not None and fn[0] is model:
        del _COMPILED[id(model)]


def predict_batched(model, x: np.ndarray, batch_size: int = 512,
                    traced: bool = True) -> dict[str, np.ndarray] | np.ndarray:  # fmt: skip
    """model(x, training=False) in batches, numpy out (dict outputs stay dicts): through one traced function
    per model (`traced`, the baselines: eager Keras calls are slow on CPU), or eagerly as the SNAP models
    were calibrated (ModelDir.predict, Snap). Stateful layers (the always-on dropout of an MC clone) draw
    new randomness on every call."""
    from keras import ops

    if len(x) == 0:
        raise SnapuqError("predict on an empty input array")
    fn = _compiled(model) if traced else (lambda xb: model(xb, training=False))
    parts = []
    for i in range(0, len(x), batch_size):
        xb = np.asarray(x[i : i + batch_size], dtype=np.float32)
        n = len(xb)
        if traced and n < batch_size and len(x) > batch_size:  # pad the tail: one traced shape
            xb = np.concatenate([xb, np.zeros((batch_size - n,) + xb.shape[1:], np.float32)])
        out = fn(xb)
        if isinstance(out, dict):
            parts.append({k: ops.convert_to_numpy(v)[:n] for k, v in out.items()})
        else:
            parts.append(ops.convert_to_numpy(out)[:n])
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)
