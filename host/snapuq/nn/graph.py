"""Keras graph rules: which layers map to an operator of the int8 C core, the taps a backbone offers, and
the logits backbone SNAP attaches to (snapuq.attach and the baselines use them; no conversion here)."""

from __future__ import annotations

from typing import Any

import numpy as np

from snapuq.errors import SnapuqError, UnsupportedOpError

# TFLite builtin operators the int8 C core executes (firmware/core; both kernel sets, bit-exact with TFLM).
CORE_OPS: frozenset[str] = frozenset(
    {
        "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "EXPAND_DIMS",
        "FULLY_CONNECTED", "LOGISTIC", "MAX_POOL_2D", "MEAN", "QUANTIZE", "RELU", "RELU6", "RESHAPE",
        "SOFTMAX", "SQUEEZE",
    }
)  # fmt: skip


# Keras layers that disappear at inference or map one to one onto a core operator.
_PASS = {
    "InputLayer", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise", "GaussianDropout",
    "AlphaDropout", "ActivityRegularization", "Identity",
}  # fmt: skip


_LAYER_OPS = {
    "Flatten": "RESHAPE", "Reshape": "RESHAPE", "GlobalAveragePooling1D": "MEAN",
    "GlobalAveragePooling2D": "MEAN", "MaxPooling1D": "MAX_POOL_2D", "MaxPooling2D": "MAX_POOL_2D",
    "AveragePooling1D": "AVERAGE_POOL_2D", "AveragePooling2D": "AVERAGE_POOL_2D", "Add": "ADD",
    "Concatenate": "CONCATENATION", "Softmax": "SOFTMAX",
}  # fmt: skip


_WEIGHTED = {"Conv1D", "Conv2D", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D",
             "Dense"}  # fmt: skip


# operators of common layers the core does not have (for the one-line refusal)
_UNSUPPORTED = {
    "LSTM": "UNIDIRECTIONAL_SEQUENCE_LSTM", "GRU": "a GRU loop (WHILE)",
    "SimpleRNN": "UNIDIRECTIONAL_SEQUENCE_RNN",
    "Bidirectional": "BIDIRECTIONAL_SEQUENCE_LSTM", "ConvLSTM1D": "a ConvLSTM loop (WHILE)",
    "ConvLSTM2D": "a ConvLSTM loop (WHILE)", "TimeDistributed": "a per-step loop (WHILE)",
    "LayerNormalization": "MEAN/SQUARED_DIFFERENCE/RSQRT/MUL", "GroupNormalization": "MEAN/RSQRT/MUL",
    "UnitNormalization": "L2_NORMALIZATION", "Embedding": "GATHER", "Conv1DTranspose": "TRANSPOSE_CONV",
    "Conv2DTranspose": "TRANSPOSE_CONV", "Conv3D": "CONV_3D", "UpSampling1D": "RESIZE_NEAREST_NEIGHBOR",
    "UpSampling2D": "RESIZE_NEAREST_NEIGHBOR", "ZeroPadding1D": "PAD", "ZeroPadding2D": "PAD",
    "Cropping1D": "STRIDED_SLICE", "Cropping2D": "STRIDED_SLICE", "LeakyReLU": "LEAKY_RELU", "PReLU": "PRELU",
    "ELU": "ELU", "GlobalMaxPooling1D": "REDUCE_MAX", "GlobalMaxPooling2D": "REDUCE_MAX", "Multiply": "MUL",
    "Subtract": "SUB", "Average": "ADD + MUL", "Maximum": "MAXIMUM", "Minimum": "MINIMUM",
    "Dot": "BATCH_MATMUL", "Rescaling": "MUL + ADD", "Normalization": "SUB + MUL", "Permute": "TRANSPOSE",
    "RepeatVector": "TILE", "MultiHeadAttention": "BATCH_MATMUL", "Attention": "BATCH_MATMUL",
    "Resizing": "RESIZE_BILINEAR", "CategoryEncoding": "ONE_HOT", "Masking": "NOT_EQUAL + MUL",
}  # fmt: skip


_ACT_OPS = {"relu": "RELU", "relu6": "RELU6", "linear": None, "softmax": "SOFTMAX", "sigmoid": "LOGISTIC",
            "tanh": "TANH", "elu": "ELU", "selu": "ELU + MUL", "gelu": "GELU", "silu": "LOGISTIC + MUL",
            "swish": "LOGISTIC + MUL", "hard_sigmoid": "HARD_SWISH", "hard_silu": "HARD_SWISH",
            "leaky_relu": "LEAKY_RELU", "softplus": "EXP + LOG", "exponential": "EXP"}  # fmt: skip


