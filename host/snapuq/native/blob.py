"""The model blob format (docs/BLOB.md): one file carrying the int8 .tflite and a compact binary SNAP
section (taps, output indices and names, LUTs, fixed-point constants, class names), so that a board needs a
single copy or upload and no JSON parser. firmware/core/snapuq_blob.c reads it (firmware upload, the C
module, the host library of snapuq.native.ccore) and so does the pure-MicroPython twin."""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from typing import Any

import numpy as np

from snapuq import snap_section as snap_layout
from snapuq.data.user import normalization_channels
from snapuq.errors import ModelFormatError
from snapuq.modeldir import ModelPaths

MAGIC = b"SNUQ"
VERSION = 2
HEADER = 32
TFLITE_ALIGN = 16
BLOB_NAME = ModelPaths.BLOB

# SNAP section v3 (docs/BLOB.md): header, tap record and output record sizes (v2 = v1 + the input-tap
# record offset at header byte 108; v3 = v2 + the input-normalization record offset at byte 112), all
# from the one layout description (firmware/core/snapuq_snap_section.h, read by snapuq.snap_section)
SNAP_MAGIC = b"SNAP"
SNAP_VERSION = 3
SNAP_HEADER = snap_layout.size("HEADER", SNAP_VERSION)
INTAP_RECORD = snap_layout.size("INTAP")
TAP_RECORD = snap_layout.size("TAP")
OUT_RECORD = snap_layout.size("OUTPUT")
SIGMOID_LEN = 513
LUT_LEN = 256
PERR_LEN = 257
PERR_STEP_SHIFT = 8


