"""Keras -> TFLite conversion with a fixed batch of 1 (full-integer int8 or float32)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

import numpy as np

from snapuq import tfquiet
from snapuq.errors import ModelFormatError
from snapuq.native.blob import input_normalization
from snapuq.tflite_graph import read_graph

if not tfquiet.showing():  # `snapuq -v` shows TensorFlow's own log lines
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def convert_keras(model, representative: np.ndarray | None, int8: bool = True) -> bytes:
    """Convert a Keras model (single NHWC float input, dict or list outputs) to a batch-1
    .tflite. int8=True gives a full-integer model (int8 input and outputs, int8 kernels,
    int32 biases) calibrated on `representative` (N, *input_shape) float32 samples."""
    import keras
    import tensorflow as tf

    in_shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    inp = keras.Input(in_shape, batch_size=1, name="input")
    out = model(inp, training=False)
    if not isinstance(out, dict):
        outs = out if isinstance(out, (list, tuple)) else [out]
        out = {f"output_{i}": o for i, o in enumerate(outs)}
    fixed = keras.Model(inp, out)
    conv = tf.lite.TFLiteConverter.from_keras_model(fixed)
    if int8:
        if representative is None or len(representative) == 0:
            raise ModelFormatError("int8 conversion needs representative samples")
        rep = np.asarray(representative, dtype=np.float32).reshape(-1, *in_shape)

        def gen() -> Iterable[list[np.ndarray]]:
            for r in rep:
                yield [r[None]]

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = gen
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    try:
        out = bytes(conv.convert())
    except Exception as e:  # converter errors are many types; report one line
        raise ModelFormatError(f"TFLite conversion failed: {str(e).strip().splitlines()[0]}") from None
    return relu6_as_relu(out) if int8 else out


_RELU, _RELU6 = 19, 21  # TFLite BuiltinOperator codes
_INT8 = 9  # TFLite TensorType


def _f32_round_div(a: float, b: float) -> int:
    """TfLiteRound(float(a) / float(b)): float32 quotient, rounded half away from zero."""
    q = float(np.float32(a) / np.float32(b))
    return int(np.sign(q) * np.floor(abs(q) + 0.5))


def relu6_as_relu(tflite: bytes) -> bytes:
    """Write the converter's standalone int8 RELU6 operators as RELU when that is the same function.

    The converter gives a standalone RELU6 (a Keras ReLU(6) no producer can fuse) its own output
    quantization, whose range is at most [0, 6]. TFLite requantizes to it and clamps at q(6) = zp_out +
    round(6 / s_out), which lies at or above 127, so the clamp at 6 is the int8 range's own: TFLite's
    RELU6 is then exactly RELU (requantize, clamp at zp_out). TFLM's RELU6 kernel instead clamps the
    input codes and ignores the output quantization (a different, wrong result when the two differ),
    while its RELU computes the TFLite function; the int8 C core follows TFLM and refuses such a RELU6.
    Rewriting the operator code (two scalars in place, same file size) gives the function TFLite means
    on TFLM, the C core and the MicroPython twin alike. A RELU6 whose clamp at 6 is not vacuous is
    left as it is (the core then runs it only when its output is quantized like its input)."""
    g = read_graph(tflite)
    idx = [i for i, f in enumerate(g.opcode_fields) if f[0] == _RELU6]
    if not idx or g.n_subgraphs != 1:
        return tflite
    for op in g.operators:
        if op.code != _RELU6:
            continue
        t = g.tensors[op.outputs[0]]
        if t.type != _INT8 or len(t.scales) != 1:
            return tflite
        if (t.zero_points[0] if t.zero_points else 0) + _f32_round_div(6.0, float(t.scales[0])) < 127:
            return tflite
    buf = bytearray(tflite)
    for i in idx:
        for pos, fmt in zip(g.opcode_fields[i][1:], ("<b", "<i")):  # deprecated_builtin_code, builtin_code
            if pos is not None:
                struct.pack_into(fmt, buf, pos, _RELU)
    return bytes(buf)


def quantize_input(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float input -> int8 code by the device's one rule (firmware/core/snapuq_input.h, as the TFLite
    QUANTIZE kernel): float32 division, round half away from zero, add the zero point, saturate (+-inf
    too); a NaN quotient gives the zero point."""
    with np.errstate(invalid="ignore", over="ignore"):
        v = (np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.float64)
    r = np.sign(v) * np.floor(np.abs(v) + 0.5) + int(zero_point)
    return np.clip(np.where(np.isnan(v), float(zero_point), r), -128, 127).astype(np.int8)


def quantize_raw(raw: np.ndarray, inp: dict) -> np.ndarray:
    """What the generated `snapuq_model_quantize_input` computes, per element i of a float32 input:
    x = float32(raw * scale[c] + offset[c]) in double with the manifest's input.normalization (c = i %
    channels), as `apply_normalization` prepares the data, then the TFLite quantization of
    `quantize_input`; NaN -> the zero point. raw (N, ...) -> int8 (N, input bytes)."""
    return quantize_input(normalize_raw(raw, inp), float(inp["scale"]), int(inp["zero_point"]))


def normalize_raw(raw: np.ndarray, inp: dict) -> np.ndarray:
    """The device's map of raw readings to the model's float input, (N, input elements) float32:
    float32(float32(raw) * scale[c] + offset[c]) in double, c = element index % channels, with the
    manifest's input.normalization (the generated quantizer, the blob's record: docs/BLOB.md)."""

    sc, of = input_normalization(inp)
    r = np.asarray(raw, np.float32).reshape(len(raw), -1)
    c = np.arange(r.shape[1]) % len(sc)
    with np.errstate(over="ignore", invalid="ignore"):
        return (r.astype(np.float64) * np.asarray(sc)[c] + np.asarray(of)[c]).astype(np.float32)
