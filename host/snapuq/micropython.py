"""Host side of the MicroPython module: the single-file model blob and an mpremote helper.

The blob (``model.snapuq``) carries the int8 .tflite and a compact binary SNAP section (taps,
output indices and names, LUTs, fixed-point constants, class names) in one file, so that a board
needs a single ``mpremote cp`` (or one serial ``model`` upload) and no JSON parser. The format
is specified in docs/BLOB.md; firmware/core/snapuq_blob.c reads it (firmware upload, C module)
and so does the pure-MicroPython twin.

Command line::

    snapuq micropython blob models/digits            # -> models/digits/model.snapuq
    snapuq micropython push models/digits --port /dev/ttyACM0 [--twin] [--n 5]

(``python -m snapuq.micropython ...`` is the same command.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import snap_section as snap_layout
from snapuq.errors import DeviceError, ModelFormatError, SnapuqError
from snapuq.modeldir import ModelPaths

MAGIC = b"SNUQ"
VERSION = 2
HEADER = 32
TFLITE_ALIGN = 16
BLOB_NAME = ModelPaths.BLOB
TWIN_PATH = Path(__file__).resolve().parents[2] / "micropython_modules" / "twin" / "snapuq.py"

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
    import hashlib

    return hashlib.sha256(snap_section(manifest)).hexdigest()


def input_normalization_record(manifest: dict[str, Any]) -> bytes:
    """The section's input-normalization record (docs/BLOB.md), b"" when the manifest's input has none:
    u16 channels C, u16 0, then C float64 scales and C float64 offsets, the exact doubles of the generated
    `snapuq_model_quantize_input` (x = float32(raw * scale[c] + offset[c]), c = element index % C)."""
    from snapuq.export.cgen import input_normalization

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


def load_model_files(model_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    paths = ModelPaths(model_dir)
    for p in (paths.int8, paths.manifest):
        if not p.is_file():
            raise ModelFormatError(f"{p} is missing (run `snapuq export {paths.root}` first)")
    return paths.int8.read_bytes(), json.loads(paths.manifest.read_text())


def checked_model_files(model_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    """load_model_files of a directory whose .tflite and snapuq.json are one export (MANIFEST.sha256, and
    the manifest's own sha256 of the model: a blob of one model's .tflite and another's constants is refused
    in one line)."""
    from snapuq.export.manifest import check_manifest
    from snapuq.modeldir import check_parts

    paths = ModelPaths(model_dir)
    tfl, man = load_model_files(model_dir)
    check_parts(paths.root, need=(paths.INT8, paths.MANIFEST))
    check_manifest(man, tfl, str(paths.manifest))
    return tfl, man


def make_blob(model_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``model.snapuq`` for an exported model directory; returns its path. The default place
    (MODEL_DIR/model.snapuq) is a part of the directory: staged, swapped in and recorded in MANIFEST.sha256
    (snapuq.modeldir.PartsUpdate)."""
    from snapuq.io import check_out_file, write_bytes
    from snapuq.modeldir import PartsUpdate

    paths = ModelPaths(model_dir)
    dst = check_out_file(out, "--out") if out else paths.blob
    tfl, man = checked_model_files(model_dir)
    blob = write_blob(tfl, man)
    if Path(dst).resolve() != paths.blob.resolve():
        dst.parent.mkdir(parents=True, exist_ok=True)
        return write_bytes(dst, blob)  # atomic: a board never copies half a blob
    with PartsUpdate(paths.root) as up:
        write_bytes(ModelPaths(up.path).blob, blob)
        up.commit()
    return paths.blob


# device result field -> host reference (snapuq.ccore) field: every integer of one score
DEVICE_FIELDS = {"u_q16": "U16", "s_q16": "S16", "f_q16": "F16", "m_q16": "m16", "z_q16": "Z16",
                 "p_q16": "P16", "a_q16": "A16", "ebar_q16": "ebar16", "tap_q16": "s16", "pred": "pred",
                 "flag": "flag"}


def device_script(n_inputs: int, input_bytes: int, blob_name: str = BLOB_NAME) -> str:
    """MicroPython code that scores the pushed inputs and prints one JSON line per input."""
    return (
        "import snapuq, json\n"
        f"m = snapuq.Model({blob_name!r})\n"
        "d = open('inputs.bin', 'rb').read()\n"
        f"for i in range({n_inputs}):\n"
        f"    r = m.infer(bytearray(d[i * {input_bytes}:(i + 1) * {input_bytes}]))\n"
        "    print(json.dumps({'i': i, 'pred': r.pred, 'u_q16': r.u_q16, 's_q16': r.s_q16,"
        " 'f_q16': r.f_q16, 'm_q16': r.m_q16, 'z_q16': r.z_q16, 'p_q16': r.p_q16, 'a_q16': r.a_q16,"
        " 'ebar_q16': list(r.ebar_q16), 'tap_q16': list(r.tap_q16), 'flag': r.flag}))\n"
    )


