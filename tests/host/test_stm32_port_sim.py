"""The STM32 port's clock bring-up, run on the host against a register model (tests/c/stm32_port_sim.c):
for each part the registers it leaves are the reference manual's clock tree (PLL factors, wait
states, bus prescalers, over-drive, caches), the USART's BRR is computed from the bus clock it really
set up, and every stuck ready flag ends in the reset clock, reported as such, not in a hang.
(QEMU's STM32 has no RCC model, so this is the only place the PLL sequence executes without hardware.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "tests" / "c" / "stm32_port_sim.c"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

BAUD = 115200
# part: (define, board, reset clock, reset name, sysclk, usart bus clock, PLLCFGR low 28 bits, flash WS, CFGR)
PARTS = {
    "f767": ("SNAPUQ_STM32F767", "nucleo_f767zi", 16_000_000, "reset_hsi_16mhz", 216_000_000, 54_000_000,
             8 | 216 << 6 | 0 << 16 | 9 << 24, 7, 2 | 2 << 2 | 5 << 10 | 4 << 13),
    "l432": ("SNAPUQ_STM32L432", "nucleo_l432kc", 4_000_000, "reset_msi_4mhz", 80_000_000, 80_000_000,
             1 | 0 << 4 | 40 << 8 | 1 << 24, 4, 3 | 3 << 2),
    "f446": ("SNAPUQ_STM32F446", "nucleo_f446re", 16_000_000, "reset_hsi_16mhz", 180_000_000, 45_000_000,
             8 | 180 << 6 | 0 << 16 | 8 << 24, 5, 2 | 2 << 2 | 5 << 10 | 4 << 13),
    "f405": ("SNAPUQ_STM32F405", "stm32f405", 16_000_000, "reset_hsi_16mhz", 168_000_000, 84_000_000,
             8 | 168 << 6 | 0 << 16 | 7 << 24, 5, 2 | 2 << 2 | 5 << 10 | 4 << 13),
}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("stm32sim")
    out = {}
    for part, spec in PARTS.items():
        exe = d / f"sim_{part}"
        subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", f"-D{spec[0]}", str(SIM),
                        "-o", str(exe)], check=True, capture_output=True, text=True)
        out[part] = exe
    return out


def run(exe: Path, scenario: str) -> dict[str, str]:
    p = subprocess.run([str(exe), scenario], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    kv: dict[str, str] = {}
    for tok in p.stdout.split():
        k, v = tok.split("=", 1)
        kv[k] = v
    return kv


@pytest.mark.parametrize("part", sorted(PARTS))
def test_clock_tree_as_the_reference_manual_gives(sims: dict[str, Path], part: str) -> None:
    _, board, _, _, sysclk, bus, pll, ws, cfgr = PARTS[part]
    r = run(sims[part], "ok")
    assert r["board"] == board and r["cpu_hz"] == str(sysclk) and r["counter_hz"] == str(sysclk)
    assert r["clock"].startswith("pll_") and r["clock"].endswith(f"_{sysclk // 1_000_000}mhz")
    assert r["counter"] == "dwt_cycles" and r["counting"] == "1"
    assert int(r["RCC_PLLCFGR"], 16) & 0x0FFFFFFF == pll
    assert int(r["RCC_CFGR"], 16) == cfgr
    assert int(r["RCC_CR"], 16) & (3 << 24) == 3 << 24  # PLL on and locked
    acr = int(r["FLASH_ACR"], 16)
    assert acr & 0xF == ws and acr & (1 << 8)  # wait states + prefetch
    assert acr & (1 << 9)  # F7: ART, F4/L4: instruction cache
    assert int(r["USART_BRR"]) == round(bus / BAUD)
    if part in ("f767", "f446"):  # 216 / 180 MHz need scale 1 + over-drive
        assert int(r["PWR_CR"], 16) & 0x3C000 == 0x3C000
    if part == "f767":  # L1 caches on after invalidating all 256 sets x 4 ways
        assert int(r["SCB_CCR"], 16) & 0x30000 == 0x30000 and r["DCISW_writes"] == "1024"


@pytest.mark.parametrize("scenario", ["pll_stuck", "od_stuck", "switch_stuck"])
@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_stuck_ready_flag_keeps_the_reset_clock_and_says_so(sims: dict[str, Path], part: str,
                                                                scenario: str) -> None:
    _, _, reset_hz, reset_name, sysclk, _, _, _, _ = PARTS[part]
    r = run(sims[part], scenario)
    if scenario == "od_stuck" and part in ("l432", "f405"):  # no over-drive on these parts
        assert r["cpu_hz"] == str(sysclk)
        return
    step = {"pll_stuck": "pll_lock", "od_stuck": "overdrive", "switch_stuck": "sysclk_switch"}[scenario]
    assert r["clock"] == f"{reset_name}(timeout:{step})"
    assert r["cpu_hz"] == str(reset_hz) and r["counter_hz"] == str(reset_hz)
    assert int(r["RCC_CFGR"], 16) & 3 == 0  # SYSCLK back on the reset oscillator
    assert int(r["RCC_CR"], 16) & (1 << 24) == 0  # PLL off
    assert int(r["FLASH_ACR"], 16) & 0xF == 0
    assert int(r["USART_BRR"]) == round(reset_hz / BAUD)  # baud from the clock that really runs
    if part in ("f767", "f446"):
        assert int(r["PWR_CR"], 16) & 0x30000 == 0  # over-drive off again


@pytest.mark.parametrize("part", sorted(PARTS))
def test_emulator_without_rcc_or_dwt_is_detected(sims: dict[str, Path], part: str) -> None:
    r = run(sims[part], "no_rcc")
    assert r["clock"] == "emulator_no_rcc" and r["counter"] == "systick_cycles" and r["counting"] == "1"
    r = run(sims[part], "no_dwt")  # silicon clock, SysTick counter
    assert r["clock"].startswith("pll_") and r["counter"] == "systick_cycles" and r["counting"] == "1"
