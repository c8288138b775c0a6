"""Generate `snapuq_model.c` / `snapuq_model.h`: the int8 model bytes, the SNAP constants and the
output map as C99 arrays and struct initializers for firmware/core (docs/FIXED_POINT.md v1).

    write_c_model(out_dir, manifest, tflite_bytes)   # -> (path_c, path_h)

The header declares
    snapuq_model_tflite[] / snapuq_model_tflite_len    flatbuffer bytes (16-byte aligned)
    snapuq_model_snap_config                           const snapuq_snap_config_t (snapuq_snap.h)
    snapuq_model_class_names[]                         class labels
    SNAPUQ_MODEL_NAME, SNAPUQ_MODEL_N_CLASSES, SNAPUQ_MODEL_INPUT_SCALE/ZERO_POINT/BYTES,
    SNAPUQ_MODEL_OUT_<NAME> (output index per manifest output name)
    SNAPUQ_MODEL_SNAP_SHA256   sha256 of the SNAP constants (snapuq.native.blob.snap_sha256), which the
                               firmware reports and the harness checks
    SNAPUQ_MODEL_OPS(X)        the model's operators (manifest model.ops, from the C core) as an
                               X(NAME, name) list for SNAPUQ_OP_TABLE (firmware/core/snapuq_ops.h)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from snapuq.errors import ModelFormatError
from snapuq.io import write_text
from snapuq.modeldir import ModelPaths
from snapuq.native.blob import input_normalization, snap_sha256

MAX_TAPS = 8
SPEC_VERSION = 3
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _ident(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]", "_", name).upper()
    return s if s and not s[0].isdigit() else "_" + s


def _c_string(s: str) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch in "\\\"":
            out.append("\\" + ch)
        elif 32 <= o < 127:
            out.append(ch)
        else:
            out.append("?")
    return '"' + "".join(out) + '"'


def _i32(v: Any, what: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ModelFormatError(f"manifest: {what} = {v!r} is not an integer in [{lo}, {hi}]")
    return v


def _int_list(v: Any, n: int, what: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> list[int]:
    if not isinstance(v, list) or len(v) != n:
        raise ModelFormatError(f"manifest: {what} must be a list of {n} integers")
    return [_i32(x, f"{what}[{i}]", lo, hi) for i, x in enumerate(v)]


def _c_double(v: float) -> str:
    """A double constant in C that the compiler reads back as exactly v (shortest round-trip digits)."""
    r = repr(float(v))
    return r if any(ch in r for ch in ".en") else r + ".0"


def _rows(values: list[int], per_line: int = 12, indent: str = "    ") -> str:
    return "\n".join(indent + ", ".join(str(x) for x in values[i:i + per_line]) + ","
                     for i in range(0, len(values), per_line))


def _output_index(manifest: dict[str, Any], name: str) -> int:
    outs = manifest.get("outputs")
    if not isinstance(outs, dict) or name not in outs:
        raise ModelFormatError(f"manifest: output {name!r} is missing from 'outputs'")
    return _i32(outs[name].get("index"), f"outputs[{name}].index", 0, 32767)


def header_snap_sha256(header: str | Path) -> str | None:
    """SNAPUQ_MODEL_SNAP_SHA256 of a generated snapuq_model.h; None where it has none (written by an older
    snapuq) or is absent."""
    try:
        text = Path(header).read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r'^#define SNAPUQ_MODEL_SNAP_SHA256 "([0-9a-f]{64})"', text, re.M)
    return m.group(1) if m else None


def check_c_header(header: str | Path, manifest: dict[str, Any]) -> None:
    """One-line ModelFormatError when the generated snapuq_model.h holds the SNAP constants of another
    snapuq.json than `manifest` (what the firmware built from it would score with)."""

    got = header_snap_sha256(header)
    if got is not None and got != (want := snap_sha256(manifest)):
        raise ModelFormatError(f"{header}: the SNAP constants of another snapuq.json (sha256 {got[:12]}; "
                               f"this one's are {want[:12]}); run `snapuq export {Path(header).parent}`")


def write_c_model(out_dir: str | Path, manifest: dict[str, Any], tflite_bytes: bytes) -> tuple[Path, Path]:
    """Write snapuq_model.c and snapuq_model.h into out_dir; raises ModelFormatError when the
    manifest lacks a constant or holds one outside the ranges FIXED_POINT.md allows."""
    if not isinstance(tflite_bytes, (bytes, bytearray)) or len(tflite_bytes) < 8 or \
            bytes(tflite_bytes[4:8]) != b"TFL3":
        raise ModelFormatError("cgen: model bytes are not a .tflite flatbuffer (identifier TFL3)")
    snap = manifest.get("snap")
    if not isinstance(snap, dict):
        raise ModelFormatError("manifest: key 'snap' is missing")
    if snap.get("spec_version") not in (1, 2, SPEC_VERSION):  # v1 = v2 with the logistic combine; v3 adds 4b
        raise ModelFormatError(f"manifest: snap.spec_version {snap.get('spec_version')!r} (C core implements "
                               f"{SPEC_VERSION})")
    variant = snap.get("variant")
    if variant not in ("best", "literal"):
        raise ModelFormatError(f"manifest: snap.variant {variant!r} is neither 'best' nor 'literal'")
    taps = snap.get("taps")
    if not isinstance(taps, list) or not 1 <= len(taps) <= MAX_TAPS:
        raise ModelFormatError(f"manifest: snap.taps must list 1..{MAX_TAPS} taps")
    conf = snap.get("conf") or {}
    logistic = snap.get("logistic") or {}
    hinge = snap.get("hinge")
    probs_name = conf.get("probs", "probs")
    outs = manifest.get("outputs", {})
    # the classes are the logits tensor's elements (the core checks .n_classes against them), never the
    # number of class names or labels; names a manifest lacks are numbered
    classes = [str(c) for c in (manifest.get("class_names") or [])]
    logits_shape = (outs.get("logits") or {}).get("shape")
    n_classes = math.prod(int(v) for v in logits_shape) if logits_shape else len(classes)
    if n_classes < 2:
        raise ModelFormatError("manifest: cannot tell the number of classes "
                               "(outputs.logits.shape or class_names)")
    if len(classes) > n_classes:
        raise ModelFormatError(f"manifest: {len(classes)} class_names, the logits have {n_classes} elements")
    classes += [str(i) for i in range(len(classes), n_classes)]
    name = str(manifest.get("name") or manifest.get("dataset") or "model")

    tap_inits, luts = [], []
    for k, tp in enumerate(taps):
        w = f"snap.taps[{k}]"
        d = _i32(tp.get("d"), f"{w}.d", 1, 16384)
        lut = _int_list(tp.get("inv_sigma_lut"), 256, f"{w}.inv_sigma_lut", 0, 2**30 - 1)
        luts.append(f"static const int32_t k_lut{k}[256] = {{\n{_rows(lut)}\n}};")
        fields = {
            "d": d,
            "out_a": _output_index(manifest, tp.get("a", f"tap{k}_a")),
            "out_mu": _output_index(manifest, tp.get("mu", f"tap{k}_mu")),
            "out_logvar": _output_index(manifest, tp.get("logvar", f"tap{k}_logvar")),
            "z_a": _i32(tp.get("z_a"), f"{w}.z_a", -128, 127),
            "z_mu": _i32(tp.get("z_mu"), f"{w}.z_mu", -128, 127),
            "z_v": _i32(tp.get("z_v"), f"{w}.z_v", -128, 127),
            "k_a": _i32(tp.get("k_a"), f"{w}.k_a", 0, 2**20),
            "k_mu": _i32(tp.get("k_mu"), f"{w}.k_mu", 0, 2**20),
            "lut_shift": _i32(tp.get("lut_shift"), f"{w}.lut_shift", 0, 62),
            "inv_sigma_lut": f"k_lut{k}",
            "p_m": _i32(tp.get("p_m"), f"{w}.p_m"), "p_n": _i32(tp.get("p_n"), f"{w}.p_n", 0, 62),
            "q_m": _i32(tp.get("q_m"), f"{w}.q_m"), "q_n": _i32(tp.get("q_n"), f"{w}.q_n", 0, 62),
            "r_q16": _i32(tp.get("r_q16"), f"{w}.r_q16"),
        }
        tap_inits.append("        {" + ", ".join(f".{a} = {b}" for a, b in fields.items()) + "},")
    weights = [_i32(tp.get("w_q16"), f"snap.taps[{k}].w_q16", 0, 2**30 - 1) for k, tp in enumerate(taps)]
    sig = _int_list(logistic.get("sigmoid_lut"), 513, "snap.logistic.sigmoid_lut", 0, 65536)
    if hinge is not None:
        h = (_i32(hinge.get("q_q16"), "snap.hinge.q_q16"), _i32(hinge.get("m"), "snap.hinge.m"),
             _i32(hinge.get("n"), "snap.hinge.n", 0, 62))
    else:
        h = (0, 0, 0)
    combine = snap.get("combine", "logistic")
    if combine not in ("logistic", "perr_alarm"):
        raise ModelFormatError(f"manifest: snap.combine {combine!r} is neither 'logistic' nor 'perr_alarm'")
    perr_init, perr_ref, k_q16 = "", "NULL", 0
    if combine == "perr_alarm":
        plut = _int_list((snap.get("perr") or {}).get("lut"), 257, "snap.perr.lut", 0, 65536)
        k_q16 = _i32((snap.get("alarm") or {}).get("k_q16"), "snap.alarm.k_q16", 1, 2**31 - 1)
        perr_init = f"static const int32_t k_perr[257] = {{\n{_rows(plut)}\n}};\n"
        perr_ref = "k_perr"
    params = {
        "w_q16": "{" + ", ".join(map(str, weights)) + "}",
        "hinge_q_q16": h[0], "hinge_m": h[1], "hinge_n": h[2],
        "b0_q16": _i32(logistic.get("b0_q16"), "snap.logistic.b0_q16"),
        "b1_m": _i32(logistic.get("b1_m"), "snap.logistic.b1_m"),
        "b1_n": _i32(logistic.get("b1_n"), "snap.logistic.b1_n", 0, 62),
        "b2_m": _i32(logistic.get("b2_m"), "snap.logistic.b2_m"),
        "b2_n": _i32(logistic.get("b2_n"), "snap.logistic.b2_n", 0, 62),
        "alarm_k_q16": k_q16,
        "u_threshold_q16": _i32(snap.get("u_threshold_q16"), "snap.u_threshold_q16", 0, 65537),
    }
    it = snap.get("intap")
    intap_init, intap_luts = "", ""
    if it:
        nf = _i32(it.get("n_feat"), "snap.intap.n_feat", 1, 16384)
        gm = _int_list(it.get("g_m"), nf, "snap.intap.g_m", -(2**31), 2**31 - 1)
        gn = _int_list(it.get("g_n"), nf, "snap.intap.g_n", 0, 62)
        hq = _int_list(it.get("h_q12"), nf, "snap.intap.h_q12", -(2**31), 2**31 - 1)
        intap_luts = "".join(f"static const int32_t k_in_{n}[{nf}] = {{\n{_rows(v)}\n}};\n"
                             for n, v in (("g_m", gm), ("g_n", gn), ("h_q12", hq)))
        ifields = {
            "rows": _i32(it.get("rows"), "snap.intap.rows", 1, 65535),
            "cols": _i32(it.get("cols"), "snap.intap.cols", 1, 65535),
            "n_feat": nf, "z_x": _i32(it.get("z_x"), "snap.intap.z_x", -128, 127),
            "g_m": "k_in_g_m", "g_n": "k_in_g_n", "h_q12": "k_in_h_q12",
            "p_m": _i32(it.get("p_m"), "snap.intap.p_m"), "p_n": _i32(it.get("p_n"), "snap.intap.p_n", 0, 62),
            "r_q16": _i32(it.get("r_q16"), "snap.intap.r_q16"),
            "w_q16": _i32(it.get("w_q16"), "snap.intap.w_q16", 0, 2**30 - 1),
        }
        body_it = ", ".join(f".{a} = {b}" for a, b in ifields.items())
        intap_init = "    .has_intap = 1,\n    .intap = {" + body_it + "},\n"
    inp = manifest.get("input") or {}
    in_scale = float(inp.get("scale", 0.0))
    in_zp = int(inp.get("zero_point", 0))
    in_shape = [int(x) for x in inp.get("shape", [])]
    in_bytes = 1
    for x in in_shape:
        in_bytes *= x
    n_scale, n_offset = input_normalization(inp)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path_h, path_c = ModelPaths(out_dir).c_header, ModelPaths(out_dir).c_source
    out_macros = "\n".join(f"#define SNAPUQ_MODEL_OUT_{_ident(n)} {_output_index(manifest, n)}"
                           for n in sorted(outs))
    banner = "generated by `snapuq export` (snapuq.export.cgen); do not edit."
    ops = [str(o) for o in (manifest.get("model") or {}).get("ops") or []]
    if any(not re.fullmatch(r"[A-Z][A-Z0-9_]*", o) for o in ops):
        raise ModelFormatError(f"manifest: model.ops {ops!r} are not builtin operator names")
    ops_macro = "".join(
        ["\n\n/* the operators this model uses, X(NAME, name) as in snapuq_ops.h: an image that runs only\n"
         "   it can link SNAPUQ_OP_TABLE(SNAPUQ_MODEL_OPS); instead of the stock ops/op_table.c */\n"
         "#define SNAPUQ_MODEL_OPS(X)"] + [f" \\\n    X({o}, {o.lower()})" for o in ops]) if ops else ""

    snap_id = snap_sha256(manifest)
    write_text(path_h, f"""/* snapuq_model.h - {banner} */
