"""platformio.ini's real-board envs carry what the official ststm32 platform leaves out without a
framework (hard-float ABI with the board's FPU on every line, -L firmware/ld, -O2, our start files),
and the project needs no environment variable (core_dir). The build itself with the official platform
is a maintainer check (docs/FIRMWARE.md): the platform is not fetched in CI."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FPU = {"nucleo_f767zi": "fpv5-d16", "nucleo_l432kc": "fpv4-sp-d16", "nucleo_f446re": "fpv4-sp-d16"}


def _ini() -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(ROOT / "platformio.ini")
    return cp


def _get(cp: configparser.ConfigParser, env: str, key: str) -> str:
    sec = f"env:{env}"
    while True:
        if cp.has_option(sec, key):
            return cp.get(sec, key)
        if not cp.has_option(sec, "extends"):
            return cp.get("env", key, fallback="")
        sec = cp.get(sec, "extends")


def test_real_board_envs_are_complete() -> None:
    cp = _ini()
    assert cp.get("platformio", "default_envs") == "nucleo_f767zi"
    assert cp.get("platformio", "core_dir") == "${PROJECT_DIR}/.pio-core"
    envs = [s[4:] for s in cp.sections() if s.startswith("env:")]
    stm32 = [e for e in envs if _get(cp, e, "platform") == "ststm32"]
    assert sorted(stm32) == sorted(FPU)
    for env in stm32:
        assert _get(cp, env, "custom_snapuq_fpu") == FPU[env], env
        assert "pre:firmware/tools/pio_stm32.py" in _get(cp, env, "extra_scripts"), env
        assert "-O2" in _get(cp, env, "build_flags").split() and "-Os" in _get(cp, env, "build_unflags")
        ld = ROOT / _get(cp, env, "board_build.ldscript")
        assert ld.is_file() and "INCLUDE cortexm_common.ld" in ld.read_text()
        assert "+<port/stm32/>" in _get(cp, env, "build_src_filter")
    script = (ROOT / "firmware" / "tools" / "pio_stm32.py").read_text()
    for needle in ("-mfloat-abi=hard", "LINKFLAGS=flags", "ASFLAGS=flags", "LIBPATH=[ld_dir]",
                   "-nostartfiles"):
        assert needle in script


def test_qemu_stm32f405_env_runs_the_stm32_port() -> None:
    cp = _ini()
    assert "qemu-cortexm" in _get(cp, "qemu_stm32f405", "platform")
    assert _get(cp, "qemu_stm32f405", "board") == "netduinoplus2"
    assert "+<port/stm32/>" in _get(cp, "qemu_stm32f405", "build_src_filter")
    assert (ROOT / "firmware" / "platforms" / "qemu-cortexm" / "boards" / "netduinoplus2.json").is_file()
