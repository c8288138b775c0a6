"""One vector set for every int8 implementation: single-operator .tflite models built with
TensorFlow (every operator the runtimes handle) plus the shipped models, random int8 inputs and
the outputs of the TFLM interpreter (the oracle), generated at test time and cached under
build/vectors/<key>/ (key: a hash of this file and the shipped models).

    cases = load_vectors()          # [Case(name, op, tflite, inputs, expected)], generated once

Each case directory holds model.tflite, inputs.bin (N records of the input, int8) and
expected.bin (N records of every output, concatenated in output order, raw bytes), plus
case.json (op, input shape, output shapes/dtypes, N). The C core on the host (ASan/UBSan
driver and the ctypes library), the MicroPython twin and the firmware read the same files.

QUANTIZE (int8 -> int8), SQUEEZE and EXPAND_DIMS are not produced by the converter from Keras
layers at batch 1 (it folds them into DEQUANTIZE/QUANTIZE pairs and RESHAPE); those models are
edited with the TFLite schema's object API from converted ones: the tensors and quantization stay
the converter's, only the operator changes. RELU6 is edited too: the converter gives a
standalone RELU6 its own output quantization, which TFLM's RELU6 ignores (it clamps the input
codes), so the case gives the output the input's quantization, the one form TFLM computes
correctly (snapuq's export writes the converter's form as RELU; see snapuq.export.convert).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "vectors"
# the shipped models: not a staging folder of a running train (.NAME.train) nor another seed's model
SHIPPED = sorted(p for p in (ROOT / "models").glob("*/model_int8.tflite")
                 if not p.parent.name.startswith(".") and "_seed" not in p.parent.name)  # fmt: skip
N_INPUTS = 12


@dataclass
class Case:
    name: str
    op: str                      # the operator under test ("model" for a shipped model)
    path: Path                   # the case directory
    tflite: bytes
    input_shape: tuple[int, ...]
    outputs: list[dict[str, Any]]   # {"shape", "dtype", "bytes"} in output order
    inputs: np.ndarray           # (N, *input_shape) int8
    expected: np.ndarray         # (N, record bytes) uint8: every output, output order

    def expected_outputs(self, i: int) -> list[np.ndarray]:
        out, off = [], 0
        for o in self.outputs:
            out.append(self.expected[i, off:off + o["bytes"]].view(o["dtype"]).reshape(o["shape"]))
            off += o["bytes"]
        return out


# ----------------------------------------------------------------------------------------------
# models


def _convert(model: Any, shape: tuple[int, ...], seed: int, float_out: bool = False,
             per_tensor_dense: bool = False) -> bytes:
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    rep = (rng.normal(size=(32, *shape)) * float(np.exp(rng.uniform(-1, 1))) + rng.uniform(-0.5, 0.5))
    rep = rep.astype(np.float32)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep_fn():  # type: ignore[no-untyped-def]
        for i in range(len(rep)):
            yield [rep[i:i + 1]]
    conv.representative_dataset = rep_fn
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.float32 if float_out else tf.int8
    if per_tensor_dense:
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    return bytes(conv.convert())


def _keras_case(build: Callable[[Any, Any], tuple[Any, Any]], shape: tuple[int, ...], seed: int,
                **kw: Any) -> Callable[[], bytes]:
    def make() -> bytes:
        import keras

        keras.utils.set_random_seed(seed)
        inp = keras.Input(shape, batch_size=1)
        out = build(keras.layers, inp)
        return _convert(keras.Model(inp, out), shape, seed, **kw)
    return make


def _edit(make: Callable[[], bytes], change: Callable[[Any, Any], None]) -> Callable[[], bytes]:
    """A converted model rewritten through the schema's object API (change(model_t, schema))."""
    def run() -> bytes:
        import flatbuffers
        from tensorflow.lite.python import schema_py_generated as fb

        m = fb.ModelT.InitFromObj(fb.Model.GetRootAs(make(), 0))
        change(m, fb)
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    return run