_FUSED_ACTS = {"relu", "relu6", "linear"}


class UnsupportedModelError(UnsupportedOpError):
    """A model that cannot be exported int8 or run by the core (the message names the layer and op)."""


# ---------------------------------------------------------------------------------------------- graph
def _cls(layer) -> str:
    return type(layer).__name__


def _act_name(layer) -> str:
    a = getattr(layer, "activation", None)
    if a is None:
        return "linear"
    return getattr(a, "__name__", str(a))


def _inputs_of(layer) -> list:
    t = layer.input
    return list(t) if isinstance(t, (list, tuple)) else [t]


def _producer(tensor):
    hist = getattr(tensor, "_keras_history", None)
    return hist[0] if hist else None


def _consumers(model) -> dict[str, list]:
    out: dict[str, list] = {lay.name: [] for lay in model.layers}
    for lay in model.layers:
        if _cls(lay) == "InputLayer":
            continue
        for t in _inputs_of(lay):
            p = _producer(t)
            if p is not None and p.name in out:
                out[p.name].append(lay)
    return out


def _relu_kind(layer) -> str | None:
    """ "RELU" / "RELU6" for an activation-only layer the core can fuse or run, None if none, else the op."""
    c = _cls(layer)
    if c == "ReLU":
        mv, ns, th = layer.max_value, float(layer.negative_slope), float(layer.threshold)
        if ns != 0.0:
            return "LEAKY_RELU"
        if th != 0.0:
            return "a thresholded ReLU (GREATER + SELECT)"
        if mv is None:
            return "RELU"
        if float(mv) == 6.0:
            return "RELU6"
        return f"a ReLU clipped at {float(mv):g} (MINIMUM)"
    if c == "Activation":
        a = _act_name(layer)
        return _ACT_OPS.get(a, f"activation '{a}'") or None
    return None


def _layer_problem(layer, is_last: bool) -> str | None:
    """None when the layer maps onto core operators; else 'needs OP' text for the refusal."""
    c = _cls(layer)
    if c in _PASS:
        return None
    if c == "Lambda":
        return "runs arbitrary Python code that cannot be exported int8 (rewrite it with built-in layers)"
    if c in _UNSUPPORTED:
        return f"needs {_UNSUPPORTED[c]}, which the int8 core does not implement"
    if hasattr(layer, "layers") and c not in _WEIGHTED:
        return "is a nested model; build the model flat (call the inner model's layers on the outer tensors)"
    if c in _LAYER_OPS:
        op = _LAYER_OPS[c]
        if op not in CORE_OPS:
            return f"needs {op}, which the int8 core does not implement"
        if c == "Softmax" and not is_last:
            return "is a softmax inside the network; only a final softmax (taken off for the logits) works"
        return None
    if c in _WEIGHTED:
        a = _act_name(layer)
        if a not in _FUSED_ACTS and not (a == "softmax" and is_last):
            op = _ACT_OPS.get(a, f"activation '{a}'")
            if op is None or op not in CORE_OPS:
                return f"has activation '{a}' ({op}), which the int8 core does not implement"
        if int(getattr(layer, "groups", 1) or 1) != 1:
            return "is a grouped convolution, which the int8 core does not implement"
        if getattr(layer, "padding", None) == "causal":
            return "uses padding='causal' (PAD), which the int8 core does not implement"
        if c == "Dense" and len(layer.input.shape) > 2:
            return (f"is a Dense on a {tuple(layer.input.shape[1:])} input (per-step BATCH_MATMUL), "
                    "which the int8 core does not implement; Flatten or pool first")  # fmt: skip
        return None
    if c == "BatchNormalization":
        p = _producer(layer.input)
        if p is not None and _cls(p) in _WEIGHTED and _act_name(p) == "linear":
            return None
        return ("does not follow a linear convolution or Dense, so it cannot fold (MUL + ADD, which the int8 "
                "core does not implement); put it right after the Conv/Dense")  # fmt: skip
    if c in ("ReLU", "Activation"):
        k = _relu_kind(layer)
        if k is None or k == "SOFTMAX" and is_last:
            return None
        # RELU / RELU6: fused into a Conv/Dense/Add producer, else a standalone RELU / RELU6 operator
        if k in CORE_OPS:
            return None
        return f"needs {k}, which the int8 core does not implement"
    return "is not a layer the int8 export supports (see docs/YOUR_MODEL.md for the list)"


