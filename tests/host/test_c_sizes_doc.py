"""docs/C_CORE.md's struct-size table is what tools/measure_c_sizes.py measures now (host gcc on x86-64
and arm-none-eabi-gcc for Cortex-M4): the script re-run in check mode."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "measure_c_sizes.py"


def test_c_core_sizes_table_is_current() -> None:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the table's host column is x86-64")
    for cc in ("gcc", "nm", "arm-none-eabi-gcc", "arm-none-eabi-nm"):
        if shutil.which(cc) is None:
            pytest.skip(f"{cc} not installed")
    p = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_check_fails_on_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed number in the marked block is caught (the check compares the whole block)."""
    if shutil.which("gcc") is None or platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("host gcc on x86-64 needed")
    sys.path.insert(0, str(TOOL.parent))
    try:
        import measure_c_sizes as mcs
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(mcs, "TARGETS", mcs.TARGETS[:1])
    targets, sizes, per = mcs.measure(require_all=True)
    n = sizes[targets[0].label]["snapuq_model_t"]
    body = mcs.table(targets, sizes, per)
    stale = body.replace(f"| {n:,} |", f"| {n + 480:,} |", 1)  # e.g. a hand-typed 9,904 for 9,424
    assert stale != body
    doc = tmp_path / "C_CORE.md"
    doc.write_text(f"x\n{mcs.BEGIN}\n{stale}\n{mcs.END}\n{mcs.CODE_BEGIN}\n{mcs.CODE_END}\n")
    monkeypatch.setattr(mcs, "DOC", doc)
    monkeypatch.setattr(mcs, "code_table", lambda: "code sizes")  # --write's second table (slow)
    monkeypatch.setattr(mcs, "ROOT", tmp_path)
    assert mcs.main(["--check"]) == 1
    assert mcs.main(["--write"]) == 0 and mcs.main(["--check"]) == 0
    text = doc.read_text()
    assert f"| {n:,} |" in text and f"{mcs.CODE_BEGIN}\ncode sizes\n{mcs.CODE_END}" in text