#ifndef SNAPUQ_MODEL_H
#define SNAPUQ_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "snapuq_input.h"
#include "snapuq_snap.h"

#define SNAPUQ_MODEL_NAME {_c_string(name)}
/* sha256 of these SNAP constants as a blob's SNAP section (snapuq.native.blob.snap_sha256): the firmware
   reports it (`profile` snap_sha256=...), the harness refuses a device built from another export */
#define SNAPUQ_MODEL_SNAP_SHA256 "{snap_id}"
#define SNAPUQ_MODEL_TFLITE_BYTES {len(tflite_bytes)}u
#define SNAPUQ_MODEL_N_CLASSES {n_classes}
#define SNAPUQ_MODEL_N_TAPS {len(taps)}
#define SNAPUQ_MODEL_INPUT_BYTES {in_bytes if in_shape else 0}u
#define SNAPUQ_MODEL_INPUT_SCALE {in_scale!r}f
#define SNAPUQ_MODEL_INPUT_ZERO_POINT {in_zp}
#define SNAPUQ_MODEL_INPUT_CHANNELS {len(n_scale)}u
{out_macros}{ops_macro}

/* A raw input (SNAPUQ_MODEL_INPUT_BYTES floats, as your data went into `snapuq train`; for a built-in
   dataset, as its loader returns it) -> the model's int8 input codes: the recorded normalization
   x = raw * scale[c] + offset[c] (c = i % SNAPUQ_MODEL_INPUT_CHANNELS: the channel, last axis; in double,
   then rounded to float32, exactly as the host prepares the data), then TFLite's quantization
   clamp(round_half_away(x / SNAPUQ_MODEL_INPUT_SCALE) + zero point) in float32. A NaN reading gives the
   zero point. The core's input path computes it (firmware/core/snapuq_input.h, snapuq_input_codes). */
