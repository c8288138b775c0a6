"""snapuq.attach on models the project did not write: the up-front refusals (one line naming the layer and
the operator), the graph walk that finds the taps, the softmax taken off for the logits, fit on a
tf.data.Dataset, and the one-line CLI errors of `snapuq train --model`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.api import attach, check_model
from snapuq.cli import main
from snapuq.export.capacity import tflite_ops
from snapuq.nn.graph import UnsupportedModelError, default_taps, logits_backbone

sys.path.insert(0, str(Path(__file__).parent))
import byom_models as BM  # noqa: E402


def _one_line(e: BaseException) -> str:
    s = str(e)
    assert "\n" not in s and s
    return s


def _seq(*layers_, shape=(16,)):
    import keras

    return keras.Sequential([keras.Input(shape), *layers_])


def test_lstm_is_refused_naming_layer_and_op():
    import keras
    from keras import layers

    i = keras.Input((32, 3))
    x = layers.LSTM(8, name="rnn")(i)
    m = keras.Model(i, layers.Dense(3)(x))
    with pytest.raises(UnsupportedModelError) as e:
        attach(m)
    s = _one_line(e.value)
    assert "'rnn'" in s and "LSTM" in s and "UNIDIRECTIONAL_SEQUENCE_LSTM" in s


def test_lambda_and_other_unsupported_layers_are_refused():
    import keras
    from keras import layers

    m = _seq(
        layers.Dense(8, activation="relu"), layers.Lambda(lambda t: t * 2, name="times2"), layers.Dense(3)
    )
    with pytest.raises(UnsupportedModelError) as e:
        check_model(m)
    assert "'times2' (Lambda)" in _one_line(e.value)
    for lay, op in [(layers.LeakyReLU(name="lk"), "LEAKY_RELU"),
                    (layers.Dense(8, activation="tanh", name="th"), "TANH"),
                    (layers.LayerNormalization(name="ln"), "RSQRT")]:  # fmt: skip
        m = _seq(layers.Dense(8, activation="relu"), lay, layers.Dense(3))
        with pytest.raises(UnsupportedModelError) as e:
            check_model(m)
        assert f"'{lay.name}'" in _one_line(e.value) and op in str(e.value)
    # a ReLU clipped at another value than 6 needs MINIMUM; a thresholded one GREATER + SELECT
    for lay, op in [(layers.ReLU(max_value=4.0, name="r4"), "MINIMUM"),
                    (layers.ReLU(threshold=0.5, name="rt"), "SELECT")]:  # fmt: skip
        with pytest.raises(UnsupportedModelError) as e:
            check_model(_seq(layers.Dense(8), lay, layers.Dense(3)))
        assert f"'{lay.name}'" in _one_line(e.value) and op in str(e.value)
    # a BatchNorm that cannot fold into a convolution (after a ReLU) would need MUL + ADD
    m = _seq(layers.Dense(8, activation="relu"), layers.BatchNormalization(name="late_bn"), layers.Dense(3))
    with pytest.raises(UnsupportedModelError, match="late_bn.*MUL"):
        check_model(m)
    # free input length, two outputs, sigmoid output
    i = keras.Input((None, 3))
    with pytest.raises(UnsupportedModelError, match="free dimension"):
        check_model(keras.Model(i, layers.Dense(2)(layers.GlobalAveragePooling1D()(i))))
    with pytest.raises(UnsupportedModelError, match="one unit"):
        attach(_seq(layers.Dense(8, activation="relu"), layers.Dense(1)), check_ops=False)


def _preproc_sensor_model(x_raw):
    """A sensor model that takes readings in physical units: an adapted per-channel Normalization, then a
    Rescaling, as a user writes the front of it."""
    import keras
    from keras import layers

    norm = layers.Normalization(axis=-1, name="norm")
    norm.adapt(x_raw)
    i = keras.Input(x_raw.shape[1:], name="accel")
    x = layers.Rescaling(0.5, offset=0.25, name="rescale")(norm(i))
    x = layers.Conv1D(12, 5, padding="same", activation="relu", name="c1")(x)
    x = layers.MaxPooling1D(2, name="p1")(x)
    x = layers.Conv1D(16, 3, padding="same", activation="relu", name="c2")(x)
    x = layers.GlobalAveragePooling1D(name="gap")(x)
    return keras.Model(i, layers.Dense(4, name="logits")(x))


def test_leading_rescaling_and_normalization_move_into_the_data_path(tmp_path, monkeypatch):
    """The int8 core has no MUL / SUB: a model's leading Normalization + Rescaling become Identity and one
    per-channel record (x_model = x_raw * scale + offset), which fit / calibrate / predict / save apply to the
    inputs given as the model takes them; the saved splits are the model's own inputs after the record."""
    import keras
    from keras import layers

    from snapuq.data.accel import make_accel
    from snapuq.data.user import load_npz
    from snapuq.nn.graph import fold_input_preprocessing

    d = make_accel(20, seed=0)
    gain, bias = np.array([9.81, 2.0, 50.0], np.float32), np.array([1.0, -3.0, 100.0], np.float32)
    x_raw = d["x_train"] * gain + bias
    model = _preproc_sensor_model(x_raw)
    stripped, pre = fold_input_preprocessing(model)
    assert pre["layers"] == ["norm", "rescale"] and pre["kind"] == "model"
    mean, sd = x_raw.reshape(-1, 3).mean(0), x_raw.reshape(-1, 3).std(0)
    assert np.allclose(pre["scale"], 0.5 / sd, rtol=1e-3)
    assert np.allclose(pre["offset"], 0.25 - 0.5 * mean / sd, rtol=1e-3, atol=1e-4)
    assert [type(lay).__name__ for lay in stripped.layers[1:3]] == ["Identity", "Identity"]
    snap = attach(model, rank=8)
    assert snap.pre == pre and not {"MUL", "SUB", "ADD"} & set(snap.ops)
    ref = np.asarray(model(x_raw[:16], training=False))
    assert np.allclose(snap.predict(x_raw[:16])["logits"], ref, atol=1e-4 * (1 + np.abs(ref).max()))
    snap.fit(x_raw[20:], epochs=1, progress=False)
    snap.calibrate(x_raw[:20], d["y_train"][:20])
    x_test_raw = d["x_test"] * gain + bias
    out = snap.save(tmp_path / "m", x_test=x_test_raw, y_test=d["y_test"])
    ds = load_npz(out / "data.npz")
    assert ds.meta["normalization"]["kind"] == "model"
    want = x_test_raw * np.asarray(pre["scale"], np.float32) + np.asarray(pre["offset"], np.float32)
    assert np.allclose(ds.x_test, want, atol=1e-5)
    # a save that fails at its last file (config.json, after data.npz and the models are written) leaves
    # the directory as it was
    import snapuq.api as api_mod

    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real_write_json = api_mod.write_json

    def disk_full_at_config(path, *a, **k):
        if Path(path).name == "config.json":
            raise OSError("No space left on device")
        return real_write_json(path, *a, **k)

    monkeypatch.setattr(api_mod, "write_json", disk_full_at_config)
    with pytest.raises(OSError, match="No space"):
        snap.save(out, x_test=x_test_raw[:5], y_test=d["y_test"][:5])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no staging folder left behind
    monkeypatch.undo()
    # a map that is not per channel cannot move out; one further inside stays refused by the layer rules
    norm_t = layers.Normalization(axis=1, name="per_step")
    norm_t.adapt(x_raw)
    i = keras.Input(x_raw.shape[1:])
    bad = keras.Model(i, layers.Dense(4)(layers.GlobalAveragePooling1D()(layers.Conv1D(8, 3)(norm_t(i)))))
    with pytest.raises(UnsupportedModelError, match="'per_step' .*per channel"):
        attach(bad)
    free = keras.Input((None, 3))
    free_m = keras.Model(free, layers.Dense(2)(layers.GlobalAveragePooling1D()(layers.Rescaling(2.0)(free))))
    with pytest.raises(UnsupportedModelError, match="free dimension"):
        attach(free_m)
    late = _seq(layers.Dense(8, activation="relu"), layers.Rescaling(2.0, name="late"), layers.Dense(3))
    assert fold_input_preprocessing(late)[1] is None
    with pytest.raises(UnsupportedModelError, match="'late' .*MUL"):
        check_model(late)


