"""SNAP-UQ on your own Keras model: attach heads, train them, calibrate, save a model directory.

    import snapuq
    snap = snapuq.attach(model, rank=32)            # taps: mid + penultimate feature maps (graph walk)
    snap.fit(x_train, epochs=10)                    # frozen backbone, self-supervised heads, QAT at the end
    snap.calibrate(x_dev, y_dev)                    # SNAP constants (calib.json)
    snap.save("models/mine", x_test=x_test, y_test=y_test)   # -> snapuq export / verify / eval / harness

`attach` accepts a functional or Sequential Keras 3 model with one fixed-shape input and one (N, C) output
(logits, or probabilities from a final softmax, which is taken off: SNAP needs the logits). Every layer must
map to an operator of the int8 C core (firmware/core): a layer that does not (LSTM, Lambda, ...) is refused
up front with one line naming the layer and the operator, and so is a model with no usable tap. The model is
also converted once to int8 TFLite with random calibration data and every operator the converter emits is
checked against the core's operator set (`CORE_OPS`), so fusions the layer rules cannot see are caught too.

The training, calibration and model-directory code is the same as `snapuq train --dataset` uses
(snapuq.nn.training, snapuq.uq.calibration); `snapuq train --model my.keras --data DATA` is
`train_user_model`, which goes through this class.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.data import Dataset, with_model_classes
from snapuq.data.user import apply_normalization, modality_of, save_cache, with_preprocessing
from snapuq.errors import SnapuqError
from snapuq.export.capacity import check_converted_ops
from snapuq.io import write_json
from snapuq.modeldir import ModelStage
from snapuq.nn import training as T
from snapuq.nn.graph import (
    UnsupportedModelError,
    _resolve_taps,
    check_model,
    fold_input_preprocessing,
    logits_backbone,
)
from snapuq.nn.saved import ModelDir, predict_batched
from snapuq.nn.training import head_config, tap_entries
from snapuq.options import CalibOptions, HeadOptions
from snapuq.uq.calibration import calibrate

__all__ = ["Snap", "attach", "check_model", "load_keras_model"]

MAX_SAVED_TRAIN = 20000


# ---------------------------------------------------------------------------------------------- data
def _dataset_arrays(ds, limit: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Up to `limit` (x, y) samples of a tf.data.Dataset (batched or not; elements x or (x, y))."""
    xs, ys = [], []
    n = 0
    for el in ds:
        if isinstance(el, (tuple, list)):
            xb, yb = np.asarray(el[0]), np.asarray(el[1]) if len(el) > 1 else None
        else:
            xb, yb = np.asarray(el), None
        xs.append(xb)
        if yb is not None:
            ys.append(yb)
        n += len(xb) if xb.ndim > 1 else 1
        if n >= limit:
            break
    return xs, ys


