"""A non-editable install works outside the checkout: the package is built and installed (no editable link,
no runtime dependency downloaded: they come from the running environment) into a fresh virtual environment,
and `snapuq verify`, `snapuq harness --port qemu:m4` and `snapuq micropython blob` run from a directory
outside the checkout, finding the C core, the firmware tree and the twin through snapuq.resources."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits"

pytestmark = [pytest.mark.install, pytest.mark.slow]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    what = " ".join(map(str, cmd))
    assert r.returncode == 0, f"{what}: rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    base = tmp_path_factory.mktemp("install")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies (TensorFlow, tflite-micro, ...) of the running environment, without its .pth files
    # (an editable snapuq of a checkout among them is not read: only site directories process .pth files)
    deps = [p for p in {*site.getsitepackages(), sysconfig.get_path("purelib")} if Path(p).is_dir()]
    (purelib / "snapuq-test-deps.pth").write_text("\n".join(deps) + "\n")
    src = base / "src"  # a copy of the tracked tree: the build never writes into the checkout
    files = subprocess.run(["git", "ls-files", "-z", "--", "host", "firmware", "micropython_modules",
                            "pyproject.toml", "README.md", "LICENSE"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        s, d = ROOT / f, src / f
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_symlink():
            d.symlink_to(os.readlink(s))
        elif s.is_file():
            shutil.copy2(s, d)
    # a regular build (pyproject's build-system: setuptools>=77 in pip's isolated build environment)
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(src)], base,
         dict(os.environ), timeout=900)
    shutil.rmtree(src)
    work = base / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", XDG_CACHE_HOME=str(base / "cache"),
               TF_CPP_MIN_LOG_LEVEL="2")
    return venv, env, work


def test_installed_package_is_not_the_checkout(installed) -> None:
    venv, env, work = installed
    out = _run([str(venv / "bin" / "python"), "-c",
                "import snapuq, snapuq.resources as r; print(snapuq.__file__); print(r.checkout_root()); "
                "print(r.core_dir()); print(r.firmware_dir()); print(r.twin_path())"], work, env)
    lines = out.split()
    assert all(str(ROOT) not in line for line in lines), out
    assert lines[1] == "None", out


def test_verify_from_outside_the_checkout(installed) -> None:
    venv, env, work = installed
    d = work / "digits"
    shutil.copytree(DIGITS, d, ignore=shutil.ignore_patterns("eval", "variants"))
    _run([str(venv / "bin" / "snapuq"), "verify", str(d), "--n", "20", "--json", str(work / "v.json")], work,
         env)
    assert (work / "v.json").is_file()


def test_micropython_blob_from_outside_the_checkout(installed) -> None:
    venv, env, work = installed
    d = work / "digits"
    if not d.exists():
        shutil.copytree(DIGITS, d, ignore=shutil.ignore_patterns("eval", "variants"))
    _run([str(venv / "bin" / "snapuq"), "micropython", "blob", str(d), "--out", str(work / "m.snapuq")], work,
         env)
    assert (work / "m.snapuq").read_bytes()[:4] == b"SNUQ"


@pytest.mark.qemu
@pytest.mark.arm
def test_harness_on_qemu_from_outside_the_checkout(installed) -> None:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("qemu-system-arm / arm-none-eabi-gcc missing")
    venv, env, work = installed
    d = work / "digits"
    if not d.exists():
        shutil.copytree(DIGITS, d, ignore=shutil.ignore_patterns("eval", "variants"))
    out = _run([str(venv / "bin" / "snapuq"), "harness", "--port", "qemu:m4", "--model", str(d), "--limit",
                "5", "--out", str(work / "h"), "--no-progress"], work, env, timeout=900)
    assert (work / "h").is_dir(), out