@pytest.mark.parametrize("separate", [False, True])
def test_binary_sigmoid_output_becomes_two_class_logits(separate):
    """A binary classifier's Dense(1) + sigmoid is the two-class softmax of logits (-z/2, z/2): class 1 is the
    sigmoid's positive class, with the same probability; the int8 graph has no LOGISTIC at the end."""
    import keras
    from keras import layers

    from snapuq.data.accel import make_accel

    d = make_accel(10, seed=0)
    x, y = d["x_train"], (d["y_train"] >= 2).astype(np.int64)
    model = BM.binary_sensor_cnn(separate=separate)
    BM.fit_binary_model(model, x, y, epochs=2)
    snap = attach(model, rank=8)
    assert snap.n_classes == 2 and "LOGISTIC" not in snap.ops
    p = snap.predict(x[:32])["probs"]
    ref = np.asarray(model(x[:32], training=False), np.float64)[:, 0]
    assert np.allclose(p[:, 1], ref, atol=1e-5) and np.allclose(p.sum(1), 1.0, atol=1e-6)
    # the user's model is untouched (the logits layer is a new one with copied weights)
    assert type(model.layers[-1]).__name__ == ("Activation" if separate else "Dense")
    # a sigmoid over several units is multi-label; a sigmoid after other layers is not a binary output
    i = keras.Input((16,))
    h = layers.Dense(8, activation="relu")(i)
    with pytest.raises(UnsupportedModelError, match="multi-label"):
        attach(keras.Model(i, layers.Dense(3, activation="sigmoid", name="ml")(h)), check_ops=False)
    with pytest.raises(UnsupportedModelError, match="'act' .*'sigmoid'"):
        attach(keras.Model(i, layers.Activation("sigmoid", name="act")(layers.Dense(3)(h))), check_ops=False)