def _mpremote(port: str, *args: str, timeout: float = 600) -> str:
    venv = Path(sys.executable).parent / "mpremote"  # the project's venv first, then PATH
    exe = str(venv) if venv.is_file() else shutil.which("mpremote")
    if exe is None:
        raise SnapuqError("mpremote is not installed (pip install mpremote)")
    cmd = [exe, "connect", port, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise DeviceError(f"{' '.join(cmd[:4])} ...: {(p.stderr or p.stdout).strip()[-300:]}")
    return p.stdout


def push(model_dir: str | Path, port: str, n: int = 5, twin: bool = False, seed: int = 0) -> list[dict]:
    """Copy the blob (and the twin when the firmware has no C module) plus ``n`` test inputs to
    the board, score them there and compare with the host integer reference."""
    import tempfile

    d = Path(model_dir)
    tfl, man = checked_model_files(d)
    x = sample_inputs(man, n, seed)
    with tempfile.TemporaryDirectory() as td:
        blob = Path(td) / BLOB_NAME
        blob.write_bytes(write_blob(tfl, man))
        inputs = Path(td) / "inputs.bin"
        inputs.write_bytes(x.tobytes())
        script = Path(td) / "run_snapuq.py"
        script.write_text(device_script(len(x), int(x[0].size)))
        if twin:
            _mpremote(port, "cp", str(TWIN_PATH), ":snapuq.py")
        _mpremote(port, "cp", str(blob), ":" + BLOB_NAME)
        _mpremote(port, "cp", str(inputs), ":inputs.bin")
        out = _mpremote(port, "run", str(script))
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    _, ref = host_reference(tfl, man, x)
    for row in rows:
        i = row["i"]
        row["host_u_q16"] = int(ref["U16"][i])
        row["match"] = all(row.get(dev) == ref[host][i].tolist() for dev, host in DEVICE_FIELDS.items())
    return rows


def sample_inputs(man: dict[str, Any], n: int, seed: int = 0) -> np.ndarray:
    """``n`` int8 test inputs (N, input size) of the model's dataset, quantized as the device does."""
    from snapuq.data import load_dataset
    from snapuq.export.convert import quantize_input

    ds = load_dataset(man.get("dataset", "digits"), None, seed)
    xs = np.asarray(ds.x_test[:n], dtype=np.float32)
    q = man["input"]
    return quantize_input(xs, float(q["scale"]), int(q["zero_point"])).reshape(len(xs), -1)


def host_reference(tfl: bytes, man: dict[str, Any], x: np.ndarray) -> tuple[dict, dict]:
    """Int8 output codes (name -> (N, size)) and the integer SNAP values (the C core on the host,
    snapuq.ccore) for int8 inputs."""
    from snapuq.ccore import CoreModel, CoreSnap

    model = CoreModel(tfl)
    outs, r = CoreSnap(tfl, man).run(model, np.asarray(x, np.int8))
    return {k: v.reshape(len(v), -1) for k, v in outs.items() if k in man["outputs"]}, r


def add_arguments(ap: argparse.ArgumentParser) -> None:
    sub = ap.add_subparsers(dest="mp_cmd", required=True, metavar="{blob,push}")
    b = sub.add_parser("blob", help="write model.snapuq for an exported model directory")
    b.add_argument("model_dir", help="exported model directory (snapuq export)")
    b.add_argument("--out", help="blob path (default: MODEL_DIR/model.snapuq)")
    p = sub.add_parser("push", help="copy model + test inputs to a board with mpremote and print U(x)")
    p.add_argument("model_dir", help="exported model directory (snapuq export)")
    p.add_argument("--port", required=True, help="mpremote device (e.g. /dev/ttyACM0, socket://host:port)")
    p.add_argument("--n", type=int, default=5, help="number of test inputs to score on the board")
    p.add_argument("--twin", action="store_true", help="also copy the pure-MicroPython snapuq.py")


def run(args: argparse.Namespace) -> int:
    if args.mp_cmd == "blob":
        path = make_blob(args.model_dir, args.out)
        norm = input_normalization_record(json.loads(ModelPaths(args.model_dir).manifest.read_text()))
        if norm:
            n = struct.unpack_from("<H", norm)[0]
            what = f"float readings go through the recorded input normalization ({n} channel{'s' * (n > 1)})"
        else:
            what = "float inputs are the model's own inputs (no input normalization recorded)"
        print(f"wrote {path} ({path.stat().st_size} bytes); {what}")
        return 0
    rows = push(args.model_dir, args.port, args.n, args.twin)
    for r in rows:
        print(f"input {r['i']}: pred {r['pred']}  U = {r['u_q16'] / 65536:.5f} (Q16 {r['u_q16']}),"
              f" host {r['host_u_q16']}  {'ok' if r['match'] else 'MISMATCH'}")
    bad = sum(not r["match"] for r in rows)
    print(f"{len(rows) - bad}/{len(rows)} inputs identical to the host reference")
    return 1 if bad or not rows else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m snapuq.micropython ...` is `snapuq micropython ...`."""
    from snapuq.cli import main as cli_main

    return cli_main(["micropython", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
