"""Client side of the firmware protocol (firmware/app/snapuq_proto.h, docs/FIRMWARE.md).

Text commands end in ``%``; the device answers lines ``m-...`` / ``e-...`` and ends every
command with ``m-ready lines=N``. Every line ends with ``*`` and the CRC-32 of the bytes before
it (8 hex digits; the reply grammar: snapuq.harness.replies), so a reply damaged on the wire (a
dropped, flipped or injected byte, a lost line) is told apart from a clean one: it raises
:class:`TransportError`, and the caller resyncs and sends the same command again; a clean reply is
never confused with a damaged one. Input
tensors travel as binary frames: ``load N CRC32%`` followed by N raw bytes, CRC-32 as
:func:`zlib.crc32`; the device echoes the CRC it received. After any error the client
resynchronises: enough ``%`` to end any partial frame, then ``sync TOKEN%``, and waits for
``m-sync-TOKEN`` + ``m-ready``.

Every wait allows the time the bytes it waits for take on the link (:meth:`Device.allow`): the bytes
sent before the reply and those of the reply, at ``rate`` bytes/s.
"""

from __future__ import annotations

import itertools
import time
import zlib
from typing import Any, Protocol

from snapuq.errors import DeviceError
from snapuq.harness.replies import (
    DeviceReplyError,
    Reply,
    TransportError,
    check_line,
    parse_input_reply,
    parse_kv,
    parse_outputs,
    tag_of,
)


class SerialLike(Protocol):
    timeout: float | None

    def write(self, data: bytes) -> int | None: ...
    def read(self, size: int = 1) -> bytes: ...
    def reset_input_buffer(self) -> None: ...
    def close(self) -> None: ...


class DeviceTimeout(DeviceError):
    """No complete reply within the timeout."""


def _framed(cmd: str, data: bytes) -> str:
    return f"{cmd} {len(data)} 0x{zlib.crc32(data) & 0xFFFFFFFF:08x}"


