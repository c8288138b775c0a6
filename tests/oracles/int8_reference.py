"""Bit-exact numpy int8 reference interpreter for the TFLite op subset the shipped models use.

It implements TFLM's reference integer kernels (default double rounding): per-channel
multipliers from QuantizeMultiplier, MultiplyByQuantizedMultiplier =
RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, M), right), zero-point offsets,
SAME padding with the odd extra at bottom/right, fused activations as clamps, and the gemmlowp
fixed-point exp / reciprocal of the int8 SOFTMAX. All multipliers are computed once when the model
is loaded (TFLM's Prepare); invoke() only does integer arithmetic.

    m = Int8Model(open("model_int8.tflite", "rb").read())
    outs = m.invoke(x_int8)            # {"logits": int8 array, "tap0_a": ..., ...}
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from tflite.ActivationFunctionType import ActivationFunctionType as Act
from tflite.Padding import Padding
from tflite.TensorType import TensorType

from oracles.tflite_reader import (
    OperatorInfo,
    TensorInfo,
    TFLiteFormatError,
    TFLiteModel,
    TFLiteUnsupportedError,
    activation_name,
    read_tflite,
)

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# ----------------------------------------------------------------------------------------------
# Scalar helpers (host side, run once per model, like TFLM's Prepare)


def quantize_multiplier(m: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: m ≈ M · 2^(shift − 31), M in [2^30, 2^31)."""
    if m == 0.0:
        return 0, 0
    q, shift = math.frexp(m)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed > (1 << 31):
        raise TFLiteFormatError(f"multiplier {m!r} cannot be quantized")
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return int(q_fixed), int(shift)


def _round_half_away(x: float) -> int:
    """std::round / TfLiteRound: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _f32(x: float) -> float:
    return float(np.float32(x))


def quantize_value(scale: float, zp: int, value: float) -> int:
    """TFLite kernel_util Quantize(): zp + round(value / scale), division in float32."""
    return int(zp) + _round_half_away(_f32(np.float32(value) / np.float32(scale)))


def activation_range(act: int, scale: float, zp: int) -> tuple[int, int]:
    qmin, qmax = -128, 127
    if act == Act.NONE:
        return qmin, qmax
    if act == Act.RELU:
        return max(qmin, quantize_value(scale, zp, 0.0)), qmax
    if act == Act.RELU6:
        return max(qmin, quantize_value(scale, zp, 0.0)), min(qmax, quantize_value(scale, zp, 6.0))
    if act == Act.RELU_N1_TO_1:
        return max(qmin, quantize_value(scale, zp, -1.0)), min(qmax, quantize_value(scale, zp, 1.0))
    raise TFLiteUnsupportedError(f"fused activation {activation_name(act)} is not supported")


# ----------------------------------------------------------------------------------------------
# Vectorized fixed-point primitives (int64 arrays holding int32 values)


def wrap32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _trunc_div(x: np.ndarray, d: int | np.ndarray) -> np.ndarray:
    """C integer division (truncates toward zero)."""
    q = np.abs(x) // d
    return np.where(x >= 0, q, -q)


def srdhm(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul for int32."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    res = _trunc_div(ab + nudge, 1 << 31)
    return np.where(overflow, INT32_MAX, res)


def rdbpot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT (round half away from zero)."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def mbqm(x: np.ndarray, m: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier (double rounding), int32 in and out."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rdbpot(srdhm(wrap32(np.asarray(x, dtype=np.int64) << left), m), right)


def _sat_shift_left(x: np.ndarray, e: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent."""
    threshold = (1 << (31 - e)) - 1
    r = wrap32(x << e)
    r = np.where(x > threshold, INT32_MAX, r)
    return np.where(x < -threshold, INT32_MIN, r)


def _exp_on_interval(a: np.ndarray) -> np.ndarray:
    """exp on [-1/4, 0) for Q0.31 input (gemmlowp exp_on_interval_between_negative_one_quarter_and_0_excl)."""
    constant_term = 1895147668
    constant_1_over_3 = 715827883
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    t = rdbpot(wrap32(srdhm(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + t)))


