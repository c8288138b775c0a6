"""The harness protocol against the firmware built for the host (same parser, commands and
core as on the boards), driven through the real client: grammar, errors, resync, CRC frames,
timeouts, and random / mutated byte streams after which the firmware must still answer."""

from __future__ import annotations

import random
import shutil
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from snapuq.errors import DeviceError
from snapuq.harness.protocol import Device, DeviceReplyError, parse_kv
from snapuq.harness.qemu import PipeSerial, build_host_firmware

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("make") is None,
                                reason="needs gcc and make")

BUILD = ROOT / "build" / "test-firmware"


@pytest.fixture(scope="module")
def exe() -> Path:
    return build_host_firmware(BUILD)


@pytest.fixture()
def dev(exe: Path):
    ser = PipeSerial(exe)
    d = Device(ser, timeout=5.0)
    d.wait_boot(timeout=10)
    d.command("timeout 100 0")
    yield d
    d.close()


def test_basic_commands(dev: Device) -> None:
    assert dev.name() == "m-name-snapuq-host"
    prof = dev.profile()
    assert prof["board"] == "host" and prof["loaded"] == 0 and prof["fw"] == "snapuq"
    st = dev.stats()
    assert {"flash", "ram_static", "arena", "stack_peak", "ram_peak"} <= set(st)
    helps = dev.command("help").lines
    assert any(h.startswith("m-help load") for h in helps)
    assert parse_kv("m-x a=1 b=1,-2 c=str")["b"] == [1, -2]


@pytest.mark.parametrize("text,err", [
    ("bogus", "e-unknown-command bogus"),
    ("infer", "e-no-model"),
    ("load 1", "e-args"),
    ("load x y", "e-args"),
    ("name extra", "e-args"),
    ("a b c d e f g h i", "e-args"),
    ("x" * 300, "e-overflow"),
    ("na\x01me", "e-bad-byte"),
    ("timeout 0 0", "e-args"),
    ("prof sideways", "e-args"),
])
def test_errors_then_ready(dev: Device, text: str, err: str) -> None:
    rep = dev.command(text, check=False)
    assert rep.errors and rep.errors[0].startswith(err), rep.errors
    assert dev.name() == "m-name-snapuq-host"  # still in step


def test_empty_commands_and_blanks_are_ignored(dev: Device) -> None:
    dev.send(b"%%%\r\n  \t%")
    assert dev.name() == "m-name-snapuq-host"


def test_binary_frame_crc_is_zlib_crc32(dev: Device) -> None:
    data = bytes(range(256)) * 3 + b"%%%%"  # payload bytes may be '%' too
    crc = zlib.crc32(data)
    # no model here, so no input buffer: a `load` is refused before its frame (see
    # test_declared_lengths_beyond_the_buffer_are_refused_before_the_frame); a `model` frame is
    # received whole into the pool and then refused as no flatbuffer
    rep = dev.command(f"model {len(data)} 0x{crc:08x}", payload=data, check=False)
    assert rep.lines[0].startswith("m-model-go") and rep.errors[0].startswith("e-model"), rep
    rep = dev.command(f"model {len(data)} 0x{crc ^ 1:08x}", payload=data, check=False)
    assert rep.errors[0].startswith("e-crc") and f"got={crc:08x}" in rep.errors[0]
    assert dev.name() == "m-name-snapuq-host"


def test_binary_timeout_then_resync(dev: Device) -> None:
    dev.send(b"model 10 0x0%abc")  # (no model here: a `load` would be refused before its frame)
    rep = dev.read_reply(timeout=5)
    assert rep.errors == ["e-timeout got=3 want=10"]
    dev.sync()
    assert dev.name() == "m-name-snapuq-host"


def test_sync_recovers_from_a_partial_command_that_starts_a_frame(dev: Device) -> None:
    # "model 50 0x1" without its '%': the sync's leading '%' completes it, the frame eats the
    # sync; the client's retry after the frame timeout must get through
    dev.send(b"model 50 0x1")
    t = time.monotonic()
    dev.sync(timeout=1.0, attempts=4)
    assert time.monotonic() - t < 10
    assert dev.name() == "m-name-snapuq-host"


