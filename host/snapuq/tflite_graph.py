"""The one reader of a .tflite file's graph in Python: subgraph 0's tensors, operators and their edges.

Every Python consumer reads a model's structure here: the capacity checks of `attach` / `train --model`
(snapuq.export.capacity), the converter's RELU6 rewrite (snapuq.export.convert), `snapuq bench` (graph split,
per-operator kernels) and the firmware's CAPS=fit / OPS=fit tool (firmware/tools/caps.py). The bytes are
read with the `tflite` schema package (generated from TFLite's own schema); validating a file against
the C core's limits stays the C core's loader's job (snapuq.native.ccore.CoreModel).

Operator codes are read as the C core and TFLM read them: max(builtin_code, deprecated_builtin_code)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from snapuq.errors import ModelFormatError

# the C core's operator names (firmware/core/snapuq_ops.h) are TFLite's BuiltinOperator names


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    type: int  # TFLite TensorType code (9 = INT8)
    buffer_bytes: int  # bytes of constant data (0 for an activation)
    scales: tuple[float, ...]  # quantization scales (one per tensor or per channel; empty if none)
    zero_points: tuple[int, ...]


@dataclass(frozen=True)
class Operator:
    index: int
    code: int  # builtin operator code
    name: str  # BuiltinOperator name, e.g. "CONV_2D" ("BUILTIN_<code>" for a code the schema lacks)
    inputs: tuple[int, ...]  # tensor indices (-1: an omitted optional input)
    outputs: tuple[int, ...]
    options: dict[str, int] = field(default_factory=dict)  # conv geometry for CONV_2D / DEPTHWISE_CONV_2D


@dataclass(frozen=True)
class Graph:
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    # per entry of the model's operator_codes table: (its builtin code, the byte positions of its
    # deprecated_builtin_code (int8) and builtin_code (int32) fields, None where absent)
    opcode_fields: list[tuple[int, int | None, int | None]]
    n_subgraphs: int = 1

    def counts(self) -> dict[str, int]:
        """What the core's loader compares with its capacities (SNAPUQ_MAX_TENSORS / _OPS / _IO)."""
        return {"tensors": len(self.tensors), "operators": len(self.operators), "inputs": len(self.inputs),
                "outputs": len(self.outputs)}

    def op_names(self) -> list[str]:
        return [op.name for op in self.operators]

    def producers(self) -> dict[int, int]:
        """tensor index -> the operator writing it."""
        return {t: op.index for op in self.operators for t in op.outputs}


def _builtin_names() -> dict[int, str]:
    import tflite as tfl

    ops = vars(tfl.BuiltinOperator).items()
    return {v: k for k, v in ops if not k.startswith("_") and isinstance(v, int)}


def _ints(vec, n: int) -> tuple[int, ...]:
    """A schema vector of n ints (the package gives 0, not an array, for an absent one)."""
    return tuple(int(v) for v in vec) if n else ()


def _conv_options(tfl, op, name: str) -> dict[str, int]:
    if name not in ("CONV_2D", "DEPTHWISE_CONV_2D") or op.BuiltinOptions() is None:
        return {}
    o = tfl.Conv2DOptions() if name == "CONV_2D" else tfl.DepthwiseConv2DOptions()
    o.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    return {"padding": int(o.Padding()), "stride_w": int(o.StrideW()), "stride_h": int(o.StrideH()),
            "dilation_w": int(o.DilationWFactor()), "dilation_h": int(o.DilationHFactor())}


def read_graph(tflite: bytes) -> Graph:
    """Subgraph 0 of a .tflite file. A file the schema cannot walk is a ModelFormatError naming why."""
    import tflite as tfl

    try:
        return _read(tfl, bytes(tflite))
    except (struct.error, IndexError, ValueError, TypeError, AttributeError) as e:
        raise ModelFormatError(f"not a readable .tflite flatbuffer ({type(e).__name__}: {e})") from None


def _read(tfl, buf: bytes) -> Graph:
    if len(buf) < 8:
        raise ValueError(f"{len(buf)} bytes")
    m = tfl.Model.GetRootAsModel(buf, 0)
    if m.SubgraphsLength() < 1:
        raise ValueError("no subgraph")
    names = _builtin_names()
    fields = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        pos = [(oc._tab.Pos + o) if (o := oc._tab.Offset(vt)) else None for vt in (4, 10)]
        fields.append((code, pos[0], pos[1]))
    sg = m.Subgraphs(0)
    tensors = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        q = t.Quantization()
        nbytes = int(m.Buffers(t.Buffer()).DataLength()) if t.Buffer() < m.BuffersLength() else 0
        scales = tuple(float(s) for s in q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else ()
        zps = _ints(q.ZeroPointAsNumpy(), q.ZeroPointLength()) if q is not None else ()
        shape = _ints(t.ShapeAsNumpy(), t.ShapeLength())
        name = (t.Name() or b"").decode(errors="replace")
        tensors.append(Tensor(name, shape, int(t.Type()), nbytes, scales, zps))
    ops = []
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        idx = int(op.OpcodeIndex())
        if idx >= len(fields):
            raise ValueError(f"operator {k} names operator code {idx} of {len(fields)}")
        code = fields[idx][0]
        name = names.get(code, f"BUILTIN_{code}")
        ops.append(Operator(k, code, name, _ints(op.InputsAsNumpy(), op.InputsLength()),
                            _ints(op.OutputsAsNumpy(), op.OutputsLength()), _conv_options(tfl, op, name)))
    return Graph(tensors, ops, list(_ints(sg.InputsAsNumpy(), sg.InputsLength())),
                 list(_ints(sg.OutputsAsNumpy(), sg.OutputsLength())), fields, int(m.SubgraphsLength()))