def check_model(model) -> None:
    """Raise UnsupportedModelError (one line, naming the layer and the operator) unless every layer of the
    model maps onto the int8 core; also checks the input (one, fixed shape) and the output ((N, C))."""
    import keras

    if not isinstance(model, keras.Model):
        raise UnsupportedModelError(f"expected a keras.Model, got {type(model).__name__}")
    if not model.built or not getattr(model, "inputs", None):
        raise UnsupportedModelError(
            "the model is not built: give its first layer an input shape (keras.Input)"
        )
    if len(model.inputs) != 1:
        raise UnsupportedModelError(f"the model has {len(model.inputs)} inputs; SNAP-UQ export needs one")
    shape = tuple(model.inputs[0].shape[1:])
    if any(d is None for d in shape):
        raise UnsupportedModelError(
            f"input shape {shape} has a free dimension; build the model with a fixed input (window) size"
        )
    if len(shape) not in (1, 2, 3):
        raise UnsupportedModelError(f"input shape {shape}: expected (F,), (T, C) or (H, W, C)")
    if len(model.outputs) != 1 or len(model.outputs[0].shape) != 2:
        raise UnsupportedModelError(
            "the model must have one output of shape (N, classes) (logits or a final softmax)"
        )
    last = _producer(model.outputs[0])
    for lay in model.layers:
        why = _layer_problem(lay, lay is last)
        if why:
            raise UnsupportedModelError(f"layer '{lay.name}' ({_cls(lay)}) {why}")


# leading input layers that are an affine map per channel: moved into the data path instead of the graph
_PREPROC = ("Rescaling", "Normalization")


def fold_input_preprocessing(model) -> tuple[Any, dict | None]:
    """(model, record). When the model starts with Rescaling / Normalization layers (right after the input,
    each feeding only the next), return a copy in which they are Identity and their map as a normalization
    record, ``x_model = x_raw * scale[c] + offset[c]`` per channel (last axis), else (model, None). The int8
    core has no MUL / ADD / SUB: the map moves into the data path (snapuq.json ``input.normalization``), which
    the harness and the device apply before quantizing, as for ``--normalize``. Raises UnsupportedModelError
    for a map that is not per channel (e.g. a Normalization over the spatial axes)."""
    import keras

    if not isinstance(model, keras.Model) or len(getattr(model, "inputs", None) or []) != 1:
        return model, None
    src = _producer(model.inputs[0])

    def readers(layer) -> list:
        return [lay for lay in model.layers if lay is not layer and _cls(lay) != "InputLayer"
                and any(_producer(t) is layer for t in _inputs_of(lay))]  # fmt: skip

    chain: list = []
    cur = src
    while True:
        nxt = readers(cur)
        if len(nxt) != 1 or _cls(nxt[0]) not in _PREPROC:
            break
        chain.append(nxt[0])
        cur = nxt[0]
    if not chain:
        return model, None
    if any(d is None for d in model.inputs[0].shape[1:]):
        return model, None  # check_model refuses a free dimension with its own message
    names = ", ".join(f"'{lay.name}' ({_cls(lay)})" for lay in chain)
    shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    sub = keras.Model(model.inputs[0], chain[-1].output)
    zero = np.asarray(sub(np.zeros((1, *shape), np.float32)), np.float64).reshape(-1, shape[-1])
    one = np.asarray(sub(np.ones((1, *shape), np.float32)), np.float64).reshape(-1, shape[-1])
    scale, offset = one[0] - zero[0], zero[0]
    probe = np.random.default_rng(0).normal(size=(2, *shape)).astype(np.float32) * 3.0
    got = np.asarray(sub(probe), np.float64)
    tol = 1e-4 * (1.0 + np.abs(got).max())
    if (not np.allclose(one, one[0], atol=tol) or not np.allclose(zero, zero[0], atol=tol)
            or not np.allclose(got, probe * scale + offset, atol=tol)):  # fmt: skip
        raise UnsupportedModelError(
            f"layer {names} is not a scale and offset per channel (last axis), so it cannot move out of the "
            "int8 graph (MUL + ADD, which the int8 core does not implement); normalize your data instead"
        )
    if not (np.all(np.isfinite(scale)) and np.all(np.isfinite(offset)) and np.all(scale != 0)):
        raise UnsupportedModelError(f"layer {names}: scale must be finite and non-zero per channel")

    folded = {lay.name for lay in chain}

    def clone(layer):
        if layer.name in folded:
            return keras.layers.Identity(name=layer.name)
        return type(layer).from_config(layer.get_config())

    out = keras.models.clone_model(model, clone_function=clone)
    for lay in out.layers:
        if lay.name not in folded and lay.weights:
            lay.set_weights(model.get_layer(lay.name).get_weights())
    ref = np.asarray(model(probe, training=False), np.float64)
    new = np.asarray(out((probe * scale + offset).astype(np.float32), training=False), np.float64)
    if not np.allclose(new, ref, atol=1e-3 * (1.0 + np.abs(ref).max())):
        raise UnsupportedModelError(f"layer {names}: the model without it does not reproduce the model")
    formula = ("x_model = x_raw * scale[c] + offset[c] (per channel c, last axis): the model's leading "
               f"{names}, moved out of the int8 graph")  # fmt: skip
    return out, {"kind": "model", "layers": [lay.name for lay in chain],
                 "scale": scale.tolist(), "offset": offset.tolist(), "formula": formula}  # fmt: skip


