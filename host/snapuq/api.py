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
(snapuq.train: fit_backbone, fit_heads, calibrate_snap); `snapuq train --model my.keras --data DATA` is
`train_user_model`, which goes through this class.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
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
MAX_SAVED_TRAIN = 20000


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


def _layer_problem(layer, consumers: dict[str, list], is_last: bool) -> str | None:
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
    cons = _consumers(model)
    last = _producer(model.outputs[0])
    for lay in model.layers:
        why = _layer_problem(lay, cons, lay is last)
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


def _convert(model, n: int = 8, seed: int = 0) -> bytes:
    from snapuq import tfquiet
    from snapuq.export.convert import convert_keras
    from snapuq.io import captured_output

    shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    rep = np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)
    with captured_output(show=tfquiet.showing()):  # the converter's dump: held, as in export (shown with -v)
        return convert_keras(model, rep, int8=True)


def tflite_ops(tflite: bytes) -> list[tuple[str, str]]:
    """(builtin operator name, first output tensor name) of every operator of a converter-made .tflite
    (read with the `tflite` schema package, as snapuq.bench does)."""
    import tflite as tfl

    ops = vars(tfl.BuiltinOperator).items()
    names = {v: k for k, v in ops if not k.startswith("_") and isinstance(v, int)}
    m = tfl.Model.GetRootAsModel(tflite, 0)
    sg = m.Subgraphs(0)
    out = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        oc = m.OperatorCodes(op.OpcodeIndex())
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        tname = sg.Tensors(int(op.Outputs(0))).Name().decode(errors="replace") if op.OutputsLength() else ""
        out.append((names.get(code, f"BUILTIN_{code}"), tname))
    return out


# ------------------------------------------------------------------------------------ core capacities
_LIMIT_OF = {"tensors": "SNAPUQ_MAX_TENSORS", "operators": "SNAPUQ_MAX_OPS", "inputs": "SNAPUQ_MAX_IO",
             "outputs": "SNAPUQ_MAX_IO"}  # fmt: skip


def core_limits() -> dict[str, int]:
    """The C core's capacities as built by default (SNAPUQ_MAX_TENSORS / _OPS / _IO in snapuq_runtime.h):
    what the host library (`snapuq export / verify`), the MicroPython module and a firmware without CAPS=fit
    take."""
    import re

    from snapuq.ccore import CORE_DIR

    text = (CORE_DIR / "snapuq_runtime.h").read_text()
    found = {k: int(v) for k, v in re.findall(r"#define (SNAPUQ_MAX_(?:TENSORS|OPS|IO)) (\d+)", text)}
    missing = sorted(set(_LIMIT_OF.values()) - set(found))
    if missing:
        raise SnapuqError(f"{CORE_DIR / 'snapuq_runtime.h'}: no #define {missing[0]}")
    return found


def graph_counts(tflite: bytes) -> dict[str, int]:
    """Tensors (constants included), operators, inputs and outputs of subgraph 0: what the core's loader
    compares with its capacities."""
    import tflite as tfl

    g = tfl.Model.GetRootAsModel(tflite, 0).Subgraphs(0)
    return {"tensors": g.TensorsLength(), "operators": g.OperatorsLength(), "inputs": g.InputsLength(),
            "outputs": g.OutputsLength()}  # fmt: skip


def head_count_bounds(n_taps: int) -> tuple[dict[str, int], dict[str, int]]:
    """(fewest, most) tensors / operators / outputs the SNAP heads add to the backbone in the exported graph.
    Per tap four FULLY_CONNECTED (P, h, mu, log-variance: weights, bias, output each), the two tap vectors (a
    MEAN over a feature map: output tensor, and a RESHAPE when the converter has folded that map away: output
    + shape), the "probs" SOFTMAX once, MEAN axis constants (one per rank, when the backbone has none) and the
    outputs "probs" + a, mu, logvar per tap. Exact for vector taps; a MEAN is shared with an identical one of
    the backbone or of another tap."""
    lo = {"tensors": 1 + 12 * n_taps, "operators": 1 + 4 * n_taps, "inputs": 0, "outputs": 1 + 3 * n_taps}
    hi = {"tensors": lo["tensors"] + 6 * n_taps + 2, "operators": lo["operators"] + 4 * n_taps, "inputs": 0,
          "outputs": lo["outputs"]}  # fmt: skip
    return lo, hi


