"""Tiny Keras models converted to int8 TFLite for the export tests (built once per process)."""

from __future__ import annotations

import functools

import numpy as np


def _keras():
    import keras

    return keras


def _cnn(seed: int, variant: str):
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(seed)
    if variant == "a":
        inp = keras.Input((12, 12, 3))
        x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
        x = L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6")(x)
        x = L.MaxPooling2D(2)(x)
        y = L.AveragePooling2D(2, padding="same")(x)
        g = L.GlobalAveragePooling2D()(x)
        logits = L.Dense(5)(L.Flatten()(y))
        out = {"logits": logits, "probs": L.Softmax()(logits), "tap0_a": g, "tap0_mu": L.Dense(8)(g)}
    elif variant == "b":
        inp = keras.Input((9, 11, 1))
        x = L.Conv2D(6, (3, 2), strides=(2, 1), padding="valid", activation="relu6")(inp)
        x = L.DepthwiseConv2D(2, depth_multiplier=2, padding="same")(x)
        x = L.Conv2D(5, 1, dilation_rate=1, padding="same")(x)
        x = L.MaxPooling2D((2, 3), strides=(1, 2), padding="same")(x)
        x = L.AveragePooling2D(2, strides=1, padding="valid")(x)
        logits = L.Dense(3, activation="relu")(L.Flatten()(x))
        out = {"logits": logits, "probs": L.Softmax()(logits)}
    else:
        raise ValueError(variant)
    return keras.Model(inp, out)


def _resnet8(seed: int):
    """A reduced MLPerf Tiny ResNet-8 shape: stem, three residual stages with ADD, GAP, dense."""
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(seed)
    inp = keras.Input((16, 16, 3))
    x = L.Conv2D(8, 3, padding="same")(inp)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    for filters, stride in ((8, 1), (12, 2), (16, 2)):
        y = L.Conv2D(filters, 3, strides=stride, padding="same")(x)
        y = L.BatchNormalization()(y)
        y = L.Activation("relu")(y)
        y = L.Conv2D(filters, 3, padding="same")(y)
        y = L.BatchNormalization()(y)
        sc = x if stride == 1 and filters == x.shape[-1] else L.Conv2D(filters, 1, strides=stride)(x)
        x = L.Activation("relu")(L.Add()([y, sc]))
    g = L.GlobalAveragePooling2D()(x)
    logits = L.Dense(10)(g)
    return keras.Model(inp, {"logits": logits, "probs": L.Softmax()(logits), "feat": g})


@functools.cache
def int8_model(name: str) -> bytes:
    from snapuq.export.convert import convert_keras

    rng = np.random.default_rng(7)
    if name == "resnet8":
        m = _resnet8(3)
    else:
        m = _cnn({"a": 1, "b": 2}[name], name)
    shape = tuple(int(d) for d in m.inputs[0].shape[1:])
    rep = rng.normal(size=(32, *shape)).astype(np.float32)
    return convert_keras(m, rep, int8=True)


def random_inputs(tflite: bytes, n: int, seed: int = 0) -> list[np.ndarray]:
    from oracles.tflite_reader import read_tflite

    m = read_tflite(tflite)
    shape = m.tensors[m.inputs[0]].shape
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=shape).astype(np.int8) for _ in range(n)]
