"""snapuq for any MicroPython: the pure-Python twin of the C user module.

Same API as the C module (``snapuq.Model``, ``Model.infer``, ``Model.calibrate``,
``Model.monitor``); the int8 TFLite interpreter and the fixed-point SNAP path use integer
arithmetic identical to firmware/core, so results are bit-exact with the C module and the host
reference. It is slower than the C module; use it where the firmware has no C module, and to
test the API under any MicroPython interpreter.

Runs on MicroPython >= 1.20 (needs struct, array, json) and on CPython 3.10+.
"""

import array
import json
import struct

try:
    from collections import namedtuple
except ImportError:  # pragma: no cover - very small ports
    namedtuple = None

__version__ = "0.1.0"
IMPLEMENTATION = "python"
SPEC_VERSION = 3  # SNAPUQ_SNAP_SPEC_VERSION: docs/FIXED_POINT.md v3 (v2 + the input tap, step 4b)

BLOB_MAGIC = b"SNUQ"
BLOB_VERSION = 2
BLOB_HEADER = 32

# TFLite builtin operator codes and tensor types (schema.fbs)
OP_ADD = 0
OP_AVERAGE_POOL_2D = 1
OP_CONCATENATION = 2
OP_CONV_2D = 3
OP_DEPTHWISE_CONV_2D = 4
OP_FULLY_CONNECTED = 9
OP_LOGISTIC = 14
OP_MAX_POOL_2D = 17
OP_RELU = 19
OP_RELU6 = 21
OP_RESHAPE = 22
OP_SOFTMAX = 25
OP_MEAN = 40
OP_SQUEEZE = 43
OP_EXPAND_DIMS = 70
OP_QUANTIZE = 114
_OP_NAMES = {
    OP_ADD: "ADD", OP_AVERAGE_POOL_2D: "AVERAGE_POOL_2D", OP_CONV_2D: "CONV_2D",
    OP_DEPTHWISE_CONV_2D: "DEPTHWISE_CONV_2D", OP_FULLY_CONNECTED: "FULLY_CONNECTED",
    OP_LOGISTIC: "LOGISTIC", OP_MAX_POOL_2D: "MAX_POOL_2D", OP_RESHAPE: "RESHAPE",
    OP_SOFTMAX: "SOFTMAX", OP_MEAN: "MEAN", OP_SQUEEZE: "SQUEEZE", OP_QUANTIZE: "QUANTIZE",
    OP_CONCATENATION: "CONCATENATION", OP_RELU: "RELU", OP_RELU6: "RELU6", OP_EXPAND_DIMS: "EXPAND_DIMS",
}
_SHAPE_OPS = (OP_RESHAPE, OP_SQUEEZE, OP_EXPAND_DIMS)  # bytes unchanged
T_FLOAT32 = 0
T_INT32 = 2
T_INT64 = 4
T_INT8 = 9
_TYPE_SIZE = {T_FLOAT32: 4, T_INT32: 4, T_INT64: 8, T_INT8: 1}

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


def _err(msg):
    return ValueError("snapuq: " + msg)


# ---------------------------------------------------------------- byte helpers

def _int8_array(data):
    """array('b') holding the bytes of ``data`` reinterpreted as int8."""
    try:
        return array.array("b", data)  # MicroPython: raw copy of a bytes object
    except OverflowError:  # CPython iterates the bytes as 0..255
        a = array.array("b")
        a.frombytes(bytes(data))
        return a


def _int32_list(data):
    n = len(data) // 4
    return list(struct.unpack("<%di" % n, data)) if n else []


class _FB:
    """Bounds-checked reader for the parts of a FlatBuffer that the TFLite schema uses."""

    def __init__(self, buf):
        self.b = buf
        self.n = len(buf)

    def _chk(self, off, size, what):
        if off < 0 or off + size > self.n:
            raise _err("corrupt model: %s at offset %d out of range (size %d)" % (what, off, self.n))

    def u8(self, off):
        self._chk(off, 1, "byte")
        return self.b[off]

    def u16(self, off):
        self._chk(off, 2, "u16")
        return self.b[off] | (self.b[off + 1] << 8)

    def u32(self, off):
        self._chk(off, 4, "u32")
        return struct.unpack_from("<I", self.b, off)[0]

    def i32(self, off):
        self._chk(off, 4, "i32")
        return struct.unpack_from("<i", self.b, off)[0]

    def f32(self, off):
        self._chk(off, 4, "f32")
        return struct.unpack_from("<f", self.b, off)[0]

    def root(self):
        return self.u32(0)

    def field(self, table, idx):
        """Absolute offset of field ``idx`` of the table at ``table``, or None if absent."""
        vt = table - self.i32(table)
        vsize = self.u16(vt)
        if vsize < 4 or vsize & 1:
            raise _err("corrupt model: bad vtable at offset %d" % vt)
        slot = 4 + 2 * idx
        if slot + 2 > vsize:
            return None
        fo = self.u16(vt + slot)
        if fo == 0:
            return None
        return table + fo

    def table(self, table, idx):
        p = self.field(table, idx)
        if p is None:
            return None
        return p + self.u32(p)

    def scalar(self, table, idx, kind, default=0):
        p = self.field(table, idx)
        if p is None:
            return default
        if kind == "u8":
            return self.u8(p)
        if kind == "i8":
            v = self.u8(p)
            return v - 256 if v > 127 else v
        if kind == "i32":
            return self.i32(p)
        if kind == "u32":
            return self.u32(p)
        if kind == "f32":
            return self.f32(p)
        raise _err("internal: kind " + kind)

    def vector(self, table, idx):
        """(start, count) of the vector in field ``idx``, or (0, 0) if absent."""
        p = self.field(table, idx)
        if p is None:
            return 0, 0
        v = p + self.u32(p)
        n = self.u32(v)
        self._chk(v + 4, 0, "vector")
        return v + 4, n

    def vec_checked(self, table, idx, elem):
        s, n = self.vector(table, idx)
        if n:
            self._chk(s, n * elem, "vector body")
        return s, n

    def ints(self, table, idx):
        s, n = self.vec_checked(table, idx, 4)
        return [self.i32(s + 4 * i) for i in range(n)]

    def floats(self, table, idx):
        s, n = self.vec_checked(table, idx, 4)
        return [self.f32(s + 4 * i) for i in range(n)]

    def longs(self, table, idx):
        s, n = self.vec_checked(table, idx, 8)
        return [struct.unpack_from("<q", self.b, s + 8 * i)[0] for i in range(n)]

    def tables(self, table, idx):
        s, n = self.vec_checked(table, idx, 4)
        return [s + 4 * i + self.u32(s + 4 * i) for i in range(n)]

    def string(self, table, idx):
        p = self.field(table, idx)
        if p is None:
            return ""
        v = p + self.u32(p)
        n = self.u32(v)
        self._chk(v + 4, n, "string")
        return bytes(self.b[v + 4:v + 4 + n]).decode()


# ---------------------------------------------------------------- exact integer arithmetic

def _bitlen(n):
    """int.bit_length (MicroPython ints lack it)."""
    n = -n if n < 0 else n
    c = 0
    while n >= 1 << 32:
        n >>= 32
        c += 32
    while n:
        n >>= 1
        c += 1
    return c


def _f32_parts(x):
    """float32 value ``x`` as (mantissa, exponent) with x == m * 2**e exactly (m >= 0 for x >= 0)."""
    return _f32_bits_parts(struct.unpack("<I", struct.pack("<f", x))[0])


def _f32_bits_parts(bits):
    """The float32 with these 32 bits as (mantissa, exponent) (see _f32_parts)."""
    sign = -1 if bits >> 31 else 1
    e = (bits >> 23) & 0xFF
    m = bits & 0x7FFFFF
    if e == 0xFF:
        raise _err("model has a non-finite quantization scale")
    if e == 0:
        e = 1
    else:
        m |= 0x800000
    return sign * m, e - 150


def _div_nearest(nm, dm, bits):
    """nm / dm (positive integers) rounded to `bits` significant bits, nearest-even, as an IEEE
    division rounds: (q, k) with 2**(bits-1) <= q <= 2**bits and nm / dm ~ q * 2**-k."""
    # quotient Q = floor(nm * 2**k / dm) with 2**bits <= Q < 2**(bits+1) (one guard bit)
    k = bits + 1 - (_bitlen(nm) - _bitlen(dm))
    while True:
        num = nm << k if k >= 0 else nm >> -k  # k < 0 never loses bits: nm is small
        q, r = divmod(num, dm)
        if q >= (1 << (bits + 1)):
            k -= 1
            continue
        if q < (1 << bits):
            k += 1
            continue
        break
    # drop the guard bit, nearest-even (sticky = remainder)
    low = q & 1
    q >>= 1
    if low and (r or (q & 1)):
        q += 1
    return q, k - 1


def _quantize_ratio(nm, ne, dm, de):
    """TFLite QuantizeMultiplier((double)(nm*2**ne) / (double)(dm*2**de)), integers only.

    The numerator is an exact product of float32 values (exact in double); the quotient is
    rounded to the nearest double (ties to even), then frexp + round(q * 2**31) as TFLite does.
    Returns (multiplier, shift).
    """
    if nm <= 0 or dm <= 0:
        if nm == 0:
            return 0, 0
        raise _err("model has a non-positive quantization scale")
    q, k = _div_nearest(nm, dm, 53)  # the quotient as a double: q * 2**-k
    exp2 = ne - de - k  # value = q * 2**exp2, 2**52 <= q <= 2**53
    if q == (1 << 53):
        q >>= 1
        exp2 += 1
    shift = exp2 + 53  # frexp: value = (q / 2**53) * 2**shift, fraction in [0.5, 1)
    qf = (q + (1 << 21)) >> 22  # round(fraction * 2**31), half away from zero
    if qf == (1 << 31):
        qf >>= 1
        shift += 1
    if shift < -31:
        return 0, 0
    return qf, shift


def quantize_multiplier(s_in, s_w, s_out):
    """(M, shift) for the effective scale double(s_in)*double(s_w)/double(s_out) of float32 scales."""
    a_m, a_e = _f32_parts(s_in)
    b_m, b_e = _f32_parts(s_w)
    c_m, c_e = _f32_parts(s_out)
    return _quantize_ratio(a_m * b_m, a_e + b_e, c_m, c_e)


def _f32_div_round(a, b):
    """round(float32(a / b)) with a, b float32 (TfLiteRound of a float division), integers only."""
    am, ae = _f32_parts(a)
    return _div_round_parts(am, ae, b)


def _norm_bits_ok(scale_bits, offset_bits):
    """An input-normalization record's doubles (as 64-bit patterns) are finite, and no scale is +-0."""
    for b in scale_bits + offset_bits:
        if (b >> 52) & 0x7FF == 0x7FF:
            return False
    return all(b & ((1 << 63) - 1) for b in scale_bits)


def _f64_parts(bits):
    """The IEEE double with these 64 bits (finite) as (mantissa, exponent): value = m * 2**e exactly."""
    e = (bits >> 52) & 0x7FF
    m = bits & ((1 << 52) - 1)
    if e == 0:
        e = 1
    else:
        m |= 1 << 52
    return (-m if bits >> 63 else m), e - 1075


def _round_bin(m, e, bits, emin):
    """m * 2**e rounded to `bits` significant bits, nearest with ties to even, the last bit's exponent at
    least emin (subnormals): what an IEEE operation does to its exact result. Returns (m', e')."""
    if m == 0:
        return 0, emin
    neg = m < 0
    a = -m if neg else m
    drop = _bitlen(a) - bits
    if e + drop < emin:
        drop = emin - e
    if drop > 0:
        q = a >> drop
        r = a - (q << drop)
        h = 1 << (drop - 1)
        if r > h or (r == h and q & 1):
            q += 1
        a, e = q, e + drop
    return (-a if neg else a), e


def _normalize_f32(xm, xe, sc, of):
    """float32(double(x) * scale + offset) of a finite float32 x = xm * 2**xe, with the doubles scale and
    offset as (mantissa, exponent) -- a C double multiply, add and float cast, integers only. Returns
    (m, e), or (sign, None) when the result is beyond float32 (+-inf)."""
    pm, pe = _round_bin(xm * sc[0], xe + sc[1], 53, -1074)
    if pm and _bitlen(pm) + pe > 1024:
        return (1 if pm > 0 else -1), None
    e = pe if pe < of[1] else of[1]
    tm, te = _round_bin((pm << (pe - e)) + (of[0] << (of[1] - e)), e, 53, -1074)
    if tm and _bitlen(tm) + te > 1024:
        return (1 if tm > 0 else -1), None
    fm, fe = _round_bin(tm, te, 24, -149)
    if fm and _bitlen(fm) + fe > 128:
        return (1 if fm > 0 else -1), None
    return fm, fe


def _div_round_parts(am, ae, b):
    """round(float32(a / b)) for a = am * 2**ae (a float32 value) and float32 b, integers only."""
    bm, be = _f32_parts(b)
    neg = (am < 0) != (bm < 0)
    am, bm = abs(am), abs(bm)
    if am == 0:
        return 0
    q, k = _div_nearest(am, bm, 24)  # the quotient as a float32: q * 2**-k
    e = ae - be - k  # float32 quotient = q * 2**e
    if e >= 0:
        v = q << e
    else:
        v = (q + (1 << (-e - 1))) >> -e  # round half away from zero (positive)
    return -v if neg else v


def _srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul for int32 a, b."""
    if a == b == _INT32_MIN:
        return _INT32_MAX
    ab = a * b
    if ab >= 0:
        return (ab + (1 << 30)) >> 31
    return -((-(ab + 1 - (1 << 30))) >> 31)


def _rdpot(x, e):
    """gemmlowp RoundingDivideByPOT."""
    if e == 0:
        return x
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def _sat_shl(x, e):
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent e (int32)."""
    thr = (1 << (31 - e)) - 1
    if x > thr:
        return _INT32_MAX
    if x < -thr:
        return _INT32_MIN
    return x << e


