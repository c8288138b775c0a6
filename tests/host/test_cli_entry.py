"""One `snapuq` command: --help lists every subcommand and each one's --help works; the two
shims (`python host/harness.py`, `python -m snapuq.micropython`) reach the same parsers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from snapuq.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out, name
    assert "harness" in COMMANDS and "micropython" in COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser(name).parse_args([name, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: snapuq {name}")


@pytest.mark.parametrize("argv", [[str(ROOT / "host" / "harness.py"), "--help"],
                                  ["-m", "snapuq.micropython", "blob", "--help"]])
def test_shims(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "host")}
    if argv[0].endswith("harness.py"):
        env.pop("PYTHONPATH")   # the script's folder is enough
    p = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd="/", timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
    assert "usage:" in p.stdout and "--help" not in p.stderr


def test_harness_port_help_lists_every_emulated_board(capsys: pytest.CaptureFixture[str]) -> None:
    from snapuq.harness.qemu import BOARDS

    with pytest.raises(SystemExit):
        build_parser("harness").parse_args(["harness", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "qemu:stm32f405" in out
    for key in BOARDS:
        assert f"qemu:{key}" in out, key