def test_model_without_a_usable_tap_says_so():
    from keras import layers

    with pytest.raises(UnsupportedModelError, match="no usable tap"):
        attach(_seq(layers.Dense(4)), check_ops=False)


def test_taps_found_by_walking_the_graph():
    m = BM.sensor_cnn()
    bb, feat = logits_backbone(m)
    assert feat == "gap" and bb.output.shape[-1] == 4
    assert default_taps(bb, feat) == (["c2b", "c3"], {"c2b": "c2", "c3": "cat_relu6"})
    r = BM.residual_image()
    bb, feat = logits_backbone(r)
    taps, prev = default_taps(bb, feat)
    assert taps == ["b_relu1", "head_conv"] and prev == {"b_relu1": "stem_relu", "head_conv": "b_out"}
    p = BM.mlp()
    bb, feat = logits_backbone(p)
    taps, prev = default_taps(bb, feat)
    assert len(taps) == 1 and prev[taps[0]].startswith("dense")  # Dense(48, relu) -> ReLU(Dense(32))
    assert feat == taps[0]


def test_softmax_is_taken_off_for_the_logits():
    m = BM.sensor_cnn()
    x = np.random.default_rng(0).normal(size=(5, 64, 3)).astype(np.float32)
    bb, _ = logits_backbone(m)
    z = np.asarray(bb(x))
    p = np.asarray(m(x))
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(1, keepdims=True), p, atol=1e-5)


def test_attach_fit_on_tf_dataset_and_explicit_taps():
    import tensorflow as tf

    m = BM.mlp(n_in=16, n_classes=3)
    x = np.random.default_rng(0).normal(size=(96, 16)).astype(np.float32)
    y = np.arange(96) % 3
    snap = attach(m, taps=[m.layers[2].name], rank=4, check_ops=False)
    snap.fit(
        tf.data.Dataset.from_tensor_slices(x), epochs=1, batch_size=32, progress=False
    )  # x only, unbatched
    assert snap.history["epochs"] == 1 and snap.history["qat_epochs"] == 0
    assert snap._data["x_train"].shape == (96, 16)
    cal = snap.calibrate(x[:40], y[:40])
    assert len(cal["taps"]) == 1
    o = snap.predict(x[:3])
    assert o["tap0_mu"].shape == (3, 32) and o["logits"].shape == (3, 3)
    with pytest.raises(Exception, match="not a layer"):
        attach(m, taps=["nope"], check_ops=False)