# ---------------------------------------------------------------------------------------------- Snap
@dataclass
class Snap:
    """A Keras model with SNAP-UQ heads attached (see `attach`). `model` is the SNAP model (dict outputs:
    logits, probs, feat, tap{k}_a/_mu/_logvar/_lvr); `backbone` the logits model it was built from."""

    backbone: Any
    model: Any
    taps: list[str]
    tap_prev: dict[str, str]
    feat: str
    heads: HeadOptions
    variant: str = "best"
    ops: list[str] = field(default_factory=list)
    pre: dict | None = None  # the leading Rescaling / Normalization moved out (fold_input_preprocessing)
    calib: dict | None = None
    history: dict[str, Any] = field(default_factory=dict)
    _data: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    # ---- training
    def fit(self, x, y=None, *, epochs: int = 10, batch_size: int = 64, lr: float = 2e-3,
            qat_frac: float | None = None, backbone_epochs: int = 0, validation_data=None,
            seed: int = 0, progress: bool = True) -> Snap:  # fmt: skip
        """Train the heads on the frozen backbone (self-supervised: labels are not needed), with fake-quant
        (QAT) in the last `qat_frac` of the epochs. `x`: a float array (N, *input_shape) or a
        tf.data.Dataset of x or (x, y) (batched or not). `backbone_epochs` > 0 first trains the model
        itself with cross-entropy (needs labels). `x` is what the model you attached takes (raw, when it
        starts with Rescaling / Normalization layers: they are applied here). Returns self."""
        import keras


        if qat_frac is not None:
            self.heads = dataclasses.replace(self.heads, qat_frac=float(qat_frac))
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise SnapuqError(f"epochs must be an integer >= 1, got {epochs!r}")
        keras.utils.set_random_seed(seed)
        t0 = time.perf_counter()
        if T._is_tf_dataset(x):
            xs, ys = _dataset_arrays(x, MAX_SAVED_TRAIN)
            self._data["x_train"] = self._in(np.concatenate([a.reshape(-1, *self.input_shape) for a in xs]))
            if ys:
                self._data["y_train"] = np.concatenate([np.asarray(b).reshape(-1) for b in ys]).astype(
                    np.int64
                )
            data = self._tf_batches(x, batch_size)
            ytr = None
        else:
            data = self._in(x)
            if tuple(data.shape[1:]) != self.input_shape:
                raise SnapuqError(
                    f"x has shape {tuple(data.shape[1:])} per sample, the model takes {self.input_shape}"
                )
            ytr = np.zeros(len(data), np.int64) if y is None else np.asarray(y).astype(np.int64).reshape(-1)
            if len(ytr) != len(data):
                raise SnapuqError(f"x has {len(data)} samples, y {len(ytr)}")
            n = self.n_classes
            if len(ytr) and int(ytr.max()) >= n:
                raise SnapuqError(f"y has label {int(ytr.max())}, outside the model's {n} classes "
                                  f"(its logits are {n} wide: labels 0..{n - 1})")
            self._data["x_train"] = data[:MAX_SAVED_TRAIN]
            if y is not None:
                self._data["y_train"] = ytr[:MAX_SAVED_TRAIN]
        if backbone_epochs:
            if y is None and not T._is_tf_dataset(x):
                raise SnapuqError("backbone_epochs > 0 needs labels y")
            for lay in self.backbone.layers:
                lay.trainable = True
            T.fit_backbone(
                self.backbone, data, ytr, backbone_epochs, batch_size, lr, validation_data, progress
            )
            self.history["backbone_s"] = round(time.perf_counter() - t0, 2)
            self.history["backbone_s_per_epoch"] = (time.perf_counter() - t0) / backbone_epochs
        for lay in self.backbone.layers:
            lay.trainable = False
        t1 = time.perf_counter()
        n_qat = T.fit_heads(
            self.model, len(self.taps), data, ytr, epochs, lambda_ss=self.heads.lambda_ss,
            lambda_reg=self.heads.lambda_reg, nll=self.heads.nll, qat_frac=self.heads.qat_frac,
            batch_size=batch_size, lr=lr, progress=progress,
            labelled=y is not None or "y_train" in self._data,
        )  # fmt: skip
        self.history.update(epochs=int(epochs), qat_epochs=int(n_qat), backbone_epochs=int(backbone_epochs),
                            heads_s=round(time.perf_counter() - t1, 2), seed=int(seed))  # fmt: skip
        self.calib = None
        return self

    def _tf_batches(self, ds, batch_size: int):
        import tensorflow as tf

        spec = ds.element_spec
        xspec = spec[0] if isinstance(spec, tuple) else spec
        if len(xspec.shape) == len(self.input_shape):
            ds = ds.batch(batch_size)
        if not isinstance(spec, tuple):
            ds = ds.map(lambda x: (x, tf.zeros(tf.shape(x)[:1], tf.int64)))
        s, o = (1.0, 0.0) if self.pre is None else (np.asarray(self.pre["scale"], np.float32),
                                                      np.asarray(self.pre["offset"], np.float32))  # fmt: skip
        return ds.map(lambda x, y: (tf.cast(x, tf.float32) * s + o, tf.cast(tf.reshape(y, [-1]), tf.int64)))

    def _in(self, x) -> np.ndarray:
        """Inputs as the attached model takes them -> inputs of the graph SNAP runs (the moved-out leading
        Rescaling / Normalization applied)."""

        a = np.asarray(x, np.float32)
        return a if self.pre is None else apply_normalization(a, self.pre)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.backbone.inputs[0].shape[1:])

    @property
    def n_classes(self) -> int:
        return int(self.backbone.outputs[0].shape[-1])

    def predict(self, x, batch_size: int = 256) -> dict[str, np.ndarray]:
        """Float outputs of the SNAP model (dict of numpy arrays), inputs as the attached model takes them."""
        return self._predict(self._in(x), batch_size)

    def _predict(self, x: np.ndarray, batch_size: int = 256) -> dict[str, np.ndarray]:
        return predict_batched(self.model, x, batch_size, traced=False)

    def config(self) -> dict[str, Any]:
        """The SNAP-head part of config.json."""

        h = self.history
        return head_config(self.heads, self.variant, tap_entries(self.backbone, self.taps, self.tap_prev),
                           h.get("epochs", 0), h.get("qat_epochs", 0))  # fmt: skip

    def calibrate(self, x_dev, y_dev, *, seed: int = 0, input_tap: bool = True,
                  alarm_rate: float | None = None, alpha: float = 1.0,
                  hinge_q: float | None = None) -> dict:  # fmt: skip
        """Fit the SNAP constants (weights, beta, the confidence proxy, the U threshold) on a labelled dev
        split and the held-out synthetic shift of it (the inputs given to `fit` join the hinge's clean
        reference). Returns the calib.json dict (also kept on self)."""
        xd = self._in(x_dev)
        yd = np.asarray(y_dev).astype(np.int64).reshape(-1)
        if len(xd) != len(yd) or len(xd) < 10:
            raise SnapuqError(
                f"calibrate needs >= 10 labelled dev samples with matching x/y, got {len(xd)}/{len(yd)}"
            )
        if tuple(xd.shape[1:]) != self.input_shape:
            raise SnapuqError(
                f"x_dev has shape {tuple(xd.shape[1:])} per sample, the model takes {self.input_shape}"
            )
        if not self.history:
            raise SnapuqError("calibrate after fit (the heads are untrained)")
        opts = CalibOptions(alpha, hinge_q, self.variant, input_tap, alarm_rate)
        self.calib = calibrate(self._predict, self.config(), xd, yd, opts, seed=seed,
                               x_ref=self._data.get("x_train"), y_ref=self._data.get("y_train"))
        self._data["x_dev"], self._data["y_dev"] = xd, yd
        self.history["calibration"] = opts.to_dict()  # config.json records it: a second seed refits alike
        return self.calib

    def save(self, directory: str | Path, *, x_test=None, y_test=None, x_ood=None,
             class_names: list[str] | None = None, dataset=None,
             name: str | None = None) -> Path:  # fmt: skip
        """Write the model directory (model.keras, calib.json, config.json, data.npz with the splits that
        `snapuq export / verify / eval` and the harness read, backbone.keras for the baselines). Test data:
        `x_test, y_test` (else the dev split stands in, noted in config.json); `x_ood`: OOD inputs for
        `snapuq eval`; `dataset`: a snapuq.data.Dataset to store instead of the arrays fit/calibrate saw.
        The directory is written as one unit (a staging folder swapped in whole, as `snapuq train` does):
        an interrupted save leaves the directory as it was."""
        if self.calib is None:
            raise SnapuqError("save after calibrate (the SNAP constants are not fitted yet)")
        final = Path(directory)
        stage = ModelStage(final)  # written in a staging folder beside it and swapped in whole
        out = stage.open(resume=False)
        try:
            self._save_into(out, final, x_test, y_test, x_ood, class_names, dataset, name)
            return stage.commit()
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)  # nothing of a failed save; `directory` is untouched
            raise
        finally:
            stage.close()

    def _save_into(self, out: Path, final: Path, x_test, y_test, x_ood, class_names, dataset, name) -> None:
        if dataset is None:
            d = self._data
            if "x_train" not in d:
                raise SnapuqError("save after fit")
            test_note = "x_test/y_test given to save()"
            if x_test is None:
                x_test, y_test, test_note = (
                    d["x_dev"],
                    d["y_dev"],
                    "no test split given: the dev split stands in",
                )
            else:
                x_test = self._in(x_test)
            if y_test is None:
                raise SnapuqError("save: x_test needs y_test")
            ytr = d.get("y_train")
            names = [str(c) for c in class_names] if class_names else []  # numbered up to n_classes below
            dataset = Dataset(
                name=name or final.name,
                x_train=d["x_train"],
                y_train=ytr if ytr is not None else np.full(len(d["x_train"]), -1, np.int64),
                x_dev=d["x_dev"],
                y_dev=d["y_dev"],
                x_test=x_test,
                y_test=np.asarray(y_test).astype(np.int64).reshape(-1),
                class_names=names,
                meta={
                    "source": "numpy arrays (snapuq.attach)",
                    "test": test_note,
                    "normalization": self.pre or {
                        "kind": "none",
                        "scale": [1.0],
                        "offset": [0.0],
                        "formula": "x_model = x_raw (arrays as given to fit)",
                    },
                },  # fmt: skip
                x_ood=None if x_ood is None else self._in(x_ood),
            )
            if x_ood is not None:
                dataset.meta["ood"] = "x_ood given to Snap.save"
            dataset.meta["modality"] = modality_of(dataset.input_shape)
        elif self.pre is not None:
            dataset = with_preprocessing(dataset, self.pre)
        # the model's classes are its logits, never the labels present: every label inside them
        dataset = with_model_classes(dataset, self.n_classes, "Snap.save")
        if tuple(dataset.input_shape) != self.input_shape:
            raise SnapuqError(
                f"data are {dataset.input_shape} per sample, the model takes {self.input_shape}"
            )
        save_cache(dataset, out / "data.npz")
        self.model.save(out / "model.keras")
        self.backbone.save(out / "backbone.keras")
        write_json(out / "calib.json", self.calib, indent=1)

        meta = {k: v for k, v in (dataset.meta or {}).items() if k != "waves"}
        cfg: dict[str, Any] = {
            "format": 1,
            "dataset": str((final / "data.npz").resolve()),
            "backbone": "user",
            "backbone_file": "backbone.keras",
            "model_name": self.backbone.name,
            "feat": self.feat,
            "input_shape": list(self.input_shape),
            "n_classes": int(self.n_classes),
            "class_names": list(dataset.class_names),
            "seed": int(self.history.get("seed", 0)),
            **self.config(),
            "tflite_ops": self.ops,
            "data_meta": json.loads(json.dumps(meta, default=str)),
            "modality": (dataset.meta or {}).get("modality"),
            "backbone_epochs": int(self.history.get("backbone_epochs", 0)),
            "calibration": self.history.get("calibration"),
        }
        md = ModelDir(out, cfg, self.model)
        cfg["test_accuracy_float"] = float(
            (md.predict(dataset.x_test)["logits"].argmax(1) == dataset.y_test).mean()
        )
        cfg["dev_accuracy_float"] = float(
            (md.predict(dataset.x_dev)["logits"].argmax(1) == dataset.y_dev).mean()
        )
        cfg["timings_s"] = {k: v for k, v in self.history.items() if k.endswith("_s")}
        write_json(out / "config.json", cfg, indent=1)  # commit records the parts: an export left from
        # another model in the directory is refused from now on


