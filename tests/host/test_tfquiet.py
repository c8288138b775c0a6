"""TensorFlow's import-time lines (absl's "All log messages before absl::InitializeLog()", oneDNN's
"custom operations are on") stay off stderr unless -v: a command that loads TensorFlow and then fails
prints exactly its one error line; with -v TensorFlow's own lines are shown too."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from snapuq.tfquiet import wants_verbose

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "digits"


def test_wants_verbose() -> None:
    assert wants_verbose(["-v", "train"]) and wants_verbose(["export", "m", "--verbose"])
    assert not wants_verbose(["train", "--out", "x"]) and not wants_verbose(["eval", "--", "-v"])


def test_tensorflow_import_lines_hidden_unless_verbose(tmp_path: Path) -> None:
    for name in ("hush", "loud"):  # one directory each: export locks its directory while it writes
        d = tmp_path / name / "m"
        d.mkdir(parents=True)
        for n in ("config.json", "calib.json"):
            shutil.copy(MODEL / n, d / n)
        (d / "model.keras").write_text("not a keras file")  # export imports TensorFlow, then fails on it
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)

    def run(extra: list[str]) -> subprocess.CompletedProcess:
        d = tmp_path / ("loud" if extra else "hush") / "m"
        return subprocess.run([sys.executable, "-m", "snapuq.cli", *extra, "export", str(d)],
                              capture_output=True, text=True, timeout=300, env=env)

    with ThreadPoolExecutor(2) as pool:
        quiet, loud = pool.map(run, [[], ["-v"]])
    assert quiet.returncode == 1 and loud.returncode == 1
    lines = quiet.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.keras" in lines[0] and "Traceback" not in quiet.stderr, quiet.stderr
    assert lines[0].replace("/hush/", "/loud/") in loud.stderr
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":  # oneDNN announces itself
        assert len(loud.stderr.strip().splitlines()) > 1, loud.stderr