def _to_int8_requantize(m: Any, fb: Any) -> None:
    """DEQUANTIZE(int8 x) -> QUANTIZE(float -> int8 y) becomes QUANTIZE(int8 x -> int8 y)."""
    sg = m.subgraphs[0]
    codes = [c.builtinCode for c in m.operatorCodes]
    deq = next(o for o in sg.operators if codes[o.opcodeIndex] == fb.BuiltinOperator.DEQUANTIZE)
    q = next(o for o in sg.operators if codes[o.opcodeIndex] == fb.BuiltinOperator.QUANTIZE)
    q.inputs = [int(deq.inputs[0])]
    sg.operators = [q]


def _reshape_to_squeeze(m: Any, fb: Any) -> None:
    """RESHAPE (1, 1, C) -> (1, C) becomes SQUEEZE with squeeze_dims [1] (same tensors)."""
    sg = m.subgraphs[0]
    op = sg.operators[0]
    code = m.operatorCodes[op.opcodeIndex]
    assert code.builtinCode == fb.BuiltinOperator.RESHAPE
    code.builtinCode = fb.BuiltinOperator.SQUEEZE
    code.deprecatedBuiltinCode = fb.BuiltinOperator.SQUEEZE
    op.inputs = [int(op.inputs[0])]
    opts = fb.SqueezeOptionsT()
    opts.squeezeDims = [1]
    op.builtinOptionsType = fb.BuiltinOptions.SqueezeOptions
    op.builtinOptions = opts


def _reshape_to_expand_dims(m: Any, fb: Any) -> None:
    """RESHAPE (1, T, C) -> (1, T, 1, C) becomes EXPAND_DIMS with a constant int32 axis -2."""
    sg = m.subgraphs[0]
    op = sg.operators[0]
    code = m.operatorCodes[op.opcodeIndex]
    assert code.builtinCode == fb.BuiltinOperator.RESHAPE and len(sg.operators) == 1
    code.builtinCode = fb.BuiltinOperator.EXPAND_DIMS
    code.deprecatedBuiltinCode = fb.BuiltinOperator.EXPAND_DIMS
    buf = fb.BufferT()
    buf.data = list(np.array([-2], "<i4").tobytes())
    m.buffers.append(buf)
    t = fb.TensorT()
    t.shape = []
    t.type = fb.TensorType.INT32
    t.buffer = len(m.buffers) - 1
    t.name = b"expand_dims_axis"
    sg.tensors.append(t)
    op.inputs = [int(op.inputs[0]), len(sg.tensors) - 1]
    op.builtinOptionsType = fb.BuiltinOptions.ExpandDimsOptions
    op.builtinOptions = fb.ExpandDimsOptionsT()


def _relu6_same_quant(m: Any, fb: Any) -> None:
    """The RELU6 input and output tensors get one quantization: the input's zero point and a scale
    of 0.08 (range about +-10, so that 6.0 falls inside the int8 range and the clamp at 6 acts)."""
    sg = m.subgraphs[0]
    op = sg.operators[0]
    assert m.operatorCodes[op.opcodeIndex].builtinCode == fb.BuiltinOperator.RELU6 and len(sg.operators) == 1
    qi, qo = sg.tensors[op.inputs[0]].quantization, sg.tensors[op.outputs[0]].quantization
    qi.scale = [0.08]
    qo.scale, qo.zeroPoint, qo.min, qo.max = [0.08], list(qi.zeroPoint), qi.min, qi.max


