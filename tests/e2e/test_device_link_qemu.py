"""Declared lengths, model uploads and waits on the emulated boards (docs/FIRMWARE.md, "Protocol"): a
length beyond the device's buffer is refused before any byte of its frame is consumed; a `model` upload
may take what the pool holds beside its arena, is refused before the frame when it cannot (the host
sends nothing then), and leaves the model that ran before it running when it fails; every wait allows
the bytes it waits for (a boot sync of a 27,648-byte input on a slow link)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from snapuq.bench.kernels import planned_arena
from snapuq.harness.protocol import Device, DeviceReplyError
from snapuq.harness.qemu import QemuProcess, board_spec, build_firmware, open_serial
from snapuq.harness.reference import HostReference
from snapuq.native.ccore import CoreModel

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-firmware"

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing"),
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc missing"),
    pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported"),
]


def _board(name: str):
    spec = board_spec(f"qemu:{name}")
    return spec, build_firmware(spec, MODEL, BUILD)


def _check_builtin(dev: Device, ref: HostReference, rng: np.random.Generator) -> None:
    """The compiled-in model answers an input exactly as the host C core does."""
    x = rng.integers(-128, 128, ref.in_bytes, dtype=np.int8)
    _inf, res, outs = dev.run_input(x.tobytes())
    host = ref.run(x)
    assert res["u"] == host.snap["u"] and res["pred"] == host.snap["pred"]
    assert outs == {i: [int(v) for v in o] for i, o in enumerate(host.outputs)}


class _Sent:
    def __init__(self, dev: Device) -> None:
        self.n = 0
        inner = dev.send

        def send(b: bytes) -> None:
            self.n += len(b)
            inner(b)
        dev.send = send  # type: ignore[method-assign]


def test_declared_lengths_beyond_the_buffer_are_refused_at_once() -> None:
    """`load 4294967295` and `model 5000000` on qemu_m4: one e-size line at once, nothing of the frame
    consumed (the next command is answered at once; before, the board swallowed bytes until its byte-gap
    timeout); a declared model upload of the pool's size is accepted (m-model-go)."""
    spec, elf = _board("m4")
    ref = HostReference(MODEL)
    with QemuProcess(spec, elf, icount=True) as q:
        dev = Device(open_serial(q.url), timeout=20)
        try:
            dev.wait_boot(timeout=20)
            pool = dev.stats()["pool"]
            t = time.monotonic()
            dev.send(b"load 4294967295 0x0%name%")
            rep = dev.read_reply(timeout=10)
            assert rep.errors == [f"e-size got=4294967295 want={ref.in_bytes} "
                                  'msg="frame longer than the input buffer; nothing received"'], rep
            assert dev.read_reply(timeout=10).lines == ["m-name-snapuq-qemu_m4"]
            dev.send(b"model 5000000 0x0%name%")
            rep = dev.read_reply(timeout=10)
            assert not rep.lines and rep.errors[0].startswith(f"e-size got=5000000 max={pool} "), rep
            assert dev.read_reply(timeout=10).lines == ["m-name-snapuq-qemu_m4"]
            assert time.monotonic() - t < 5
            assert dev.profile()["loaded"] == 1
            _check_builtin(dev, ref, np.random.default_rng(1))
        finally:
            dev.close()


def test_a_refused_upload_is_not_sent_and_a_bad_one_keeps_the_model() -> None:
    """qemu_m4 (pool 57,312 B): the keywords model (100,456 B) is refused before its frame, so the host
    sends nothing after `model N CRC%` and the answer comes at once (before: `e-size max=28656` after the
    whole frame); a frame that arrives whole but is no model, or one with a wrong CRC, leaves the
    compiled-in model running (before: a bad upload left no model)."""
    spec, elf = _board("m4")
    ref = HostReference(MODEL)
    kw = (ROOT / "models" / "keywords" / "model_int8.tflite").read_bytes()
    rng = np.random.default_rng(2)
    with QemuProcess(spec, elf, icount=True) as q:
        dev = Device(open_serial(q.url), timeout=60)
        try:
            dev.wait_boot(timeout=20)
            pool = dev.stats()["pool"]
            assert pool < len(kw)
            sent = _Sent(dev)
            t = time.monotonic()
            with pytest.raises(DeviceReplyError) as e:
                dev.load_model(kw)
            dt = time.monotonic() - t
            assert e.value.errors[0].startswith(f"e-size got={len(kw)} max={pool} "), e.value.errors
            assert sent.n == len(f"model {len(kw)} 0x{zlib.crc32(kw):08x}%") and dt < 2.0, (sent.n, dt)
            _check_builtin(dev, ref, rng)
            junk = bytes(rng.integers(0, 256, 40_000, dtype=np.uint8))
            with pytest.raises(DeviceReplyError) as e:
                dev.load_model(junk)
            assert e.value.errors[0].startswith("e-model"), e.value.errors
            prof = dev.profile()
            assert prof["loaded"] == 1 and prof["model_sha256"] == ref_sha(ref)
            _check_builtin(dev, ref, rng)
            rep = dev.command(f"model {len(junk)} 0x{zlib.crc32(junk) ^ 1:08x}", payload=junk, check=False)
            assert rep.errors[0].startswith("e-crc") and "m-model-kept builtin=1 bytes=" in rep.lines[-1], rep
            _check_builtin(dev, ref, rng)
        finally:
            dev.close()


