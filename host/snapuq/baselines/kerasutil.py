"""Keras helpers the baselines share: batched prediction, the final Dense layer behind "logits",
an MC-dropout clone (drop* layers always on, everything else in inference mode), and the block outputs
of a backbone where early exits attach."""

from __future__ import annotations

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.nn.backbones import BACKBONES, backbone_module
from snapuq.nn.graph import tap_candidates


def logsumexp(z: np.ndarray, t: float = 1.0) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64) / t
    m = z.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]


def entropy(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1.0)
    return -(p * np.log(p)).sum(axis=1)


def output_tensor(model, name: str | None = "logits"):
    out = model.output
    if isinstance(out, dict):
        if name not in out:
            raise SnapuqError(f"model has no output '{name}' (outputs: {', '.join(sorted(out))})")
        return out[name]
    if isinstance(out, (list, tuple)):
        return out[0]
    return out


def logits_model(model):
    """A model with the single "logits" output of `model` (or `model` itself if it has one output)."""
    import keras

    out = model.output
    if isinstance(out, dict):
        return keras.Model(model.input, out["logits"], name=f"{model.name}_logits")
    return model


def final_dense(model, feat_dim: int, n_classes: int):
    """The Dense layer producing "logits" (kernel (F, C)); SnapuqError if logits are not Dense(feat)."""
    import keras

    t = output_tensor(model, "logits")
    layer = t._keras_history.operation
    if isinstance(layer, keras.layers.Dense) and tuple(layer.kernel.shape) == (feat_dim, n_classes):
        return layer
    cands = [
        lay
        for lay in model.layers
        if isinstance(lay, keras.layers.Dense) and tuple(lay.kernel.shape) == (feat_dim, n_classes)
    ]
    if len(cands) != 1:
        raise SnapuqError(
            f"cannot find the final Dense layer ({feat_dim}->{n_classes}) behind the 'logits' output"
        )
    return cands[0]


def dense_apply(layer, feat: np.ndarray) -> np.ndarray:
    w = np.asarray(layer.kernel, dtype=np.float64)
    b = np.asarray(layer.bias, dtype=np.float64) if layer.use_bias else 0.0
    z = np.asarray(feat, dtype=np.float64) @ w + b
    act = getattr(layer.activation, "__name__", "linear")
    if act != "linear":
        raise SnapuqError(f"final Dense layer has activation '{act}'; logits must be linear")
    return z


def _always_on_dropout_cls():
    import keras

    class AlwaysOnDropout(keras.layers.Dropout):
        """Dropout that samples a mask also at inference (MC dropout)."""

        def call(self, inputs, training=None):
            return super().call(inputs, training=True)

    return AlwaysOnDropout


def mc_dropout_clone(model, seed: int = 0):
    """Clone with every Dropout named "drop*" always on; all other layers are shared (same weights,
    BatchNormalization keeps its moving statistics because the clone is called with training=False).
    Returns (clone with the logits output, number of dropout layers)."""
    import keras

    cls = _always_on_dropout_cls()
    n = 0

    def fn(layer):
        nonlocal n
        if isinstance(layer, keras.layers.Dropout) and layer.name.startswith("drop"):
            n += 1
            return cls(layer.rate, seed=seed + n, name=f"{layer.name}_mc")
        return layer

    clone = keras.models.clone_model(logits_model(model), clone_function=fn)
    return clone, n


def block_outputs(model, backbone: str | None = None) -> list[str]:
    """Names of the backbone's block outputs, shallow to deep: the backbone module's TAP_LAYERS when it has
    one, else every 4-D ReLU/activation output."""
    import keras

    names: list[str] = []
    if backbone in BACKBONES:
        names = list(getattr(backbone_module(backbone), "TAP_LAYERS", []))
    have = {lay.name for lay in model.layers}
    names = [n for n in names if n in have]
    if not names:
        for lay in model.layers:
            if isinstance(lay, (keras.layers.ReLU, keras.layers.Activation)) and len(lay.output.shape) == 4:
                names.append(lay.name)
    if not names:  # your own model: the feature maps SNAP taps could read (fused ReLUs, 1-D maps, MLPs)

        names = tap_candidates(model, model.layers[-1].name)
    return names
