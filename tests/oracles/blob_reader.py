"""An independent Python reader of the model blob (docs/BLOB.md), written from the page and used
only to check the writer (snapuq.native.blob.write_blob) and the twin's reader against it. The
product's readers are the C core's (firmware/core/snapuq_blob.c: firmware, MicroPython C module,
the host's snapuq.native.ccore) and the pure-MicroPython twin's.

    tflite, device_manifest = read_blob(blob_bytes)
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from snapuq.errors import ModelFormatError

# the sizes docs/BLOB.md states (blob header; SNAP section v1 header and records; LUT lengths)
MAGIC, VERSION, HEADER = b"SNUQ", 2, 32
SNAP_MAGIC, SNAP_HEADER, TAP_RECORD, OUT_RECORD = b"SNAP", 108, 64, 8
SIGMOID_LEN, LUT_LEN, PERR_LEN = 513, 256, 257
_HDR = struct.Struct("<4sHHHHBBBBHHHHHBB12i6IiI")   # the section header table of docs/BLOB.md
_TAP = struct.Struct("<HHHH12iII")
_OUT = struct.Struct("<HhI")
assert _HDR.size == SNAP_HEADER and _TAP.size == TAP_RECORD and _OUT.size == OUT_RECORD
SNAP_HEADER_V2 = 112  # v2 appends the u32 offset of the input-tap record (0: none)
_INTAP = struct.Struct("<HHHH5i3I")
assert _INTAP.size == 40
SNAP_HEADER_V3 = 116  # v3 appends the u32 offset of the input-normalization record (0: none)


def parse_snap_section(sec: bytes) -> dict[str, Any]:
    """The device manifest (outputs, class_names, snap) a SNAP section holds; the inverse of
    snap_section() on the fields the device uses."""
    if len(sec) < SNAP_HEADER or sec[:4] != SNAP_MAGIC:
        raise ModelFormatError("SNAP section: bad magic")
    (_, ver, hl, tr, orec, spec, variant, hinge, n_taps, n_classes, n_out, o_logits, o_probs, n_cls, combine,
     pshift, a_q16, b0, b1m, b1n, b2m, b2n, hq, hm, hn, thr, zc, step, sig_off, taps_off, outs_off, cls_off,
     str_off, str_len, alarm_k, perr_off) = _HDR.unpack_from(sec, 0)
    if ver < 1 or hl < SNAP_HEADER or tr < TAP_RECORD or orec < OUT_RECORD:
        raise ModelFormatError("SNAP section: unsupported version or record sizes")
    strings = sec[str_off:str_off + str_len]

    def sget(off: int) -> str:
        end = strings.find(b"\0", off)
        if off >= len(strings) or end < 0:
            raise ModelFormatError("SNAP section: bad string offset")
        return strings[off:end].decode()

    def ints(off: int, n: int) -> list[int]:
        if off % 4 or off + 4 * n > len(sec):
            raise ModelFormatError("SNAP section: LUT outside the section")
        return list(struct.unpack_from(f"<{n}i", sec, off))

    outputs: dict[str, Any] = {}
    by_index: dict[int, str] = {}
    for i in range(n_out):
        idx, zp, name = _OUT.unpack_from(sec, outs_off + i * orec)
        outputs[sget(name)] = {"index": idx, "zero_point": zp}
        by_index[idx] = sget(name)
    taps = []
    for k in range(n_taps):
        f = _TAP.unpack_from(sec, taps_off + k * tr)
        keys = ("z_a", "z_mu", "z_v", "k_a", "k_mu", "lut_shift", "p_m", "p_n", "q_m", "q_n", "r_q16",
                "w_q16")
        tap: dict[str, Any] = {"name": sget(f[17]), "d": f[0], "a": by_index.get(f[1]),
                               "mu": by_index.get(f[2]), "logvar": by_index.get(f[3])}
        tap.update(zip(keys, f[4:16]))
        tap["inv_sigma_lut"] = ints(f[16], LUT_LEN)
        taps.append(tap)
    snap: dict[str, Any] = {
        "spec_version": spec, "variant": "literal" if variant else "best",
        "combine": "perr_alarm" if combine == 1 else "logistic", "taps": taps,
        "hinge": {"q_q16": hq, "m": hm, "n": hn} if hinge else None,
        "conf": {"a_q16": a_q16, "probs": by_index.get(o_probs, "probs")},
        "logistic": {"b0_q16": b0, "b1_m": b1m, "b1_n": b1n, "b2_m": b2m, "b2_n": b2n, "z_clamp_q16": zc,
                     "lut_step_shift": step, "sigmoid_lut": ints(sig_off, SIGMOID_LEN)},
        "u_threshold_q16": thr, "section_version": ver, "n_classes": n_classes,
    }
    if combine == 1:
        snap["perr"] = {"lut": ints(perr_off, PERR_LEN), "step_shift": pshift}
        snap["alarm"] = {"k_q16": alarm_k}
    it_off = struct.unpack_from("<I", sec, SNAP_HEADER)[0] if ver >= 2 and hl >= SNAP_HEADER_V2 else 0
    snap["intap"] = None
    if it_off:  # section v2: the input-tap record (rows, cols, n_feat, pad, 5 x i32, 3 table offsets)
        rows, cols, nf, _, zx, pm, pn, rq, wq, o_gm, o_gn, o_h = _INTAP.unpack_from(sec, it_off)
        snap["intap"] = {"rows": rows, "cols": cols, "n_feat": nf, "z_x": zx, "p_m": pm, "p_n": pn,
                         "r_q16": rq, "w_q16": wq, "g_m": ints(o_gm, nf), "g_n": ints(o_gn, nf),
                         "h_q12": ints(o_h, nf)}  # fmt: skip
    classes = [sget(struct.unpack_from("<I", sec, cls_off + 4 * i)[0]) for i in range(n_cls)]
    if by_index.get(o_logits) != "logits":
        raise ModelFormatError("SNAP section: the logits output is not named 'logits'")
    man: dict[str, Any] = {"outputs": outputs, "class_names": classes, "snap": snap}
    nm_off = struct.unpack_from("<I", sec, SNAP_HEADER_V2)[0] if ver >= 3 and hl >= SNAP_HEADER_V3 else 0
    if nm_off:  # section v3: u16 channels C, u16 pad, C float64 scales, C float64 offsets
        (c,) = struct.unpack_from("<H", sec, nm_off)
        if nm_off % 4 or c < 1 or nm_off + 4 + 16 * c > len(sec):
            raise ModelFormatError("SNAP section: input-normalization record outside the section")
        v = struct.unpack_from(f"<{2 * c}d", sec, nm_off + 4)
        bits = list(struct.unpack_from(f"<{2 * c}Q", sec, nm_off + 4))
        man["input"] = {"normalization": {"kind": "blob", "scale": list(v[:c]), "offset": list(v[c:]),
                                          "scale_bits": bits[:c], "offset_bits": bits[c:]}}
    return man



def read_blob(buf: bytes) -> tuple[bytes, dict[str, Any]]:
    """(tflite, device manifest) from a blob; ModelFormatError names what is wrong."""
    if len(buf) < HEADER or buf[:4] != MAGIC:
        raise ModelFormatError("not a snapuq blob (bad magic)")
    ver, hsize, toff, tlen, soff, slen, crc, _ = struct.unpack_from("<HHIIIIII", buf, 4)
    if ver != VERSION:
        raise ModelFormatError(f"unsupported blob version {ver}")
    if hsize != HEADER or toff < hsize or soff < toff + tlen or soff + slen != len(buf):
        raise ModelFormatError(f"corrupt blob: section offsets do not fit a {len(buf)}-byte blob")
    if zlib.crc32(buf[HEADER:]) & 0xFFFFFFFF != crc:
        raise ModelFormatError("corrupt blob: CRC mismatch")
    return bytes(buf[toff:toff + tlen]), parse_snap_section(bytes(buf[soff:soff + slen]))