def _binary_sigmoid_dense(last):
    """The Dense(1) of a binary classifier's sigmoid output (Dense(1, activation='sigmoid'), or a linear
    Dense(1) followed by Activation('sigmoid')), else None."""
    if _cls(last) == "Activation" and _act_name(last) == "sigmoid":
        last = _producer(last.input)
        if last is None or _cls(last) != "Dense" or _act_name(last) != "linear":
            return None
    elif _cls(last) != "Dense" or _act_name(last) != "sigmoid":
        return None
    return last if int(last.units) == 1 else None


def _linear_copy(layer, weights: list, **config):
    """A linear copy of a weighted layer on the same input, named `<name>_logits`, with `weights` (and
    `config` overrides): it shares nothing with the original. Returns (its output tensor, the copy)."""
    cfg = layer.get_config()
    cfg.update(activation="linear", name=f"{layer.name}_logits", **config)
    lin = type(layer).from_config(cfg)
    out = lin(layer.input)
    lin.set_weights(weights)
    return out, lin


def _two_class_logits(dense):
    """A binary classifier's p = sigmoid(z) as two-class logits (-z/2, z/2): their softmax is
    (1 - sigmoid(z), sigmoid(z)) exactly, so class 1 is the sigmoid's positive class. Returns
    (logits tensor, the new Dense(2): the weights halved, negated for class 0)."""
    w, *b = dense.get_weights()
    halves = [np.concatenate([-w / 2, w / 2], axis=-1), *[np.concatenate([-v / 2, v / 2]) for v in b]]
    return _linear_copy(dense, halves, units=2)


def logits_backbone(model):
    """(model with a logits output, name of the penultimate-feature layer). A final softmax (a Softmax /
    Activation layer or a Dense(activation='softmax')) is taken off; a Dense gets a linear copy that shares
    nothing with the original (its weights are copied). A binary classifier's Dense(1) + sigmoid becomes
    the equivalent two-class logits (`_two_class_logits`): class 1 = the sigmoid's positive class."""
    import keras

    out = model.outputs[0]
    last = _producer(out)
    logits = out
    binary = _binary_sigmoid_dense(last)
    if binary is not None:
        logits, last = _two_class_logits(binary)
    elif _cls(last) == "Softmax" or _cls(last) == "Activation" and _act_name(last) == "softmax":
        logits = last.input
        last = _producer(logits)
    elif _cls(last) in _WEIGHTED and _act_name(last) == "softmax":
        logits, last = _linear_copy(last, last.get_weights())
    elif (_cls(last) in _WEIGHTED and _act_name(last) != "linear"
          or _cls(last) == "Activation" and _act_name(last) == "sigmoid"):  # fmt: skip
        units = int(out.shape[-1])
        what = f" on {units} units (multi-label)" if _act_name(last) == "sigmoid" and units > 1 else ""
        raise UnsupportedModelError(
            f"layer '{last.name}' ({_cls(last)}): the output has activation '{_act_name(last)}'{what}; "
            "end the model with linear logits, a softmax, or Dense(1, activation='sigmoid') for a binary "
            "classifier"
        )
    if int(logits.shape[-1]) < 2:
        raise UnsupportedModelError(
            "the output has one unit; use Dense(classes >= 2) logits, or activation='sigmoid' for a binary "
            "classifier"
        )
    feat_t = last.input if _cls(last) in _WEIGHTED else logits
    feat = _producer(feat_t)
    # a Dropout in front of the classifier is the identity at inference: its input is the feature layer
    while feat is not None and _cls(feat) in _PASS - {"InputLayer"}:
        feat = _producer(feat.input)
    backbone = keras.Model(model.inputs[0], logits, name=f"{model.name}_logits")
    return backbone, (feat.name if feat is not None else last.name)


