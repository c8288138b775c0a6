"""C runtime (firmware/core) vs the tflite-micro interpreter: element-for-element equality on
multi-op models and on random single-op models, both kernel sets, under ASan/UBSan."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402
import tensorflow as tf  # noqa: E402
import tflite_micro  # noqa: E402,F401  (the oracle: missing is an error, never a skip)

keras = tf.keras
layers = keras.layers

KERNELS = {"ref": (), "dsp": ("SNAPUQ_KERNELS_DSP=1",)}


@pytest.fixture(scope="module", params=sorted(KERNELS))
def runner(request: pytest.FixtureRequest) -> Path:
    return ccore.build_binary(f"run_model_{request.param}", ["run_model.c"], KERNELS[request.param])


def _mixed_model() -> bytes:
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    inp = keras.Input((12, 12, 3), batch_size=1)
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    y = layers.Conv2D(8, 1)(x)
    x = layers.Add()([x, y])
    x2 = layers.AveragePooling2D(2, padding="same")(x)
    g = layers.GlobalAveragePooling2D()(x2)
    z = layers.Dense(10)(layers.Flatten()(x))
    p = layers.Softmax()(z)
    m = keras.Model(inp, [z, p, g])
    return ccore.convert_int8(m, rng.normal(size=(64, 12, 12, 3)).astype(np.float32))


def test_mixed_model_bit_exact_300_inputs(runner: Path) -> None:
    tfl = ccore.cached_model("mixed_v1", _mixed_model)
    rng = np.random.default_rng(1)
    xs = [rng.integers(-128, 128, size=(1, 12, 12, 3), dtype=np.int8) for _ in range(300)]
    info, ours = ccore.run_model_c(runner, tfl, xs)
    ref = ccore.run_model_tflm(tfl, xs)
    assert info["ops"] == ["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "CONV_2D", "ADD", "AVERAGE_POOL_2D",
                           "MEAN", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    assert ccore.compare_outputs(ours, ref) == [0, 0, 0]
    # outputs are not constant (the comparison is not vacuous)
    assert len({o[0].tobytes() for o in ours}) > 100


def _per_tensor_model(per_tensor: str) -> bytes:
    """Conv, depthwise and two dense layers (50 output channels in all), int8 with per-channel
    weights (""), per-tensor dense weights ("dense") or per-tensor weights everywhere ("all")."""
    keras.utils.set_random_seed(3)
    inp = keras.Input((6, 6, 3), batch_size=1)
    x = layers.Conv2D(10, 3, padding="same", activation="relu")(inp)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = layers.Dense(24, activation="relu")(layers.Flatten()(x))
    m = keras.Model(inp, layers.Dense(6)(x))
    rep = np.random.default_rng(3).normal(size=(48, 6, 6, 3)).astype(np.float32)
    return ccore.convert_int8(m, rep, per_tensor=per_tensor)


def test_per_tensor_weights_keep_one_requantization_pair(runner: Path) -> None:
    """A per-tensor CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED stores one (multiplier, shift)
    pair in the arena, not one per output channel: the arena shrinks by (n_out - 1) * 8 B per such
    layer, the activations are planned alike, and every output still equals TFLM's."""
    tfl = {pt: ccore.cached_model(f"per_tensor_v1_{pt or 'none'}", lambda pt=pt: _per_tensor_model(pt))
           for pt in ("", "dense", "all")}
    info = {pt: ccore.run_model_c(runner, b, [])[0] for pt, b in tfl.items()}
    assert info[""]["ops"] == ["CONV_2D", "DEPTHWISE_CONV_2D", "RESHAPE", "FULLY_CONNECTED",
                               "FULLY_CONNECTED"]
    assert {pt: i["persistent"] for pt, i in info.items()} == {
        "": 8 * (10 + 10 + 24 + 6), "dense": 8 * (10 + 10 + 1 + 1), "all": 8 * 4}
    assert len({i["activations"] for i in info.values()}) == 1
    assert info[""]["arena"] - info["dense"]["arena"] == 8 * ((24 - 1) + (6 - 1))
    assert info[""]["arena"] - info["all"]["arena"] == 8 * ((10 - 1) + (10 - 1) + (24 - 1) + (6 - 1))
    rng = np.random.default_rng(4)
    xs = [rng.integers(-128, 128, size=(1, 6, 6, 3), dtype=np.int8) for _ in range(40)]
    for pt in ("dense", "all"):
        _, ours = ccore.run_model_c(runner, tfl[pt], xs)
        assert ccore.compare_outputs(ours, ccore.run_model_tflm(tfl[pt], xs)) == [0], pt
        assert len({o[0].tobytes() for o in ours}) > 20
    assert info["all"]["arena"] <= ccore.tflm_min_arena(tfl["all"], xs[0])


