"""The firmware reports the sha256 of the model flatbuffer it runs (`profile` model_sha256=...):
its one-shot SHA-256 agrees with hashlib over every padding case (lengths around 55/56/64 bytes)."""

from __future__ import annotations

import hashlib
import random
import shutil
import zlib
from pathlib import Path

import pytest

from snapuq.harness.protocol import Device
from snapuq.harness.qemu import PipeSerial, build_host_firmware

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("make") is None,
                                reason="needs gcc and make")

BUILD = ROOT / "build" / "test-firmware"


@pytest.fixture(scope="module")
def exe() -> Path:
    return build_host_firmware(BUILD)


def test_firmware_sha256_matches_hashlib(exe: Path) -> None:
    rng = random.Random(11)
    dev = Device(PipeSerial(exe), timeout=5.0)
    try:
        dev.wait_boot(timeout=10)
        assert "model_sha256" not in dev.profile()  # protocol-only build: no model yet
        for n in (1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 4097):
            data = bytes(rng.randrange(256) for _ in range(n))
            crc = zlib.crc32(data) & 0xFFFFFFFF
            # not a flatbuffer: the model is refused, but its bytes were hashed on arrival
            rep = dev.command(f"model {n} 0x{crc:08x}", payload=data, check=False)
            assert rep.errors, rep
            assert dev.profile()["model_sha256"] == hashlib.sha256(data).hexdigest(), n
    finally:
        dev.close()