def snap_section(manifest: dict[str, Any]) -> bytes:
    """The binary SNAP section of a manifest (docs/BLOB.md): everything the device's integer
    path and the MicroPython API read, nothing else (no float provenance, no JSON)."""
    try:
        outs = manifest["outputs"]
        snap = manifest["snap"]
        taps, lg, conf = snap["taps"], snap["logistic"], snap["conf"]
        strings = bytearray()
        offsets: dict[str, int] = {}

        def sref(text: str) -> int:
            if text not in offsets:
                offsets[text] = len(strings)
                strings.extend(text.encode() + b"\0")
            return offsets[text]

        names = sorted(outs, key=lambda n: outs[n]["index"])
        out_recs = b"".join(snap_layout.pack("OUTPUT", {"index": int(outs[n]["index"]), "name": sref(n),
                                                        "zero_point": int(outs[n].get("zero_point", 0))})
                            for n in names)
        classes = [str(c) for c in manifest.get("class_names", [])]
        class_refs = b"".join(struct.pack("<I", sref(c)) for c in classes)
        hinge = snap.get("hinge") or None
        for key, known in (("variant", ("best", "literal")), ("combine", ("logistic", "perr_alarm"))):
            if snap.get(key, known[0]) not in known:
                raise ModelFormatError(f"manifest snap.{key} {snap[key]!r} is none of {', '.join(known)}")
        probs = conf.get("probs", "probs")
        n_classes = int(np.prod(outs["logits"].get("shape", [manifest.get("n_classes", 0)])))
        # layout: header | taps | outputs | class names | input tap | sigmoid LUT | p_err LUT | tap LUTs |
        # input-tap tables | input normalization | strings
        it = snap.get("intap") or None
        taps_off = SNAP_HEADER
        outs_off = taps_off + TAP_RECORD * len(taps)
        cls_off = outs_off + len(out_recs)
        it_off = cls_off + len(class_refs) if it else 0
        sig_off = cls_off + len(class_refs) + (INTAP_RECORD if it else 0)
        perr = snap.get("combine") == "perr_alarm"
        perr_off = sig_off + 4 * SIGMOID_LEN if perr else 0
        lut_off = sig_off + 4 * SIGMOID_LEN + (4 * PERR_LEN if perr else 0)
        tap_recs = b""
        for k, t in enumerate(taps):
            if len(t["inv_sigma_lut"]) != LUT_LEN:
                raise ModelFormatError(f"manifest tap {k}: inv_sigma_lut must have {LUT_LEN} entries")
            rec = {f: int(t[f]) for f in ("d", "z_a", "z_mu", "z_v", "k_a", "k_mu", "lut_shift", "p_m", "p_n",
                                          "q_m", "q_n", "r_q16", "w_q16")}
            rec.update(out_a=int(outs[t["a"]]["index"]), out_mu=int(outs[t["mu"]]["index"]),
                       out_logvar=int(outs[t["logvar"]]["index"]), name=sref(str(t.get("name", f"tap{k}"))),
                       inv_sigma_lut_off=lut_off + 4 * LUT_LEN * k)
            tap_recs += snap_layout.pack("TAP", rec)
        if len(lg["sigmoid_lut"]) != SIGMOID_LEN:
            raise ModelFormatError(f"manifest sigmoid_lut must have {SIGMOID_LEN} entries")
        it_tab = lut_off + 4 * LUT_LEN * len(taps)
        it_rec = b""
        nf = int(it["n_feat"]) if it else 0
        if it:
            if not all(len(it[k]) == nf for k in ("g_m", "g_n", "h_q12")):
                raise ModelFormatError(f"manifest intap tables must have n_feat = {nf} entries")
            rec = {k: int(it[k]) for k in ("rows", "cols", "z_x", "p_m", "p_n", "r_q16", "w_q16")}
            rec.update(n_feat=nf, g_m_off=it_tab, g_n_off=it_tab + 4 * nf, h_q12_off=it_tab + 8 * nf)
            it_rec = snap_layout.pack("INTAP", rec)
        norm_rec = input_normalization_record(manifest)
        norm_off = it_tab + 12 * nf if norm_rec else 0
        str_off = it_tab + 12 * nf + len(norm_rec)
        head = snap_layout.pack("HEADER", {
            "magic": SNAP_MAGIC, "version": SNAP_VERSION, "header_len": SNAP_HEADER,
            "tap_rec_len": TAP_RECORD, "out_rec_len": OUT_RECORD,
            "spec_version": int(snap.get("spec_version", 1)),
            "variant": 1 if snap.get("variant") == "literal" else 0, "hinge": 1 if hinge else 0,
            "n_taps": len(taps), "n_classes": n_classes, "n_outputs": len(names),
            "out_logits": int(outs["logits"]["index"]), "out_probs": int(outs[probs]["index"]),
            "n_class_names": len(classes), "combine": 1 if perr else 0, "perr_step_shift": PERR_STEP_SHIFT,
            "conf_a_q16": int(conf["a_q16"]),
            **{k: int(lg[k]) for k in ("b0_q16", "b1_m", "b1_n", "b2_m", "b2_n")},
            "hinge_q_q16": int(hinge["q_q16"]) if hinge else 0, "hinge_m": int(hinge["m"]) if hinge else 0,
            "hinge_n": int(hinge["n"]) if hinge else 0, "u_threshold_q16": int(snap["u_threshold_q16"]),
            "z_clamp_q16": int(lg.get("z_clamp_q16", (1 << 20) - 1)),
            "lut_step_shift": int(lg.get("lut_step_shift", 11)), "sigmoid_lut_off": sig_off,
            "tap_table_off": taps_off, "out_table_off": outs_off, "class_table_off": cls_off,
            "strings_off": str_off, "strings_len": len(strings),
            "alarm_k_q16": int(snap["alarm"]["k_q16"]) if perr else 0, "perr_lut_off": perr_off,
            "intap_off": it_off, "in_norm_off": norm_off}, SNAP_VERSION)
        luts = struct.pack(f"<{SIGMOID_LEN}i", *map(int, lg["sigmoid_lut"]))
        if perr:
            if len(snap["perr"]["lut"]) != PERR_LEN:
                raise ModelFormatError(f"manifest perr.lut must have {PERR_LEN} entries")
            luts += struct.pack(f"<{PERR_LEN}i", *map(int, snap["perr"]["lut"]))
        for t in taps:
            luts += struct.pack(f"<{LUT_LEN}i", *map(int, t["inv_sigma_lut"]))
        if it:
            for k in ("g_m", "g_n", "h_q12"):
                luts += struct.pack(f"<{nf}i", *map(int, it[k]))
    except (KeyError, TypeError, ValueError, struct.error) as e:
        if isinstance(e, ModelFormatError):
            raise
        msg = f"manifest cannot be packed into a SNAP section: {type(e).__name__}: {e}"
        raise ModelFormatError(msg) from None
    body = head + tap_recs + out_recs + class_refs + it_rec + luts + norm_rec + bytes(strings)
    return body + bytes((-len(body)) % 4)