class Device:
    """A board running the snapuq firmware, over any pyserial-compatible port."""

    RATE = 1000.0  # bytes/s the waits allow for: below 115200 baud (11.5 KB/s) and QEMU's UART
    # under load (2-3 KB/s measured), so a wait is never shorter than the bytes take to cross

    def __init__(self, ser: SerialLike, timeout: float = 10.0, log: list[str] | None = None,
                 rate: float = RATE):
        if not (rate > 0 and rate < float("inf")):
            raise ValueError(f"rate must be a finite number of bytes/s > 0, got {rate}")
        self.ser = ser
        self.timeout = timeout
        self.rate = float(rate)
        self.reply_bytes = 0  # the largest outputs reply expected (set by the runner): its time is allowed
        self._buf = bytearray()
        self._tokens = itertools.count(1)
        self.log = log
        self.boot_lines: list[str] = []
        self.frame_fill = 0  # '%' sent before a sync: the largest input frame the device may hold
        self.transport_faults = 0  # damaged replies seen
        self.exchange_retries = 0  # start / end commands asked again (runner._exchange)
        self.retry_log: list[str] = []  # why the current input was resent (filled by the runner)

    # ------------------------------------------------------------ low level
    def _readraw(self, deadline: float) -> bytes:
        """The next received line without its LF (raw bytes; not checked)."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                raw = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                if self.log is not None:
                    self.log.append(raw.decode("ascii", "replace").rstrip("\r"))
                return raw
            if len(self._buf) > self.MAX_LINE:
                del self._buf[: len(self._buf) - self.MAX_LINE]  # endless garbage: keep the tail
            if time.monotonic() > deadline:
                partial = bytes(self._buf)[:80]
                raise DeviceTimeout(f"no reply line within {self.timeout:.1f} s (partial: {partial!r})")
            try:
                waiting = int(getattr(self.ser, "in_waiting", 0) or 0)
            except Exception:  # noqa: BLE001 - a port without in_waiting
                waiting = 0
            chunk = self.ser.read(max(1, waiting))
            if chunk:
                self._buf.extend(chunk)
            # pyserial's read returns b"" on its own timeout; loop until our deadline

    MAX_LINE = 1 << 16

    def allow(self, nbytes: int, base: float | None = None) -> float:
        """Seconds to wait for a reply that needs `nbytes` to cross the link (sent before it, or the
        reply's own): the device's time (`base`, default the timeout) + nbytes at `rate`."""
        return (self.timeout if base is None else base) + max(0, int(nbytes)) / self.rate

    def read_reply(self, timeout: float | None = None, until: str | None = None,
                   rep: Reply | None = None) -> Reply:
        """Lines up to ``m-ready``, every one CRC-checked; TransportError on any damage. With `until`
        (a tag) it returns as soon as such a line arrived (``rep.stopped``); a second call with
        ``rep=`` reads the rest of the same reply (the m-ready count covers both)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        rep = Reply() if rep is None else rep
        rep.stopped = False
        n = len(rep.lines) + len(rep.errors)
        while True:
            raw = self._readraw(deadline)
            if not raw.strip(b"\r\x00 "):
                continue  # an empty line carries nothing
            line = check_line(raw)
            if line is None:
                self.transport_faults += 1
                raise TransportError(f"damaged reply line {raw[:80]!r}")
            if line == "m-ready" or line.startswith("m-ready "):
                if parse_kv(line).get("lines") != n:
                    self.transport_faults += 1
                    raise TransportError(f"reply of {n} lines announced as '{line}' (a line was lost)")
                return rep
            n += 1
            if line.startswith("e-"):
                rep.errors.append(line)
            elif line.startswith("m-boot"):
                self.boot_lines.append(line)
                rep.lines.append(line)
            else:
                rep.lines.append(line)
                if until is not None and tag_of(line) == until:
                    rep.stopped = True
                    return rep

    def send(self, data: bytes) -> None:
        self.ser.write(data)

    def command(self, text: str, payload: bytes | None = None, timeout: float | None = None,
                check: bool = True) -> Reply:
        """Send a command (+ its frame) and read its reply; the wait allows `timeout` (default the
        device's) + the bytes sent at `rate`."""
        data = text.encode("ascii") + b"%" + (payload or b"")
        self.send(data)
        rep = self.read_reply(self.allow(len(data), timeout))
        if check and rep.errors:
            raise DeviceReplyError(text, rep.errors)
        return rep

    def sync(self, timeout: float = 5.0, attempts: int = 4, fill: int | None = None) -> None:
        """Bring the parser back to a clean state: ``frame_fill`` (or `fill`) + 1 '%' end whatever
        partial command or input frame the device holds (in text mode a lone '%' is ignored; a
        longer frame ends by the device's byte-gap timeout), then sync TOKEN. Each attempt waits
        twice as long as the one before (an emulator under load counts its byte-gap timeouts
        slowly), plus the time its bytes take on the link."""
        last: Exception | None = None
        wait = timeout
        fill = self.frame_fill if fill is None else fill
        for _ in range(attempts):
            token = f"s{next(self._tokens)}"
            want = f"m-sync-{token}"
            self._buf.clear()
            try:
                self.ser.reset_input_buffer()
            except Exception:  # noqa: BLE001 - not every port implements it
                pass
            data = b"%" * (1 + fill) + b"sync " + token.encode() + b"%"
            self.send(data)
            deadline = time.monotonic() + self.allow(len(data), wait)
            wait *= 2
            try:
                while True:
                    raw = self._readraw(deadline)
                    line = check_line(raw)
                    if line == want:
                        break
                    if line is None and raw.rstrip(b"\r") == want.encode():
                        raise DeviceError("the device's replies carry no CRC: its firmware is older "
                                          "than this harness; rebuild and flash it")
                # the m-ready that closes the sync
                while True:
                    line = check_line(self._readraw(deadline))
                    if line is not None and line.startswith("m-ready"):
                        return
            except DeviceTimeout as e:
                last = e
        raise DeviceError(f"device does not answer sync after {attempts} attempts ({last})")

    def wait_boot(self, timeout: float = 10.0) -> None:
        """Wait until the device answers (boot banner or a sync). Each sync attempt waits up to 2 s
        + its bytes (1 + frame_fill '%': as many as the input has) at `rate`; the whole wait is
        `timeout` + one attempt's bytes, so a large input does not use up the time at boot."""
        deadline = time.monotonic() + self.allow(2 + self.frame_fill + 12, timeout)
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self.sync(timeout=min(2.0, max(0.2, deadline - time.monotonic())), attempts=1)
                return
            except DeviceError as e:
                last = e
        raise DeviceError(f"device did not come up within {timeout:.0f} s ({last})")

    # ------------------------------------------------------------ commands
    def name(self) -> str:
        rep = self.command("name")
        return rep.lines[0] if rep.lines else ""

    def profile(self) -> dict[str, Any]:
        return self.command("profile").first("m-profile")

    def stats(self) -> dict[str, Any]:
        return self.command("stats").first("m-stats")

    def load_input(self, data: bytes) -> None:
        self.command(_framed("load", data), payload=data)

    def load_model(self, tflite: bytes, timeout: float = 60.0) -> dict[str, Any]:
        """Upload a .tflite or .snapuq blob (`model N CRC`). The device answers the command first:
        ``m-model-go bytes=N crc=CRC`` (then the N bytes are sent) or a refusal (``e-size max=...``
        when N is more than its pool holds beside what it keeps): then nothing is sent and
        DeviceReplyError says why. `timeout`: the device's time to hash and load the model, on top
        of the time the bytes take on the link. A go-ahead that names other bytes (a damaged
        command) is a TransportError after a resync that fills the frame the device expects."""
        crc = zlib.crc32(tflite) & 0xFFFFFFFF
        text = _framed("model", tflite)
        self.send(text.encode("ascii") + b"%")
        rep = self.read_reply(self.allow(len(text) + 1), until="m-model-go")
        if not rep.stopped:
            raise DeviceReplyError(text, rep.errors or [f"no m-model-go: {rep.lines!r}"])
        try:
            go = rep.first("m-model-go")
        except TransportError:
            self.sync()  # a frame of a length this line does not say: the device's timeout ends it
            raise
        if go["bytes"] != len(tflite) or go["crc"] != f"{crc:08x}":
            self.sync(fill=int(go["bytes"]))
            raise TransportError(f"the device's go-ahead names another frame ({go}) than the {len(tflite)} "
                                 f"bytes (crc {crc:08x}) to upload: nothing sent")
        self.send(tflite)
        rep = self.read_reply(self.allow(len(tflite), timeout), rep=rep)
        if rep.errors:
            raise DeviceReplyError(text, rep.errors)
        return rep.first("m-model-loaded")

    def infer(self, n: int = 1, warmup: int = 0, timeout: float | None = None) -> dict[str, Any]:
        return self.command(f"infer {n} {warmup}", timeout=timeout).first("m-infer")

    def results(self) -> dict[str, Any]:
        return self.command("results").first("m-results")

    def outputs(self) -> dict[int, list[int]]:
        return parse_outputs(self.command("outputs"))

    def send_input(self, data: bytes, check_outputs: bool = True) -> list[str]:
        """Pipeline load + infer + results (+ outputs) in one write; read with receive_input."""
        cmds = [_framed("load", data), "infer 1 0", "results"]
        if check_outputs:
            cmds.append("outputs")
        self.send(cmds[0].encode() + b"%" + data + b"".join(c.encode() + b"%" for c in cmds[1:]))
        return cmds

    def receive_input(self, cmds: list[str], data: bytes) -> tuple[dict, dict, dict[int, list[int]] | None]:
        """The replies of send_input: the load's wait allows the input's bytes on the link, the
        outputs' the bytes of their hex lines (reply_bytes)."""
        sent = len(data) + sum(len(c) + 1 for c in cmds)
        waits = [self.allow(sent), None, None, self.allow(self.reply_bytes)][:len(cmds)]
        reps = [self.read_reply(w) for w in waits]
        return parse_input_reply(reps, data, len(cmds) > 3)

    def run_input(self, data: bytes,
                  check_outputs: bool = True) -> tuple[dict, dict, dict[int, list[int]] | None]:
        return self.receive_input(self.send_input(data, check_outputs), data)

    def prof(self, on: bool | None = None) -> list[dict[str, Any]]:
        if on is not None:
            self.command("prof on" if on else "prof off")
            return []
        return self.command("prof show").all("m-prof")

    def close(self) -> None:
        try:
            self.ser.close()
        except Exception:  # noqa: BLE001
            pass