def exp_on_negative_values_q5(a: np.ndarray) -> np.ndarray:
    """gemmlowp exp_on_negative_values for a Q5.26 input (≤ 0), Q0.31 output."""
    frac_bits = 26
    one_quarter = 1 << (frac_bits - 2)
    mask = one_quarter - 1
    a = np.asarray(a, dtype=np.int64)
    a_mod_q_minus_q = wrap32((a & mask) - one_quarter)
    result = _exp_on_interval(_sat_shift_left(a_mod_q_minus_q, 5))
    remainder = wrap32(a_mod_q_minus_q - a)
    for exponent, mult in (
        (-2, 1672461947),
        (-1, 1302514674),
        (0, 790015084),
        (1, 290630308),
        (2, 39332535),
        (3, 720401),
        (4, 242),
    ):
        bit = 1 << (frac_bits + exponent)
        result = np.where((remainder & bit) != 0, srdhm(result, mult), result)
    return np.where(a == 0, INT32_MAX, result)


def _one_over_one_plus_x(a: int) -> int:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out), scalar."""
    s = a + INT32_MAX
    half_den = s + (1 if s >= 0 else -1)
    half_den = abs(half_den) // 2 * (1 if half_den >= 0 else -1)
    x = int(wrap32(1515870810 + srdhm(half_den, -1010580540)))
    for _ in range(3):
        hdx = int(srdhm(half_den, x))
        one_minus = int(wrap32((1 << 29) - hdx))
        x = int(wrap32(x + _sat_shift_left(srdhm(x, one_minus), 2)))
    return int(_sat_shift_left(np.int64(x), 1))


def get_reciprocal(x: int, x_integer_digits: int) -> tuple[int, int]:
    headroom_plus_one = 32 - int(x).bit_length() if x > 0 else 32
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    return _one_over_one_plus_x(int(wrap32(shifted))), num_bits_over_unit


def softmax_int8(x: np.ndarray, beta: float, in_scale: float) -> np.ndarray:
    """TFLM int8 → int8 softmax (output scale 1/256, zero point −128) over the last axis."""
    m, left = quantize_multiplier(min(float(beta) * float(in_scale) * (1 << 26), float((1 << 31) - 1)))
    if left < 0:
        raise TFLiteFormatError("softmax input multiplier below one")
    diff_min = -int(math.floor(31.0 * (1 << 26) / (1 << left)))
    flat = x.reshape(-1, x.shape[-1]).astype(np.int64)
    out = np.empty(flat.shape, dtype=np.int8)
    for r in range(flat.shape[0]):
        row = flat[r]
        diff = row - row.max()
        use = diff >= diff_min
        rescaled = srdhm(wrap32(diff << left), m)
        exps = exp_on_negative_values_q5(rescaled)
        total = int(wrap32(np.sum(np.where(use, rdbpot(exps, 12), 0))))
        scale, nbits = get_reciprocal(total, 12)
        exponent = nbits + 31 - 8
        o = rdbpot(srdhm(scale, exps), exponent) - 128
        out[r] = np.where(use, np.clip(o, -128, 127), -128).astype(np.int8)
    return out.reshape(x.shape)


# ----------------------------------------------------------------------------------------------
# Kernels


def _padding(padding: int, in_size: int, filt: int, stride: int, dilation: int) -> tuple[int, int]:
    eff = (filt - 1) * dilation + 1
    if padding == Padding.SAME:
        out = (in_size + stride - 1) // stride
    elif padding == Padding.VALID:
        out = (in_size - eff + stride) // stride
    else:
        raise TFLiteUnsupportedError(f"padding type {padding} is not supported")
    total = max((out - 1) * stride + eff - in_size, 0)
    return out, total // 2


def _patches(
    x: np.ndarray,
    kh: int,
    kw: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    ph: int,
    pw: int,
    oh: int,
    ow: int,
    pad_value: int,
) -> np.ndarray:
    """x: (H, W, C) -> (oh, ow, kh, kw, C), out-of-bounds filled with pad_value."""
    h, w, c = x.shape
    big_h = max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1) + 1
    big_w = max(w + pw, (ow - 1) * sw + (kw - 1) * dw + 1) + 1
    padded = np.full((big_h, big_w, c), pad_value, dtype=np.int64)
    padded[ph : ph + h, pw : pw + w] = x
    iy = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :]
    ix = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :]
    return padded[iy[:, None, :, None], ix[None, :, None, :]]


def _window_mask(size: int, out: int, stride: int, pad: int, filt: int) -> np.ndarray:
    start = np.arange(out) * stride - pad
    pos = start[:, None] + np.arange(filt)[None, :]
    return (pos >= 0) & (pos < size)


@dataclass
class _Prepared:
    op: OperatorInfo
    run: Callable[[list[np.ndarray]], np.ndarray]


def _q(t: TensorInfo, what: str) -> tuple[float, int]:
    if t.quant is None:
        raise TFLiteUnsupportedError(f"{what}: tensor {t.index} ({t.name!r}) is not quantized")
    return float(t.quant.scale[0]), int(t.quant.zero_point[0])


class Int8Model:
    """Bit-exact int8 interpreter for a .tflite model (batch 1)."""

    SUPPORTED = (
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "MAX_POOL_2D",
        "AVERAGE_POOL_2D",
        "MEAN",
        "ADD",
        "RESHAPE",
        "SOFTMAX",
        "QUANTIZE",
        "DEQUANTIZE",
    )

    def __init__(self, tflite_bytes: bytes | TFLiteModel) -> None:
        self.model = tflite_bytes if isinstance(tflite_bytes, TFLiteModel) else read_tflite(tflite_bytes)
        m = self.model
        if m.n_subgraphs != 1:
            raise TFLiteUnsupportedError(f"model has {m.n_subgraphs} subgraphs, only 1 is supported")
        if len(m.inputs) != 1:
            raise TFLiteUnsupportedError(f"model has {len(m.inputs)} inputs, only 1 is supported")
        self.output_names = m.output_names()
        if len(set(self.output_names)) != len(self.output_names):
            raise TFLiteFormatError(f"duplicate output names {self.output_names}")
        self._steps = [self._prepare(op) for op in m.operators]
        produced = {m.inputs[0]} | {t.index for t in m.tensors if t.data is not None}
        for st in self._steps:
            for i in st.op.inputs:
                if i >= 0 and i not in produced:
                    raise TFLiteFormatError(
                        f"{st.op.describe()}: input tensor {i} is used before it is computed"
                    )
            produced.update(st.op.outputs)
        for o in m.outputs:
            if o not in produced:
                raise TFLiteFormatError(f"output tensor {o} is never computed")

    # -- public ---------------------------------------------------------------------------------
    @property
    def input(self) -> TensorInfo:
        return self.model.tensors[self.model.inputs[0]]

    def output_details(self) -> dict[str, dict[str, Any]]:
        out = {}
        for i, (name, t) in enumerate(zip(self.output_names, self.model.outputs)):
            ti = self.model.tensors[t]
            s, z = (float(ti.quant.scale[0]), int(ti.quant.zero_point[0])) if ti.quant else (0.0, 0)
            out[name] = {
                "index": i,
                "tensor": t,
                "scale": s,
                "zero_point": z,
                "shape": list(ti.shape),
                "dtype": ti.type_name.lower(),
            }
        return out

    def invoke(self, x: np.ndarray) -> dict[str, np.ndarray]:
        tensors = self.invoke_all(x)
        return {n: tensors[t] for n, t in zip(self.output_names, self.model.outputs)}

    def invoke_all(self, x: np.ndarray) -> dict[int, np.ndarray]:
        inp = self.input
        want = np.int8 if inp.type == TensorType.INT8 else np.float32
        x = np.asarray(x)
        if x.dtype != want:
            raise TFLiteFormatError(f"input must be {np.dtype(want).name}, got {x.dtype}")
        if x.size != inp.size:
            raise TFLiteFormatError(f"input has {x.size} elements, model wants shape {list(inp.shape)}")
        vals: dict[int, np.ndarray] = {inp.index: x.reshape(inp.shape)}
        for st in self._steps:
            args = [vals[i] if i >= 0 and i in vals else self._const(i) for i in st.op.inputs]
            ot = self.model.tensors[st.op.outputs[0]]
            try:
                vals[ot.index] = st.run(args).reshape(ot.shape)
            except (ValueError, IndexError) as e:  # shapes the preparation could not rule out
                raise TFLiteFormatError(f"{st.op.describe()}: inconsistent tensor shapes ({e})") from None
        return vals

    # -- preparation ----------------------------------------------------------------------------
    def _const(self, i: int) -> np.ndarray | None:
        if i < 0:
            return None
        d = self.model.tensors[i].data
        if d is None:
            raise TFLiteFormatError(f"tensor {i} has no value")
        return d

    def _t(self, op: OperatorInfo, k: int, io: str = "in") -> TensorInfo:
        lst = op.inputs if io == "in" else op.outputs
        if k >= len(lst) or lst[k] < 0:
            raise TFLiteFormatError(f"{op.describe()}: missing {io}put {k}")
        return self.model.tensors[lst[k]]

    def _check_int8(self, op: OperatorInfo, *ts: TensorInfo) -> None:
        for t in ts:
            if t.type != TensorType.INT8:
                raise TFLiteUnsupportedError(
                    f"{op.describe()}: tensor {t.index} ({t.name!r}) is {t.type_name}, only INT8 is supported"
                )
            if t.quant is None:
                raise TFLiteUnsupportedError(
                    f"{op.describe()}: tensor {t.index} ({t.name!r}) is not quantized"
                )

    def _prepare(self, op: OperatorInfo) -> _Prepared:
        name = op.name
        if name not in self.SUPPORTED:
            raise TFLiteUnsupportedError(
                f"{op.describe()}: operator {name} is not supported (supported: {', '.join(self.SUPPORTED)})"
            )
        if not op.outputs:
            raise TFLiteFormatError(f"{op.describe()}: no outputs")
        fn = getattr(self, "_prep_" + name.lower())
        return _Prepared(op, fn(op))

    def _conv_common(self, op: OperatorInfo, depthwise: bool):
        x, w, o = self._t(op, 0), self._t(op, 1), self._t(op, 0, "out")
        self._check_int8(op, x, w, o)
        if w.data is None:
            raise TFLiteUnsupportedError(f"{op.describe()}: filter must be a constant")
        bias = None
        if len(op.inputs) > 2 and op.inputs[2] >= 0:
            b = self._t(op, 2)
            if b.type != TensorType.INT32 or b.data is None:
                raise TFLiteUnsupportedError(f"{op.describe()}: bias must be a constant INT32 tensor")
            bias = b.data.astype(np.int64).reshape(-1)
        if len(x.shape) != 4 or len(w.shape) != 4 or len(o.shape) != 4 or x.shape[0] != 1:
            raise TFLiteUnsupportedError(f"{op.describe()}: expects NHWC batch-1 tensors")
        s_in, z_in = _q(x, op.describe())
        s_out, z_out = _q(o, op.describe())
        cout = o.shape[3]
        if (w.shape[3] if depthwise else w.shape[0]) != cout:
            raise TFLiteFormatError(
                f"{op.describe()}: filter shape {list(w.shape)} vs output {list(o.shape)}"
            )
        if bias is not None and bias.size != cout:
            raise TFLiteFormatError(f"{op.describe()}: bias has {bias.size} values for {cout} channels")
        ws = w.quant.scale.astype(np.float64)
        if ws.size not in (1, cout):
            raise TFLiteFormatError(f"{op.describe()}: {ws.size} filter scales for {cout} channels")
        if np.any(w.quant.zero_point != 0):
            raise TFLiteUnsupportedError(f"{op.describe()}: filter zero points must be 0")
        ws = np.broadcast_to(ws, (cout,))
        mults = [quantize_multiplier(float(s_in) * float(sw) / float(s_out)) for sw in ws]
        ms = np.array([m for m, _ in mults], dtype=np.int64)
        sh = np.array([s for _, s in mults], dtype=np.int64)
        opts = op.options
        lo, hi = activation_range(int(opts.get("activation", 0)), s_out, z_out)
        stride_h, stride_w = int(opts.get("stride_h", 1)), int(opts.get("stride_w", 1))
        dil_h, dil_w = int(opts.get("dilation_h", 1)), int(opts.get("dilation_w", 1))
        if min(stride_h, stride_w, dil_h, dil_w) < 1:
            raise TFLiteFormatError(f"{op.describe()}: strides and dilations must be >= 1")
        kh, kw = w.shape[1], w.shape[2]
        oh, ph = _padding(int(opts.get("padding", 0)), x.shape[1], kh, stride_h, dil_h)
        ow, pw = _padding(int(opts.get("padding", 0)), x.shape[2], kw, stride_w, dil_w)
        if (oh, ow) != (o.shape[1], o.shape[2]):
            raise TFLiteFormatError(
                f"{op.describe()}: output shape {list(o.shape)} does not match the computed {oh}x{ow}"
            )
        cin = x.shape[3]
        if depthwise:
            dm = int(opts.get("depth_multiplier", 1)) or 1
            if cin * dm != cout:
                dm = cout // cin if cin and cout % cin == 0 else 0
                if dm == 0:
                    raise TFLiteFormatError(f"{op.describe()}: {cin} input and {cout} output channels")
            filt = w.data.astype(np.int64).reshape(kh * kw, cout)
            chan = np.arange(cout) // dm
        else:
            if w.shape[3] != cin:
                raise TFLiteUnsupportedError(f"{op.describe()}: grouped convolution is not supported")
            filt = w.data.astype(np.int64).reshape(cout, kh * kw * cin).T
        bias_v = np.zeros(cout, dtype=np.int64) if bias is None else bias

        def run(args: list[np.ndarray]) -> np.ndarray:
            xi = args[0].reshape(x.shape[1:]).astype(np.int64) - z_in
            p = _patches(xi, kh, kw, stride_h, stride_w, dil_h, dil_w, ph, pw, oh, ow, 0)
            if depthwise:
                pp = p.reshape(oh * ow, kh * kw, cin)[:, :, chan]
                acc = np.einsum("pkc,kc->pc", pp, filt)
            else:
                acc = p.reshape(oh * ow, kh * kw * cin) @ filt
            acc = wrap32(acc + bias_v)
            out = mbqm(acc, ms, sh) + z_out
            return np.clip(out, lo, hi).astype(np.int8)

        return run

    def _prep_conv_2d(self, op: OperatorInfo):
        return self._conv_common(op, depthwise=False)

    def _prep_depthwise_conv_2d(self, op: OperatorInfo):
        return self._conv_common(op, depthwise=True)

    def _prep_fully_connected(self, op: OperatorInfo):
        x, w, o = self._t(op, 0), self._t(op, 1), self._t(op, 0, "out")
        self._check_int8(op, x, w, o)
        if w.data is None or len(w.shape) != 2:
            raise TFLiteUnsupportedError(f"{op.describe()}: weights must be a constant 2-D tensor")
        if int(op.options.get("weights_format", 0)) != 0:
            raise TFLiteUnsupportedError(f"{op.describe()}: shuffled weights are not supported")
        n_out, k = w.shape
        if x.size % k or o.size != (x.size // k) * n_out:
            raise TFLiteFormatError(
                f"{op.describe()}: shapes {list(x.shape)} x {list(w.shape)} -> {list(o.shape)}"
            )
        bias = None
        if len(op.inputs) > 2 and op.inputs[2] >= 0:
            b = self._t(op, 2)
            if b.type != TensorType.INT32 or b.data is None or b.size != n_out:
                raise TFLiteUnsupportedError(
                    f"{op.describe()}: bias must be a constant INT32 tensor of {n_out}"
                )
            bias = b.data.astype(np.int64).reshape(-1)
        s_in, z_in = _q(x, op.describe())
        s_out, z_out = _q(o, op.describe())
        if np.any(w.quant.zero_point != 0):
            raise TFLiteUnsupportedError(f"{op.describe()}: weight zero points must be 0")
        if w.quant.per_channel:
            if w.quant.scale.size != n_out or w.quant.quantized_dimension != 0:
                raise TFLiteFormatError(f"{op.describe()}: per-channel scales do not match {n_out} outputs")
            mults = [quantize_multiplier(float(s_in) * float(s) / float(s_out)) for s in w.quant.scale]
        else:
            # per-tensor path multiplies the two float32 scales in float32 first (TFLite kernel_util)
            prod = float(np.float32(s_in) * np.float32(w.quant.scale[0]))
            mults = [quantize_multiplier(prod / float(s_out))] * n_out
        ms = np.array([m for m, _ in mults], dtype=np.int64)
        sh = np.array([s for _, s in mults], dtype=np.int64)
        lo, hi = activation_range(int(op.options.get("activation", 0)), s_out, z_out)
        wt = w.data.astype(np.int64).T
        bias_v = np.zeros(n_out, dtype=np.int64) if bias is None else bias

        def run(args: list[np.ndarray]) -> np.ndarray:
            xi = args[0].reshape(-1, k).astype(np.int64) - z_in
            acc = wrap32(xi @ wt + bias_v)
            return np.clip(mbqm(acc, ms, sh) + z_out, lo, hi).astype(np.int8)

        return run

    def _pool(self, op: OperatorInfo, kind: str):
        x, o = self._t(op, 0), self._t(op, 0, "out")
        self._check_int8(op, x, o)
        if len(x.shape) != 4 or len(o.shape) != 4 or x.shape[0] != 1:
            raise TFLiteUnsupportedError(f"{op.describe()}: expects NHWC batch-1 tensors")
        s_in, z_in = _q(x, op.describe())
        s_out, z_out = _q(o, op.describe())
        if kind == "avg" and (s_in != s_out or z_in != z_out):
            raise TFLiteUnsupportedError(f"{op.describe()}: input and output quantization must match")
        opts = op.options
        sh_, sw_ = int(opts.get("stride_h", 1)), int(opts.get("stride_w", 1))
        fh, fw = int(opts.get("filter_h", 1)), int(opts.get("filter_w", 1))
        if min(sh_, sw_, fh, fw) < 1:
            raise TFLiteFormatError(f"{op.describe()}: strides and filter sizes must be >= 1")
        oh, ph = _padding(int(opts.get("padding", 0)), x.shape[1], fh, sh_, 1)
        ow, pw = _padding(int(opts.get("padding", 0)), x.shape[2], fw, sw_, 1)
        if (oh, ow, x.shape[3]) != tuple(o.shape[1:]):
            raise TFLiteFormatError(f"{op.describe()}: output shape {list(o.shape)} does not match")
        lo, hi = activation_range(int(opts.get("activation", 0)), s_out, z_out)
        my = _window_mask(x.shape[1], oh, sh_, ph, fh)
        mx = _window_mask(x.shape[2], ow, sw_, pw, fw)
        valid = (my[:, None, :, None] & mx[None, :, None, :])[..., None]  # oh, ow, fh, fw, 1
        count = valid.sum(axis=(2, 3)).astype(np.int64)  # oh, ow, 1
        if np.any(count == 0):
            raise TFLiteFormatError(f"{op.describe()}: empty pooling window")

        def run(args: list[np.ndarray]) -> np.ndarray:
            xi = args[0].reshape(x.shape[1:]).astype(np.int64)
            p = _patches(xi, fh, fw, sh_, sw_, 1, 1, ph, pw, oh, ow, 0)
            if kind == "max":
                acc = np.where(valid, p, -(1 << 40)).max(axis=(2, 3))
            else:
                s = np.where(valid, p, 0).sum(axis=(2, 3))
                acc = np.where(s > 0, _trunc_div(s + count // 2, count), _trunc_div(s - count // 2, count))
            return np.clip(acc, lo, hi).astype(np.int8)

        return run

    def _prep_max_pool_2d(self, op: OperatorInfo):
        return self._pool(op, "max")

    def _prep_average_pool_2d(self, op: OperatorInfo):
        return self._pool(op, "avg")

    def _prep_mean(self, op: OperatorInfo):
        x, ax, o = self._t(op, 0), self._t(op, 1), self._t(op, 0, "out")
        self._check_int8(op, x, o)
        if ax.data is None or ax.type != TensorType.INT32:
            raise TFLiteUnsupportedError(f"{op.describe()}: axis must be a constant INT32 tensor")
        rank = len(x.shape)
        axes = sorted({int(a) + rank if int(a) < 0 else int(a) for a in ax.data.reshape(-1)})
        if any(a < 0 or a >= rank for a in axes):
            raise TFLiteFormatError(f"{op.describe()}: axis {ax.data.tolist()} out of range for rank {rank}")
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        if n == 0:
            raise TFLiteFormatError(f"{op.describe()}: empty reduction")
        kept = [x.shape[i] for i in range(rank) if i not in axes]
        if int(np.prod(kept, dtype=np.int64)) != o.size:
            raise TFLiteFormatError(f"{op.describe()}: output shape {list(o.shape)} does not match")
        s_in, z_in = _q(x, op.describe())
        s_out, z_out = _q(o, op.describe())
        m, shift = quantize_multiplier(float(s_in) / float(s_out))
        nshift = min(n.bit_length() - 1, 32, 31 + shift)
        m2 = int(_trunc_div(np.int64(m) << nshift, n))
        shift2 = shift - nshift

        def run(args: list[np.ndarray]) -> np.ndarray:
            xi = args[0].reshape(x.shape).astype(np.int64)
            s = xi.sum(axis=tuple(axes)) - z_in * n
            out = mbqm(wrap32(s), m2, shift2) + z_out
            return np.clip(out, -128, 127).astype(np.int8)

        return run

    def _prep_add(self, op: OperatorInfo):
        a, b, o = self._t(op, 0), self._t(op, 1), self._t(op, 0, "out")
        self._check_int8(op, a, b, o)
        s1, z1 = _q(a, op.describe())
        s2, z2 = _q(b, op.describe())
        so, zo = _q(o, op.describe())
        try:
            bshape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise TFLiteFormatError(
                f"{op.describe()}: shapes {list(a.shape)} and {list(b.shape)} do not broadcast"
            ) from None
        if int(np.prod(bshape, dtype=np.int64)) != o.size:
            raise TFLiteFormatError(f"{op.describe()}: output shape {list(o.shape)} does not match")
        left = 20
        twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
        m1, sh1 = quantize_multiplier(float(s1) / twice_max)
        m2, sh2 = quantize_multiplier(float(s2) / twice_max)
        mo, sho = quantize_multiplier(twice_max / ((1 << left) * float(so)))
        lo, hi = activation_range(int(op.options.get("activation", 0)), so, zo)

        def run(args: list[np.ndarray]) -> np.ndarray:
            xa = (args[0].reshape(a.shape).astype(np.int64) - z1) << left
            xb = (args[1].reshape(b.shape).astype(np.int64) - z2) << left
            sa = rdbpot(srdhm(xa, m1), -sh1)
            sb = rdbpot(srdhm(xb, m2), -sh2)
            raw = wrap32(sa + sb)
            out = rdbpot(srdhm(raw, mo), -sho) + zo
            return np.clip(out, lo, hi).astype(np.int8)

        return run

    def _prep_reshape(self, op: OperatorInfo):
        x, o = self._t(op, 0), self._t(op, 0, "out")
        if x.size != o.size:
            raise TFLiteFormatError(f"{op.describe()}: {x.size} elements cannot become shape {list(o.shape)}")
        if x.type != o.type:
            raise TFLiteFormatError(f"{op.describe()}: input and output types differ")
        return lambda args: args[0].reshape(o.shape).copy()

    def _prep_softmax(self, op: OperatorInfo):
        x, o = self._t(op, 0), self._t(op, 0, "out")
        self._check_int8(op, x, o)
        so, zo = _q(o, op.describe())
        if zo != -128 or np.float32(so) != np.float32(1.0 / 256):
            raise TFLiteUnsupportedError(
                f"{op.describe()}: int8 output must have scale 1/256, zero point -128"
            )
        if x.shape != o.shape:
            raise TFLiteFormatError(f"{op.describe()}: input and output shapes differ")
        s_in, _ = _q(x, op.describe())
        beta = float(op.options.get("beta", 1.0))
        return lambda args: softmax_int8(args[0], beta, s_in)

    def _prep_quantize(self, op: OperatorInfo):
        x, o = self._t(op, 0), self._t(op, 0, "out")
        self._check_int8(op, o)
        so, zo = _q(o, op.describe())
        if x.type == TensorType.FLOAT32:

            def run_f(args: list[np.ndarray]) -> np.ndarray:
                v = (np.asarray(args[0], dtype=np.float32) / np.float32(so)).astype(np.float64)
                r = np.sign(v) * np.floor(np.abs(v) + 0.5)
                return np.clip(r.astype(np.int64) + zo, -128, 127).astype(np.int8)

            return run_f
        self._check_int8(op, x)
        si, zi = _q(x, op.describe())
        m, sh = quantize_multiplier(float(si) / float(so))

        def run(args: list[np.ndarray]) -> np.ndarray:
            v = mbqm(args[0].astype(np.int64) - zi, m, sh) + zo
            return np.clip(v, -128, 127).astype(np.int8)

        return run

    def _prep_dequantize(self, op: OperatorInfo):
        x, o = self._t(op, 0), self._t(op, 0, "out")
        self._check_int8(op, x)
        if o.type != TensorType.FLOAT32:
            raise TFLiteUnsupportedError(f"{op.describe()}: only int8 -> float32 is supported")
        si, zi = _q(x, op.describe())
        return lambda args: (float(si) * (args[0].astype(np.float64) - zi)).astype(np.float32)