void snapuq_model_quantize_input(const float *raw, int8_t *codes);
/* the same map for the core's input path: snapuq_input_from_float(&model, &snapuq_model_input_map, raw,
   SNAPUQ_MODEL_INPUT_BYTES, &snapuq_model_snap_config, &s_in16) fills the input and runs the input tap */
extern const snapuq_input_map_t snapuq_model_input_map;

/* the .tflite flatbuffer, 16-byte aligned (snapuq_model_init reads it in place) */
extern const uint8_t snapuq_model_tflite[];
extern const size_t snapuq_model_tflite_len;
/* SNAP constants and default calibration (FIXED_POINT.md v3) */
extern const snapuq_snap_config_t snapuq_model_snap_config;
/* class labels, SNAPUQ_MODEL_N_CLASSES entries */
extern const char *const snapuq_model_class_names[];

#endif /* SNAPUQ_MODEL_H */
""")
    data = ",".join(f"0x{b:02x}" for b in tflite_bytes)
    lines = [data[i:i + 100] for i in range(0, len(data), 100)]
    body = "\n".join("    " + ln.strip(",") + "," for ln in lines)
    write_text(path_c, f"""/* snapuq_model.c - {banner} */
#include "snapuq_model.h"

#if defined(__GNUC__) || defined(__clang__)
#define SNAPUQ_MODEL_ALIGN __attribute__((aligned(16)))
#else
#define SNAPUQ_MODEL_ALIGN
#endif

