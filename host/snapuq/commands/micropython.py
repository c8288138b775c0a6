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
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.data import load_dataset, read_by
from snapuq.errors import DeviceError, SnapuqError
from snapuq.export.convert import quantize_input
from snapuq.export.manifest import check_manifest
from snapuq.io import check_out_file, write_bytes
from snapuq.modeldir import ModelPaths, PartsUpdate, check_parts
from snapuq.native.blob import BLOB_NAME, input_normalization_record, write_blob
from snapuq.native.ccore import CoreModel, CoreSnap


def load_model_files(model_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    paths = ModelPaths(model_dir)
    paths.need_export()
    return paths.int8.read_bytes(), json.loads(paths.manifest.read_text())


def checked_model_files(model_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    """load_model_files of a directory whose .tflite and snapuq.json are one export (MANIFEST.sha256, and
    the manifest's own sha256 of the model: a blob of one model's .tflite and another's constants is refused
    in one line)."""

    paths = ModelPaths(model_dir)
    tfl, man = load_model_files(model_dir)
    check_parts(paths.root, need=(paths.INT8, paths.MANIFEST))
    check_manifest(man, tfl, str(paths.manifest))
    return tfl, man


def make_blob(model_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``model.snapuq`` for an exported model directory; returns its path. The default place
    (MODEL_DIR/model.snapuq) is a part of the directory: staged, swapped in and recorded in MANIFEST.sha256
    (snapuq.modeldir.PartsUpdate)."""

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


# device result field -> host reference (snapuq.native.ccore) field: every integer of one score
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
    x = sample_inputs(man, n, seed, **read_by(d))
    with tempfile.TemporaryDirectory() as td:
        blob = Path(td) / BLOB_NAME
        blob.write_bytes(write_blob(tfl, man))
        inputs = Path(td) / "inputs.bin"
        inputs.write_bytes(x.tobytes())
        script = Path(td) / "run_snapuq.py"
        script.write_text(device_script(len(x), int(x[0].size)))
        if twin:
            _mpremote(port, "cp", str(resources.twin_path()), ":snapuq.py")
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


def sample_inputs(man: dict[str, Any], n: int, seed: int = 0, frontend: dict | None = None,
                  build: dict | None = None) -> np.ndarray:  # fmt: skip
    """``n`` int8 test inputs (N, input size) of the model's dataset (through the model's `frontend`, when
    audio, and from the `build` of the set it was trained on: data.read_by), quantized as the device does."""

    ds = load_dataset(man.get("dataset", "digits"), None, seed, frontend=frontend, build=build)
    xs = np.asarray(ds.x_test[:n], dtype=np.float32)
    q = man["input"]
    return quantize_input(xs, float(q["scale"]), int(q["zero_point"])).reshape(len(xs), -1)


def host_reference(tfl: bytes, man: dict[str, Any], x: np.ndarray) -> tuple[dict, dict]:
    """Int8 output codes (name -> (N, size)) and the integer SNAP values (the C core on the host,
    snapuq.native.ccore) for int8 inputs."""

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
