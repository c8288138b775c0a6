"""The validating .tflite reader: agrees with the `tflite` package on valid models; corrupted,
truncated, wrong-magic and randomly mutated files raise only TFLiteFormatError."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from export_models import int8_model
from oracles.int8_reference import Int8Model
from oracles.tflite_reader import TFLiteFormatError, TFLiteUnsupportedError, read_tflite

from snapuq.errors import ModelFormatError


def test_reader_agrees_with_schema_package():
    b = int8_model("a")
    m = read_tflite(b)
    ref = tflite.Model.GetRootAsModel(b, 0)
    sg = ref.Subgraphs(0)
    assert len(m.tensors) == sg.TensorsLength()
    for i, t in enumerate(m.tensors):
        rt = sg.Tensors(i)
        assert list(t.shape) == list(rt.ShapeAsNumpy() if rt.ShapeLength() else [])
        assert t.type == rt.Type() and t.buffer == rt.Buffer() and t.name == rt.Name().decode()
        q = rt.Quantization()
        if t.quant is not None:
            np.testing.assert_array_equal(t.quant.scale, q.ScaleAsNumpy())
            np.testing.assert_array_equal(t.quant.zero_point, q.ZeroPointAsNumpy())
    assert [op.opcode for op in m.operators] == [
        max(
            ref.OperatorCodes(sg.Operators(j).OpcodeIndex()).BuiltinCode(),
            ref.OperatorCodes(sg.Operators(j).OpcodeIndex()).DeprecatedBuiltinCode(),
        )
        for j in range(sg.OperatorsLength())
    ]
    assert m.outputs == list(sg.OutputsAsNumpy())


def test_error_type_hierarchy():
    assert issubclass(TFLiteFormatError, ModelFormatError)
    assert issubclass(TFLiteUnsupportedError, TFLiteFormatError)


@pytest.mark.parametrize(
    "data, msg",
    [
        (b"", "too short"),
        (b"\x00" * 7, "too short"),
        (b"\x10\x00\x00\x00XXXX" + b"\x00" * 64, "file identifier"),
    ],
)
def test_short_and_wrong_magic(data, msg):
    with pytest.raises(TFLiteFormatError, match=msg):
        read_tflite(data)


def test_wrong_magic_on_real_model():
    b = bytearray(int8_model("a"))
    b[4:8] = b"TFL2"
    with pytest.raises(TFLiteFormatError, match="file identifier"):
        read_tflite(bytes(b))


def test_truncated_files():
    b = int8_model("a")
    for cut in (8, 16, 64, len(b) // 3, len(b) // 2, len(b) - 200):
        with pytest.raises(TFLiteFormatError):
            Int8Model(b[:cut])


def test_bad_root_offset_names_offset():
    b = bytearray(int8_model("a"))
    b[0:4] = (len(b) + 100).to_bytes(4, "little")
    with pytest.raises(TFLiteFormatError, match="offset"):
        read_tflite(bytes(b))


def test_unsupported_op_is_named():
    import keras

    from snapuq.export.convert import convert_keras

    inp = keras.Input((4, 4, 2))
    x = keras.layers.Conv2D(3, 1)(inp)
    y = keras.layers.Concatenate()([x, inp])
    m = keras.Model(inp, {"y": keras.layers.Flatten()(y)})
    b = convert_keras(m, np.random.default_rng(0).normal(size=(8, 4, 4, 2)))
    with pytest.raises(TFLiteUnsupportedError, match="CONCATENATION"):
        Int8Model(b)


def test_random_mutations_raise_only_own_error():
    """Fuzz: flip, overwrite, insert and delete bytes; the reader and the interpreter's
    preparation either accept the file or raise TFLiteFormatError, never anything else."""
    base = int8_model("a")
    rng = np.random.default_rng(1234)
    n_rejected = 0
    for it in range(400):
        b = bytearray(base)
        kind = it % 4
        if kind == 0:  # flip random bits
            for _ in range(int(rng.integers(1, 8))):
                b[int(rng.integers(0, len(b)))] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:  # overwrite a 4-byte word with a random or extreme value
            pos = int(rng.integers(0, len(b) - 4)) & ~3
            val = int(rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, int(rng.integers(0, 1 << 32))]))
            b[pos : pos + 4] = val.to_bytes(4, "little")
        elif kind == 2:  # delete a slice
            pos = int(rng.integers(0, len(b)))
            del b[pos : pos + int(rng.integers(1, 64))]
        else:  # insert junk
            pos = int(rng.integers(0, len(b)))
            b[pos:pos] = rng.integers(0, 256, size=int(rng.integers(1, 32))).astype(np.uint8).tobytes()
        try:
            m = Int8Model(bytes(b))
        except TFLiteFormatError:
            n_rejected += 1
            continue
        x = np.zeros(m.input.shape, dtype=np.int8)
        try:
            m.invoke(x)
        except TFLiteFormatError:
            n_rejected += 1
    assert n_rejected > 50