const uint8_t snapuq_model_tflite[{len(tflite_bytes)}] SNAPUQ_MODEL_ALIGN = {{
{body}
}};
const size_t snapuq_model_tflite_len = {len(tflite_bytes)}u;

{chr(10).join(luts)}

static const int32_t k_sigmoid[513] = {{
{_rows(sig)}
}};
{perr_init}{intap_luts}
const snapuq_snap_config_t snapuq_model_snap_config = {{
    .spec_version = {SPEC_VERSION},
    .variant = {"SNAPUQ_SNAP_BEST" if variant == "best" else "SNAPUQ_SNAP_LITERAL"},
    .hinge = {1 if hinge is not None else 0},
    .n_taps = {len(taps)},
    .n_classes = {n_classes},
    .out_logits = {_output_index(manifest, "logits")},
    .out_probs = {_output_index(manifest, probs_name)},
    .conf_a_q16 = {_i32(conf.get("a_q16"), "snap.conf.a_q16", 0, 65536)},
    .combine = {"SNAPUQ_COMBINE_PERR_ALARM" if combine == "perr_alarm" else "SNAPUQ_COMBINE_LOGISTIC"},
    .sigmoid_lut = k_sigmoid,
    .perr_lut = {perr_ref},
    .taps = {{
{chr(10).join(tap_inits)}
    }},
    .defaults = {{{", ".join(f".{a} = {b}" for a, b in params.items())}}},
{intap_init}}};

const char *const snapuq_model_class_names[{len(classes)}] = {{{", ".join(_c_string(c) for c in classes)}}};

static const double k_in_norm_scale[{len(n_scale)}] = {{{", ".join(_c_double(v) for v in n_scale)}}};
static const double k_in_norm_offset[{len(n_offset)}] = {{{", ".join(_c_double(v) for v in n_offset)}}};

const snapuq_input_map_t snapuq_model_input_map = {{
    SNAPUQ_MODEL_INPUT_SCALE, SNAPUQ_MODEL_INPUT_ZERO_POINT, SNAPUQ_MODEL_INPUT_CHANNELS, k_in_norm_scale,
    k_in_norm_offset}};

void snapuq_model_quantize_input(const float *raw, int8_t *codes)
{{
    snapuq_input_codes(&snapuq_model_input_map, raw, SNAPUQ_MODEL_INPUT_BYTES, codes);
}}
""")
    return path_c, path_h
