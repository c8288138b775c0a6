"""A validating reader for `.tflite` flatbuffers, in Python: the numpy oracle's loader (the product
loads models with the C core's reader, firmware/core).

Every offset, length, type code and index is checked against the file before it is used, so a
corrupted, truncated or hostile file gives a `TFLiteFormatError` naming the table, operator or
byte offset instead of a crash. Field slots and enums follow the TFLite schema of the `tflite`
package (`tflite.BuiltinOperator`, `tflite.TensorType`, the `*Options` tables); the tests check
that this reader and the package's own (unchecked) accessors agree on valid models.

    model = read_tflite(open("model_int8.tflite", "rb").read())
    model.tensors[model.outputs[0]].quant.scale
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.TensorType import TensorType

from snapuq.errors import ModelFormatError, UnsupportedOpError

FILE_IDENTIFIER = b"TFL3"
MAX_FILE_BYTES = 1 << 31
MAX_TENSOR_ELEMENTS = 1 << 28
MAX_RANK = 8

OP_NAMES: dict[int, str] = {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
TYPE_NAMES: dict[int, str] = {v: k for k, v in vars(TensorType).items() if not k.startswith("_")}
OPTION_NAMES: dict[int, str] = {v: k for k, v in vars(BuiltinOptions).items() if not k.startswith("_")}

# TensorType -> numpy dtype for the types whose constant data this reader decodes.
NUMPY_DTYPES: dict[int, np.dtype] = {
    TensorType.FLOAT32: np.dtype("<f4"),
    TensorType.FLOAT16: np.dtype("<f2"),
    TensorType.FLOAT64: np.dtype("<f8"),
    TensorType.INT8: np.dtype("i1"),
    TensorType.UINT8: np.dtype("u1"),
    TensorType.INT16: np.dtype("<i2"),
    TensorType.UINT16: np.dtype("<u2"),
    TensorType.INT32: np.dtype("<i4"),
    TensorType.UINT32: np.dtype("<u4"),
    TensorType.INT64: np.dtype("<i8"),
    TensorType.BOOL: np.dtype("?"),
}


class TFLiteFormatError(ModelFormatError):
    """The bytes are not a valid TFLite flatbuffer (message names the offset, table or op)."""


class TFLiteUnsupportedError(TFLiteFormatError, UnsupportedOpError):
    """A valid model that uses something outside the supported int8 subset."""


# ----------------------------------------------------------------------------------------------
# Checked flatbuffer access


class _Buf:
    __slots__ = ("data", "n")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def _need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise TFLiteFormatError(
                f"{what}: {size} bytes at offset {pos:#x} lie outside the file ({self.n} bytes)"
            )

    def unpack(self, fmt: str, pos: int, what: str) -> Any:
        size = struct.calcsize(fmt)
        self._need(pos, size, what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def table(self, pos: int, what: str) -> _Table:
        self._need(pos, 4, what)
        soff = self.unpack("<i", pos, what)
        vt = pos - soff
        self._need(vt, 4, f"{what} (vtable of table at {pos:#x})")
        vt_size = self.unpack("<H", vt, what)
        tbl_size = self.unpack("<H", vt + 2, what)
        if vt_size < 4 or vt_size % 2:
            raise TFLiteFormatError(f"{what}: vtable at {vt:#x} has invalid size {vt_size}")
        self._need(vt, vt_size, f"{what} (vtable at {vt:#x})")
        if tbl_size < 4:
            raise TFLiteFormatError(f"{what}: table at {pos:#x} has invalid size {tbl_size}")
        self._need(pos, tbl_size, f"{what} (table at {pos:#x})")
        return _Table(self, pos, vt, vt_size, tbl_size, what)


class _Table:
    __slots__ = ("buf", "pos", "vt", "vt_size", "tbl_size", "what")

    def __init__(self, buf: _Buf, pos: int, vt: int, vt_size: int, tbl_size: int, what: str) -> None:
        self.buf, self.pos, self.vt, self.vt_size, self.tbl_size, self.what = (
            buf,
            pos,
            vt,
            vt_size,
            tbl_size,
            what,
        )

    def _field(self, slot: int, size: int, name: str) -> int | None:
        voff = 4 + 2 * slot
        if voff + 2 > self.vt_size:
            return None
        fo = self.buf.unpack("<H", self.vt + voff, self.what)
        if fo == 0:
            return None
        if fo + size > self.tbl_size:
            raise TFLiteFormatError(
                f"{self.what}: field {name} at table offset {fo} exceeds the table size {self.tbl_size}"
                f" (table at {self.pos:#x})"
            )
        return self.pos + fo

    def scalar(self, slot: int, fmt: str, default: Any, name: str) -> Any:
        loc = self._field(slot, struct.calcsize(fmt), name)
        if loc is None:
            return default
        return self.buf.unpack(fmt, loc, f"{self.what}.{name}")

    def _target(self, slot: int, name: str) -> int | None:
        loc = self._field(slot, 4, name)
        if loc is None:
            return None
        off = self.buf.unpack("<I", loc, f"{self.what}.{name}")
        if off == 0:
            raise TFLiteFormatError(f"{self.what}.{name}: null offset at {loc:#x}")
        tgt = loc + off
        self.buf._need(tgt, 4, f"{self.what}.{name} (offset {off} from {loc:#x})")
        return tgt

    def table(self, slot: int, name: str) -> _Table | None:
        tgt = self._target(slot, name)
        return None if tgt is None else self.buf.table(tgt, f"{self.what}.{name}")

    def _vector(self, slot: int, elem: int, name: str) -> tuple[int, int] | None:
        tgt = self._target(slot, name)
        if tgt is None:
            return None
        n = self.buf.unpack("<I", tgt, f"{self.what}.{name}")
        self.buf._need(tgt + 4, n * elem, f"{self.what}.{name} (vector of {n} x {elem} bytes at {tgt:#x})")
        return tgt + 4, n

    def array(self, slot: int, dtype: str, name: str) -> np.ndarray | None:
        dt = np.dtype(dtype)
        v = self._vector(slot, dt.itemsize, name)
        if v is None:
            return None
        start, n = v
        return np.frombuffer(self.buf.data, dtype=dt, count=n, offset=start).copy()

    def raw_bytes(self, slot: int, name: str) -> bytes | None:
        v = self._vector(slot, 1, name)
        if v is None:
            return None
        start, n = v
        return bytes(self.buf.data[start : start + n])

    def string(self, slot: int, name: str) -> str | None:
        raw = self.raw_bytes(slot, name)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TFLiteFormatError(f"{self.what}.{name}: string is not UTF-8 ({e.reason})") from None

    def tables(self, slot: int, name: str) -> list[_Table]:
        v = self._vector(slot, 4, name)
        if v is None:
            return []
        start, n = v
        out = []
        for j in range(n):
            loc = start + 4 * j
            off = self.buf.unpack("<I", loc, f"{self.what}.{name}[{j}]")
            if off == 0:
                raise TFLiteFormatError(f"{self.what}.{name}[{j}]: null offset at {loc:#x}")
            out.append(self.buf.table(loc + off, f"{self.what}.{name}[{j}]"))
        return out


# ----------------------------------------------------------------------------------------------
# Model structure


@dataclass
class QuantParams:
    scale: np.ndarray  # float32, length 1 (per tensor) or channels (per axis)
    zero_point: np.ndarray  # int64, same length
    quantized_dimension: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclass
class TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    type: int
    buffer: int
    quant: QuantParams | None
    data: np.ndarray | None = None  # constant data (reshaped), None for activations

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type, str(self.type))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass
class OperatorInfo:
    index: int
    opcode: int
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return OP_NAMES.get(self.opcode, f"BUILTIN_{self.opcode}")

    def describe(self) -> str:
        return f"operator {self.index} ({self.name})"


@dataclass
class SignatureInfo:
    key: str
    inputs: dict[str, int]
    outputs: dict[str, int]
    subgraph: int


@dataclass
class TFLiteModel:
    version: int
    description: str
    tensors: list[TensorInfo]
    operators: list[OperatorInfo]
    inputs: list[int]
    outputs: list[int]
    signatures: list[SignatureInfo]
    n_subgraphs: int
    n_bytes: int

    def output_names(self) -> list[str]:
        """Name of every subgraph output, in output order: the signature name where the model
        has a signature for it (what the Keras dict key becomes), else the tensor name."""
        by_tensor: dict[int, str] = {}
        for sig in self.signatures:
            if sig.subgraph == 0:
                for name, t in sig.outputs.items():
                    by_tensor.setdefault(t, name)
        return [by_tensor.get(t, self.tensors[t].name) for t in self.outputs]

    def input_names(self) -> list[str]:
        by_tensor: dict[int, str] = {}
        for sig in self.signatures:
            if sig.subgraph == 0:
                for name, t in sig.inputs.items():
                    by_tensor.setdefault(t, name)
        return [by_tensor.get(t, self.tensors[t].name) for t in self.inputs]


# Options tables: BuiltinOptions type -> (name, [(slot, fmt, default, key)], vector fields)
_OPTION_FIELDS: dict[int, list[tuple[int, str, Any, str]]] = {
    BuiltinOptions.Conv2DOptions: [
        (0, "<b", 0, "padding"),
        (1, "<i", 0, "stride_w"),
        (2, "<i", 0, "stride_h"),
        (3, "<b", 0, "activation"),
        (4, "<i", 1, "dilation_w"),
        (5, "<i", 1, "dilation_h"),
    ],
    BuiltinOptions.DepthwiseConv2DOptions: [
        (0, "<b", 0, "padding"),
        (1, "<i", 0, "stride_w"),
        (2, "<i", 0, "stride_h"),
        (3, "<i", 0, "depth_multiplier"),
        (4, "<b", 0, "activation"),
        (5, "<i", 1, "dilation_w"),
        (6, "<i", 1, "dilation_h"),
    ],
    BuiltinOptions.FullyConnectedOptions: [
        (0, "<b", 0, "activation"),
        (1, "<b", 0, "weights_format"),
        (2, "<?", False, "keep_num_dims"),
        (3, "<?", False, "asymmetric_quantize_inputs"),
    ],
    BuiltinOptions.Pool2DOptions: [
        (0, "<b", 0, "padding"),
        (1, "<i", 0, "stride_w"),
        (2, "<i", 0, "stride_h"),
        (3, "<i", 0, "filter_w"),
        (4, "<i", 0, "filter_h"),
        (5, "<b", 0, "activation"),
    ],
    BuiltinOptions.ReducerOptions: [(0, "<?", False, "keep_dims")],
    BuiltinOptions.AddOptions: [(0, "<b", 0, "activation"), (1, "<?", True, "pot_scale_int16")],
    BuiltinOptions.SoftmaxOptions: [(0, "<f", 0.0, "beta")],
    BuiltinOptions.ReshapeOptions: [],
    BuiltinOptions.QuantizeOptions: [],
    BuiltinOptions.DequantizeOptions: [],
}
_OPTION_VECTORS: dict[int, list[tuple[int, str, str]]] = {
    BuiltinOptions.ReshapeOptions: [(0, "<i4", "new_shape")],
}


def _read_options(op_tab: _Table, what: str) -> dict[str, Any]:
    otype = op_tab.scalar(3, "<B", 0, "builtin_options_type")
    tab = op_tab.table(4, "builtin_options")
    opts: dict[str, Any] = {"_type": otype}
    if tab is None:
        return opts
    if otype not in _OPTION_FIELDS:
        # an options table this reader does not decode; kept as its type only
        return opts
    tab.what = f"{what}.{OPTION_NAMES.get(otype, otype)}"
    for slot, fmt, default, key in _OPTION_FIELDS[otype]:
        opts[key] = tab.scalar(slot, fmt, default, key)
    for slot, dt, key in _OPTION_VECTORS.get(otype, []):
        arr = tab.array(slot, dt, key)
        opts[key] = None if arr is None else [int(x) for x in arr]
    return opts


def read_tflite(data: bytes | bytearray | memoryview) -> TFLiteModel:
    """Parse and validate a .tflite flatbuffer; raises TFLiteFormatError on anything malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TFLiteFormatError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 8:
        raise TFLiteFormatError(f"file too short for a TFLite flatbuffer ({len(data)} bytes)")
    if len(data) > MAX_FILE_BYTES:
        raise TFLiteFormatError(f"file too large ({len(data)} bytes, limit {MAX_FILE_BYTES})")
    if data[4:8] != FILE_IDENTIFIER:
        raise TFLiteFormatError(
            f"not a TFLite flatbuffer: file identifier {data[4:8]!r} at offset 4, "
            f"expected {FILE_IDENTIFIER!r}"
        )
    buf = _Buf(data)
    root = buf.unpack("<I", 0, "root offset")
    model = buf.table(root, "Model")

    version = model.scalar(0, "<I", 0, "version")
    if version != 3:
        raise TFLiteFormatError(f"Model.version is {version}, expected 3")
    description = model.string(3, "description") or ""

    # operator codes
    codes: list[tuple[int, int]] = []
    for j, oc in enumerate(model.tables(1, "operator_codes")):
        dep = oc.scalar(0, "<b", 0, "deprecated_builtin_code")
        ver = oc.scalar(2, "<i", 1, "version")
        bc = oc.scalar(3, "<i", 0, "builtin_code")
        code = max(int(dep), int(bc))
        if code == BuiltinOperator.CUSTOM:
            name = oc.string(1, "custom_code") or "?"
            raise TFLiteUnsupportedError(f"operator code {j}: custom operator {name!r} is not supported")
        if code not in OP_NAMES:
            raise TFLiteFormatError(f"operator code {j}: unknown builtin code {code}")
        codes.append((code, int(ver)))

    # buffers
    buffers: list[bytes] = []
    for j, bt in enumerate(model.tables(4, "buffers")):
        raw = bt.raw_bytes(0, "data")
        off = bt.scalar(1, "<Q", 0, "offset")
        size = bt.scalar(2, "<Q", 0, "size")
        if off > 1:
            if raw:
                raise TFLiteFormatError(f"buffer {j}: has both inline data and an external offset")
            buf._need(off, size, f"buffer {j} (external data)")
            raw = data[off : off + size]
        buffers.append(raw or b"")

    subgraphs = model.tables(2, "subgraphs")
    if len(subgraphs) == 0:
        raise TFLiteFormatError("Model has no subgraphs")
    sg = subgraphs[0]
    sg.what = "SubGraph 0"

    tensors: list[TensorInfo] = []
    for ti, tt in enumerate(sg.tables(0, "tensors")):
        tt.what = f"tensor {ti}"
        shape_arr = tt.array(0, "<i4", "shape")
        shape = tuple(int(s) for s in shape_arr) if shape_arr is not None else ()
        name = tt.string(3, "name") or f"tensor_{ti}"
        label = f"tensor {ti} ({name!r})"
        if len(shape) > MAX_RANK or any(s < 0 for s in shape):
            raise TFLiteFormatError(f"{label}: invalid shape {list(shape)}")
        n_el = 1
        for s in shape:
            n_el *= s
        if n_el > MAX_TENSOR_ELEMENTS:
            raise TFLiteFormatError(f"{label}: shape {list(shape)} has too many elements")
        ttype = tt.scalar(1, "<b", 0, "type")
        if ttype not in TYPE_NAMES:
            raise TFLiteFormatError(f"{label}: unknown tensor type {ttype}")
        bidx = tt.scalar(2, "<I", 0, "buffer")
        if bidx >= len(buffers):
            raise TFLiteFormatError(f"{label}: buffer {bidx} out of range ({len(buffers)} buffers)")
        quant = None
        qt = tt.table(4, "quantization")
        if qt is not None:
            qt.what = f"{label}.quantization"
            scale = qt.array(2, "<f4", "scale")
            zp = qt.array(3, "<i8", "zero_point")
            qdim = qt.scalar(6, "<i", 0, "quantized_dimension")
            if qt.scalar(4, "<B", 0, "details_type") != 0:
                raise TFLiteUnsupportedError(f"{label}: custom quantization details are not supported")
            if scale is not None and scale.size > 0:
                if zp is None or zp.size != scale.size:
                    raise TFLiteFormatError(
                        f"{label}: {scale.size} scales but {0 if zp is None else zp.size} zero points"
                    )
                if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
                    raise TFLiteFormatError(f"{label}: quantization scales must be finite and > 0")
                if scale.size > 1:
                    if not (0 <= qdim < len(shape)) or shape[qdim] != scale.size:
                        raise TFLiteFormatError(
                            f"{label}: {scale.size} per-axis scales do not match dimension {qdim} of "
                            f"shape {list(shape)}"
                        )
                quant = QuantParams(scale.astype(np.float32), zp.astype(np.int64), int(qdim))
        tdata = None
        raw = buffers[bidx]
        if raw:
            dt = NUMPY_DTYPES.get(ttype)
            if dt is None:
                raise TFLiteUnsupportedError(
                    f"{label}: constant data of type {TYPE_NAMES[ttype]} not supported"
                )
            if len(raw) != n_el * dt.itemsize:
                raise TFLiteFormatError(
                    f"{label}: buffer {bidx} holds {len(raw)} bytes, shape {list(shape)} of "
                    f"{TYPE_NAMES[ttype]} needs {n_el * dt.itemsize}"
                )
            tdata = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        tensors.append(TensorInfo(ti, name, shape, int(ttype), int(bidx), quant, tdata))

    nt = len(tensors)

    def _indices(tab: _Table, slot: int, key: str, what: str, optional: bool) -> tuple[int, ...]:
        arr = tab.array(slot, "<i4", key)
        if arr is None:
            return ()
        for v in arr:
            if not (0 <= v < nt or (optional and v == -1)):
                raise TFLiteFormatError(f"{what}: {key} names tensor {int(v)}, model has {nt} tensors")
        return tuple(int(v) for v in arr)

    inputs = list(_indices(sg, 1, "inputs", "SubGraph 0", False))
    outputs = list(_indices(sg, 2, "outputs", "SubGraph 0", False))
    operators: list[OperatorInfo] = []
    for oi, ot in enumerate(sg.tables(3, "operators")):
        ot.what = f"operator {oi}"
        ci = ot.scalar(0, "<I", 0, "opcode_index")
        if ci >= len(codes):
            raise TFLiteFormatError(f"operator {oi}: opcode index {ci} out of range ({len(codes)} codes)")
        code, ver = codes[ci]
        what = f"operator {oi} ({OP_NAMES[code]})"
        ot.what = what
        ins = _indices(ot, 1, "inputs", what, True)
        outs = _indices(ot, 2, "outputs", what, False)
        opts = _read_options(ot, what)
        operators.append(OperatorInfo(oi, code, ver, ins, outs, opts))

    signatures: list[SignatureInfo] = []
    for si, st in enumerate(model.tables(7, "signature_defs")):
        st.what = f"signature {si}"
        maps: list[dict[str, int]] = []
        for slot, key in ((0, "inputs"), (1, "outputs")):
            m: dict[str, int] = {}
            for tm in st.tables(slot, key):
                tname = tm.string(0, "name") or ""
                tidx = tm.scalar(1, "<I", 0, "tensor_index")
                if tidx >= nt:
                    raise TFLiteFormatError(f"signature {si}: {key} {tname!r} names tensor {tidx} of {nt}")
                m[tname] = int(tidx)
            maps.append(m)
        key = st.string(2, "signature_key") or ""
        sgi = st.scalar(4, "<I", 0, "subgraph_index")
        if sgi >= len(subgraphs):
            raise TFLiteFormatError(f"signature {si}: subgraph index {sgi} out of range")
        signatures.append(SignatureInfo(key, maps[0], maps[1], int(sgi)))

    return TFLiteModel(
        int(version), description, tensors, operators, inputs, outputs, signatures, len(subgraphs), len(data)
    )


def activation_name(code: int) -> str:
    names = {v: k for k, v in vars(ActivationFunctionType).items() if not k.startswith("_")}
    return names.get(code, str(code))