def _single_op(seed: int) -> tuple[str, bytes, tuple[int, ...]]:
    """A random one- or two-op model with random shape and quantization ranges."""
    rng = np.random.default_rng(seed)
    kinds = ["conv", "dwconv", "dense", "dense_pt", "maxpool", "avgpool", "mean", "add", "softmax",
             "logistic"]
    kind = kinds[seed % len(kinds)]
    h = int(rng.integers(3, 10))
    w = int(rng.integers(3, 10))
    c = int(rng.integers(1, 9))
    flat = kind in ("dense", "dense_pt", "softmax", "logistic")
    shape = (int(rng.integers(2, 40)),) if flat else (h, w, c)
    scale = float(np.exp(rng.uniform(-3, 3)))
    shift = float(rng.uniform(-2, 2))
    keras.utils.set_random_seed(seed)
    inp = keras.Input(shape, batch_size=1)
    act = ["relu", None, "relu6"][int(rng.integers(0, 3))]
    if kind == "conv":
        k = int(rng.integers(1, min(h, w, 4) + 1))
        s = int(rng.integers(1, 3))
        pad = ["same", "valid"][int(rng.integers(0, 2))]
        dil = 1 if s > 1 or k == 1 else int(rng.integers(1, 3))
        if pad == "valid" and (k - 1) * dil + 1 > min(h, w):
            dil = 1
        out = layers.Conv2D(int(rng.integers(1, 9)), k, strides=s, padding=pad, dilation_rate=dil,
                            activation=act)(inp)
    elif kind == "dwconv":
        k = int(rng.integers(1, min(h, w, 4) + 1))
        out = layers.DepthwiseConv2D(k, strides=int(rng.integers(1, 3)), padding=["same", "valid"][seed % 2],
                                     depth_multiplier=int(rng.integers(1, 3)), activation=act)(inp)
    elif kind in ("dense", "dense_pt"):
        out = layers.Dense(int(rng.integers(1, 20)), activation=act)(inp)
    elif kind == "maxpool":
        out = layers.MaxPooling2D(int(rng.integers(1, 3)), strides=int(rng.integers(1, 3)),
                                  padding=["same", "valid"][seed % 2])(inp)
    elif kind == "avgpool":
        out = layers.AveragePooling2D(int(rng.integers(1, 3)), strides=int(rng.integers(1, 3)),
                                      padding=["same", "valid"][seed % 2])(inp)
    elif kind == "mean":
        out = layers.GlobalAveragePooling2D(keepdims=bool(seed % 2))(inp)
    elif kind == "add":
        a = layers.Conv2D(c, 1)(inp)
        out = layers.Add()([inp, a])
    elif kind == "logistic":
        out = layers.Dense(int(rng.integers(2, 12)), activation="sigmoid")(inp)
    else:
        out = layers.Softmax()(layers.Dense(int(rng.integers(2, 12)))(inp))
    m = keras.Model(inp, out)
    rep = (rng.normal(size=(48, *shape)) * scale + shift).astype(np.float32)
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep_fn():  # type: ignore[no-untyped-def]
        for i in range(len(rep)):
            yield [rep[i:i + 1]]
    conv.representative_dataset = rep_fn
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    if kind == "dense_pt":
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    return kind, bytes(conv.convert()), (1, *shape)