def snap_sha256(manifest: dict[str, Any]) -> str:
    """The identity of a manifest's SNAP constants as the device runs them: sha256 of its SNAP section (the
    bytes of a blob's section; SNAPUQ_MODEL_SNAP_SHA256 in the generated snapuq_model.h). The firmware reports
    it (`profile` snap_sha256=...) and the harness compares it with the host's manifest."""
    return hashlib.sha256(snap_section(manifest)).hexdigest()


def input_normalization_record(manifest: dict[str, Any]) -> bytes:
    """The section's input-normalization record (docs/BLOB.md), b"" when the manifest's input has none:
    u16 channels C, u16 0, then C float64 scales and C float64 offsets, the exact doubles of the generated
    `snapuq_model_quantize_input` (x = float32(raw * scale[c] + offset[c]), c = element index % C)."""
    inp = manifest.get("input") or {}
    norm = inp.get("normalization") or {}
    if norm.get("kind", "none") == "none" or "scale" not in norm:
        return b""
    sc, of = input_normalization(inp)
    # the record's fixed part holds the first scale; the other scales and the offsets follow it
    return snap_layout.pack("NORM", {"channels": len(sc), "scale": sc[0]}) + struct.pack(
        f"<{2 * len(sc) - 1}d", *sc[1:], *of)


def write_blob(tflite: bytes, manifest: dict[str, Any]) -> bytes:
    """Pack a .tflite and the SNAP section of its manifest into one blob (docs/BLOB.md)."""
    if len(tflite) < 8 or tflite[4:8] != b"TFL3":
        raise ModelFormatError("write_blob: not a .tflite (missing TFL3 identifier)")
    sec = snap_section(manifest)
    toff = HEADER + (-HEADER) % TFLITE_ALIGN
    tend = toff + len(tflite)
    soff = tend + (-tend) % 4
    body = bytearray(soff + len(sec) - HEADER)
    body[toff - HEADER:tend - HEADER] = tflite
    body[soff - HEADER:] = sec
    crc = zlib.crc32(bytes(body)) & 0xFFFFFFFF
    head = MAGIC + struct.pack("<HHIIIIII", VERSION, HEADER, toff, len(tflite), soff, len(sec), crc, 0)
    return head + bytes(body)


def input_normalization(inp: dict) -> tuple[list[float], list[float]]:
    """Per-channel (scale, offset) of the manifest's input.normalization, as snapuq.data.user.
    apply_normalization broadcasts them over the input (one value, or one per channel of the last axis)."""
    shape = [int(x) for x in inp.get("shape", [])]
    try:
        so = normalization_channels(inp.get("normalization"), shape)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelFormatError(f"manifest: input.normalization is not a scale/offset record ({e})") from None
    if so is None:
        return [1.0], [0.0]
    sc, of = [float(v) for v in so[0]], [float(v) for v in so[1]]
    last = shape[-1] if shape else 1
    if len(sc) != len(of) or not sc or not all(math.isfinite(v) for v in sc + of):
        raise ModelFormatError("manifest: input.normalization needs finite scale/offset lists of one length")
    if len(sc) not in (1, last):
        raise ModelFormatError(f"manifest: input.normalization has {len(sc)} channels, the input {last}")
    return sc, of
