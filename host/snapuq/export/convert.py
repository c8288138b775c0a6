"""Keras -> TFLite conversion with a fixed batch of 1 (full-integer int8 or float32)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import numpy as np

from snapuq.errors import ModelFormatError

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
        return bytes(conv.convert())
    except Exception as e:  # converter errors are many types; report one line
        raise ModelFormatError(f"TFLite conversion failed: {str(e).strip().splitlines()[0]}") from None


def quantize_input(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float input -> int8 code exactly as the TFLite QUANTIZE kernel does (float32 division,
    round half away from zero, clamp)."""
    v = (np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.float64)
    r = np.sign(v) * np.floor(np.abs(v) + 0.5) + int(zero_point)
    return np.clip(r, -128, 127).astype(np.int8)


Progress = Callable[[Iterable], Iterable]