def _fake_quant_pair() -> bytes:
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, 24], tf.float32)])
    def f(x):  # type: ignore[no-untyped-def]
        a = tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.5)
        return tf.quantization.fake_quant_with_min_max_args(a, -3.0, 2.0)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def _squeeze_source() -> bytes:
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, 1, 10], tf.float32)])
    def f(x):  # type: ignore[no-untyped-def]
        a = tf.quantization.fake_quant_with_min_max_args(x, -2.0, 1.0)
        return tf.quantization.fake_quant_with_min_max_args(tf.squeeze(a, axis=[1]), -2.0, 1.0)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def single_op_cases() -> dict[str, tuple[str, Callable[[], bytes]]]:
    """name -> (operator under test, model factory). Shapes and parameters exercise padding,
    strides, dilation, depth multipliers, per-channel and per-tensor weights and fused ReLU/ReLU6."""
    return {
        "conv_same_relu": ("CONV_2D", _keras_case(
            lambda L, x: L.Conv2D(6, 3, padding="same", activation="relu")(x), (7, 6, 3), 1)),
        "conv_valid_stride2_dil": ("CONV_2D", _keras_case(
            lambda L, x: L.Conv2D(4, (3, 2), strides=(2, 1), padding="valid", activation="relu6")(x),
            (9, 8, 2), 2)),
        "conv_dilation2": ("CONV_2D", _keras_case(
            lambda L, x: L.Conv2D(3, 3, dilation_rate=2, padding="same")(x), (8, 8, 2), 3)),
        "dwconv_mult2": ("DEPTHWISE_CONV_2D", _keras_case(
            lambda L, x: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", activation="relu")(x),
            (6, 7, 3), 4)),
        "dwconv_valid_stride2": ("DEPTHWISE_CONV_2D", _keras_case(
            lambda L, x: L.DepthwiseConv2D(2, strides=2, padding="valid")(x), (8, 6, 4), 5)),
        "fc_per_channel": ("FULLY_CONNECTED", _keras_case(
            lambda L, x: L.Dense(11, activation="relu")(x), (19,), 6)),
        "fc_per_tensor": ("FULLY_CONNECTED", _keras_case(
            lambda L, x: L.Dense(7)(x), (13,), 7, per_tensor_dense=True)),
        "maxpool_same": ("MAX_POOL_2D", _keras_case(
            lambda L, x: L.MaxPooling2D(3, strides=2, padding="same")(x), (7, 7, 3), 8)),
        "avgpool_valid": ("AVERAGE_POOL_2D", _keras_case(
            lambda L, x: L.AveragePooling2D(2, padding="valid")(x), (6, 8, 5), 9)),
        "avgpool_same": ("AVERAGE_POOL_2D", _keras_case(
            lambda L, x: L.AveragePooling2D(3, strides=2, padding="same")(x), (7, 5, 2), 10)),
        "mean_spatial": ("MEAN", _keras_case(
            lambda L, x: L.GlobalAveragePooling2D(keepdims=True)(x), (5, 6, 7), 11)),
        "add_relu": ("ADD", _keras_case(
            lambda L, x: L.Activation("relu")(L.Add()([x, L.Conv2D(4, 1)(x)])), (5, 5, 4), 12)),
        "reshape": ("RESHAPE", _keras_case(
            lambda L, x: L.Reshape((12, 2))(L.Conv2D(2, 1)(x)), (3, 4, 2), 13)),
        "softmax": ("SOFTMAX", _keras_case(
            lambda L, x: L.Softmax()(L.Dense(9)(x)), (14,), 14)),
        "logistic": ("LOGISTIC", _keras_case(
            lambda L, x: L.Activation("sigmoid")(L.Dense(10)(x)), (12,), 15)),
        "concat_channels": ("CONCATENATION", _keras_case(
            lambda L, x: L.Concatenate()([L.Conv2D(3, 1)(x), L.Conv2D(2, 1)(x)]), (4, 5, 2), 17)),
        "concat_time_3in": ("CONCATENATION", _keras_case(
            lambda L, x: L.Concatenate(axis=1)([L.Conv1D(3, 1)(x), x, L.Conv1D(3, 2)(x)]), (6, 3), 18)),
        "relu": ("RELU", _keras_case(lambda L, x: L.ReLU()(x), (5, 4, 3), 19)),
        "relu_after_concat": ("RELU", _keras_case(
            lambda L, x: L.ReLU()(L.Concatenate()([L.Dense(4)(x), L.Dense(3)(x)])), (10,), 20)),
        "relu6": ("RELU6", _edit(_keras_case(lambda L, x: L.ReLU(6.0)(x), (7, 4), 21), _relu6_same_quant)),
        "expand_dims": ("EXPAND_DIMS", _edit(_keras_case(lambda L, x: L.Reshape((8, 1, 3))(x), (8, 3), 22),
                                             _reshape_to_expand_dims)),
        "mean_temporal": ("MEAN", _keras_case(lambda L, x: L.GlobalAveragePooling1D()(x), (9, 5), 23)),
        "conv1d_pools": ("CONV_2D", _keras_case(
            lambda L, x: L.AveragePooling1D(2)(L.MaxPooling1D(2, padding="same")(
                L.Conv1D(4, 3, activation="relu")(x))), (15, 3), 24)),
        "quantize_int8": ("QUANTIZE", _edit(_fake_quant_pair, _to_int8_requantize)),
        "squeeze": ("SQUEEZE", _edit(_squeeze_source, _reshape_to_squeeze)),
        "dequantize": ("DEQUANTIZE", _keras_case(lambda L, x: L.Dense(6)(x), (9,), 16, float_out=True)),
    }