def export_counts(snap_model, n_taps: int) -> dict[str, int]:
    """graph_counts of the graph `snapuq export` converts (ModelDir.export_model: logits, probs and each
    tap's a, mu, logvar) for this backbone + heads, by converting it once (int8, random calibration data).
    The heads' biases are made non-zero for the conversion as training leaves them (the converter drops an
    all-zero bias and shares equal constants, so untrained heads would count short), then restored."""
    from snapuq import snap as S
    from snapuq.modeldir import ModelDir

    saved = [(lay, lay.get_weights()) for lay in S.head_layers(snap_model)]
    rng = np.random.default_rng(0)
    try:
        for lay, ws in saved:
            lay.set_weights([w + rng.uniform(0.01, 0.02, w.shape).astype(w.dtype) if w.ndim == 1 else w
                             for w in ws])  # fmt: skip
        em = ModelDir(Path("."), {"taps": [None] * n_taps}, snap_model).export_model()
        return graph_counts(_convert(em))
    finally:
        for lay, ws in saved:
            lay.set_weights(ws)


def check_capacity(backbone_tflite: bytes, snap_model, n_taps: int) -> dict[str, int]:
    """Refuse, before any training, a model the core cannot load once export has added the SNAP heads: the
    backbone's converted graph plus what the heads add (`head_count_bounds`; when the most they could add
    does not fit, the exact count of `export_counts`) against `core_limits()`. One line naming the limit and
    the count. Returns the counts known (exact, or the backbone's plus the heads' upper bound)."""
    lim = core_limits()
    base = graph_counts(backbone_tflite)
    lo, hi = head_count_bounds(n_taps)
    total = {k: base[k] + hi[k] for k in base}
    if any(total[k] > lim[_LIMIT_OF[k]] for k in total):
        total = export_counts(snap_model, n_taps)
    for k, n in total.items():
        if n > lim[_LIMIT_OF[k]]:
            name = _LIMIT_OF[k]
            raise UnsupportedModelError(
                f"with its SNAP heads ({n_taps} tap{'s' if n_taps != 1 else ''}) the int8 model has {n} {k} "
                f"(backbone {base[k]} + heads {n - base[k]}), more than the core's {name} = {lim[name]}: "
                f"use fewer taps (taps=...), or a core built with a larger {name}"
            )
    return total


def check_converted_ops(model, heads: tuple[Any, int] | None = None) -> list[str]:
    """Convert once (int8, random calibration data) and refuse operators outside CORE_OPS, naming the Keras
    layer the operator came from; with `heads` = (SNAP model, number of taps), refuse a model that exceeds
    the core's capacities with its heads (`check_capacity`); then load the result into the C core itself
    (when a host compiler is available), which rejects parameters it does not implement. Returns the sorted
    operator names."""
    tfl = _convert(model)
    ops = tflite_ops(tfl)
    names = sorted((lay.name for lay in model.layers), key=len, reverse=True)
    for op, tname in ops:
        if op not in CORE_OPS:
            lay = next((n for n in names if n in tname), None)
            where = f"layer '{lay}'" if lay else f"tensor '{tname}'"
            raise UnsupportedModelError(f"{where} converts to {op}, which the int8 core does not implement")
    if heads is not None:
        check_capacity(tfl, *heads)
    from snapuq.ccore import CCoreError, CoreModel

    try:
        CoreModel(tfl).close()
    except CCoreError:
        pass  # no host C compiler: the operator list above is the check
    except SnapuqError as e:
        raise UnsupportedModelError(f"the int8 core rejects the converted model: {e}") from None
    return sorted({op for op, _ in ops})


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


