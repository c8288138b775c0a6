"""The STM32 port (firmware/port/stm32) on an emulated STM32F405 (QEMU netduinoplus2: F4 USART, no
RCC or DWT model): it boots, detects the missing RCC and DWT, falls back to the emulator's fixed SYSCLK
and SysTick, and the harness gets the host's results bit for bit. A firmware built for another model
is refused with one line naming both models."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from oracles.tflite_reader import read_tflite

from snapuq.harness.protocol import Device
from snapuq.harness.qemu import QemuProcess, board_spec, build_firmware, open_serial

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-firmware"

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing"),
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc missing"),
    pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported"),
]


def _harness(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--dataset", "digits", "--split", "test",
           "--build-dir", str(BUILD), "--no-progress", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_stm32_port_on_qemu_stm32f405(tmp_path: Path) -> None:
    spec = board_spec("qemu:stm32f405")
    assert spec.machine == "netduinoplus2"
    elf = build_firmware(spec, MODEL, BUILD)
    flags = (elf.parent / "cflags.txt").read_text()
    assert "-DSNAPUQ_STM32F405" in flags and "-mfpu=fpv4-sp-d16 -mfloat-abi=hard" in flags
    with QemuProcess(spec, elf, icount=True) as q:
        dev = Device(open_serial(q.url), timeout=10)
        dev.wait_boot(timeout=20)
        prof = dev.profile()
        dev.close()
    # no RCC model: the port says so and reports QEMU's fixed SYSCLK; no DWT: SysTick at that clock
    assert prof["board"] == "qemu_stm32f405" and prof["cpu"] == "cortex-m4"
    assert prof["clock"] == "emulator_no_rcc" and prof["cpu_hz"] == 168_000_000
    assert prof["counter"] == "qemu_systick_168mhz" and prof["counter_hz"] == 168_000_000
    assert prof["model_sha256"] == hashlib.sha256((MODEL / "model_int8.tflite").read_bytes()).hexdigest()

    out = tmp_path / "R405"
    p = _harness("--port", "qemu:stm32f405", "--model", str(MODEL), "--limit", "20", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 20 and s["board"] == "qemu_stm32f405"
    assert s["mismatches_vs_host"] == 0
    assert s["latency"]["cycles_unit"] == "qemu_instructions" and s["latency"]["cycles_median"] > 0
    assert 0 < s["latency"]["snap_cycles_median"] < s["latency"]["model_cycles_median"]
    assert s["flash_budget_bytes"] == 1024 * 1024 and s["ram_budget_bytes"] == 128 * 1024
    assert s["clock"] == "emulator_no_rcc" and s["counter"] == "qemu_systick_168mhz"
    assert s["latency"]["us_median"] > 0 and "168 MHz emulated SYSCLK" in s["latency"]["us_source"]


def _other_model(dst: Path) -> Path:
    """A copy of the digits model with one int8 weight changed: same shapes, another model (its parts
    unrecorded, as an older snapuq wrote them: the firmware check, not the record, must refuse it)."""
    shutil.copytree(MODEL, dst, ignore=shutil.ignore_patterns("*.keras", "baselines", "MANIFEST.sha256"))
    blob = bytearray((dst / "model_int8.tflite").read_bytes())
    g = read_tflite(bytes(blob))
    weights = max((t for t in g.tensors if getattr(t, "data", None) is not None),
                  key=lambda t: t.data.size)
    raw = weights.data.tobytes()
    at = bytes(blob).find(raw)
    assert at > 0
    blob[at] = (blob[at] + 1) & 0xFF
    (dst / "model_int8.tflite").write_bytes(bytes(blob))
    man = json.loads((dst / "snapuq.json").read_text())
    man["model"]["sha256"] = hashlib.sha256(bytes(blob)).hexdigest()
    (dst / "snapuq.json").write_text(json.dumps(man))
    return dst


def test_harness_refuses_firmware_built_for_another_model(tmp_path: Path) -> None:
    elf = build_firmware(board_spec("qemu:m4"), MODEL, BUILD)  # the firmware runs digits
    other = _other_model(tmp_path / "other")
    p = _harness("--port", "qemu:m4", "--firmware", str(elf), "--model", str(other), "--limit", "5",
                 "--out", str(tmp_path / "R"))
    assert p.returncode == 1
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: error: "), p.stderr
    fw_sha = hashlib.sha256((MODEL / "model_int8.tflite").read_bytes()).hexdigest()
    host_sha = hashlib.sha256((other / "model_int8.tflite").read_bytes()).hexdigest()
    assert fw_sha[:16] in err[0] and host_sha[:16] in err[0] and "'digits'" in err[0]
    assert "Traceback" not in p.stderr
    res = tmp_path / "R" / "results.jsonl"
    assert not res.exists() or not res.read_text()