def attach(model, taps=None, rank: int = 64, *, eps: float = 1e-2, lambda_reg: float = 1e-4,
           nll: str = "gauss", qat_frac: float = 0.2, variant: str = "best",
           check_ops: bool = True) -> Snap:  # fmt: skip
    """Attach SNAP-UQ heads to a Keras 3 model (functional or Sequential, built, one input, one (N, C)
    output). `taps`: layer names (or (layer, predecessor) pairs); default the mid + penultimate feature
    maps found by walking the graph. `rank`: the rank r of each head's projection. With `check_ops` the
    model is converted to int8 TFLite once and every operator is checked against the core.
    Raises UnsupportedModelError (one line naming the layer and op) for a model the core cannot run."""
    from snapuq.nn import heads as S
    heads = HeadOptions(rank=rank, eps=eps, lambda_reg=lambda_reg, nll=nll, qat_frac=qat_frac)
    CalibOptions(variant=variant)  # its one-line error for an unknown variant, before any work
    model, pre = fold_input_preprocessing(model)
    check_model(model)
    backbone, feat = logits_backbone(model)
    tap_list, tap_prev = _resolve_taps(backbone, feat, taps)
    snap_model = S.add_heads(backbone, tap_list, tap_prev, rank=rank, eps=eps, floor="hard", detach=True,
                             feat=feat)  # fmt: skip
    # the operators, and the capacities counted with the heads export adds (before any training)
    ops = check_converted_ops(backbone, heads=(snap_model, len(tap_list))) if check_ops else []
    return Snap(backbone, snap_model, tap_list, tap_prev, feat, heads, variant, ops, pre=pre)