# ---------------------------------------------------------------------------------------------- data
def _as_numpy(x) -> np.ndarray:
    return np.asarray(x, np.float32)


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
    options: dict[str, Any]
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

        from snapuq import train as T

        qf = self.options["qat_frac"] if qat_frac is None else float(qat_frac)
        T.validate_head_options(self.options["rank"], qf, epochs, self.options["eps"])
        self.options["qat_frac"] = qf
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
            self.model, len(self.taps), data, ytr, epochs, lambda_reg=self.options["lambda_reg"],
            nll=self.options["nll"], qat_frac=qf, batch_size=batch_size, lr=lr, progress=progress,
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
        from snapuq.data.user import apply_normalization

        a = _as_numpy(x)
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
        parts = []
        for i in range(0, len(x), batch_size):
            out = self.model(x[i : i + batch_size], training=False)
            parts.append({k: np.asarray(v) for k, v in out.items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def config(self) -> dict[str, Any]:
        """The SNAP-head part of config.json."""
        from snapuq.train import head_config, tap_entries

        h = self.history
        return head_config(self.options, tap_entries(self.backbone, self.taps, self.tap_prev),
                           h.get("epochs", 0), h.get("qat_epochs", 0))  # fmt: skip

    def calibrate(self, x_dev, y_dev, *, seed: int = 0, input_tap: bool = True,
                  alarm_rate: float | None = None) -> dict:  # fmt: skip
        """Fit the SNAP constants (weights, beta, the confidence proxy, the U threshold) on a labelled dev
        split and the held-out synthetic shift of it (the inputs given to `fit` join the hinge's clean
        reference). Returns the calib.json dict (also kept on self)."""
        from snapuq.train import calibrate_snap

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
        self.calib = calibrate_snap(
            self._predict, self.config(), xd, yd, self.options["variant"], seed,
            x_ref=self._data.get("x_train"), y_ref=self._data.get("y_train"), input_tap=input_tap,
            alarm_rate=alarm_rate,
        )  # fmt: skip
        self._data["x_dev"], self._data["y_dev"] = xd, yd
        return self.calib

    def save(self, directory: str | Path, *, x_test=None, y_test=None, x_ood=None,
             class_names: list[str] | None = None, dataset=None,
             name: str | None = None) -> Path:  # fmt: skip
        """Write the model directory (model.keras, calib.json, config.json, data.npz with the splits that
        `snapuq export / verify / eval` and the harness read, backbone.keras for the baselines). Test data:
        `x_test, y_test` (else the dev split stands in, noted in config.json); `x_ood`: OOD inputs for
        `snapuq eval`; `dataset`: a snapuq.data.Dataset to store instead of the arrays fit/calibrate saw."""
        from snapuq.data import Dataset, with_model_classes
        from snapuq.data.user import modality_of, save_cache, with_preprocessing

        if self.calib is None:
            raise SnapuqError("save after calibrate (the SNAP constants are not fitted yet)")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
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
                name=name or out.name,
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
        cache = save_cache(dataset, out / "data.npz")
        self.model.save(out / "model.keras")
        self.backbone.save(out / "backbone.keras")
        (out / "calib.json").write_text(json.dumps(self.calib, indent=1))
        from snapuq.modeldir import ModelDir

        meta = {k: v for k, v in (dataset.meta or {}).items() if k != "waves"}
        cfg: dict[str, Any] = {
            "format": 1,
            "dataset": str(cache.resolve()),
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
        }
        md = ModelDir(out, cfg, self.model)
        cfg["test_accuracy_float"] = float(
            (md.predict(dataset.x_test)["logits"].argmax(1) == dataset.y_test).mean()
        )
        cfg["dev_accuracy_float"] = float(
            (md.predict(dataset.x_dev)["logits"].argmax(1) == dataset.y_dev).mean()
        )
        cfg["timings_s"] = {k: v for k, v in self.history.items() if k.endswith("_s")}
        tmp = out / "config.json.tmp"
        tmp.write_text(json.dumps(cfg, indent=1))
        tmp.replace(out / "config.json")
        from snapuq.modeldir import TRAIN_PARTS, record_parts

        record_parts(out, TRAIN_PARTS)  # an export left from another model in `out` is refused from now on
        return out


def attach(model, taps=None, rank: int = 64, *, eps: float = 1e-2, lambda_reg: float = 1e-4,
           nll: str = "gauss", qat_frac: float = 0.2, variant: str = "best",
           check_ops: bool = True) -> Snap:  # fmt: skip
    """Attach SNAP-UQ heads to a Keras 3 model (functional or Sequential, built, one input, one (N, C)
    output). `taps`: layer names (or (layer, predecessor) pairs); default the mid + penultimate feature
    maps found by walking the graph. `rank`: the rank r of each head's projection. With `check_ops` the
    model is converted to int8 TFLite once and every operator is checked against the core.
    Raises UnsupportedModelError (one line naming the layer and op) for a model the core cannot run."""
    from snapuq import snap as S
    from snapuq.train import validate_head_options

    validate_head_options(rank, qat_frac, None, eps)
    if variant not in ("best", "literal"):
        raise SnapuqError(f"variant must be 'best' or 'literal', got {variant!r}")
    if nll not in S.NLLS:
        raise SnapuqError(f"nll must be one of {', '.join(S.NLLS)}, got {nll!r}")
    model, pre = fold_input_preprocessing(model)
    check_model(model)
    backbone, feat = logits_backbone(model)
    tap_list, tap_prev = _resolve_taps(backbone, feat, taps)
    snap_model = S.add_heads(backbone, tap_list, tap_prev, rank=rank, eps=eps, floor="hard", detach=True,
                             feat=feat)  # fmt: skip
    # the operators, and the capacities counted with the heads export adds (before any training)
    ops = check_converted_ops(backbone, heads=(snap_model, len(tap_list))) if check_ops else []
    opts = {"rank": int(rank), "eps": float(eps), "lambda_reg": float(lambda_reg), "nll": nll,
            "qat_frac": float(qat_frac), "variant": variant, "detach": True, "joint": False,
            "floor": "hard", "lambda_ss": 1.0, "cov_rank": 0}  # fmt: skip
    return Snap(backbone, snap_model, tap_list, tap_prev, feat, opts, ops, pre=pre)


# ---------------------------------------------------------------------------------------------- CLI
def load_keras_model(path: str | Path):
    """A .keras / .h5 model file, one-line errors."""
    import keras

    p = Path(path)
    if not p.is_file():
        raise SnapuqError(f"{p}: no such model file")
    try:
        return keras.saving.load_model(p, compile=False, safe_mode=True)
    except Exception as e:  # custom layers, Lambda under safe mode, damaged files
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        if "Lambda" in msg or "lambda" in msg:
            raise UnsupportedModelError(
                f"{p}: contains a Lambda layer (arbitrary Python code cannot be exported int8)"
            ) from None
        raise SnapuqError(f"{p}: cannot load the Keras model ({type(e).__name__}: {msg})") from None


def train_user_model(args: argparse.Namespace) -> dict:
    """`snapuq train --model my.keras --data DATA --out DIR`: attach, fit, calibrate, save (+ baselines)."""
    from snapuq.data import with_model_classes
    from snapuq.data.user import load_user_data, precheck_user_data, with_preprocessing
    from snapuq.train import check_input_range

    t0 = time.perf_counter()
    if not args.data:
        raise SnapuqError("--model needs --data DATA (.npz or a folder of class subfolders)")
    if args.dataset:
        raise SnapuqError("give either --dataset (built-in) or --model with --data, not both")
    if not Path(args.model).is_file():
        raise SnapuqError(f"{args.model}: no such model file")
    precheck_user_data(args.data)  # an .npz read and checked before TensorFlow loads (read once)
    progress = not args.no_progress
    model = load_keras_model(args.model)
    # a leading Rescaling / Normalization moves into the data path; the data then go to it raw ("auto")
    model, pre = fold_input_preprocessing(model)
    check_model(model)  # the layer rules first (fast), then the data, then the conversion check in attach
    shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    mode = "none" if pre is not None and args.normalize == "auto" else args.normalize
    ds = load_user_data(args.data, seed=args.seed, input_shape=shape, normalize=mode)
    if pre is not None:
        ds = with_preprocessing(ds, pre)
        print(f"snapuq train: {pre['formula'].split(': ', 1)[1]} (the data path applies it: "
              f"scale {_short(pre['scale'])}, offset {_short(pre['offset'])})")  # fmt: skip
    # n_classes is the model's logits width, not the largest label in the data (a class the data lack is
    # still an output: the generated C and the manifest must say so); a label outside it is refused here,
    # before attach converts the model
    n_classes = int(logits_backbone(model)[0].outputs[0].shape[-1])
    ds = with_model_classes(ds, n_classes, str(args.data))
    check_input_range(ds, str(args.data))
    taps = [t.strip() for t in args.taps.split(",")] if args.taps else None
    snap = attach(model, taps=taps, rank=args.rank, eps=args.eps, lambda_reg=args.lambda_reg, nll=args.nll,
                  qat_frac=args.qat_frac, variant=args.variant)  # fmt: skip
    if snap.n_classes != n_classes:  # the same logits: attach takes them from logits_backbone too
        ds = with_model_classes(ds, snap.n_classes, str(args.data))
    snap.fit(ds.x_train, ds.y_train, epochs=args.epochs or 10, batch_size=args.batch_size or 64,
             lr=args.lr or 2e-3, backbone_epochs=args.backbone_epochs, validation_data=(ds.x_dev, ds.y_dev),
             seed=args.seed, progress=progress)  # fmt: skip
    snap.calibrate(ds.x_dev, ds.y_dev, seed=args.seed, input_tap=getattr(args, "input_tap", True),
                   alarm_rate=getattr(args, "alarm_rate", None))  # fmt: skip
    snap.history["load_and_prepare_s"] = round(time.perf_counter() - t0, 2)
    out = snap.save(args.out, dataset=ds)
    cfg = json.loads((out / "config.json").read_text())
    if not args.no_baselines:
        from snapuq.baselines import train_baselines
        from snapuq.train import announce_baselines

        t = time.perf_counter()
        per = snap.history.get("backbone_s_per_epoch") or _estimate_epoch_s(
            snap.backbone, ds, args.batch_size or 64
        )
        cfg["_backbone_s_per_epoch"] = per
        ep = args.baseline_epochs or args.epochs or 10
        announce_baselines(ds, cfg, ep, progress)
        cfg.pop("_backbone_s_per_epoch")
        train_baselines(ds, cfg, out, seed=args.seed, epochs=ep, progress=progress)
        cfg["timings_s"]["baselines"] = round(time.perf_counter() - t, 2)
    cfg["timings_s"]["total"] = round(time.perf_counter() - t0, 2)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    from snapuq.modeldir import ModelPaths, record_parts

    record_parts(out, (ModelPaths.CONFIG,))
    return cfg


def _short(v: list[float]) -> str:
    """A per-channel list for one line: one value when all agree, else the first three."""
    a = np.asarray(v, np.float64)
    if np.allclose(a, a[0]):
        return f"{a[0]:.6g}"
    return "[" + ", ".join(f"{t:.4g}" for t in a[:3]) + (", ...]" if len(a) > 3 else "]")


def _estimate_epoch_s(backbone, ds, batch_size: int) -> float:
    """Seconds per training epoch of the backbone, from a few timed train steps on a clone."""
    import keras

    m = keras.models.clone_model(backbone)
    for lay in m.layers:  # the backbone is frozen after the heads' training: time real train steps
        lay.trainable = True
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    n = min(len(ds.x_train), 4 * batch_size)
    x, y = ds.x_train[:n], ds.y_train[:n]
    m.train_on_batch(x[:batch_size], y[:batch_size])  # trace
    t = time.perf_counter()
    for i in range(0, n, batch_size):
        m.train_on_batch(x[i : i + batch_size], y[i : i + batch_size])
    per_sample = (time.perf_counter() - t) / n
    return per_sample * len(ds.x_train)