@pytest.mark.parametrize("seed", range(20))
def test_random_single_op_models(runner: Path, seed: int) -> None:
    holder: dict[str, object] = {}

    def make() -> bytes:
        kind, data, shape = _single_op(seed)
        holder["shape"] = shape
        return data
    tfl = ccore.cached_model(f"single_v2_{seed}", make)
    info, _ = ccore.run_model_c(runner, tfl, [])
    assert info["status"] == "ok", info
    shape = tuple(info["inputs"][0]["shape"])
    rng = np.random.default_rng(100 + seed)
    xs = [rng.integers(-128, 128, size=shape, dtype=np.int8) for _ in range(25)]
    _, ours = ccore.run_model_c(runner, tfl, xs)
    ref = ccore.run_model_tflm(tfl, xs)
    assert ccore.compare_outputs(ours, ref) == [0] * len(ref[0]), info["ops"]


def _squeeze_dequantize_model() -> bytes:
    """conv -> global mean (keepdims) -> tf.squeeze -> float output: SQUEEZE and DEQUANTIZE."""
    keras.utils.set_random_seed(7)
    inp = keras.Input((6, 5, 3), batch_size=1)
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = layers.GlobalAveragePooling2D(keepdims=True)(x)
    out = layers.Lambda(lambda t: tf.squeeze(t, axis=[1, 2]))(x)
    m = keras.Model(inp, out)
    rep = np.random.default_rng(7).normal(size=(48, 6, 5, 3)).astype(np.float32)
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep_fn():  # type: ignore[no-untyped-def]
        for i in range(len(rep)):
            yield [rep[i:i + 1]]
    conv.representative_dataset = rep_fn
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.float32
    return _reshape_to_squeeze(bytes(conv.convert()), [1, 2])


def _reshape_to_squeeze(tfl: bytes, dims: list[int]) -> bytes:
    """The converter lowers tf.squeeze with static shapes to RESHAPE: rewrite that operator as
    the SQUEEZE it was (one input, SqueezeOptions.squeeze_dims) with TFLite's own schema API."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(tfl, 0))
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.SQUEEZE
    code.version = 1
    m.operatorCodes.append(code)
    for op in m.subgraphs[0].operators:
        if m.operatorCodes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.RESHAPE:
            op.opcodeIndex = len(m.operatorCodes) - 1
            op.inputs = op.inputs[:1]
            op.builtinOptionsType = schema.BuiltinOptions.SqueezeOptions
            op.builtinOptions = schema.SqueezeOptionsT()
            op.builtinOptions.squeezeDims = dims
    b = flatbuffers.Builder(len(tfl) + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_squeeze_and_dequantize_bit_exact(runner: Path) -> None:
    tfl = ccore.cached_model("squeeze_dequant_v2", _squeeze_dequantize_model)
    info, _ = ccore.run_model_c(runner, tfl, [])
    assert info["status"] == "ok", info
    assert "SQUEEZE" in info["ops"] and "DEQUANTIZE" in info["ops"], info["ops"]
    assert info["outputs"][0]["type"] == 0  # float32
    rng = np.random.default_rng(8)
    xs = [rng.integers(-128, 128, size=(1, 6, 5, 3), dtype=np.int8) for _ in range(40)]
    _, ours = ccore.run_model_c(runner, tfl, xs)
    ref = ccore.run_model_tflm(tfl, xs)
    assert ours[0][0].dtype == np.float32
    assert ccore.compare_outputs(ours, ref) == [0]


def test_unsupported_op_is_named(runner: Path) -> None:
    def make() -> bytes:
        keras.utils.set_random_seed(3)
        inp = keras.Input((6,), batch_size=1)
        out = layers.Activation("tanh")(layers.Dense(4)(inp))
        rep = np.random.default_rng(0).normal(size=(16, 6)).astype(np.float32)
        return ccore.convert_int8(keras.Model(inp, out), rep)
    tfl = ccore.cached_model("tanh_v1", make)
    info, _ = ccore.run_model_c(runner, tfl, [])
    assert info["status"] == "unsupported operator"
    assert "TANH" in info["message"]


def test_bad_files_give_status(runner: Path, tmp_path: Path) -> None:
    tfl = ccore.cached_model("mixed_v1", _mixed_model)
    cases = {"truncated": tfl[: len(tfl) // 2], "magic": tfl[:4] + b"XXXX" + tfl[8:], "empty": b"",
             "short": tfl[:12]}
    for name, data in cases.items():
        info, _ = ccore.run_model_c(runner, data, [])
        assert info["status"] != "ok", name
        assert info["message"], name