def test_device_reply_error_type(dev: Device) -> None:
    with pytest.raises(DeviceReplyError):
        dev.command("bogus")


VALID = [b"name%", b"profile%", b"stats%", b"infer 3 1%", b"results%", b"outputs%", b"db load 4%",
         b"db 0a0b%", b"prof on%", b"prof show%", b"calib show%", b"monitor 10 1 2 3%", b"sync q%",
         b"load 4 0x12345678%abcd", b"model 8 0x0%12345678", b"timeout 50 200%", b"help%"]


def _streams(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        if k % 3 == 0:
            s = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:
            s = bytearray(b"".join(rng.choice(VALID) for _ in range(rng.randrange(1, 8))))
            for _ in range(rng.randrange(0, 6)):  # mutate: flip, insert, delete
                op = rng.randrange(3)
                pos = rng.randrange(len(s) + 1)
                if op == 0 and pos < len(s):
                    s[pos] ^= 1 << rng.randrange(8)
                elif op == 1:
                    s[pos:pos] = bytes([rng.choice(b"% 0123456789x\x00\xff")])
                elif pos < len(s):
                    del s[pos]
            s = bytes(s)
        out.append(s)
    return out


def test_fuzz_streams_leave_the_firmware_answering(dev: Device) -> None:
    ser = dev.ser
    assert isinstance(ser, PipeSerial)
    for i, s in enumerate(_streams(1234, 150)):
        dev.send(s)
        # streams may reset the timeouts; the resync must still succeed
        dev.sync(timeout=1.5, attempts=8)
        assert ser.alive(), f"firmware died after stream {i}: {s[:80]!r}"
    assert dev.name() == "m-name-snapuq-host"
    dev.send(b"timeout 50 0%")
    dev.read_reply()


def test_libfuzzer_short_run(tmp_path: Path) -> None:
    if shutil.which("clang") is None:
        pytest.skip("clang not installed")
    build = tmp_path / "fz"
    make = ["make", "-C", str(ROOT / "firmware"), "fuzz", f"BUILD={build}", "SNAP=0", "FUZZ_OPT=-O0"]
    proc = subprocess.run(make, capture_output=True, text=True)
    if proc.returncode != 0 and "fuzzer" in proc.stderr and "cannot find" in proc.stderr:
        pytest.skip("libFuzzer runtime (libclang-rt-14-dev) missing")
    assert proc.returncode == 0, proc.stderr[-2000:]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k, s in enumerate(VALID):
        (corpus / f"seed{k}").write_bytes(s)
    run = subprocess.run([str(build / "fuzz" / "fuzz_proto"), "-runs=2000", "-max_len=512", str(corpus)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Done 2000 runs" in run.stderr or "DONE" in run.stderr


def test_device_error_on_dead_port(exe: Path) -> None:
    ser = PipeSerial(exe)
    d = Device(ser, timeout=1.0)
    d.wait_boot()
    ser.proc.kill()
    ser.proc.wait()
    with pytest.raises((DeviceError, OSError)):
        d.command("name")
    d.close()


def test_model_that_does_not_fit_says_why(tmp_path: Path) -> None:
    """A board whose RAM pool is too small for the model: `profile` says loaded=0 and `model builtin`
    (what the harness asks then) repeats the firmware's own e-arena line, which the harness prints."""
    model = ROOT / "models" / "digits"
    if not (model / "snapuq_model.c").exists():
        pytest.skip("models/digits not exported")
    build = tmp_path / "b"
    make = ["make", "-C", str(ROOT / "firmware"), "host", f"BUILD={build}", f"MODEL={model}",
            "CDEFS=-DSNAPUQ_HOST_POOL_BYTES=4096", "VARIANT=_tiny"]
    p = subprocess.run(make, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    ser = PipeSerial(build / "host_tiny" / "snapuq_fw")
    d = Device(ser, timeout=5.0)
    try:
        d.wait_boot(timeout=10)
        assert d.profile()["loaded"] == 0
        errs = d.command("model builtin", check=False).errors
        assert errs and errs[0].startswith("e-arena need=") and "have=4096" in errs[0], errs
        rep = d.command("infer", check=False)
        assert rep.errors and rep.errors[0].startswith("e-no-model")
    finally:
        d.close()


def test_a_stop_signal_is_not_swallowed_by_a_best_effort_port_call() -> None:
    """The harness turns SIGTERM / SIGHUP into runner._Stop, raised wherever the main thread is. Inside
    the read loop's best-effort `in_waiting` (an `except Exception`) it used to be swallowed, so a
    SIGTERM'd run went on to the end and exited 0; as a BaseException it reaches the runner."""
    from snapuq.harness.runner import _Stop

    class Port:
        def __init__(self) -> None:
            self.reads = 0

        @property
        def in_waiting(self) -> int:
            raise _Stop("SIGTERM")   # the signal lands while the port is polled

        def read(self, n: int) -> bytes:
            self.reads += 1
            return b""

        def write(self, data: bytes) -> int:
            return len(data)

    port = Port()
    d = Device(port, timeout=0.5)
    with pytest.raises(_Stop):
        d._readraw(time.monotonic() + 0.5)
    assert port.reads == 0


# ---------------------------------------------------------------- declared lengths and model uploads
MODEL = ROOT / "models" / "digits"
KEYWORDS = ROOT / "models" / "keywords" / "model_int8.tflite"


def test_declared_lengths_beyond_the_buffer_are_refused_before_the_frame(dev: Device) -> None:
    """`load 4294967295` / `model 5000000`: refused at once, before any byte of the frame is consumed, so
    the next command is answered at once (before: the board swallowed the bytes as the frame and said
    nothing until its byte-gap timeout). No model: no input buffer, every `load` is refused at once."""
    t = time.monotonic()
    dev.send(b"load 4294967295 0x0%name%")
    rep = dev.read_reply(timeout=5)
    assert rep.errors and rep.errors[0].startswith("e-no-model"), rep
    assert dev.read_reply(timeout=5).lines == ["m-name-snapuq-host"]
    pool = dev.stats()["pool"]
    dev.send(b"model 5000000 0x0%name%")
    rep = dev.read_reply(timeout=5)
    assert rep.errors and rep.errors[0].startswith(f"e-size got=5000000 max={pool} "), rep
    assert not rep.lines  # no m-model-go: the host sends nothing
    assert dev.read_reply(timeout=5).lines == ["m-name-snapuq-host"]
    assert time.monotonic() - t < 3.0


def _pool_build(pool: int) -> Path:
    if not (MODEL / "snapuq_model.c").exists():
        pytest.skip("models/digits not exported")
    p = subprocess.run(["make", "-C", str(ROOT / "firmware"), "host", f"BUILD={BUILD}", f"MODEL={MODEL}",
                        f"CDEFS=-DSNAPUQ_HOST_POOL_BYTES={pool}u", f"VARIANT=_pool{pool}"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return BUILD / f"host_pool{pool}" / "snapuq_fw"


def _outputs(dev: Device, x: bytes) -> list[int]:
    outs = dev.run_input(x)[2]
    assert outs is not None
    return [v for i in sorted(outs) for v in outs[i]]


class _Sent:
    """Records what the client writes."""

    def __init__(self, dev: Device) -> None:
        self.data = bytearray()
        inner = dev.send

        def send(b: bytes) -> None:
            self.data += b
            inner(b)
        dev.send = send  # type: ignore[method-assign]


def test_model_upload_takes_the_pool_and_keeps_the_current_model() -> None:
    """A pool of 160 KiB beside the compiled-in digits model: the keywords model (100,456 B, more than half
    the pool; refused before as `e-size max=81920`) loads and runs as the host C core does; a bad upload
    (not a model, a damaged frame, one larger than the pool beside the kept upload) leaves the model
    that ran before it running, and a refused one is never sent (the host waits for m-model-go)."""
    import hashlib

    import numpy as np

    from snapuq.native.ccore import CoreModel

    pool = 160 * 1024
    kw = KEYWORDS.read_bytes()
    digits = (MODEL / "model_int8.tflite").read_bytes()
    assert pool // 2 < len(kw) < pool
    rng = np.random.default_rng(5)
    x_d = rng.integers(-128, 128, 64, dtype=np.int8).tobytes()
    x_k = rng.integers(-128, 128, 490, dtype=np.int8).tobytes()
    dev = Device(PipeSerial(_pool_build(pool)), timeout=20.0)
    try:
        dev.wait_boot(timeout=10)
        assert dev.stats()["pool"] == pool
        ref_d = _outputs(dev, x_d)
        assert dev.profile()["model_sha256"] == hashlib.sha256(digits).hexdigest()

        loaded = dev.load_model(kw)
        assert loaded["bytes"] == len(kw) and loaded["in_bytes"] == 490
        want_k = CoreModel(kw).run(np.frombuffer(x_k, np.int8)).view(np.int8).reshape(-1).tolist()
        assert _outputs(dev, x_k) == want_k
        sha_k = hashlib.sha256(kw).hexdigest()

        def kept(rep_errors: list[str], what: str) -> None:
            assert rep_errors and rep_errors[0].startswith(what), rep_errors
            prof = dev.profile()
            assert prof["loaded"] == 1 and prof["model_sha256"] == sha_k
            assert _outputs(dev, x_k) == want_k

        junk = bytes(rng.integers(0, 256, 30_000, dtype=np.uint8))
        with pytest.raises(DeviceReplyError) as e:
            dev.load_model(junk)
        kept(e.value.errors, "e-model")
        rep = dev.command(f"model {len(junk)} 0x{zlib.crc32(junk) ^ 1:08x}", payload=junk, check=False)
        assert any(ln.startswith("m-model-kept builtin=0") for ln in rep.lines), rep
        kept(rep.errors, "e-crc")
        # the kept upload holds 100,456 B of the pool: digits (120,576 B) does not fit beside it
        sent = _Sent(dev)
        with pytest.raises(DeviceReplyError) as e:
            dev.load_model(digits)
        assert "e-size got=120576 max=" in e.value.errors[0] and "model builtin frees it" in e.value.errors[0]
        assert bytes(sent.data) == f"model {len(digits)} 0x{zlib.crc32(digits):08x}%".encode()
        kept(e.value.errors, "e-size")

        assert dev.command("model builtin").lines == ["m-model-loaded builtin=1"]
        assert _outputs(dev, x_d) == ref_d
        # now the whole pool is free again: the same digits flatbuffer uploaded runs as the compiled-in one
        assert dev.load_model(digits)["bytes"] == len(digits)
        assert _outputs(dev, x_d) == ref_d
        assert dev.stats()["model_in_ram"] == 1
    finally:
        dev.close()


class SlowLink(PipeSerial):
    """The host firmware behind a link that carries `rate` bytes/s towards the device (a UART, QEMU's
    under load): write() queues, a thread delivers."""

    def __init__(self, exe: Path, rate: float) -> None:
        import threading

        super().__init__(exe)
        self.rate = rate
        self.queue = bytearray()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def write(self, data: bytes) -> int:
        with self.lock:
            self.queue += data
        return len(data)

    def _feed(self) -> None:
        step = max(1, int(self.rate / 50))
        while not self.stop.is_set():
            with self.lock:
                chunk = bytes(self.queue[:step])
                del self.queue[:step]
            if chunk:
                try:
                    super().write(chunk)
                except OSError:
                    return
            time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        super().close()


def test_waits_scale_with_the_bytes_they_wait_for(exe: Path) -> None:
    """A 27,648-byte input (VWW) on a 10 KB/s link: the boot sync sends 27,649 '%' first (2.8 s on the
    wire), a frame as long takes as long; each wait allows its bytes at Device.rate on top of its base
    (before: 2 s per boot attempt and the plain timeout per frame, so the board never came up)."""
    link = SlowLink(exe, 10_000)
    dev = Device(link, timeout=1.0)
    dev.frame_fill = 27_648
    try:
        t = time.monotonic()
        dev.wait_boot(timeout=5)
        assert 2.0 < time.monotonic() - t < 15
        dev.frame_fill = 0
        junk = bytes(27_648)
        rep = dev.command(f"model {len(junk)} 0x{zlib.crc32(junk):08x}", payload=junk, check=False)
        assert rep.errors and rep.errors[0].startswith("e-model"), rep  # received whole, then refused
        assert dev.allow(27_648) == pytest.approx(1.0 + 27_648 / Device.RATE)
    finally:
        dev.close()