def test_converted_ops_are_checked_against_the_core():
    """The conversion check lists the converter's operators, all of them in the core's set."""
    from snapuq.export.capacity import check_converted_ops
    from snapuq.nn.graph import CORE_OPS

    m = BM.sensor_cnn()
    bb, _ = logits_backbone(m)
    ops = check_converted_ops(bb)
    assert set(ops) <= CORE_OPS and "CONV_2D" in ops


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--model", "nope.keras", "--data", "x.npz"], "no such model file"),
        (["--model", "{m}"], "needs --data"),
        (["--model", "{m}", "--data", "{d}/missing.npz"], "no such"),
        (["--model", "{lstm}", "--data", "{d}/missing.npz"], "LSTM"),
        (["--model", "{m}", "--data", "{d}/bad.npz"], "missing y_test"),
        (["--model", "{m}", "--data", "{d}/x.npz", "--dataset", "digits"], "not both"),
    ],
)
def test_train_model_cli_errors_are_one_line(argv, msg, tmp_path, capsys):
    import keras
    from keras import layers

    m = _seq(layers.Dense(8, activation="relu"), layers.Dense(3))
    m.save(tmp_path / "m.keras")
    i = keras.Input((8, 2))
    keras.Model(i, layers.Dense(3)(layers.LSTM(4, name="rnn")(i))).save(tmp_path / "lstm.keras")
    np.savez(tmp_path / "bad.npz", x_train=np.zeros((4, 16)), y_train=np.zeros(4), x_test=np.zeros((2, 16)))
    np.savez(tmp_path / "x.npz", x_train=np.zeros((4, 16)))
    fmt = {"m": tmp_path / "m.keras", "lstm": tmp_path / "lstm.keras", "d": tmp_path}
    argv = [a.format(**fmt) for a in argv]
    rc = main(["train", *argv, "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and msg in err[0], err


@pytest.mark.parametrize("rank", [1, 2])
def test_concatenate_runs_in_the_core_bit_exact_with_tflm(rank):
    """CONCATENATION (ops/op_concat.c) on 1-D and 2-D feature maps: the host C core equals TFLM."""
    import keras
    from keras import layers

    from snapuq.export.capacity import _convert
    from snapuq.export.convert import quantize_input
    from snapuq.export.tflm import TFLMInterpreter
    from snapuq.native.ccore import CoreModel

    keras.utils.set_random_seed(0)
    shape = (8, 8, 3) if rank == 2 else (32, 3)
    conv = layers.Conv2D if rank == 2 else layers.Conv1D
    gap = layers.GlobalAveragePooling2D if rank == 2 else layers.GlobalAveragePooling1D
    i = keras.Input(shape)
    a = conv(6, 3, padding="same", activation="relu")(i)
    b = conv(4, 3, padding="same", activation="relu")(a)
    c = layers.Concatenate(name="cat")([a, b])
    d = conv(5, 3, padding="same", activation="relu")(c)
    m = keras.Model(i, {"o": layers.Dense(3)(gap()(d)), "c": gap()(c)})
    check_model(keras.Model(i, m.outputs[0]))
    tfl = _convert(m, n=16)
    cm = CoreModel(tfl)
    assert "CONCATENATION" in cm.op_names()
    ip, inp, om = TFLMInterpreter(tfl), cm.inputs[0], cm.output_map()
    diff = 0
    for s in range(10):
        x = np.random.default_rng(s).normal(size=(1, *shape)).astype(np.float32)
        xq = quantize_input(x, inp.scale, inp.zero_point)
        r, t = cm.invoke(xq), ip.invoke(xq)
        diff += sum(int(np.count_nonzero(v.reshape(-1) != t[om[n]["index"]].reshape(-1)))
                    for n, v in r.items())  # fmt: skip
    assert diff == 0


def test_standalone_relu_and_relu6_run_in_the_core_bit_exact_with_tflm(monkeypatch):
    """A ReLU / ReLU(6) that no producer can fuse (after a Concatenate, on the input) is accepted and becomes
    a standalone RELU / RELU6 operator. The converter quantizes a standalone RELU6's output on its own range
    (at most [0, 6]); TFLM's RELU6 ignores that quantization (it clamps the input codes), so export writes
    the operator as RELU (export.convert.relu6_as_relu): on all 256 input codes TFLite on the converter's
    file == TFLM on the exported one == the host C core, while TFLM on the converter's file differs. The
    core refuses the converter's RELU6 with one line."""
    import keras
    import tensorflow as tf
    from keras import layers

    import snapuq.export.convert as cv
    from snapuq.errors import ModelFormatError
    from snapuq.export.capacity import _convert, check_converted_ops
    from snapuq.export.convert import quantize_input
    from snapuq.export.tflm import TFLMInterpreter
    from snapuq.native.ccore import CoreModel

    keras.utils.set_random_seed(1)
    # one RELU6 over every int8 code
    i = keras.Input((256,))
    one = keras.Model(i, layers.ReLU(6.0)(i))
    rep = np.random.default_rng(0).normal(size=(16, 256)).astype(np.float32) * 3  # range about +-9
    exported = cv.convert_keras(one, rep)
    with monkeypatch.context() as mp:
        mp.setattr(cv, "relu6_as_relu", lambda b: b)
        converted = cv.convert_keras(one, rep)
    assert cv.relu6_as_relu(converted) == exported != converted and len(exported) == len(converted)
    assert "RELU6" in [o for o, _ in tflite_ops(converted)] and "RELU" in [o for o, _ in tflite_ops(exported)]
    x = np.arange(-128, 128).astype(np.int8).reshape(1, 256)
    lite = tf.lite.Interpreter(model_content=converted)
    lite.allocate_tensors()
    lite.set_tensor(lite.get_input_details()[0]["index"], x)
    lite.invoke()
    ref = lite.get_tensor(lite.get_output_details()[0]["index"]).reshape(-1)
    assert len(np.unique(ref)) > 60   # requantized codes between the two clamps
    tflm = TFLMInterpreter(exported).invoke(x)[0].reshape(-1)
    core = next(iter(CoreModel(exported).invoke(x).values())).reshape(-1)
    assert np.array_equal(ref, tflm) and np.array_equal(ref, core)
    assert np.count_nonzero(TFLMInterpreter(converted).invoke(x)[0].reshape(-1) != ref) > 200
    with pytest.raises(ModelFormatError) as e:
        CoreModel(converted)
    assert "RELU6 with output quantized unlike its input" in _one_line(e.value)

    # in a model: ReLU(6) on the input, ReLU and an Activation('relu6') after Concatenates
    i = keras.Input((16, 3))
    r6 = layers.ReLU(6.0, name="in_relu6")(i)
    a = layers.Conv1D(4, 3, padding="same", activation="relu")(r6)
    c = layers.ReLU(name="cat_relu")(layers.Concatenate(name="cat")([a, r6]))
    d = layers.Activation("relu6", name="cat_relu6")(layers.Concatenate()([layers.Conv1D(3, 1)(c), c]))
    m = keras.Model(i, layers.Dense(3)(layers.GlobalAveragePooling1D()(d)))
    check_model(m)
    assert {"RELU", "CONCATENATION"} <= set(check_converted_ops(m))
    tfl = _convert(m, n=16)
    assert [o for o, _ in tflite_ops(tfl)].count("RELU") == 3
    cm, ip = CoreModel(tfl), TFLMInterpreter(tfl)
    inp, om = cm.inputs[0], cm.output_map()
    diff = 0
    for s in range(8):
        x = np.random.default_rng(s).normal(size=(1, 16, 3)).astype(np.float32) * 3
        xq = quantize_input(x, inp.scale, inp.zero_point)
        r, t = cm.invoke(xq), ip.invoke(xq)
        diff += sum(int(np.count_nonzero(v.reshape(-1) != t[om[n]["index"]].reshape(-1)))
                    for n, v in r.items())  # fmt: skip
    assert diff == 0