def _exp_on_negative_values(a, int_bits=5):
    """gemmlowp exp_on_negative_values for FixedPoint<int32, int_bits> raw a <= 0 (int_bits 4 for
    LOGISTIC, 5 for SOFTMAX); result Q0.31 raw."""
    frac = 31 - int_bits
    quarter = 1 << (frac - 2)
    amq = (a & (quarter - 1)) - quarter
    # exp on [-1/4, 0): Taylor expansion around -1/8 in Q0.31
    x = (amq << int_bits) + (1 << 28)
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_4 = _rdpot(x4, 2)
    poly = _rdpot(_srdhm(x4_4 + x3, 715827883) + x2, 1)
    r = 1895147668 + _srdhm(1895147668, x + poly)
    rem = amq - a
    for e, mul in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                   (2, 39332535), (3, 720401), (4, 242)):
        bit = frac + e
        if int_bits > e and bit < 31 and rem & (1 << bit):
            r = _srdhm(r, mul)
    if a == 0:
        r = _INT32_MAX
    return r


def _reciprocal(x, int_bits):
    """TFLite GetReciprocal: (Q0.31 raw of 1/x scaled, num_bits_over_unit) for FixedPoint<int_bits> x > 0."""
    clz = 32 - _bitlen(x)
    nbits = int_bits - clz
    a = ((x << clz) & 0xFFFFFFFF) - (1 << 31)
    return _one_over_one_plus_x(a), nbits


