"""Knowledge distillation of a backbone from teachers (a deep ensemble: a model directory's baselines).

    teachers, record = load_teachers("models/keywords", input_shape=(49, 10, 1), n_classes=12)
    soft = soft_targets(teachers, x_train, temperature=3.0)     # (N, C), the members' softmax(z / T) averaged
    fit_backbone_resumable(backbone, x_train, y_train, opts, soft=soft, ...)

The loss is (1 - a) * cross-entropy(label) + a * T^2 * KL(soft || softmax(z / T)) (`distill_loss`; a =
`TrainOptions.distill_alpha`, T = `distill_temperature`). The teachers' probabilities are computed once per
train clip, before the fit: with an augmentation in the data path every augmented copy of a clip learns its
un-augmented clip's soft target.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.io import save_arrays

TEACHER_GLOB = "ensemble_*.keras"


def teacher_files(path: str | Path) -> list[Path]:
    """The teacher model files of `path`: a model directory's baselines/ensemble_*.keras, a folder's own
    ensemble_*.keras, else every *.keras in the folder, else the one .keras file `path` names."""
    p = Path(path)
    if p.is_file() and p.suffix == ".keras":
        return [p]
    if not p.is_dir():
        raise SnapuqError(f"--distill-from: {p} is neither a folder nor a .keras file")
    for d, pattern in ((p / "baselines", TEACHER_GLOB), (p, TEACHER_GLOB), (p, "*.keras")):
        files = sorted(d.glob(pattern)) if d.is_dir() else []
        if (p / "config.json").exists():  # a model directory's own model (SNAP heads) is no teacher
            files = [f for f in files if f.name != "model.keras"]
        if files:
            return files
    raise SnapuqError(f"--distill-from: no teacher in {p} (baselines/{TEACHER_GLOB}, {TEACHER_GLOB} or "
                      "*.keras; train the model's baselines first)")  # fmt: skip


def load_teachers(path: str | Path, input_shape: tuple[int, ...],
                  n_classes: int) -> tuple[list, dict[str, Any]]:  # fmt: skip
    """The teachers (logits models) and their record for config.json: where they came from, their files and a
    digest of their bytes (a resumed run checks it). Each must take `input_shape` and give `n_classes`
    logits, else a one-line SnapuqError names it."""
    import keras

    files = teacher_files(path)
    h = hashlib.sha256()
    models = []
    for f in files:
        h.update(f.read_bytes())
        try:
            m = keras.models.load_model(f, compile=False)
        except Exception as e:  # a corrupt or foreign file: keras raises many kinds
            raise SnapuqError(f"--distill-from: {f} is not a Keras model ({type(e).__name__})") from None
        shape_in, shape_out = tuple(m.input_shape[1:]), tuple(m.output_shape[1:])
        if shape_in != tuple(input_shape) or shape_out != (n_classes,):
            raise SnapuqError(f"--distill-from: {f} maps {shape_in} to {shape_out}; the model maps "
                              f"{tuple(input_shape)} to ({n_classes},)")  # fmt: skip
        models.append(m)
    record = {"from": str(Path(path)), "files": [f.name for f in files], "members": len(files),
              "sha256": h.hexdigest()}  # fmt: skip
    return models, record


def soft_targets(models: list, x: np.ndarray, temperature: float, batch: int = 1024) -> np.ndarray:
    """softmax(logits / temperature) of every model on x, averaged over the models: (N, C) float32."""
    out = None
    for m in models:
        for a in range(0, len(x), batch):
            z = np.asarray(m(np.asarray(x[a : a + batch], np.float32), training=False), np.float64)
            z = z / float(temperature)
            e = np.exp(z - z.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
            if out is None:
                out = np.zeros((len(x), p.shape[1]), np.float64)
            out[a : a + batch] += p
    if out is None:
        raise SnapuqError("--distill-from: no teacher, or no training input")
    return (out / len(models)).astype(np.float32)


def cached_soft_targets(models: list, x: np.ndarray, temperature: float, record: dict[str, Any],
                        path: str | Path) -> np.ndarray:  # fmt: skip
    """`soft_targets`, kept in `path` (an .npz beside a run's checkpoint) with what they were computed from:
    the teachers' digest, the temperature and a digest of the train inputs. A resumed run with the same three
    reads them back instead of running every teacher over the train split again."""
    key = json.dumps({"teachers_sha256": record["sha256"], "temperature": float(temperature),
                      "x_sha256": hashlib.sha256(np.ascontiguousarray(x, np.float32).tobytes()).hexdigest()})
    p = Path(path)
    if p.is_file():
        try:
            with np.load(p) as z:
                if str(z["key"]) == key and z["soft"].shape[0] == len(x):
                    return np.asarray(z["soft"], np.float32)
        except (OSError, ValueError, KeyError, EOFError):
            pass  # unreadable (an interrupted write is never one: written atomically): computed again
    soft = soft_targets(models, x, temperature)
    p.parent.mkdir(parents=True, exist_ok=True)
    save_arrays(p, soft=soft, key=np.array(key))
    return soft


def distill_targets(y: np.ndarray, soft: np.ndarray | None, n_classes: int) -> np.ndarray:
    """The fit's target rows: [label, soft target of each class] (zeros when there is none: a validation
    split, whose loss is then the cross-entropy part alone)."""
    s = np.zeros((len(y), n_classes), np.float32) if soft is None else np.asarray(soft, np.float32)
    return np.concatenate([np.asarray(y, np.float32).reshape(-1, 1), s], axis=1)


def distill_loss(alpha: float, temperature: float):
    """The keras loss of rows [label, soft...] against logits: (1 - alpha) * cross-entropy + alpha * T^2 *
    KL(soft || softmax(logits / T))."""
    import keras
    from keras import ops

    t = float(temperature)

    def loss(y, z):
        label = ops.cast(y[:, 0], "int32")
        ce = keras.losses.sparse_categorical_crossentropy(label, z, from_logits=True)
        p = y[:, 1:]
        logq = ops.log_softmax(z / t, axis=-1)
        kl = ops.sum(ops.where(p > 0, p * (ops.log(ops.maximum(p, 1e-12)) - logq), 0.0), axis=-1)
        return (1.0 - alpha) * ce + alpha * t * t * kl

    loss.__name__ = "distill_loss"
    return loss


def label_accuracy(y, z):
    """Accuracy against the label column of distillation targets."""
    import keras
    from keras import ops

    return keras.metrics.sparse_categorical_accuracy(ops.cast(y[:, 0], "int32"), z)