def ref_sha(ref: HostReference) -> str:
    import hashlib

    return hashlib.sha256(ref.tflite).hexdigest()


def test_an_upload_above_half_the_pool_loads_and_a_later_bad_one_keeps_it() -> None:
    """qemu_m7 (pool 494,576 B): a 300,000-byte .tflite (the digits backbone, padded with zeros after its
    flatbuffer) is more than half the pool (refused before as `e-size max=247288`) and loads; it answers
    as the host C core does; a bad upload after it (received beside it) leaves it running."""
    spec, elf = _board("m7")
    tfl = (MODEL / "variants" / "base.tflite").read_bytes()
    big = tfl + bytes(300_000 - len(tfl))
    core = CoreModel(big)
    rng = np.random.default_rng(3)
    xs = [rng.integers(-128, 128, core.in_bytes, dtype=np.int8) for _ in range(3)]
    want = [core.run(x).view(np.int8).reshape(-1).tolist() for x in xs]

    def outputs(dev: Device, x: np.ndarray) -> list[int]:
        outs = dev.run_input(x.tobytes())[2]
        return [v for i in sorted(outs) for v in outs[i]]

    with QemuProcess(spec, elf, icount=True) as q:
        dev = Device(open_serial(q.url), timeout=120)
        try:
            dev.wait_boot(timeout=20)
            pool = dev.stats()["pool"]
            assert pool // 2 < len(big) < pool
            loaded = dev.load_model(big)
            # the arena the DSP image plans (its kernels' scratch included), not the host library's
            assert loaded["bytes"] == len(big) and loaded["arena"] == planned_arena(big, "dsp")
            assert [outputs(dev, x) for x in xs] == want
            junk = bytes(rng.integers(0, 256, 30_000, dtype=np.uint8))
            with pytest.raises(DeviceReplyError) as e:
                dev.load_model(junk)
            assert e.value.errors[0].startswith("e-model"), e.value.errors
            assert [outputs(dev, x) for x in xs] == want
            st = dev.stats()
            assert st["model_bytes"] == len(big) and st["model_in_ram"] == 1
        finally:
            dev.close()


class SlowProxy:
    """127.0.0.1:<port> -> QEMU, carrying `rate` bytes/s towards the device (a slow UART, QEMU's under
    load) and everything back at once."""

    def __init__(self, target: int, rate: float) -> None:
        self.rate = rate
        self.stop = threading.Event()
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.url = f"socket://127.0.0.1:{self.lsock.getsockname()[1]}"
        self.dev = socket.create_connection(("127.0.0.1", target))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        cli, _ = self.lsock.accept()
        threading.Thread(target=self._pump, args=(cli, self.dev, self.rate), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.dev, cli, 0), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, rate: float) -> None:
        src.settimeout(0.2)
        while not self.stop.is_set():
            try:
                chunk = src.recv(256 if rate else 4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            try:
                dst.sendall(chunk)
            except OSError:
                return
            if rate:
                time.sleep(len(chunk) / rate)

    def close(self) -> None:
        self.stop.set()
        for s in (self.lsock, self.dev):
            try:
                s.close()
            except OSError:
                pass


def test_the_boot_sync_of_a_large_input_allows_its_bytes() -> None:
    """A 27,648-byte input (MLPerf VWW) means 27,649 '%' before each boot sync; at 6 KB/s towards the
    board they take 4.6 s. Each attempt now waits 2 s + its bytes at Device.rate (before: 2 s, and the
    attempts piled up behind each other until the boot wait gave up)."""
    spec, elf = _board("m7")
    with QemuProcess(spec, elf, icount=True) as q:
        proxy = SlowProxy(q.port, 6000)
        dev = Device(open_serial(proxy.url), timeout=5)
        dev.frame_fill = 27_648
        try:
            t = time.monotonic()
            dev.wait_boot(timeout=20)
            assert time.monotonic() - t > 4
            assert dev.name() == "m-name-snapuq-qemu_m7"
        finally:
            dev.close()
            proxy.close()