# ---------------------------------------------------------------------------------------------- CLI
def load_keras_model(path: str | Path):
    """A .keras / .h5 model file, one-line errors naming the whole cause. A legacy .h5 whose
    DepthwiseConv2D layers carry Keras 2's `groups: 1` (which Keras 3 refuses) is loaded without it; a
    TensorFlow SavedModel folder is refused with the ways to convert it."""
    import keras

    p = Path(path)
    if p.is_dir():
        raise SnapuqError(saved_model_route(p, keras.__version__))
    if not p.is_file():
        raise SnapuqError(f"{p}: no such model file")
    try:
        return keras.saving.load_model(p, compile=False, safe_mode=True)
    except Exception as e:  # custom layers, Lambda under safe mode, legacy configs, damaged files
        cause = load_error_cause(e)
        if "Lambda" in cause or "lambda" in cause:
            raise UnsupportedModelError(
                f"{p}: contains a Lambda layer (arbitrary Python code cannot be exported int8)"
            ) from None
        if "groups" in cause and p.suffix.lower() in (".h5", ".hdf5"):
            model = _load_h5_without_depthwise_groups(p, cause)
            if model is not None:
                return model
        raise SnapuqError(f"{p}: cannot load the Keras model ({type(e).__name__}: {cause})") from None