def tap_candidates(backbone, feat: str) -> list[str]:
    """Feature maps a SNAP tap can read, shallow to deep: block outputs (ReLU/ReLU6 layers or activations,
    Conv/Dense with a fused ReLU, Add/Concatenate not followed by an activation) up to the penultimate
    features. Convolutional models use their 2-D/1-D maps when they have at least two."""
    cons = _consumers(backbone)
    names = [lay.name for lay in backbone.layers]
    stop = names.index(feat) if feat in names else len(names) - 1
    cands: list[tuple[str, int]] = []
    for lay in backbone.layers[: stop + 1]:
        c = _cls(lay)
        rank = len(lay.output.shape)
        if rank < 2 or rank > 4:
            continue
        ok = False
        if c in ("ReLU", "Activation"):
            ok = _relu_kind(lay) in ("RELU", "RELU6")
        elif c in _WEIGHTED:
            ok = _act_name(lay) in ("relu", "relu6") and not any(
                _cls(n) in ("BatchNormalization", "ReLU", "Activation") for n in cons[lay.name]
            )
        elif c in ("Add", "Concatenate"):
            ok = not any(_cls(n) in ("ReLU", "Activation", "BatchNormalization") for n in cons[lay.name])
        if ok:
            cands.append((lay.name, rank))
    spatial = [n for n, r in cands if r >= 3]
    return spatial if len(spatial) >= 2 else [n for n, _ in cands]


def default_taps(backbone, feat: str) -> tuple[list[str], dict[str, str]]:
    """The mid + penultimate candidate feature maps and each tap's predecessor (the candidate before it;
    the input layer for a model with a single candidate)."""
    cands = tap_candidates(backbone, feat)
    if not cands:
        raise UnsupportedModelError(
            "no usable tap: the model has no hidden activation (ReLU/ReLU6 after a Conv/Dense, an Add or a "
            "Concatenate) before its classifier; SNAP heads need at least one hidden feature map"
        )
    if len(cands) == 1:
        return cands, {cands[0]: backbone.layers[0].name}
    prev = {c: cands[i - 1] for i, c in enumerate(cands) if i > 0}
    mid = cands[max(1, (len(cands) - 1) // 2)]
    taps = [mid] if mid == cands[-1] else [mid, cands[-1]]
    return taps, {t: prev[t] for t in taps}


def _resolve_taps(backbone, feat: str, taps) -> tuple[list[str], dict[str, str]]:
    if taps is None:
        return default_taps(backbone, feat)
    names = [lay.name for lay in backbone.layers]
    cands = tap_candidates(backbone, feat)
    out, prev = [], {}
    for t in taps:
        tap, p = t if isinstance(t, (tuple, list)) else (t, None)
        if tap not in names:
            raise SnapuqError(
                f"tap '{tap}' is not a layer of the model (candidates: {', '.join(cands) or 'none'})"
            )
        if p is None:
            earlier = [c for c in cands if names.index(c) < names.index(tap)]
            p = earlier[-1] if earlier else names[0]
        if p not in names or names.index(p) >= names.index(tap):
            raise SnapuqError(f"tap '{tap}': predecessor '{p}' is not an earlier layer of the model")
        if len(backbone.get_layer(tap).output.shape) not in (2, 3, 4):
            raise SnapuqError(f"tap '{tap}': output rank must be 2..4")
        out.append(tap)
        prev[tap] = p
    if not out:
        raise SnapuqError("taps: give at least one layer name")
    return out, prev