# ----------------------------------------------------------------------------------------------
# generation + cache


def _key() -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    for p in SHIPPED:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _tflm_run(tflite: bytes, xs: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime

    ip = runtime.Interpreter.from_bytes(tflite, arena_size=1 << 22)
    outs: list[dict[str, Any]] = []
    k = 0
    while True:
        try:
            d = ip.get_output_details(k)
        except (IndexError, RuntimeError, ValueError):
            break
        dt = np.dtype(d["dtype"])
        outs.append({"shape": [int(s) for s in d["shape"]], "dtype": dt.name,
                     "bytes": int(np.prod(d["shape"])) * dt.itemsize})
        k += 1
    rows = []
    for x in xs:
        ip.set_input(np.ascontiguousarray(x), 0)
        ip.invoke()
        rows.append(b"".join(np.ascontiguousarray(ip.get_output(i)).tobytes() for i in range(len(outs))))
    return outs, np.frombuffer(b"".join(rows), np.uint8).reshape(len(xs), -1)


def _input_shape(tflite: bytes) -> tuple[int, ...]:
    from tflite_micro.python.tflite_micro import runtime

    ip = runtime.Interpreter.from_bytes(tflite, arena_size=1 << 22)
    return tuple(int(s) for s in ip.get_input_details(0)["shape"])


def _write_case(d: Path, op: str, tflite: bytes, seed: int) -> None:
    shape = _input_shape(tflite)
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 128, size=(N_INPUTS, *shape), dtype=np.int8)
    xs[0] = -128          # the extremes of the int8 range
    xs[1] = 127
    outs, expected = _tflm_run(tflite, xs)
    tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", dir=d.parent))
    (tmp / "model.tflite").write_bytes(tflite)
    (tmp / "inputs.bin").write_bytes(xs.tobytes())
    (tmp / "expected.bin").write_bytes(expected.tobytes())
    (tmp / "case.json").write_text(json.dumps({"op": op, "input_shape": list(shape), "outputs": outs,
                                               "n": N_INPUTS}, indent=1) + "\n")
    try:
        os.replace(tmp, d)
    except OSError:       # another worker generated it first
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def _read_case(d: Path) -> Case:
    meta = json.loads((d / "case.json").read_text())
    shape = tuple(meta["input_shape"])
    xs = np.frombuffer((d / "inputs.bin").read_bytes(), np.int8).reshape(meta["n"], *shape)
    exp = np.frombuffer((d / "expected.bin").read_bytes(), np.uint8).reshape(meta["n"], -1)
    return Case(d.name, meta["op"], d, (d / "model.tflite").read_bytes(), shape, meta["outputs"], xs, exp)


def load_vectors(root: Path = BUILD) -> list[Case]:
    """Every case, generated on first use (TensorFlow + TFLM, a few seconds per model). Parallel
    test workers wait for each other on a lock file instead of generating twice."""
    import fcntl

    base = root / _key()
    base.mkdir(parents=True, exist_ok=True)
    cases = {name: (op, make) for name, (op, make) in single_op_cases().items()}
    for p in SHIPPED:
        cases[f"model_{p.parent.name}"] = ("model", p.read_bytes)
    out = []
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for i, (name, (op, make)) in enumerate(sorted(cases.items())):
            d = base / name
            if not (d / "case.json").is_file():
                _write_case(d, op, make(), seed=1000 + i)
            out.append(_read_case(d))
    for other in root.iterdir():   # sets of older generator versions or shipped models
        if other.is_dir() and other != base:
            shutil.rmtree(other, ignore_errors=True)
    return out


if __name__ == "__main__":   # python tests/vectors/generate.py: build the set, print a summary
    sys.path.insert(0, str(ROOT / "host"))
    for c in load_vectors():
        print(f"{c.name:<24} {c.op:<18} in {c.input_shape} -> {[o['shape'] for o in c.outputs]}")