def load_error_cause(e: BaseException) -> str:
    """The cause of a Keras loading error on one line, in full: Keras wraps it in "Error when deserializing
    class ... using config={...}. Exception encountered: CAUSE"; the cause is that last part."""
    text = " ".join(str(e).split()) or type(e).__name__
    _, sep, tail = text.rpartition("Exception encountered:")
    return tail.strip() if sep and tail.strip() else text


def saved_model_route(p: Path, keras_version: str) -> str:
    if not ((p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file()):
        return f"{p}: a folder, not a model file (give a .keras or .h5 file)"
    return (f"{p}: a TensorFlow SavedModel folder; Keras {keras_version} loads only .keras / .h5 files (a "
            "SavedModel keeps no Keras layers to attach SNAP heads to). Convert it where it was saved: "
            "tf.keras.models.load_model(DIR).save('model.keras') (TensorFlow <= 2.15, or tf_keras), "
            "then `snapuq train --model model.keras`; or, for the int8 graph alone, "
            "tf.lite.TFLiteConverter.from_saved_model(DIR) with int8 quantization, then "
            "`snapuq verify / bench / harness --model FILE.tflite`")


def _load_h5_without_depthwise_groups(p: Path, cause: str):
    """Keras 2 (tf.keras <= 2.15) wrote `groups: 1` into every DepthwiseConv2D's config (it subclassed
    Conv2D); Keras 3 refuses the argument. The architecture is rebuilt from the file's config without it and
    the weights loaded from the same file. None when the file has no such layer (the error is another one)."""
    import h5py
    import keras

    try:
        with h5py.File(p, "r") as f:
            raw = f.attrs.get("model_config")
        if raw is None:
            return None
        cfg = json.loads(raw if isinstance(raw, str) else raw.decode())
    except (OSError, ValueError):
        return None
    found: list[tuple[str, int]] = []

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            c = node.get("config")
            if node.get("class_name") == "DepthwiseConv2D" and isinstance(c, dict) and "groups" in c:
                found.append((str(c.get("name", "?")), int(c["groups"])))
                c.pop("groups")
            for v in node.values():
                strip(v)
        elif isinstance(node, list):
            for v in node:
                strip(v)

    strip(cfg)
    if not found:
        return None
    bad = [(n, g) for n, g in found if g != 1]
    if bad:
        raise UnsupportedModelError(
            f"{p}: DepthwiseConv2D layer '{bad[0][0]}' has groups={bad[0][1]} (a grouped depthwise "
            f"convolution has no Keras 3 layer); Keras said: {cause}")
    class Keras2DepthwiseConv2D(keras.layers.DepthwiseConv2D):  # the file's layers, groups=1 accepted
        def __init__(self, *args: Any, groups: int = 1, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

    def plain(layer: Any) -> Any:  # the model rebuilt of stock layers (a later .keras save needs no class)
        cls = keras.layers.DepthwiseConv2D if isinstance(layer, Keras2DepthwiseConv2D) else type(layer)
        return cls.from_config(layer.get_config())

    try:
        loaded = keras.saving.load_model(p, compile=False, safe_mode=True,
                                         custom_objects={"DepthwiseConv2D": Keras2DepthwiseConv2D})
        model = keras.models.clone_model(loaded, clone_function=plain)
        model.set_weights(loaded.get_weights())
    except Exception as e:  # noqa: BLE001 - any other legacy quirk: named in full, with the first one
        raise SnapuqError(f"{p}: cannot load the Keras model: its {len(found)} DepthwiseConv2D layer(s) "
                          f"carry Keras 2's groups=1 (dropped), and then: {type(e).__name__}: "
                          f"{load_error_cause(e)}") from None
    print(f"snapuq: {p.name}: loaded as a legacy Keras 2 .h5 ({len(found)} DepthwiseConv2D layer(s) without "
          "Keras 2's groups=1)", file=sys.stderr)
    return model


