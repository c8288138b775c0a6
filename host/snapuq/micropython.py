"""Host side of the MicroPython module: the single-file model blob and an mpremote helper.

The blob (``model.snapuq``) carries the int8 .tflite and its manifest in one file so that a
board needs a single ``mpremote cp``. Layout (little-endian, offsets from the blob start)::

    0   4  magic b"SNUQ"
    4   2  version (1)
    6   2  header size (32)
    8   4  tflite offset (multiple of 16)
    12  4  tflite length
    16  4  manifest offset (tflite end, padded to 4)
    20  4  manifest length (UTF-8 JSON)
    24  4  CRC-32 (zlib) of bytes [32, end)
    28  4  reserved, 0

``snapuq.Model`` (the C module and the pure-MicroPython twin) accepts the blob, or a .tflite
plus snapuq.json.

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

from snapuq.errors import DeviceError, ModelFormatError, SnapuqError
from snapuq.modeldir import ModelPaths

MAGIC = b"SNUQ"
VERSION = 1
HEADER = 32
TFLITE_ALIGN = 16
BLOB_NAME = ModelPaths.BLOB
TWIN_PATH = Path(__file__).resolve().parents[2] / "micropython_modules" / "twin" / "snapuq.py"


DEVICE_UNUSED = ("snap_variants", "verify")


def compact_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without what the device never reads: the float provenance of the constants
    (``snap.float``), the extra calibrated variants and the export's verification record;
    everything the integer path and the API use is kept."""
    out = json.loads(json.dumps(manifest))
    snap = out.get("snap")
    if isinstance(snap, dict):
        snap.pop("float", None)
    for k in DEVICE_UNUSED:
        out.pop(k, None)
    return out


def write_blob(tflite: bytes, manifest: dict[str, Any], compact: bool = True) -> bytes:
    """Pack a .tflite and its manifest into one blob (format in the module docstring)."""
    if len(tflite) < 8 or tflite[4:8] != b"TFL3":
        raise ModelFormatError("write_blob: not a .tflite (missing TFL3 identifier)")
    man = compact_manifest(manifest) if compact else manifest
    mbytes = json.dumps(man, separators=(",", ":")).encode()
    toff = HEADER + (-HEADER) % TFLITE_ALIGN
    tend = toff + len(tflite)
    moff = tend + (-tend) % 4
    body = bytearray(moff + len(mbytes) - HEADER)
    body[toff - HEADER:tend - HEADER] = tflite
    body[moff - HEADER:] = mbytes
    crc = zlib.crc32(bytes(body)) & 0xFFFFFFFF
    head = MAGIC + struct.pack("<HHIIIIII", VERSION, HEADER, toff, len(tflite), moff, len(mbytes), crc, 0)
    return head + bytes(body)


def read_blob(buf: bytes) -> tuple[bytes, dict[str, Any]]:
    """(tflite, manifest) from a blob; ModelFormatError names what is wrong."""
    if len(buf) < HEADER or buf[:4] != MAGIC:
        raise ModelFormatError("not a snapuq blob (bad magic)")
    ver, hsize, toff, tlen, moff, mlen, crc, _ = struct.unpack_from("<HHIIIIII", buf, 4)
    if ver != VERSION:
        raise ModelFormatError(f"unsupported blob version {ver}")
    if hsize != HEADER or toff < hsize or moff < toff + tlen or moff + mlen != len(buf):
        raise ModelFormatError(f"corrupt blob: section offsets do not fit a {len(buf)}-byte blob")
    if zlib.crc32(buf[HEADER:]) & 0xFFFFFFFF != crc:
        raise ModelFormatError("corrupt blob: CRC mismatch")
    try:
        man = json.loads(buf[moff:moff + mlen])
    except ValueError as e:
        raise ModelFormatError(f"corrupt blob: manifest is not JSON ({e})") from None
    return bytes(buf[toff:toff + tlen]), man


def load_model_files(model_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    paths = ModelPaths(model_dir)
    for p in (paths.int8, paths.manifest):
        if not p.is_file():
            raise ModelFormatError(f"{p} is missing (run `snapuq export {paths.root}` first)")
    return paths.int8.read_bytes(), json.loads(paths.manifest.read_text())


def make_blob(model_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``model.snapuq`` for an exported model directory; returns its path."""
    tfl, man = load_model_files(model_dir)
    dst = Path(out) if out else ModelPaths(model_dir).blob
    dst.write_bytes(write_blob(tfl, man))
    return dst


def device_script(n_inputs: int, input_bytes: int, blob_name: str = BLOB_NAME) -> str:
    """MicroPython code that scores the pushed inputs and prints one JSON line per input."""
    return (
        "import snapuq, json\n"
        f"m = snapuq.Model({blob_name!r})\n"
        "d = open('inputs.bin', 'rb').read()\n"
        f"for i in range({n_inputs}):\n"
        f"    r = m.infer(bytearray(d[i * {input_bytes}:(i + 1) * {input_bytes}]))\n"
        "    print(json.dumps({'i': i, 'pred': r.pred, 'u_q16': r.u_q16, 's_q16': r.s_q16,"
        " 'ebar_q16': list(r.ebar_q16)}))\n"
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
    tfl, man = load_model_files(d)
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
        ebar = [int(v) for v in ref["ebar16"][i]]
        row["match"] = row["u_q16"] == row["host_u_q16"] and row["ebar_q16"] == ebar
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
    outs, r = CoreSnap(man["snap"], man["outputs"]).run(model, np.asarray(x, np.int8))
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
        print(f"wrote {path} ({path.stat().st_size} bytes)")
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