def _one_over_one_plus_x(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1: Q0.31 raw a in [0, 1) -> Q0.31 raw 1 / (1 + a)
    (Newton-Raphson in Q2.29)."""
    s = a + _INT32_MAX
    half = (s + 1) // 2 if s >= 0 else -((-s + 1) // 2)
    xx = 1515870810 + _srdhm(half, -1010580540)
    for _ in range(3):
        hx = _srdhm(half, xx)
        xx = xx + _sat_shl(_srdhm(xx, (1 << 29) - hx), 2)
    return _sat_shl(xx, 1)


def mbqm(x, m, shift):
    """TFLite MultiplyByQuantizedMultiplier (int32 accumulator, default double rounding)."""
    if shift > 0:
        x = x << shift
        x = ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # int32 wrap as on the device
        return _srdhm(x, m)
    return _rdpot(_srdhm(x, m), -shift)


# ---------------------------------------------------------------- model loading

class _Tensor:
    def __init__(self):
        self.shape = ()
        self.type = 0
        self.name = ""
        self.scale = ()
        self.zp = ()
        self.data = None  # constant data (array/list) or None
        self.nbytes = 0


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _act_range(act, scale, zp):
    if act == 0:
        return -128, 127
    if act == 1:  # RELU
        return max(-128, zp), 127
    if act == 3:  # RELU6
        return max(-128, zp), min(127, zp + _f32_div_round(6.0, scale))
    if act == 2:  # RELU_N1_TO_1
        return max(-128, zp + _f32_div_round(-1.0, scale)), min(127, zp + _f32_div_round(1.0, scale))
    raise _err("unsupported fused activation %d" % act)


def _pad(padding, stride, dil, insz, fsz):
    eff = (fsz - 1) * dil + 1
    if padding == 0:  # SAME
        out = (insz + stride - 1) // stride
    else:
        out = (insz - eff + stride) // stride
    total = max(0, (out - 1) * stride + eff - insz)
    return out, total // 2


class _Op:
    def __init__(self, code, ins, outs):
        self.code = code
        self.ins = ins
        self.outs = outs


def split_blob(buf):
    """(tflite, manifest dict) from a .snapuq blob v2 (docs/BLOB.md): header, CRC and the binary
    SNAP section, read with the same checks as firmware/core/snapuq_blob.c's snapuq_blob_open."""
    tfl, sec = _split_blob(buf)
    return tfl, sec.manifest()


def _split_blob(buf):
    if len(buf) < BLOB_HEADER or bytes(buf[:4]) != BLOB_MAGIC:
        raise _err("not a snapuq blob (bad magic or truncated header)")
    ver, hsize, toff, tlen, soff, slen, crc = struct.unpack_from("<HHIIIII", buf, 4)
    if ver == 1:
        raise _err("blob version 1 (JSON manifest): rebuild it with `snapuq micropython blob`")
    if ver != BLOB_VERSION:
        raise _err("unsupported blob version")
    if (hsize != BLOB_HEADER or toff < hsize or toff % 16 or soff % 4 or soff < toff + tlen
            or soff + slen != len(buf)):
        raise _err("corrupt blob: section offsets do not fit the blob")
    if crc32(memoryview(buf)[BLOB_HEADER:]) != crc:
        raise _err("corrupt blob: CRC mismatch")
    return memoryview(buf)[toff:toff + tlen], _Section(bytes(buf[soff:soff + slen]))


# ---- SNAP section layout: generated from firmware/core/snapuq_snap_section.h
# by `python -m snapuq.snap_section twin --write`; do not edit (docs/BLOB.md).
_SNAP_HEADER = (
    ('magic', '4s', 0, 1),
    ('version', 'H', 4, 1),
    ('header_len', 'H', 6, 1),
    ('tap_rec_len', 'H', 8, 1),
    ('out_rec_len', 'H', 10, 1),
    ('spec_version', 'B', 12, 1),
    ('variant', 'B', 13, 1),
    ('hinge', 'B', 14, 1),
    ('n_taps', 'B', 15, 1),
    ('n_classes', 'H', 16, 1),
    ('n_outputs', 'H', 18, 1),
    ('out_logits', 'H', 20, 1),
    ('out_probs', 'H', 22, 1),
    ('n_class_names', 'H', 24, 1),
    ('combine', 'B', 26, 1),
    ('perr_step_shift', 'B', 27, 1),
    ('conf_a_q16', 'i', 28, 1),
    ('b0_q16', 'i', 32, 1),
    ('b1_m', 'i', 36, 1),
    ('b1_n', 'i', 40, 1),
    ('b2_m', 'i', 44, 1),
    ('b2_n', 'i', 48, 1),
    ('hinge_q_q16', 'i', 52, 1),
    ('hinge_m', 'i', 56, 1),
    ('hinge_n', 'i', 60, 1),
    ('u_threshold_q16', 'i', 64, 1),
    ('z_clamp_q16', 'i', 68, 1),
    ('lut_step_shift', 'i', 72, 1),
    ('sigmoid_lut_off', 'I', 76, 1),
    ('tap_table_off', 'I', 80, 1),
    ('out_table_off', 'I', 84, 1),
    ('class_table_off', 'I', 88, 1),
    ('strings_off', 'I', 92, 1),
    ('strings_len', 'I', 96, 1),
    ('alarm_k_q16', 'i', 100, 1),
    ('perr_lut_off', 'I', 104, 1),
    ('intap_off', 'I', 108, 2),
    ('in_norm_off', 'I', 112, 3),
)
_SNAP_TAP = (
    ('d', 'H', 0, 1),
    ('out_a', 'H', 2, 1),
    ('out_mu', 'H', 4, 1),
    ('out_logvar', 'H', 6, 1),
    ('z_a', 'i', 8, 1),
    ('z_mu', 'i', 12, 1),
    ('z_v', 'i', 16, 1),
    ('k_a', 'i', 20, 1),
    ('k_mu', 'i', 24, 1),
    ('lut_shift', 'i', 28, 1),
    ('p_m', 'i', 32, 1),
    ('p_n', 'i', 36, 1),
    ('q_m', 'i', 40, 1),
    ('q_n', 'i', 44, 1),
    ('r_q16', 'i', 48, 1),
    ('w_q16', 'i', 52, 1),
    ('inv_sigma_lut_off', 'I', 56, 1),
    ('name', 'I', 60, 1),
)
_SNAP_OUTPUT = (
    ('index', 'H', 0, 1),
    ('zero_point', 'h', 2, 1),
    ('name', 'I', 4, 1),
)
_SNAP_INTAP = (
    ('rows', 'H', 0, 2),
    ('cols', 'H', 2, 2),
    ('n_feat', 'H', 4, 2),
    ('reserved', 'H', 6, 2),
    ('z_x', 'i', 8, 2),
    ('p_m', 'i', 12, 2),
    ('p_n', 'i', 16, 2),
    ('r_q16', 'i', 20, 2),
    ('w_q16', 'i', 24, 2),
    ('g_m_off', 'I', 28, 2),
    ('g_n_off', 'I', 32, 2),
    ('h_q12_off', 'I', 36, 2),
)
_SNAP_NORM = (
    ('channels', 'H', 0, 3),
    ('reserved', 'H', 2, 3),
    ('scale', 'd', 4, 3),
)
# ---- end of the generated SNAP section layout


def _get(table, name, buf, base):
    """Field `name` of the header or record of `table` at `base`."""
    for n, code, off, _since in table:
        if n == name:
            return struct.unpack_from("<" + code, buf, base + off)[0]
    raise KeyError(name)


def _fields(table, buf, base, ver=255, limit=1 << 30):
    """{name: value} of the header or record of `table` at `base`: the fields of versions <= ver that end
    within `limit` bytes (a header field appended later is there when both hold; 0 otherwise)."""
    out = {}
    for name, code, off, since in table:
        fmt = "<" + code
        out[name] = struct.unpack_from(fmt, buf, base + off)[0] if (
            since <= ver and off + struct.calcsize(fmt) <= limit) else 0
    return out


def _size(table, ver=255):
    """Bytes of `table` (the header of section version `ver`: its fields with since <= ver)."""
    return sum(struct.calcsize("<" + code) for _n, code, _off, since in table if since <= ver)


def _end(table, name):
    """Offset of the byte after field `name`."""
    for n, code, off, _since in table:
        if n == name:
            return off + struct.calcsize("<" + code)
    raise KeyError(name)


_TAP_KEYS = ("z_a", "z_mu", "z_v", "k_a", "k_mu", "lut_shift", "p_m", "p_n", "q_m", "q_n", "r_q16", "w_q16")
MAX_TAPS = 8          # SNAPUQ_MAX_TAPS of the C core's default build
_SPEC_MAX = 3         # SNAPUQ_SNAP_SPEC_VERSION
_Z_CLAMP = 1048575
_LUT_STEP = 11
_PERR_STEP = 8


def _utf8_ok(b, start, end):
    """MicroPython's own UTF-8 check (py/unicode.c utf8_check), as firmware/core/snapuq_blob.c does it:
    a name that passes decodes on every port."""
    need = 0
    for i in range(start, end):
        c = b[i]
        if need:
            if c & 0xC0 != 0x80:
                return False
            need -= 1
        elif c >= 0xC0:
            if c >= 0xF8:
                return False
            need = 1 if c < 0xE0 else (2 if c < 0xF0 else 3)
        elif c >= 0x80:
            return False
    return need == 0


class _Section:
    """A SNAP section, checked exactly as snapuq_blob_open's check_section does it (same checks, same
    order, same one-line messages); nothing is copied out of it but what later checks need."""

    def __init__(self, sec):
        self.sec = sec
        n = self.n = len(sec)
        if n < _end(_SNAP_HEADER, "header_len") or sec[:4] != b"SNAP":
            raise _err("SNAP section: bad magic")
        ver, hl = _get(_SNAP_HEADER, "version", sec, 0), _get(_SNAP_HEADER, "header_len", sec, 0)
        if ver < 1:
            raise _err("SNAP section: version 0")
        if hl < _size(_SNAP_HEADER, 1) or hl > n:
            raise _err("SNAP section: header length out of range")
        self.h = h = _fields(_SNAP_HEADER, sec, 0, ver, hl)
        tr, orec = h["tap_rec_len"], h["out_rec_len"]
        if tr < _size(_SNAP_TAP) or orec < _size(_SNAP_OUTPUT) or tr % 4 or orec % 4:
            raise _err("SNAP section: record sizes too small or unaligned")
        self.ver, self.hl, self.tr, self.orec = ver, hl, tr, orec
        self.n_taps, self.n_out, self.n_cls = h["n_taps"], h["n_outputs"], h["n_class_names"]
        self.combine = h["combine"]
        self.sig_off, self.taps_off = h["sigmoid_lut_off"], h["tap_table_off"]
        self.outs_off = h["out_table_off"]
        self.cls_off, self.str_off, self.str_len = h["class_table_off"], h["strings_off"], h["strings_len"]
        if not (self._table(self.taps_off, self.n_taps, tr) and self._table(self.outs_off, self.n_out, orec)
                and self._table(self.cls_off, self.n_cls, 4) and self._table(self.str_off, self.str_len, 1)):
            raise _err("SNAP section: a table lies outside the section")
        if not self._lut(self.sig_off, 4 * 513):
            raise _err("SNAP section: sigmoid LUT outside the section or unaligned")
        if self.combine > 1:
            raise _err("SNAP section: unknown combine")
        if self.combine == 1 and not self._lut(h["perr_lut_off"], 4 * 257):
            raise _err("SNAP section: p_err LUT outside the section or unaligned")
        self.it_off = h["intap_off"]  # 0 in a section before version 2
        if self.it_off:  # section v2: the input tap (FIXED_POINT.md step 4b)
            r = self.it_off
            if not self._lut(r, _size(_SNAP_INTAP)):
                raise _err("SNAP section: input-tap record outside the section or unaligned")
            x = _fields(_SNAP_INTAP, sec, r)
            nf = x["n_feat"]
            if not (self._lut(x["g_m_off"], 4 * nf) and self._lut(x["g_n_off"], 4 * nf)
                    and self._lut(x["h_q12_off"], 4 * nf)):
                raise _err("SNAP section: input-tap tables outside the section or unaligned")
        self.norm = None
        nm_off = h["in_norm_off"]
        if nm_off:  # section v3: the input normalization (C, then C double scales and C double offsets)
            vo = nm_off + _end(_SNAP_NORM, "reserved")  # the first scale
            c = _get(_SNAP_NORM, "channels", sec, nm_off) if self._lut(nm_off, vo - nm_off) else 0
            if c < 1 or c > 4096 or not self._lut(nm_off, vo - nm_off + 16 * c):
                raise _err("SNAP section: input-normalization record outside the section")
            w = struct.unpack_from("<%dI" % (4 * c), sec, vo)
            bits = [w[2 * k] | (w[2 * k + 1] << 32) for k in range(2 * c)]
            if not _norm_bits_ok(bits[:c], bits[c:]):
                raise _err("SNAP section: input normalization is not finite or has scale 0")
            vals = struct.unpack_from("<%dd" % (2 * c), sec, vo)
            self.norm = {"kind": "blob", "scale": list(vals[:c]), "offset": list(vals[c:]),
                         "scale_bits": bits[:c], "offset_bits": bits[c:]}
        for k in range(self.n_taps):
            t = self.taps_off + k * tr
            lut_off, name = _get(_SNAP_TAP, "inv_sigma_lut_off", sec, t), _get(_SNAP_TAP, "name", sec, t)
            if not self._lut(lut_off, 1024):
                raise _err("SNAP section: tap LUT outside the section or unaligned")
            if not self._name_ok(name):
                raise _err("SNAP section: bad tap name")
        for i in range(self.n_out):
            if not self._name_ok(_get(_SNAP_OUTPUT, "name", sec, self.outs_off + i * orec)):
                raise _err("SNAP section: bad output name")
        for i in range(self.n_cls):
            if not self._name_ok(struct.unpack_from("<I", sec, self.cls_off + 4 * i)[0]):
                raise _err("SNAP section: bad class name")

    def _table(self, off, count, size):
        return off <= self.n and count * size <= self.n - off

    def _lut(self, off, nbytes):
        return off % 4 == 0 and off <= self.n and nbytes <= self.n - off

    def _name_ok(self, off):
        if off >= self.str_len:
            return False
        end = self.sec.find(b"\0", self.str_off + off, self.str_off + self.str_len)
        return end >= 0 and _utf8_ok(self.sec, self.str_off + off, end)

    def name(self, off):
        s = self.str_off + off
        return str(self.sec[s:self.sec.find(b"\0", s)], "utf-8")

    def ints(self, off, count):
        return list(struct.unpack_from("<%di" % count, self.sec, off))

    def outputs(self, names=True):
        """[(model output index, zero point, name)] of the output table, in table order (the name's
        string offset instead of the name with names=False)."""
        out = []
        for i in range(self.n_out):
            o = _fields(_SNAP_OUTPUT, self.sec, self.outs_off + i * self.orec)
            out.append((o["index"], o["zero_point"], self.name(o["name"]) if names else o["name"]))
        return out

    def class_names(self):
        return tuple(self.name(struct.unpack_from("<I", self.sec, self.cls_off + 4 * i)[0])
                     for i in range(self.n_cls))

    def config(self):
        """The section as the check (_check_config) and the score read it: snapuq_blob_snap_config's
        fields, raw. Call after the tap count check (each tap brings a 256-entry table)."""
        h, sec = self.h, self.sec
        taps = []
        for k in range(self.n_taps):
            f = _fields(_SNAP_TAP, sec, self.taps_off + k * self.tr)
            tap = {"d": f["d"], "ia": f["out_a"], "imu": f["out_mu"], "iv": f["out_logvar"],
                   "lut": self.ints(f["inv_sigma_lut_off"], 256), "name_off": f["name"]}
            for key in _TAP_KEYS:
                tap[key] = f[key]
            taps.append(tap)
        it = None
        if self.it_off:
            x = _fields(_SNAP_INTAP, sec, self.it_off)
            nf = x["n_feat"]
            it = {"rows": x["rows"], "cols": x["cols"], "n_feat": nf, "z_x": x["z_x"], "p_m": x["p_m"],
                  "p_n": x["p_n"], "r_q16": x["r_q16"], "w_q16": x["w_q16"],
                  "g_m": self.ints(x["g_m_off"], nf), "g_n": self.ints(x["g_n_off"], nf),
                  "h_q12": self.ints(x["h_q12_off"], nf)}
        return {"spec": h["spec_version"], "variant": h["variant"], "hinge": h["hinge"],
                "n_classes": h["n_classes"], "logits": h["out_logits"], "probs": h["out_probs"],
                "combine": h["combine"], "perr_step": h["perr_step_shift"], "a_q16": h["conf_a_q16"],
                "b0_q16": h["b0_q16"], "b1_m": h["b1_m"], "b1_n": h["b1_n"], "b2_m": h["b2_m"],
                "b2_n": h["b2_n"],
                "hinge_q": h["hinge_q_q16"], "hinge_m": h["hinge_m"], "hinge_n": h["hinge_n"],
                "thr": h["u_threshold_q16"], "z_clamp": h["z_clamp_q16"], "lut_step": h["lut_step_shift"],
                "alarm_k": h["alarm_k_q16"], "taps": taps, "intap": it,
                "sigmoid": self.ints(self.sig_off, 513),
                "perr": self.ints(h["perr_lut_off"], 257) if self.combine == 1 else None}

    def manifest(self, cfg=None, outputs=None, classes=True):
        """The manifest fields the device uses (outputs, class_names, snap), the input normalization
        (class_names only with classes: Model reads them on access, as the C module does)."""
        cfg = cfg or self.config()
        outs = self.outputs() if outputs is None else outputs
        by_index = {}
        for idx, _zp, name in outs:
            by_index[idx] = name
        taps = []
        for tp in cfg["taps"]:
            t = {"name": self.name(tp["name_off"]), "d": tp["d"], "a": by_index.get(tp["ia"]),
                 "mu": by_index.get(tp["imu"]), "logvar": by_index.get(tp["iv"]),
                 "inv_sigma_lut": tp["lut"]}
            for k in _TAP_KEYS:
                t[k] = tp[k]
            taps.append(t)
        c = cfg
        snap = {"spec_version": c["spec"], "variant": "literal" if c["variant"] else "best",
                "combine": "perr_alarm" if c["combine"] == 1 else "logistic", "taps": taps,
                "hinge": {"q_q16": c["hinge_q"], "m": c["hinge_m"], "n": c["hinge_n"]} if c["hinge"] else None,
                "conf": {"a_q16": c["a_q16"], "probs": by_index.get(c["probs"], "probs")},
                "logistic": {"b0_q16": c["b0_q16"], "b1_m": c["b1_m"], "b1_n": c["b1_n"], "b2_m": c["b2_m"],
                             "b2_n": c["b2_n"], "z_clamp_q16": c["z_clamp"], "lut_step_shift": c["lut_step"],
                             "sigmoid_lut": c["sigmoid"]},
                "u_threshold_q16": c["thr"], "section_version": self.ver, "n_classes": c["n_classes"]}
        if c["combine"] == 1:
            snap["perr"] = {"lut": c["perr"], "step_shift": c["perr_step"]}
            snap["alarm"] = {"k_q16": c["alarm_k"]}
        snap["intap"] = c["intap"]
        man = {"outputs": {name: {"index": idx, "zero_point": zp} for idx, zp, name in outs}, "snap": snap}
        if classes:
            man["class_names"] = list(self.class_names())
        if self.norm is not None:
            man["input"] = {"normalization": self.norm}
        return man


def parse_snap_section(sec):
    """The manifest fields the device uses (outputs, class_names, snap) from a SNAP section."""
    return _Section(sec).manifest()


def _zp_ok(z):
    return -128 <= z <= 127


def _check_config(it, c, outputs, name_of, n_taps, intap_v2, norm_channels):
    """snapuq_blob_snap_config's checks against the loaded model, then snapuq_snap_params_check and
    snapuq_snap_check (firmware/core), in the C core's order with its one-line messages: a config this
    passes scores every inference, in C and here. `c` is _Section.config() (or the same built from a
    manifest), `outputs` [(index, zero point, name reference)] in table order, name_of(reference) the
    name (decoded only once the record count is known to be the model's at most). Returns the outputs
    with their names."""
    nout = len(it.outputs)
    if nout == 0:
        raise _err("model not loaded")
    if n_taps < 1 or n_taps > MAX_TAPS:
        raise _err("SNAP section: tap count outside 1..SNAPUQ_MAX_TAPS")
    if c["z_clamp"] != _Z_CLAMP or c["lut_step"] != _LUT_STEP:
        raise _err("SNAP section: logistic clamp or LUT step differ from the spec")
    if c["spec"] < 1 or c["spec"] > _SPEC_MAX:
        raise _err("SNAP section: fixed-point spec version not supported")
    if c["combine"] == 1 and c["perr_step"] != _PERR_STEP:
        raise _err("SNAP section: p_err step differs from the spec")

    def model_output(idx, n):
        if idx >= nout:
            raise _err("SNAP section names a model output that does not exist")
        t = it.tensors[it.outputs[idx]]
        if t.type != T_INT8 or _numel(t.shape) != n:
            raise _err("SNAP section: output size or type differs from the model")

    model_output(c["logits"], c["n_classes"])
    model_output(c["probs"], c["n_classes"])
    for tp in c["taps"]:
        for key in ("ia", "imu", "iv"):
            model_output(tp[key], tp["d"])
    inp = it.tensors[it.inputs[0]]
    if intap_v2:
        x = c["intap"]
        if inp.type != T_INT8 or _numel(inp.shape) != x["rows"] * x["cols"]:
            raise _err("SNAP section: input tap size or type differs from the model input")
        if (inp.zp[0] if inp.zp else 0) != x["z_x"]:
            raise _err("SNAP section: input tap zero point differs from the model input")
    if norm_channels and _numel(inp.shape) % norm_channels:
        raise _err("SNAP section: input normalization channels do not divide the model input")
    if len(outputs) > nout:
        raise _err("SNAP section: more output records than the model has outputs")
    seen_i, seen_n = {}, {}
    named = []
    for idx, zp, ref in outputs:
        name = name_of(ref)
        named.append((idx, zp, name))
        if idx >= nout:
            raise _err("SNAP section names a model output that does not exist")
        t = it.tensors[it.outputs[idx]]
        if zp != (t.zp[0] if t.zp else 0):
            raise _err("SNAP section: output zero point differs from the model")
        if idx in seen_i:
            raise _err("SNAP section: two records for one output")
        if name in seen_n:
            raise _err("SNAP section: two outputs share a name")
        seen_i[idx] = name
        seen_n[name] = idx
    if seen_i.get(c["logits"]) != "logits":
        raise _err("SNAP section: the logits output is not named 'logits'")
    used = [c["probs"]]
    for tp in c["taps"]:
        used += [tp["ia"], tp["imu"], tp["iv"]]
    for idx in used:
        if idx not in seen_i:
            raise _err("SNAP section: an output it uses is not in its output table")
    # snapuq_snap_params_check on the defaults
    ws = [tp["w_q16"] for tp in c["taps"]]
    if (min(ws) < 0 or max(ws) >= (1 << 30) or not 0 <= c["hinge_n"] <= 62 or not 0 <= c["b1_n"] <= 62
            or not 0 <= c["b2_n"] <= 62 or c["alarm_k"] < 0 or (c["hinge"] and c["hinge_m"] < 0)
            or (c["combine"] == 1 and c["alarm_k"] < 1)):
        raise _err("SNAP section: default calibration out of range (weights, shifts, hinge, alarm k)")
    # snapuq_snap_check: check_core, the tables, then what the score's arithmetic relies on
    bad = (c["n_classes"] < 2 or not 0 <= c["a_q16"] <= 65536 or c["variant"] > 1)
    x = c["intap"]
    if x is not None and not bad:
        rows, cols = x["rows"], x["cols"]
        j = cols + rows + (cols if rows > 1 else 0) + (rows if cols > 1 else 0)
        bad = (rows < 1 or cols < 1 or x["n_feat"] != j or j > 16384 or not 0 <= x["p_n"] <= 62
               or not 0 <= x["w_q16"] < (1 << 30))
    for tp in c["taps"]:
        bad = bad or (tp["d"] < 1 or tp["d"] > 16384 or not 0 <= tp["lut_shift"] <= 62
                      or not 0 <= tp["k_a"] <= (1 << 20) or not 0 <= tp["k_mu"] <= (1 << 20)
                      or not 0 <= tp["p_n"] <= 62 or not 0 <= tp["q_n"] <= 62)
    if not bad and c["combine"] == 1:
        bad = min(c["perr"]) < 0 or max(c["perr"]) > 65536
    if not bad and x is not None:
        bad = min(x["g_n"]) < 0 or max(x["g_n"]) > 62
    if not bad and x is not None:
        bad = not _zp_ok(x["z_x"])
    if not bad:
        bad = min(c["sigmoid"]) < 0 or max(c["sigmoid"]) > 65536
    for tp in c["taps"]:
        bad = bad or not (_zp_ok(tp["z_a"]) and _zp_ok(tp["z_mu"]) and _zp_ok(tp["z_v"]))
        if not bad:
            lut = tp["lut"]
            bad = min(lut) < 0 or max(lut) >= (1 << 30)
    if bad:
        raise _err("SNAP section: constants out of range (snapuq_snap_check)")
    return named


def _int(v, what, lo, hi):
    if not isinstance(v, int) or isinstance(v, bool):
        raise _err("manifest %s must be an integer, got %r" % (what, v))
    if not lo <= v <= hi:
        raise _err("manifest %s = %d does not fit its blob field (%d..%d)" % (what, v, lo, hi))
    return v


def _ints(v, n, what):
    if not isinstance(v, (list, tuple)) or (n is not None and len(v) != n):
        raise _err("manifest %s must be a list of %s integers" % (what, n))
    return [_int(e, what, _INT32_MIN, _INT32_MAX) for e in v]


def _manifest_config(man):
    try:
        return _manifest_fields(man)
    except (AttributeError, TypeError, KeyError) as e:
        raise _err("manifest is malformed (%s: %s)" % (type(e).__name__, e)) from None


def _manifest_fields(man):
    """A manifest (snapuq.json) as the fields the blob writer (snapuq.native.blob.snap_section) would
    pack, each checked to fit its field: (config, outputs) for _check_config, so that Model(tflite,
    manifest) applies the C reader's checks to what a blob of it would say."""
    def get(d, key, what, default=None):
        if isinstance(d, dict) and key in d:
            return d[key]
        if default is not None:
            return default
        raise _err("manifest lacks %s" % what)

    outs = get(man, "outputs", "'outputs'")
    snap = get(man, "snap", "'snap'")
    taps = get(snap, "taps", "'snap.taps'")
    if not isinstance(outs, dict) or not isinstance(taps, list):
        raise _err("manifest lacks 'outputs' or 'snap.taps'")
    if not 1 <= len(taps) <= MAX_TAPS:
        raise _err("SNAP section: tap count outside 1..SNAPUQ_MAX_TAPS")
    variant = snap.get("variant", "best")
    combine = snap.get("combine", "logistic")
    if variant not in ("best", "literal"):
        raise _err("manifest snap.variant %r is none of best, literal" % (variant,))
    if combine not in ("logistic", "perr_alarm"):
        raise _err("manifest snap.combine %r is none of logistic, perr_alarm" % (combine,))
    outputs = []
    for name, o in outs.items():
        outputs.append((_int(get(o, "index", "outputs.%s.index" % name), "output %r index" % name, 0, 65535),
                        _int(o.get("zero_point", 0), "output %r zero_point" % name, -32768, 32767), name))
    outputs.sort(key=lambda r: r[0])
    index = {}
    for idx, _zp, name in outputs:
        index[name] = idx
    probs = get(snap, "conf", "'snap.conf'").get("probs", "probs")
    for nm in ("logits", probs):
        if nm not in index:
            raise _err("manifest lacks output %r" % nm)
    I32 = (_INT32_MIN, _INT32_MAX)
    c_taps = []
    for k, tp in enumerate(taps):
        t = {"d": _int(get(tp, "d", "tap %d d" % k), "tap %d d" % k, 0, 65535),
             "lut": _ints(get(tp, "inv_sigma_lut", "tap %d inv_sigma_lut" % k), 256, "tap %d inv_sigma_lut" % k)}
        for key, ik in (("a", "ia"), ("mu", "imu"), ("logvar", "iv")):
            nm = tp.get(key)
            if nm not in index:
                raise _err("tap %r names output %r that the manifest lacks" % (tp.get("name"), nm))
            t[ik] = index[nm]
        for key in _TAP_KEYS:
            t[key] = _int(get(tp, key, "tap %d %s" % (k, key)), "tap %d %s" % (k, key), *I32)
        c_taps.append(t)
    lg = get(snap, "logistic", "'snap.logistic'")
    hg = snap.get("hinge") or None
    perr = combine == "perr_alarm"
    sh = _ints(get(outs["logits"], "shape", "", [man.get("n_classes", 0)]), None, "outputs.logits.shape")
    c = {"spec": _int(snap.get("spec_version", 1), "snap.spec_version", 0, 255),
         "variant": 1 if variant == "literal" else 0, "hinge": 1 if hg else 0,
         "n_classes": _int(_numel(sh), "n_classes", 0, 65535), "logits": index["logits"], "probs": index[probs],
         "combine": 1 if perr else 0, "perr_step": _PERR_STEP,
         "a_q16": _int(get(snap["conf"], "a_q16", "snap.conf.a_q16"), "snap.conf.a_q16", *I32),
         "thr": _int(get(snap, "u_threshold_q16", "snap.u_threshold_q16"), "snap.u_threshold_q16", *I32),
         "z_clamp": _int(lg.get("z_clamp_q16", _Z_CLAMP), "logistic.z_clamp_q16", *I32),
         "lut_step": _int(lg.get("lut_step_shift", _LUT_STEP), "logistic.lut_step_shift", *I32),
         "taps": c_taps, "sigmoid": _ints(get(lg, "sigmoid_lut", "logistic.sigmoid_lut"), 513, "sigmoid_lut"),
         "alarm_k": _int(get(get(snap, "alarm", "'snap.alarm'"), "k_q16", "snap.alarm.k_q16"), "snap.alarm.k_q16",
                         *I32) if perr else 0,
         "perr": _ints(get(get(snap, "perr", "'snap.perr'"), "lut", "snap.perr.lut"), 257, "perr.lut")
         if perr else None}
    for key in ("b0_q16", "b1_m", "b1_n", "b2_m", "b2_n"):
        c[key] = _int(get(lg, key, "logistic." + key), "logistic." + key, *I32)
    for key, hk in (("hinge_q", "q_q16"), ("hinge_m", "m"), ("hinge_n", "n")):
        c[key] = _int(get(hg, hk, "hinge." + hk), "hinge." + hk, *I32) if hg else 0
    it = snap.get("intap") or None
    if it is not None:
        x = {}
        for key, lo, hi in (("rows", 0, 65535), ("cols", 0, 65535), ("n_feat", 0, 65535), ("z_x",) + I32,
                            ("p_m",) + I32, ("p_n",) + I32, ("r_q16",) + I32, ("w_q16",) + I32):
            x[key] = _int(get(it, key, "intap." + key), "intap." + key, lo, hi)
        for key in ("g_m", "g_n", "h_q12"):
            x[key] = _ints(get(it, key, "intap." + key), x["n_feat"], "intap." + key)
        it = x
    c["intap"] = it
    return c, outputs


try:
    from binascii import crc32 as _crc32
except ImportError:  # pragma: no cover - ports without binascii.crc32
    _crc32 = None
_CRC_TABLE = None


def crc32(data, crc=0):
    """CRC-32 (IEEE, zlib-compatible)."""
    global _CRC_TABLE
    if _crc32 is not None:
        return _crc32(data, crc) & 0xFFFFFFFF
    if _CRC_TABLE is None:
        t = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
            t.append(c)
        _CRC_TABLE = t
    tab = _CRC_TABLE
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = tab[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Interpreter:
    """Int8 TFLite interpreter for the C core's operators but DEQUANTIZE (TFLM reference arithmetic;
    checked on the vector set of tests/vectors, docs/YOUR_MODEL.md lists them)."""

    def __init__(self, tflite):
        fb = _FB(tflite)
        if len(tflite) < 8:
            raise _err("corrupt model: %d bytes is too short for a .tflite" % len(tflite))
        if bytes(tflite[4:8]) != b"TFL3":
            raise _err("not a .tflite model (bad magic %r)" % bytes(tflite[4:8]))
        root = fb.root()
        codes = []
        for oc in fb.tables(root, 1):
            dep = fb.scalar(oc, 0, "i8", 0)
            bc = fb.scalar(oc, 3, "i32", 0)
            codes.append(max(dep, bc))
        subgraphs = fb.tables(root, 2)
        if len(subgraphs) != 1:
            raise _err("model has %d subgraphs, expected 1" % len(subgraphs))
        sg = subgraphs[0]
        buffers = fb.tables(root, 4)
        self.tensors = []
        for t in fb.tables(sg, 0):
            tt = _Tensor()
            tt.shape = tuple(fb.ints(t, 0))
            tt.type = fb.scalar(t, 1, "u8", 0)
            tt.name = fb.string(t, 3)
            q = fb.table(t, 4)
            if q is not None:
                tt.scale = tuple(fb.floats(q, 2))
                tt.zp = tuple(fb.longs(q, 3))
            bi = fb.scalar(t, 2, "u32", 0)
            if bi >= len(buffers) and bi != 0:
                raise _err("corrupt model: tensor %r names buffer %d of %d" % (tt.name, bi, len(buffers)))
            if tt.type not in _TYPE_SIZE:
                raise _err("tensor %r has unsupported type %d" % (tt.name, tt.type))
            tt.nbytes = _numel(tt.shape) * _TYPE_SIZE[tt.type]
            if bi and bi < len(buffers):
                s, n = fb.vec_checked(buffers[bi], 0, 1)
                if n == 0 and fb.scalar(buffers[bi], 1, "u32", 0):
                    raise _err("models with external buffers (>2 GB layout) are not supported")
                if n:
                    if n != tt.nbytes:
                        raise _err("corrupt model: tensor %r has %d data bytes, shape needs %d"
                                   % (tt.name, n, tt.nbytes))
                    raw = bytes(tflite[s:s + n])
                    if tt.type == T_INT8:
                        tt.data = _int8_array(raw)
                    elif tt.type == T_INT32:
                        tt.data = _int32_list(raw)
                    elif tt.type == T_INT64:
                        tt.data = list(struct.unpack("<%dq" % (n // 8), raw))
                    else:
                        tt.data = raw
            self.tensors.append(tt)
        nt = len(self.tensors)
        self.inputs = fb.ints(sg, 1)
        self.outputs = fb.ints(sg, 2)
        for i in self.inputs + self.outputs:
            if not 0 <= i < nt:
                raise _err("corrupt model: subgraph names tensor %d of %d" % (i, nt))
        self.ops = []
        for o in fb.tables(sg, 3):
            ci = fb.scalar(o, 0, "u32", 0)
            if ci >= len(codes):
                raise _err("corrupt model: operator code %d of %d" % (ci, len(codes)))
            op = _Op(codes[ci], fb.ints(o, 1), fb.ints(o, 2))
            for i in op.ins + op.outs:
                if not -1 <= i < nt:
                    raise _err("corrupt model: operator names tensor %d of %d" % (i, nt))
            op.opt = fb.table(o, 4)
            self._prepare(fb, op)
            self.ops.append(op)
        if len(self.inputs) != 1:
            raise _err("model has %d inputs, expected 1" % len(self.inputs))
        self.input = self.tensors[self.inputs[0]]
        if self.input.type != T_INT8:
            raise _err("model input is not int8")

    def _q(self, i):
        t = self.tensors[i]
        if not t.scale or not t.zp:
            raise _err("tensor %r is not quantized" % t.name)
        return t.scale[0], t.zp[0]

    def _prepare(self, fb, op):
        c = op.code
        name = _OP_NAMES.get(c, "builtin %d" % c)
        T = self.tensors
        for i in op.outs:
            if T[i].type != T_INT8:
                raise _err("op %s: output %r is not int8" % (name, T[i].name))
        o = op.opt
        if c in (OP_CONV_2D, OP_DEPTHWISE_CONV_2D):
            dw = c == OP_DEPTHWISE_CONV_2D
            x, w, y = T[op.ins[0]], T[op.ins[1]], T[op.outs[0]]
            b = T[op.ins[2]] if len(op.ins) > 2 and op.ins[2] >= 0 else None
            if w.data is None or w.type != T_INT8 or len(x.shape) != 4 or len(w.shape) != 4:
                raise _err("op %s: needs 4-D int8 input and constant int8 filter" % name)
            op.padding = fb.scalar(o, 0, "u8", 0) if o else 0
            op.sw = fb.scalar(o, 1, "i32", 1) if o else 1
            op.sh = fb.scalar(o, 2, "i32", 1) if o else 1
            if dw:
                op.dm = fb.scalar(o, 3, "i32", 1) if o else 1
                act = fb.scalar(o, 4, "u8", 0) if o else 0
                op.dw_ = fb.scalar(o, 5, "i32", 1) if o else 1
                op.dh = fb.scalar(o, 6, "i32", 1) if o else 1
            else:
                act = fb.scalar(o, 3, "u8", 0) if o else 0
                op.dw_ = fb.scalar(o, 4, "i32", 1) if o else 1
                op.dh = fb.scalar(o, 5, "i32", 1) if o else 1
            _, ih, iw, ic = x.shape
            if dw:
                _, fh, fw, oc = w.shape
                if oc != ic * op.dm:
                    raise _err("op %s: %d output channels != %d x %d" % (name, oc, ic, op.dm))
            else:
                oc, fh, fw, fic = w.shape
                if fic != ic:
                    raise _err("op %s: filter depth %d != input depth %d" % (name, fic, ic))
            oh, op.pt = _pad(op.padding, op.sh, op.dh, ih, fh)
            ow, op.pl = _pad(op.padding, op.sw, op.dw_, iw, fw)
            if tuple(y.shape) != (1, oh, ow, oc):
                raise _err("op %s: output shape %r, expected %r" % (name, y.shape, (1, oh, ow, oc)))
            self._conv_quant(op, x, w, y, b, oc, act, name)
            op.dims = (ih, iw, ic, fh, fw, oh, ow, oc)
        elif c == OP_FULLY_CONNECTED:
            x, w, y = T[op.ins[0]], T[op.ins[1]], T[op.outs[0]]
            b = T[op.ins[2]] if len(op.ins) > 2 and op.ins[2] >= 0 else None
            if w.data is None or w.type != T_INT8 or len(w.shape) != 2:
                raise _err("op FULLY_CONNECTED: needs a constant 2-D int8 filter")
            act = fb.scalar(o, 0, "u8", 0) if o else 0
            if o and fb.scalar(o, 1, "u8", 0):
                raise _err("op FULLY_CONNECTED: shuffled weights are not supported")
            oc, depth = w.shape
            if _numel(x.shape) % depth or _numel(y.shape) != _numel(x.shape) // depth * oc:
                raise _err("op FULLY_CONNECTED: shapes %r x %r -> %r do not fit" % (x.shape, w.shape, y.shape))
            self._conv_quant(op, x, w, y, b, oc, act, name)
            op.dims = (_numel(x.shape) // depth, depth, oc)
        elif c in (OP_MAX_POOL_2D, OP_AVERAGE_POOL_2D):
            x, y = T[op.ins[0]], T[op.outs[0]]
            op.padding = fb.scalar(o, 0, "u8", 0)
            op.sw = fb.scalar(o, 1, "i32", 1)
            op.sh = fb.scalar(o, 2, "i32", 1)
            fw = fb.scalar(o, 3, "i32", 1)
            fh = fb.scalar(o, 4, "i32", 1)
            act = fb.scalar(o, 5, "u8", 0)
            sx, zx = self._q(op.ins[0])
            sy, zy = self._q(op.outs[0])
            if sx != sy or zx != zy:
                raise _err("op %s: input and output quantization differ" % name)
            if len(x.shape) != 4:
                raise _err("op %s: needs a 4-D input" % name)
            _, ih, iw, ch = x.shape
            oh, op.pt = _pad(op.padding, op.sh, 1, ih, fh)
            ow, op.pl = _pad(op.padding, op.sw, 1, iw, fw)
            if tuple(y.shape) != (1, oh, ow, ch):
                raise _err("op %s: output shape %r, expected %r" % (name, y.shape, (1, oh, ow, ch)))
            op.lo, op.hi = _act_range(act, sy, zy)
            op.dims = (ih, iw, ch, fh, fw, oh, ow)
        elif c in _SHAPE_OPS:
            x, y = T[op.ins[0]], T[op.outs[0]]
            if x.type != T_INT8 or _numel(x.shape) != _numel(y.shape):
                raise _err("op %s: %r -> %r changes the element count or type" % (name, x.shape, y.shape))
            if c == OP_EXPAND_DIMS:
                ax = T[op.ins[1]] if len(op.ins) == 2 and op.ins[1] >= 0 else None
                if ax is None or ax.data is None or ax.type != T_INT32 or len(ax.data) != 1:
                    raise _err("op EXPAND_DIMS: axis must be one constant int32")
                a = ax.data[0] + (len(x.shape) + 1 if ax.data[0] < 0 else 0)
                if not 0 <= a <= len(x.shape) or tuple(y.shape) != tuple(x.shape[:a]) + (1,) + tuple(x.shape[a:]):
                    raise _err("op EXPAND_DIMS: output shape %r for axis %d of %r" % (y.shape, ax.data[0], x.shape))
        elif c == OP_CONCATENATION:
            self._prepare_concat(fb, op)
        elif c in (OP_RELU, OP_RELU6):
            x, y = T[op.ins[0]], T[op.outs[0]]
            if tuple(x.shape) != tuple(y.shape) or x.type != T_INT8:
                raise _err("op %s: needs an int8 input of the output's shape" % name)
            sx, zx = self._q(op.ins[0])
            sy, zy = self._q(op.outs[0])
            if c == OP_RELU:  # TFLM ReluQuantized: requantize s_in / s_out, clamp [zp_out, 127]
                op.mult, op.shift = quantize_multiplier(sx, 1.0, sy)
                op.zx, op.zy = zx, zy
                op.lo, op.hi = max(-128, zy), 127
            else:  # TFLM RELU6 clamps the input codes to [zp, q(6)]: only right when out == in
                if sx != sy or zx != zy:
                    raise _err("op RELU6: output quantized unlike its input")
                op.mult = None
                op.lo, op.hi = _act_range(3, sx, zx)
        elif c == OP_MEAN:
            self._prepare_mean(op)
        elif c == OP_SOFTMAX:
            x, y = T[op.ins[0]], T[op.outs[0]]
            sx, _ = self._q(op.ins[0])
            sy, zy = self._q(op.outs[0])
            if sy != 0.00390625 or zy != -128:
                raise _err("op SOFTMAX: int8 output must have scale 1/256 and zero point -128")
            beta = fb.scalar(o, 0, "f32", 1.0) if o else 1.0
            bm, be = _f32_parts(beta)
            xm, xe = _f32_parts(sx)
            op.mult, op.left_shift = _quantize_ratio(bm * xm, be + xe + 26, 1, 0)
            if op.left_shift < 0:
                raise _err("op SOFTMAX: input scale too small")
            op.diff_min = -((31 << 26) >> op.left_shift)
            op.depth = x.shape[-1] if x.shape else 1
            if _numel(x.shape) != _numel(y.shape):
                raise _err("op SOFTMAX: shapes %r -> %r" % (x.shape, y.shape))
        elif c == OP_ADD:
            self._prepare_add(fb, op)
        elif c == OP_LOGISTIC:
            self._prepare_logistic(op)
        elif c == OP_QUANTIZE:
            x, y = T[op.ins[0]], T[op.outs[0]]
            if x.type != T_INT8 or _numel(x.shape) != _numel(y.shape):
                raise _err("op QUANTIZE: only int8 -> int8 of the same shape is supported")
            sx, zx = self._q(op.ins[0])
            sy, zy = self._q(op.outs[0])
            op.mult, op.shift = quantize_multiplier(sx, 1.0, sy)
            op.zx, op.zy = zx, zy
        else:
            raise _err("unsupported operator %s" % name)

    def _conv_quant(self, op, x, w, y, b, oc, act, name):
        sx, zx = self._q(op.ins[0])
        sy, zy = self._q(op.outs[0])
        ws = w.scale
        if len(ws) not in (1, oc):
            raise _err("op %s: %d filter scales for %d channels" % (name, len(ws), oc))
        if any(z != 0 for z in w.zp):
            raise _err("op %s: filter zero point must be 0" % name)
        op.mult = []
        op.shift = []
        for ch in range(oc):
            m, s = quantize_multiplier(sx, ws[ch if len(ws) > 1 else 0], sy)
            op.mult.append(m)
            op.shift.append(s)
        if b is not None:
            if b.data is None or b.type != T_INT32 or len(b.data) != oc:
                raise _err("op %s: bias must be %d constant int32 values" % (name, oc))
            op.bias = b.data
        else:
            op.bias = [0] * oc
        op.in_off = -zx
        op.out_off = zy
        op.lo, op.hi = _act_range(act, sy, zy)

    def _prepare_mean(self, op):
        T = self.tensors
        if len(op.ins) != 2 or op.ins[1] < 0:
            raise _err("op MEAN: needs input and axis")
        x, ax, y = T[op.ins[0]], T[op.ins[1]], T[op.outs[0]]
        nd = len(x.shape)
        if ax.data is None or ax.type != T_INT32 or not 1 <= nd <= 4:
            raise _err("op MEAN: needs a 1-D to 4-D input and constant int32 axes")
        if not ax.data or any(not -nd <= a < nd for a in ax.data):
            raise _err("op MEAN: axes %r out of range for %d-D input" % (list(ax.data), nd))
        axes = sorted(set((a + nd) % nd for a in ax.data))
        sx, zx = self._q(op.ins[0])
        sy, zy = self._q(op.outs[0])
        kept = [x.shape[k] for k in range(nd) if k not in axes]
        if _numel(y.shape) != _numel(kept):
            raise _err("op MEAN: output shape %r" % (y.shape,))
        n = _numel([x.shape[k] for k in axes])
        if nd == 4 and axes == [1, 2]:
            op.dims = (x.shape[1], x.shape[2], x.shape[3])
            op.gen = None
        else:  # any other axes: output index of every input element (input order)
            op.dims = None
            strides = []
            m = 1
            for k in range(nd - 1, -1, -1):
                strides.insert(0, 0 if k in axes else m)
                m *= 1 if k in axes else x.shape[k]
            idx = [0]
            for k in range(nd):
                idx = [i + j * strides[k] for i in idx for j in range(x.shape[k])]
            op.gen = (idx, _numel(kept), n)
        op.zx, op.zy = zx, zy
        # TFLM int8 MEAN: multiplier of s_in/s_out with 1/n folded in (floor(log2 n) extra bits)
        m, sh = quantize_multiplier(sx, 1.0, sy)
        extra = min(_bitlen(n) - 1, 32, 31 + sh)
        op.mult = (m << extra) // n
        op.shift = sh - extra

    def _prepare_concat(self, fb, op):
        T = self.tensors
        y = T[op.outs[0]]
        nd = len(y.shape)
        axis = fb.scalar(op.opt, 0, "i32", 0) if op.opt else 0
        act = fb.scalar(op.opt, 1, "u8", 0) if op.opt else 0
        if act:
            raise _err("op CONCATENATION: fused activation is not supported")
        if not 2 <= len(op.ins) <= 3:
            raise _err("op CONCATENATION: needs 2 or 3 inputs")
        axis += nd if axis < 0 else 0
        if not 0 <= axis < nd:
            raise _err("op CONCATENATION: axis out of range")
        sy, zy = self._q(op.outs[0])
        total = 0
        for i in op.ins:
            x = T[i] if i >= 0 else None
            if x is None or x.data is not None or x.type != T_INT8:
                raise _err("op CONCATENATION: inputs must be int8 activations")
            if self._q(i) != (sy, zy):
                raise _err("op CONCATENATION: inputs quantized differently from the output")
            if len(x.shape) != nd or any(x.shape[k] != y.shape[k] for k in range(nd) if k != axis):
                raise _err("op CONCATENATION: shape %r does not fit %r" % (x.shape, y.shape))
            total += x.shape[axis]
        if total != y.shape[axis]:
            raise _err("op CONCATENATION: output size mismatch")
        base = _numel(y.shape[axis + 1:])
        op.outer = _numel(y.shape[:axis])
        op.chunks = [T[i].shape[axis] * base for i in op.ins]

    def _prepare_logistic(self, op):
        T = self.tensors
        x, y = T[op.ins[0]], T[op.outs[0]]
        if _numel(x.shape) != _numel(y.shape):
            raise _err("op LOGISTIC: shapes %r -> %r" % (x.shape, y.shape))
        sx, zx = self._q(op.ins[0])
        sy, zy = self._q(op.outs[0])
        if sy != 0.00390625 or zy != -128:
            raise _err("op LOGISTIC: int8 output must have scale 1/256 and zero point -128")
        # TFLM: frexp(s_in * 2^27) -> (multiplier, left shift); input radius for 4 integer bits
        m, e = _f32_parts(sx)
        if m <= 0:
            raise _err("op LOGISTIC: bad input scale")
        while m < (1 << 23):  # subnormal: normalize the mantissa
            m <<= 1
            e -= 1
        op.mult = m << 7
        op.left_shift = e + 51
        if op.left_shift > 30 or op.left_shift < -31:
            raise _err("op LOGISTIC: input scale out of range")
        op.radius = (15 << 27) >> op.left_shift if op.left_shift >= 1 else _INT32_MAX
        op.zx = zx

    def _prepare_add(self, fb, op):
        T = self.tensors
        a, b, y = T[op.ins[0]], T[op.ins[1]], T[op.outs[0]]
        if _numel(a.shape) != _numel(b.shape) or _numel(a.shape) != _numel(y.shape):
            raise _err("op ADD: broadcasting is not supported")
        sa, za = self._q(op.ins[0])
        sb, zb = self._q(op.ins[1])
        sy, zy = self._q(op.outs[0])
        act = fb.scalar(op.opt, 0, "u8", 0) if op.opt else 0
        am, ae = _f32_parts(sa)
        bm, be = _f32_parts(sb)
        ym, ye = _f32_parts(sy)
        # twice_max = 2 * max(sa, sb) (float32, exact)
        if sa >= sb:
            tm, te = am, ae + 1
        else:
            tm, te = bm, be + 1
        op.left_shift = 20
        op.m1, op.s1 = _quantize_ratio(am, ae, tm, te)
        op.m2, op.s2 = _quantize_ratio(bm, be, tm, te)
        op.mo, op.so = _quantize_ratio(tm, te, ym, ye + 20)
        op.za, op.zb, op.zy = -za, -zb, zy
        op.lo, op.hi = _act_range(act, sy, zy)

    # ------------------------------------------------------------ kernels

    def invoke(self, x):
        """Run the model on an int8 input; returns {tensor index: int8 array} for the outputs."""
        vals = {self.inputs[0]: x}
        T = self.tensors
        for op in self.ops:
            c = op.code
            a = vals[op.ins[0]] if op.ins[0] in vals else T[op.ins[0]].data
            if c == OP_CONV_2D:
                r = self._conv(op, a)
            elif c == OP_DEPTHWISE_CONV_2D:
                r = self._dwconv(op, a)
            elif c == OP_FULLY_CONNECTED:
                r = self._fc(op, a)
            elif c == OP_MAX_POOL_2D:
                r = self._maxpool(op, a)
            elif c == OP_AVERAGE_POOL_2D:
                r = self._avgpool(op, a)
            elif c in _SHAPE_OPS:
                r = a
            elif c == OP_CONCATENATION:
                r = self._concat(op, [vals[i] for i in op.ins])
            elif c in (OP_RELU, OP_RELU6):
                r = self._relu(op, a)
            elif c == OP_MEAN:
                r = self._mean(op, a)
            elif c == OP_SOFTMAX:
                r = self._softmax(op, a)
            elif c == OP_ADD:
                bb = vals[op.ins[1]] if op.ins[1] in vals else T[op.ins[1]].data
                r = self._add(op, a, bb)
            elif c == OP_LOGISTIC:
                r = self._logistic(op, a)
            elif c == OP_QUANTIZE:
                r = self._requantize(op, a)
            else:  # pragma: no cover - rejected in _prepare
                raise _err("unsupported operator %d" % c)
            vals[op.outs[0]] = r
        return {i: vals[i] for i in self.outputs}

    @staticmethod
    def _taps(op, oy, ox, wc):
        """The valid taps of output pixel (oy, ox) of a CONV_2D / DEPTHWISE_CONV_2D window:
        (input offset, filter offset) pairs, taps outside the input (padding) left out; wc is the
        filter's channel stride (in channels for CONV_2D, out channels for DEPTHWISE)."""
        ih, iw, ic, fh, fw = op.dims[:5]
        y0 = oy * op.sh - op.pt
        x0 = ox * op.sw - op.pl
        rows = []
        for ky in range(fh):
            iy = y0 + ky * op.dh
            if 0 <= iy < ih:
                for kx in range(fw):
                    ix = x0 + kx * op.dw_
                    if 0 <= ix < iw:
                        rows.append(((iy * iw + ix) * ic, (ky * fw + kx) * wc))
        return rows

    def _conv(self, op, x):
        ic, fh, fw, oh, ow, oc = op.dims[2:]
        w = self.tensors[op.ins[1]].data
        bias, mult, shift = op.bias, op.mult, op.shift
        ioff, ooff, lo, hi = op.in_off, op.out_off, op.lo, op.hi
        y = array.array("b", bytes(oh * ow * oc))
        fstride = fh * fw * ic
        yi = 0
        for oy in range(oh):
            for ox in range(ow):
                rows = self._taps(op, oy, ox, ic)
                for o in range(oc):
                    acc = 0
                    fb_ = o * fstride
                    for xo, fo in rows:
                        fo += fb_
                        for k in range(ic):
                            acc += w[fo + k] * (x[xo + k] + ioff)
                    acc = mbqm(acc + bias[o], mult[o], shift[o]) + ooff
                    y[yi] = lo if acc < lo else (hi if acc > hi else acc)
                    yi += 1
        return y

    def _dwconv(self, op, x):
        oh, ow, oc = op.dims[5:]
        dm = op.dm
        w = self.tensors[op.ins[1]].data
        bias, mult, shift = op.bias, op.mult, op.shift
        ioff, ooff, lo, hi = op.in_off, op.out_off, op.lo, op.hi
        y = array.array("b", bytes(oh * ow * oc))
        yi = 0
        for oy in range(oh):
            for ox in range(ow):
                rows = self._taps(op, oy, ox, oc)
                for o in range(oc):
                    ci = o // dm
                    acc = 0
                    for xo, fo in rows:
                        acc += w[fo + o] * (x[xo + ci] + ioff)
                    acc = mbqm(acc + bias[o], mult[o], shift[o]) + ooff
                    y[yi] = lo if acc < lo else (hi if acc > hi else acc)
                    yi += 1
        return y

    def _fc(self, op, x):
        nb, depth, oc = op.dims
        w = self.tensors[op.ins[1]].data
        bias, mult, shift = op.bias, op.mult, op.shift
        ioff, ooff, lo, hi = op.in_off, op.out_off, op.lo, op.hi
        y = array.array("b", bytes(nb * oc))
        yi = 0
        for bi in range(nb):
            xb = bi * depth
            xs = [x[xb + k] + ioff for k in range(depth)]
            for o in range(oc):
                acc = 0
                wo = o * depth
                for k in range(depth):
                    acc += w[wo + k] * xs[k]
                acc = mbqm(acc + bias[o], mult[o], shift[o]) + ooff
                y[yi] = lo if acc < lo else (hi if acc > hi else acc)
                yi += 1
        return y

    def _pool_windows(self, op):
        ih, iw, ch, fh, fw, oh, ow = op.dims
        for oy in range(oh):
            ys = oy * op.sh - op.pt
            y0, y1 = max(0, ys), min(fh + ys, ih)
            for ox in range(ow):
                xs = ox * op.sw - op.pl
                x0, x1 = max(0, xs), min(fw + xs, iw)
                yield y0, y1, x0, x1

    def _maxpool(self, op, x):
        ih, iw, ch, fh, fw, oh, ow = op.dims
        y = array.array("b", bytes(oh * ow * ch))
        lo, hi = op.lo, op.hi
        yi = 0
        for y0, y1, x0, x1 in self._pool_windows(op):
            for c in range(ch):
                m = -128
                for iy in range(y0, y1):
                    b = iy * iw
                    for ix in range(x0, x1):
                        v = x[(b + ix) * ch + c]
                        if v > m:
                            m = v
                y[yi] = lo if m < lo else (hi if m > hi else m)
                yi += 1
        return y

    def _avgpool(self, op, x):
        ih, iw, ch, fh, fw, oh, ow = op.dims
        y = array.array("b", bytes(oh * ow * ch))
        lo, hi = op.lo, op.hi
        yi = 0
        for y0, y1, x0, x1 in self._pool_windows(op):
            n = (y1 - y0) * (x1 - x0)
            for c in range(ch):
                acc = 0
                for iy in range(y0, y1):
                    b = iy * iw
                    for ix in range(x0, x1):
                        acc += x[(b + ix) * ch + c]
                if n == 0:
                    v = 0
                elif acc > 0:
                    v = (acc + n // 2) // n
                else:
                    v = -((-acc + n // 2) // n)
                y[yi] = lo if v < lo else (hi if v > hi else v)
                yi += 1
        return y

    def _concat(self, op, xs):
        y = array.array("b")
        for k in range(op.outer):
            for x, n in zip(xs, op.chunks):
                y.extend(x[k * n:(k + 1) * n])
        return y

    def _relu(self, op, x):
        n = len(x)
        lo, hi = op.lo, op.hi
        if op.mult is None:  # RELU6: clamp the codes
            return array.array("b", [lo if v < lo else (hi if v > hi else v) for v in x])
        y = array.array("b", bytes(n))
        m, s, zx, zy = op.mult, op.shift, op.zx, op.zy
        for i in range(n):
            v = mbqm(x[i] - zx, m, s) + zy
            y[i] = lo if v < lo else (hi if v > hi else v)
        return y

    def _mean(self, op, x):
        if op.gen is not None:
            idx, n_out, n = op.gen
            acc = [-op.zx * n] * n_out
            for i in range(len(idx)):
                acc[idx[i]] += x[i]
            y = array.array("b", bytes(n_out))
            for k in range(n_out):
                v = mbqm(acc[k], op.mult, op.shift) + op.zy
                y[k] = -128 if v < -128 else (127 if v > 127 else v)
            return y
        ih, iw, ch = op.dims
        n = ih * iw
        mult, shift, zy = op.mult, op.shift, op.zy
        off = -op.zx * n
        y = array.array("b", bytes(ch))
        for c in range(ch):
            acc = off
            for i in range(c, n * ch, ch):
                acc += x[i]
            v = mbqm(acc, mult, shift) + zy
            y[c] = -128 if v < -128 else (127 if v > 127 else v)
        return y

    def _softmax(self, op, x):
        n = len(x)
        depth = op.depth
        y = array.array("b", bytes(n))
        mult, ls, dmin = op.mult, op.left_shift, op.diff_min
        for base in range(0, n, depth):
            mx = -128
            for c in range(base, base + depth):
                if x[c] > mx:
                    mx = x[c]
            exps = []
            total = 0
            for c in range(base, base + depth):
                d = x[c] - mx
                if d >= dmin:
                    e = _exp_on_negative_values(_srdhm(d * (1 << ls), mult))
                    total += _rdpot(e, 12)
                else:
                    e = None
                exps.append(e)
            scale, nbits = _reciprocal(total, 12)
            for k in range(depth):
                e = exps[k]
                if e is None:
                    v = -128
                else:
                    v = _rdpot(_srdhm(scale, e), nbits + 23) - 128
                    v = -128 if v < -128 else (127 if v > 127 else v)
                y[base + k] = v
        return y

    def _logistic(self, op, x):
        n = len(x)
        y = array.array("b", bytes(n))
        rad, zx = op.radius, op.zx
        for i in range(n):
            v = x[i] - zx
            if v <= -rad:
                y[i] = -128
            elif v >= rad:
                y[i] = 127
            else:
                q4 = mbqm(v, op.mult, op.left_shift)
                if q4 == 0:
                    res = 1 << 30
                else:
                    pos = _one_over_one_plus_x(_exp_on_negative_values(-(q4 if q4 > 0 else -q4), 4))
                    res = pos if q4 > 0 else _INT32_MAX - pos
                r = _rdpot(res, 23) - 128
                y[i] = -128 if r < -128 else (127 if r > 127 else r)
        return y

    def _requantize(self, op, x):
        n = len(x)
        y = array.array("b", bytes(n))
        for i in range(n):
            v = mbqm(x[i] - op.zx, op.mult, op.shift) + op.zy
            y[i] = -128 if v < -128 else (127 if v > 127 else v)
        return y

    def _add(self, op, a, b):
        n = len(a)
        y = array.array("b", bytes(n))
        ls = 1 << op.left_shift
        for i in range(n):
            va = mbqm((a[i] + op.za) * ls, op.m1, op.s1)
            vb = mbqm((b[i] + op.zb) * ls, op.m2, op.s2)
            v = mbqm(va + vb, op.mo, op.so) + op.zy
            y[i] = op.lo if v < op.lo else (op.hi if v > op.hi else v)
        return y

    def arena_estimate(self):
        """Peak bytes of simultaneously live activation tensors (16-byte aligned) plus 8 bytes
        per requantized channel: what a lifetime-based planner needs at least."""
        T = self.tensors
        n = len(self.ops)
        first = {}
        last = {}
        for i in self.inputs:
            first[i] = -1
        for k, op in enumerate(self.ops):
            for i in op.outs:
                first.setdefault(i, k)
                last[i] = k
            for i in op.ins:
                if i >= 0 and T[i].data is None:
                    last[i] = k
        for i in self.outputs:
            last[i] = n
        alias = {}
        for op in self.ops:
            if op.code in _SHAPE_OPS:
                alias[op.outs[0]] = alias.get(op.ins[0], op.ins[0])
        life = {}
        for i in first:
            r = alias.get(i, i)
            lo, hi = life.get(r, (first[i], last.get(i, first[i])))
            life[r] = (min(lo, first[i]), max(hi, last.get(i, first[i])))
        peak = 0
        for k in range(-1, n + 1):
            live = 0
            for r, (lo, hi) in life.items():
                if lo <= k <= hi:
                    live += (T[r].nbytes + 15) & ~15
            peak = max(peak, live)
        chans = sum(len(op.mult) for op in self.ops if isinstance(getattr(op, "mult", None), list))
        return peak + 8 * chans


# ---------------------------------------------------------------- SNAP (docs/FIXED_POINT.md)

T_MAX = (1 << 24) - 1
_I32MAX = (1 << 31) - 1


def mul_shift(x, m, n):
    """FIXED_POINT.md mul_shift: x*M rounded half up by n bits."""
    if n == 0:
        return x * m
    return (x * m + (1 << (n - 1))) >> n


def _f32(x):
    """x rounded to float32 (what a C float holds)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def round_q16(x):
    """round(x * 2**16) exactly as the C core does it in float32 (halves away from zero)."""
    v = _f32(_f32(x) * 65536.0)
    return int(_f32(v + 0.5)) if v >= 0 else -int(_f32(-v + 0.5))


def encode_mn(c):
    """A float32 constant as (M, n): M = mantissa << 7 (|M| in [2**30, 2**31)), c = M / 2**n
    exactly; (0, 0) for 0 or when n > 62 (as snapuq_snap_set_beta)."""
    m, e = _f32_parts(c)
    if m == 0 or abs(m) < (1 << 23):  # zero or denormal
        return 0, 0
    n = 7 - e
    if n < 0:
        raise _err("constant %r is too large for fixed point" % c)
    if n > 62:
        return 0, 0
    return m << 7, n


def input_tap(x, it):
    """FIXED_POINT.md step 4b: s_in16 from the int8 input codes ``x`` (rows x cols, row-major)."""
    rows, cols, zx = it["rows"], it["cols"], it["z_x"]
    v = []
    for k in range(cols):
        a = 0
        for r in range(rows):
            a += x[r * cols + k] - zx
        v.append(a)
    for r in range(rows):
        a = 0
        for k in range(cols):
            a += x[r * cols + k] - zx
        v.append(a)
    if rows > 1:
        for k in range(cols):
            a = 0
            for r in range(rows - 1):
                d = x[(r + 1) * cols + k] - x[r * cols + k]
                a += -d if d < 0 else d
            v.append(a)
    if cols > 1:
        for r in range(rows):
            a = 0
            for k in range(cols - 1):
                d = x[r * cols + k + 1] - x[r * cols + k]
                a += -d if d < 0 else d
            v.append(a)
    gm, gn, hq = it["g_m"], it["g_n"], it["h_q12"]
    E = 0
    for j in range(len(v)):
        z = mul_shift(v[j], gm[j], gn[j]) - hq[j]
        if z > T_MAX:
            z = T_MAX
        elif z < -T_MAX:
            z = -T_MAX
        E += z * z
    y = E // (256 * it["n_feat"])
    if y > _I32MAX:
        y = _I32MAX
    s = mul_shift(y, it["p_m"], it["p_n"]) + it["r_q16"]
    if s < 0:
        s = -s
    return s if s < (1 << 30) - 1 else (1 << 30) - 1


def snap_int(outs, snap, x=None):
    """Integer SNAP path: ``outs`` maps output name -> int8 sequence, ``x`` the int8 input codes (needed
    with an input tap); returns a dict of ints."""
    acc = 0
    ebars = []
    stap = []
    s_in = 0
    if snap.get("intap"):
        if x is None:
            raise _err("this SNAP section has an input tap: the input codes are needed")
        s_in = input_tap(x, snap["intap"])
        acc += s_in * snap["intap"]["w_q16"]
    for tp in snap["taps"]:
        qa, qm, qv = outs[tp["a"]], outs[tp["mu"]], outs[tp["logvar"]]
        d = tp["d"]
        za, zm, zv, ka, km = tp["z_a"], tp["z_mu"], tp["z_v"], tp["k_a"], tp["k_mu"]
        R = tp["lut_shift"]
        lut = tp["inv_sigma_lut"]
        half = (1 << (R - 1)) if R else 0
        E = 0
        lam = 0
        for i in range(d):
            v = qv[i]
            delta = (qa[i] - za) * ka - (qm[i] - zm) * km
            if delta < 0:
                delta = -delta
            p = delta * lut[v + 128]
            t = (p + half) >> R if R else p
            if t > T_MAX:
                t = T_MAX
            E += t * t
            lam += v - zv
        e16 = E // (256 * d)
        if e16 > _I32MAX:
            e16 = _I32MAX
        s16 = mul_shift(e16, tp["p_m"], tp["p_n"]) + mul_shift(lam, tp["q_m"], tp["q_n"]) + tp["r_q16"]
        if s16 < 0:
            s16 = -s16
        if s16 > (1 << 30) - 1:
            s16 = (1 << 30) - 1
        ebars.append(e16)
        stap.append(s16)
        acc += s16 * tp["w_q16"]
    S16 = (acc + (1 << 15)) >> 16
    if S16 > _I32MAX:
        S16 = _I32MAX
    hg = snap.get("hinge")
    if hg:
        D = S16 - hg["q_q16"]
        if D <= 0:
            F16 = 0
        else:
            F16 = mul_shift(min(D, _I32MAX), hg["m"], hg["n"])
            if F16 > _I32MAX:
                F16 = _I32MAX
    else:
        F16 = S16
    qp = outs[snap["conf"].get("probs", "probs")]
    P1 = -1
    P2 = -1
    for v in qp:
        v += 128
        if v > P1:
            P2 = P1
            P1 = v
        elif v > P2:
            P2 = v
    m16 = 65536 - 256 * P1 + ((snap["conf"]["a_q16"] * P2 + 128) >> 8)
    if snap.get("combine", "logistic") == "perr_alarm":
        # FIXED_POINT.md v2 step 8: p_err from the 257-entry table, alarm = F / (F + k), noisy-OR
        pl = snap["perr"]["lut"]
        i = m16 >> 8
        if i > 255:
            i = 255
        f = m16 - (i << 8)
        P16 = pl[i] + (((pl[i + 1] - pl[i]) * f + 128) >> 8)
        A16 = (F16 << 16) // (F16 + snap["alarm"]["k_q16"])
        U16 = P16 + ((A16 * (65536 - P16) + 32768) >> 16)
        return {"ebar": ebars, "tap": stap, "S": S16, "F": F16, "m": m16, "Z": 0, "U": U16,
                "P": P16, "A": A16, "flag": U16 >= snap["u_threshold_q16"], "s_in": s_in}
    lg = snap["logistic"]
    Z16 = lg["b0_q16"] + mul_shift(F16, lg["b1_m"], lg["b1_n"]) + mul_shift(m16, lg["b2_m"], lg["b2_n"])
    zc = lg.get("z_clamp_q16", (1 << 20) - 1)
    Z16 = -zc if Z16 < -zc else (zc if Z16 > zc else Z16)
    st = lg.get("lut_step_shift", 11)
    sl = lg["sigmoid_lut"]
    a = -Z16 if Z16 < 0 else Z16
    i = a >> st
    f = a & ((1 << st) - 1)
    v = sl[i] + (((sl[i + 1] - sl[i]) * f + (1 << (st - 1))) >> st)
    U16 = v if Z16 >= 0 else 65536 - v
    return {"ebar": ebars, "tap": stap, "S": S16, "F": F16, "m": m16, "Z": Z16, "U": U16,
            "P": U16, "A": 0, "flag": U16 >= snap["u_threshold_q16"]}


def _argmax(seq):
    best = 0
    for i in range(1, len(seq)):
        if seq[i] > seq[best]:
            best = i
    return best


# ---------------------------------------------------------------- public API

_FIELDS = ("pred", "u", "s", "ebar", "flag", "u_q16", "z_q16", "s_q16", "f_q16", "m_q16",
           "ebar_q16", "tap_q16", "p_err", "alarm", "p_q16", "a_q16")
if namedtuple is not None:
    Result = namedtuple("Result", _FIELDS)
else:  # pragma: no cover
    def Result(*a):
        return a


def _result_items(r, what):
    """A Result (or any tuple of its 16 fields), else the C module's TypeError."""
    if isinstance(r, tuple) and len(r) == len(_FIELDS):
        return r
    raise TypeError("snapuq: %s needs a Result from Model.infer" % what)


def _is_path(x):
    return isinstance(x, str)


def _read(path):
    try:
        f = open(path, "rb")
        try:
            return memoryview(f)  # ROMFS: the file's bytes in place (flash), no copy
        except TypeError:
            pass
        with f:
            return f.read()
    except OSError as e:
        raise OSError(e.args[0] if e.args else 0, "can't open " + path) from None


_K256 = None


def _sha256_hex(data):
    """SHA-256 of ``data`` as 64 lower-case hex digits: hashlib where the port has it, else FIPS 180-4
    here (the firmware's snapuq_sha256.c in Python; ports without hashlib are the small ones)."""
    try:
        import hashlib

        h = hashlib.sha256(data).digest()
        return "".join("%02x" % b for b in h)
    except (ImportError, AttributeError):
        pass
    global _K256
    if _K256 is None:
        _K256 = [int(v, 16) for v in (
            "428a2f98 71374491 b5c0fbcf e9b5dba5 3956c25b 59f111f1 923f82a4 ab1c5ed5 d807aa98 12835b01 "
            "243185be 550c7dc3 72be5d74 80deb1fe 9bdc06a7 c19bf174 e49b69c1 efbe4786 0fc19dc6 240ca1cc "
            "2de92c6f 4a7484aa 5cb0a9dc 76f988da 983e5152 a831c66d b00327c8 bf597fc7 c6e00bf3 d5a79147 "
            "06ca6351 14292967 27b70a85 2e1b2138 4d2c6dfc 53380d13 650a7354 766a0abb 81c2c92e 92722c85 "
            "a2bfe8a1 a81a664b c24b8b70 c76c51a3 d192e819 d6990624 f40e3585 106aa070 19a4c116 1e376c08 "
            "2748774c 34b0bcb5 391c0cb3 4ed8aa4a 5b9cca4f 682e6ff3 748f82ee 78a5636f 84c87814 8cc70208 "
            "90befffa a4506ceb bef9a3f7 c67178f2").split()]
    k = _K256
    msk = 0xFFFFFFFF
    n = len(data)
    tail = bytes(data[n - n % 64:]) + b"\x80" + bytes((55 - n % 64) % 64) + struct.pack(">Q", 8 * n)
    hs = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]

    def rotr(x, r):
        return ((x >> r) | (x << (32 - r))) & msk

    mv = memoryview(data)
    for off in range(0, n - n % 64 + len(tail), 64):
        blk = mv[off:off + 64] if off + 64 <= n - n % 64 else tail[off - (n - n % 64):][:64]
        w = list(struct.unpack(">16I", bytes(blk)))
        for i in range(16, 64):
            a, b = w[i - 15], w[i - 2]
            s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >> 3)
            s1 = rotr(b, 17) ^ rotr(b, 19) ^ (b >> 10)
            w.append((w[i - 16] + s0 + w[i - 7] + s1) & msk)
        a, b, c, d, e, f, g, h = hs
        for i in range(64):
            t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i]) & msk
            t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) & msk
            a, b, c, d, e, f, g, h = (t1 + t2) & msk, a, b, c, (d + t1) & msk, e, f, g
        hs = [(x + y) & msk for x, y in zip(hs, (a, b, c, d, e, f, g, h))]
    return "".join("%08x" % v for v in hs)


def _dirname(path):
    i = path.rfind("/")
    return path[:i] if i > 0 else ("/" if i == 0 else ".")


class Model:
    """An exported snapuq model: ``Model(blob_or_path)`` or ``Model(tflite, manifest)``.

    ``model`` is a bytes-like .snapuq blob or .tflite, or a path to either; ``manifest`` is the
    snapuq.json manifest as a dict, JSON text or a path (default: snapuq.json beside a .tflite
    path). Raises ValueError for corrupt or inconsistent models, OSError for unreadable files.
    """

    def __init__(self, model, manifest=None):
        if _is_path(model):
            path = model
            model = _read(path)
            if manifest is None and bytes(model[:4]) != BLOB_MAGIC:
                manifest = _dirname(path) + "/snapuq.json"
        elif not isinstance(model, (bytes, bytearray, memoryview)):
            try:
                model = memoryview(model)  # e.g. a ROMFS file: its bytes in place
            except TypeError:
                raise TypeError("snapuq: model must be bytes, bytearray, memoryview, a ROMFS file "
                                "or a path") from None
        if isinstance(model, bytearray):
            model = bytes(model)  # read in place for the object's life: a copy, not the caller's buffer
        sec = None
        if bytes(model[:4]) == BLOB_MAGIC:
            tfl, sec = _split_blob(model)
            man = {}
        else:
            tfl = model
            if manifest is None:
                raise ValueError("snapuq: not a .snapuq blob: make one with `snapuq micropython blob DIR`")
            man = manifest
        if _is_path(man) and not man.lstrip().startswith("{") and len(man) < 256 and "\n" not in man:
            man = _read(man)
        if isinstance(man, memoryview):
            man = bytes(man)
        if isinstance(man, (bytes, bytearray, str)):
            try:
                man = json.loads(man)
            except ValueError:
                raise ValueError("snapuq: manifest is not valid JSON") from None
        if not isinstance(man, dict):
            raise ValueError("snapuq: manifest must be a JSON object")
        self._tflite = tfl
        self._it = Interpreter(tfl)
        self._sec = sec
        self._sha = None
        if sec is not None:
            self.manifest = self._check_blob(sec)
        else:
            self.manifest = man
            self._check_manifest()
        self._last = None

    def _check_blob(self, sec):
        """The SNAP section against the loaded model: snapuq_blob_snap_config's checks (_check_config)."""
        it = self._it
        if not it.outputs:
            raise _err("model not loaded")
        if not 1 <= sec.n_taps <= MAX_TAPS:
            raise _err("SNAP section: tap count outside 1..SNAPUQ_MAX_TAPS")
        c = sec.config()
        outs = _check_config(it, c, sec.outputs(names=False), sec.name, sec.n_taps, sec.it_off != 0,
                             len(sec.norm["scale"]) if sec.norm else 0)
        man = sec.manifest(c, outs, classes=False)
        self._setup(man, man.get("input", {}).get("normalization"))
        return man

    def _check_manifest(self):
        """Model(tflite, manifest): the C reader's checks on the fields a blob of this manifest would carry
        (_manifest_config, _check_config); the normalization with the manifest's own messages."""
        man = self.manifest
        c, outs = _manifest_config(man)
        _check_config(self._it, c, outs, lambda name: name, len(c["taps"]), c["intap"] is not None, 0)
        self._setup(man, (man.get("input") or {}).get("normalization"))

    @property
    def snap_sha256(self):
        """sha256 (hex) of the blob's SNAP section, as the firmware reports it (`profile` snap_sha256=...) and
        the host computes it (snapuq.micropython.snap_sha256); None for Model(tflite, manifest)."""
        if self._sec is None:
            return None
        if self._sha is None:
            self._sha = _sha256_hex(self._sec.sec)
        return self._sha

    @property
    def class_names(self):
        """The class names (a tuple of str; read from the blob on access, as the C module does)."""
        if self._sec is not None:
            return self._sec.class_names()
        return tuple(self.manifest.get("class_names", ()))

    def _setup(self, man, norm):
        it = self._it
        taps = man["snap"]["taps"]
        self._out_index = {}
        for name, o in man["outputs"].items():
            self._out_index[name] = o["index"]
        inp = it.input
        self.input_shape = tuple(inp.shape)
        self.input_scale = inp.scale[0] if inp.scale else 1.0
        self.input_zero_point = inp.zp[0] if inp.zp else 0
        self.input_size = _numel(inp.shape)
        self._set_normalization(norm)
        self.n_classes = _numel(it.tensors[it.outputs[self._out_index["logits"]]].shape)
        self.taps = tuple((tp.get("name", "tap%d" % k), tp["d"]) for k, tp in enumerate(taps))
        self.outputs = tuple(sorted(self._out_index, key=lambda n: self._out_index[n]))
        self.arena_bytes = it.arena_estimate()

    def _set_normalization(self, norm):
        """The recorded input normalization (blob section v3, or the manifest's input.normalization):
        per channel (scale, offset) as exact doubles (mantissa, exponent); None when there is none."""
        self._norm = None
        self.input_normalization = None
        if not norm or norm.get("kind", "none") == "none" or "scale" not in norm:
            return
        sc, of = list(norm["scale"]), list(norm["offset"])
        if "scale_bits" in norm:  # from the blob: the exact doubles, whatever this port's float is
            sb, ob = list(norm["scale_bits"]), list(norm["offset_bits"])
        else:
            sb = [struct.unpack("<Q", struct.pack("<d", float(v)))[0] for v in sc]
            ob = [struct.unpack("<Q", struct.pack("<d", float(v)))[0] for v in of]
        c = len(sb)
        if c < 1 or len(ob) != c or self.input_size % c:
            raise ValueError("snapuq: input normalization has %d channels, the input %d values"
                             % (c, self.input_size))
        if not _norm_bits_ok(sb, ob):
            raise ValueError("snapuq: input normalization is not finite or has scale 0")
        self._norm = [(_f64_parts(sb[k]), _f64_parts(ob[k])) for k in range(c)]
        self.input_normalization = (tuple(float(v) for v in sc), tuple(float(v) for v in of))

    # -------------------------------------------------------- inference

    def quantize(self, x):
        """int8 codes (bytearray) of a float sequence: TFLite AffineQuantize (roundf(x/s) + zp), after the
        model's recorded input normalization x * scale[c] + offset[c] in double when it has one -- the rule
        of the C core's input path (firmware/core/snapuq_input.h): NaN gives the zero point, +-inf and huge
        readings saturate, ties round half away from zero (tests/host/test_input_path.py)."""
        n = self.input_size
        if len(x) != n:
            raise ValueError("snapuq: input has %d values, model needs %d" % (len(x), n))
        s = self.input_scale
        z = self.input_zero_point
        norm = self._norm
        out = bytearray(n)
        for i in range(n):
            v = x[i]
            if not isinstance(v, (int, float)):
                raise TypeError("snapuq: input values must be numbers")
            v = float(v)
            if v != v:  # NaN: the zero point, like the C module and snapuq_model_quantize_input
                q = z
            elif norm is not None:
                sc, of = norm[i % len(norm)]
                try:
                    bits = struct.unpack("<I", struct.pack("<f", v))[0]
                except OverflowError:  # CPython refuses what a C float cast makes +-inf
                    bits = 0x7F800000 if v > 0 else 0xFF800000
                if (bits >> 23) & 0xFF == 0xFF:  # +-inf times the scale's sign
                    q = 127 if (bits >> 31 == 0) == (sc[0] > 0) else -128
                else:
                    xm, xe = _f32_bits_parts(bits)
                    fm, fe = _normalize_f32(xm, xe, sc, of)
                    q = (127 if fm > 0 else -128) if fe is None else _div_round_parts(fm, fe, s) + z
            elif v > 3.4028234e38 or v < -3.4028234e38:  # beyond float32: saturate
                q = 127 if v > 0 else -128
            else:
                q = _f32_div_round(v, s) + z
            q = -128 if q < -128 else (127 if q > 127 else q)
            out[i] = q & 0xFF
        return out

    def _input_codes(self, x):
        n = self.input_size
        if isinstance(x, (bytes, bytearray, memoryview)):
            if len(x) != n:
                raise ValueError("snapuq: input has %d bytes, model needs %d" % (len(x), n))
            return _int8_array(bytes(x))
        if isinstance(x, array.array):
            if len(x) != n:
                raise ValueError("snapuq: input has %d values, model needs %d" % (len(x), n))
            raw = bytes(x)
            if len(raw) == n:  # one-byte items: int8 codes as they are
                return _int8_array(raw)
            if n and isinstance(x[0], float):
                return _int8_array(bytes(self.quantize(x)))
            raise TypeError("snapuq: array input must have typecode 'b' (int8) or 'f'/'d' (float)")
        if isinstance(x, (list, tuple)):
            return _int8_array(bytes(self.quantize(x)))
        raise TypeError("snapuq: input must be an int8 bytearray/array('b') or a list of floats")

    def run(self, x):
        """Run the model only; returns {output name: array('b')} (no SNAP scoring)."""
        codes = self._input_codes(x)
        self._last_input = codes
        res = self._it.invoke(codes)
        it = self._it
        outs = {name: res[it.outputs[idx]] for name, idx in self._out_index.items()}
        self._last = outs
        return outs

    def infer(self, x):
        """Prediction, U(x), S(x) and per-tap surprisal for one input (see Result fields)."""
        outs = self.run(x)
        r = snap_int(outs, self.manifest["snap"], self._last_input)
        return Result(_argmax(outs["logits"]), r["U"] / 65536, r["S"] / 65536,
                      tuple(e / 65536 for e in r["ebar"]), bool(r["flag"]), r["U"], r["Z"],
                      r["S"], r["F"], r["m"], tuple(r["ebar"]), tuple(r["tap"]),
                      r["P"] / 65536, r["A"] / 65536, r["P"], r["A"])

    def output(self, name):
        """int8 codes of output ``name`` from the last infer()/run() as bytes."""
        if self._last is None:
            raise ValueError("snapuq: no inference yet")
        if not isinstance(name, str):
            raise TypeError("snapuq: output name must be a str")
        if name not in self._last:
            raise ValueError("snapuq: no output named %r" % (name,))
        return bytes(self._last[name])

    # -------------------------------------------------------- calibration and monitoring

    @property
    def beta(self):
        """(b0, b1, b2) of the logistic U = sigmoid(b0 + b1 S' + b2 m) as floats."""
        lg = self.manifest["snap"]["logistic"]
        return (lg["b0_q16"] / 65536, lg["b1_m"] / (1 << lg["b1_n"]) if lg["b1_m"] else 0.0,
                lg["b2_m"] / (1 << lg["b2_n"]) if lg["b2_m"] else 0.0)

    @beta.setter
    def beta(self, value):
        self.set_beta(value)

    @property
    def u_threshold(self):
        """The decision threshold u* on U (Result.flag is U >= u*)."""
        return self.manifest["snap"]["u_threshold_q16"] / 65536

    kernels = "python"

    def set_beta(self, beta):
        """Store a float (b0, b1, b2) in the fixed-point logistic constants (|b| < 16384)."""
        if len(beta) != 3:
            raise ValueError("snapuq: beta needs 3 values")
        for b in beta:
            if not -16384.0 < b < 16384.0:
                raise ValueError("snapuq: beta values must be finite and |b| < 16384")
        lg = self.manifest["snap"]["logistic"]
        b1 = encode_mn(beta[1])
        b2 = encode_mn(beta[2])
        lg["b0_q16"] = round_q16(beta[0])
        lg["b1_m"], lg["b1_n"] = b1
        lg["b2_m"], lg["b2_n"] = b2

    def calibrate(self, xs, labels, capacity=256, nonneg=True, l2=1e-3, max_iter=25, tol=1e-5,
                  apply=True):
        """Refit beta on labelled samples (label = true class; a sample is positive when the
        prediction is wrong). Keeps the newest ``capacity`` samples. Returns (beta, iterations)."""
        cal = Calibrator(capacity, nonneg=nonneg, l2=l2, max_iter=max_iter, tol=tol)
        for x, y in zip(xs, labels):
            cal.add(self.infer(x), y)
        beta, iters = cal.solve()
        if apply:
            self.set_beta(beta)
        return beta, iters

    def calibrator(self, capacity=256, nonneg=True, l2=1e-3, max_iter=25, tol=1e-5):
        """An empty Calibrator; feed it with cal.add(m.infer(x), label), then m.set_beta(cal.solve()[0])."""
        return Calibrator(capacity, nonneg=nonneg, l2=l2, max_iter=max_iter, tol=tol)

    def monitor(self, window=100, threshold=None, cusum_ref=None, cusum_h=None):
        """Drift monitor on U: window mean >= threshold, or CUSUM of (U - cusum_ref) >= cusum_h.
        Values are U floats (cusum_h in U x samples); defaults: threshold = the model's decision
        threshold u*, cusum_ref = u*/2, cusum_h = 10 u*."""
        thr = self.manifest["snap"]["u_threshold_q16"]
        return Monitor(window, thr if threshold is None else round_q16(threshold),
                       thr // 2 if cusum_ref is None else round_q16(cusum_ref),
                       10 * thr if cusum_h is None else round_q16(cusum_h))

    def stream(self, xs, monitor=None):
        """Generator of (Result, alarm bits) over inputs, through a drift monitor."""
        mon = monitor if monitor is not None else self.monitor()
        if not isinstance(mon, Monitor):
            raise TypeError("snapuq: monitor must be a snapuq.Monitor")
        for x in xs:
            r = self.infer(x)
            yield r, mon.push(r)


class Calibrator:
    """Logistic fit of U = sigmoid(b0 + b1 s + b2 m) over the newest ``capacity`` samples:
    projected, damped Newton steps from the intercept-only start, as snapuq_fit_solve does
    (float arithmetic: float32 on boards, double on the unix port, so betas agree with the C
    module to float precision, not bit for bit)."""

    def __init__(self, capacity=256, nonneg=True, l2=1e-3, max_iter=25, tol=1e-5):
        if not (1 <= capacity <= 100000 and 1 <= max_iter <= 1000 and l2 >= 0 and tol > 0):
            raise ValueError("snapuq: bad calibrator options")  # the C module's limits; NaN fails too
        self.capacity = capacity
        self._samples = []
        self._head = 0
        self._nonneg = nonneg
        self._l2 = l2
        self._max_iter = max_iter
        self._tol = tol

    def push(self, s, m, wrong):
        """Add one (S', m, wrong) triple (floats as Result.f_q16 / 2**16, m_q16 / 2**16)."""
        smp = (float(s), float(m), 1 if wrong else 0)
        if not (-3.4028234e38 <= smp[0] <= 3.4028234e38 and -3.4028234e38 <= smp[1] <= 3.4028234e38):
            raise ValueError("snapuq: calibration features must be finite")  # finite as float32, as in C
        if len(self._samples) < self.capacity:
            self._samples.append(smp)
        else:
            self._samples[self._head] = smp
        self._head = (self._head + 1) % self.capacity

    def add(self, result, label):
        """Add one scored inference with its true class."""
        result = _result_items(result, "add()")
        self.push(result[8] / 65536, result[9] / 65536, result[0] != label)

    @property
    def count(self):
        return len(self._samples)

    def _objective(self, b):
        import math
        f = 0.5 * self._l2 * (b[1] * b[1] + b[2] * b[2])
        for s, m, y in self._samples:
            z = b[0] + b[1] * s + b[2] * m
            f += (z if z > 0 else 0.0) + math.log(1 + math.exp(-abs(z))) - (z if y else 0.0)
        return f

    def solve(self):
        """(beta, iterations); ValueError when the labels or the system do not allow a fit."""
        import math
        sm = self._samples
        npos = sum(y for _, _, y in sm)
        if npos < 2 or len(sm) - npos < 2:
            raise ValueError("snapuq: calibration needs >= 2 correct and >= 2 wrong samples")
        l2 = self._l2
        b = [(npos / len(sm) - 0.5) * 4.0, 0.0, 0.0]
        f_old = self._objective(b)
        for it in range(self._max_iter):
            g = [0.0, 0.0, 0.0]
            H = [[0.0] * 3 for _ in range(3)]
            for s, m, y in sm:
                z = b[0] + b[1] * s + b[2] * m
                p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
                r = p - y
                w = p * (1 - p)
                f = (1.0, s, m)
                for i in range(3):
                    g[i] += r * f[i]
                    for j in range(3):
                        H[i][j] += w * f[i] * f[j]
            for j in (1, 2):
                g[j] += l2 * b[j]
                H[j][j] += l2
            free = [j for j in range(3) if not (self._nonneg and j > 0 and b[j] <= 0 and g[j] > 0)]
            xs = _solve(H, g, free)
            if xs is None:
                raise ValueError("snapuq: calibration system is singular")
            step = [0.0, 0.0, 0.0]
            for k, j in enumerate(free):
                step[j] = xs[k]
            t = 1.0
            maxstep = 0.0
            for _ in range(30):
                nb = [b[j] - t * step[j] for j in range(3)]
                if self._nonneg:
                    nb[1] = max(0.0, nb[1])
                    nb[2] = max(0.0, nb[2])
                f_new = self._objective(nb)
                if f_new <= f_old + 1e-6 * abs(f_old):
                    maxstep = max(abs(nb[j] - b[j]) for j in range(3))
                    b = nb
                    f_old = f_new
                    break
                t *= 0.5
            if maxstep < self._tol:
                return tuple(b), it + 1
        raise ValueError("snapuq: calibration did not converge in %d steps" % self._max_iter)


def _solve(A, y, idx):
    """Solve the sub-system A[idx][idx] x = y[idx] (Gaussian elimination, partial pivoting)."""
    n = len(idx)
    M = [[A[i][j] for j in idx] + [y[i]] for i in idx]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        if abs(M[p][c]) < 1e-20:
            return None
        M[c], M[p] = M[p], M[c]
        for r in range(c + 1, n):
            f = M[r][c] / M[c][c]
            for k in range(c, n + 1):
                M[r][k] -= f * M[c][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (M[r][n] - sum(M[r][k] * x[k] for k in range(r + 1, n))) / M[r][r]
    return x


class Monitor:
    """Sliding-window mean of U16 plus a one-sided CUSUM, integer like snapuq_monitor_push.

    push(r) takes a Result or a U16 integer and returns alarm bits: 1 = window full and its
    mean >= threshold, 2 = CUSUM >= h. Thresholds are Q16 integers (Model.monitor converts)."""

    def __init__(self, window=100, threshold=32768, cusum_ref=16384, cusum_h=327680):
        if not 1 <= window <= 100000 or cusum_h <= 0:
            raise ValueError("snapuq: monitor needs window >= 1 and cusum_h > 0")
        self.window = window
        self.threshold = threshold
        self.cusum_ref = cusum_ref
        self.cusum_h = cusum_h
        self._ring = [0] * window
        self.reset()

    def reset(self):
        self._head = 0
        self.count = 0
        self._sum = 0
        self.cusum = 0
        self.n_seen = 0
        self.first_alarm = 0

    def push(self, u):
        if not isinstance(u, int):
            u = _result_items(u, "push()")[5]  # Result.u_q16
        w = self.window
        if self.count == w:
            self._sum -= self._ring[self._head]
        else:
            self.count += 1
        self._ring[self._head] = u
        self._sum += u
        self._head = (self._head + 1) % w
        alarm = 0
        if self.count == w and self._sum >= self.threshold * w:
            alarm |= 1
        c = self.cusum + u - self.cusum_ref
        self.cusum = c if c > 0 else 0
        if self.cusum >= self.cusum_h:
            alarm |= 2
        self.n_seen += 1
        if alarm and self.first_alarm == 0:
            self.first_alarm = self.n_seen
        return alarm

    @property
    def mean(self):
        """Window mean of U as a float."""
        return self._sum / self.count / 65536 if self.count else 0.0
