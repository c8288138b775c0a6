"""Client side of the firmware protocol (firmware/app/snapuq_proto.h, docs/FIRMWARE.md).

Text commands end in ``%``; the device answers lines ``m-...`` / ``e-...`` and ends every
command with ``m-ready lines=N``. Every line ends with ``*`` and the CRC-32 of the bytes before
it (8 hex digits), so a reply damaged on the wire (a dropped, flipped or injected byte, a lost
line) is told apart from a clean one: it raises :class:`TransportError`, and the caller resyncs
and sends the same command again; a clean reply is never confused with a damaged one. Input
tensors travel as binary frames: ``load N CRC32%`` followed by N raw bytes, CRC-32 as
:func:`zlib.crc32`; the device echoes the CRC it received. After any error the client
resynchronises: enough ``%`` to end any partial frame, then ``sync TOKEN%``, and waits for
``m-sync-TOKEN`` + ``m-ready``.
"""

from __future__ import annotations

import itertools
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from snapuq.errors import DeviceError


class SerialLike(Protocol):
    timeout: float | None

    def write(self, data: bytes) -> int | None: ...
    def read(self, size: int = 1) -> bytes: ...
    def reset_input_buffer(self) -> None: ...
    def close(self) -> None: ...


class DeviceTimeout(DeviceError):
    """No complete reply within the timeout."""


class TransportError(DeviceError):
    """A reply damaged on the wire (CRC error, unparsable, lost line, unexpected reply): not the
    device's answer to the command, so the command is resent after a resync."""


class DeviceReplyError(DeviceError):
    """The device answered a command with an ``e-`` line."""

    def __init__(self, command: str, errors: list[str]):
        super().__init__(f"device rejected '{command}': {'; '.join(errors)}")
        self.command = command
        self.errors = errors


_HEX = frozenset(b"0123456789abcdef")


def check_line(raw: bytes) -> str | None:
    """One received line (without its LF) -> its text when it ends in a correct ``*CRC32``,
    else None. Never raises, whatever the bytes."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    star = raw.rfind(b"*")
    if star < 0 or len(raw) - star != 9 or not _HEX.issuperset(raw[star + 1:]):
        return None
    body = raw[:star]
    if zlib.crc32(body) != int(raw[star + 1:], 16):
        return None
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not text.startswith(("m-", "e-")) or not text.isprintable():
        return None
    return text


def parse_kv(line: str) -> dict[str, Any]:
    """``m-results pred=3 logits=1,-2 u=5`` -> {"_tag": "m-results", "pred": 3, "logits": [1, -2], "u": 5}.
    Values are ints, lists of ints (comma separated) or strings."""
    parts = line.split()
    out: dict[str, Any] = {"_tag": parts[0] if parts else ""}
    for tok in parts[1:]:
        if "=" not in tok:
            continue
        k, v = tok.split("=", 1)
        out[k] = _value(v)
        if k == "crc":
            out["crc_hex"] = v  # hex digits, kept as written (int() would misread 00001234)
    return out


def _value(v: str) -> Any:
    if "," in v:
        try:
            return [int(x) for x in v.split(",")]
        except ValueError:
            return v
    try:
        return int(v)
    except ValueError:
        return v.strip('"')


def parse_outputs(rep: Reply) -> dict[int, list[int]]:
    """m-output idx=I name=N hex=... lines -> {I: [int8 codes]}. A malformed line raises
    TransportError."""
    out: dict[int, list[int]] = {}
    for ln in rep.lines:
        if not ln.startswith("m-output "):
            continue
        fields = dict(t.split("=", 1) for t in ln.split()[1:] if "=" in t)
        try:
            raw = bytes.fromhex(fields["hex"])
            idx = int(fields["idx"])
        except (KeyError, ValueError) as e:
            raise TransportError(f"malformed output line {ln[:60]!r}: {e}") from None
        if idx in out:
            raise TransportError(f"output {idx} twice in one reply")
        out[idx] = [b - 256 if b > 127 else b for b in raw]
    return out


def parse_input_reply(reps: list[Reply], data: bytes, check_outputs: bool
                      ) -> tuple[dict[str, Any], dict[str, Any], dict[int, list[int]] | None]:
    """The four replies of one pipelined input (load, infer, results[, outputs]), already
    CRC-checked line by line, -> (infer, results, outputs). Raises DeviceReplyError for a clean
    ``e-`` answer and TransportError when a reply is not what the commands ask for (a reply of
    another command, a load of other bytes, other counts)."""
    names = ["load", "infer", "results", "outputs"][:len(reps)]
    for c, r in zip(names, reps):
        if r.errors:
            raise DeviceReplyError(c, r.errors)
    try:
        load = reps[0].first("m-load-done")
        crc = f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"
        if load.get("bytes") != len(data) or str(load.get("crc_hex")) != crc:
            raise TransportError(f"device loaded other bytes ({load}) than sent "
                                 f"({len(data)} bytes, crc {crc})")
        inf = reps[1].first("m-infer")
        if inf.get("n") != 1 or inf.get("w") != 0 or not isinstance(inf.get("ticks"), int) \
                or not isinstance(inf.get("model_ticks"), int) or not isinstance(inf.get("snap_ticks"), int):
            raise TransportError(f"unexpected infer reply {inf}")
        res = reps[2].first("m-results")
        outs = parse_outputs(reps[3]) if len(reps) > 3 else None
    except DeviceError as e:
        raise e if isinstance(e, TransportError) else TransportError(str(e)) from None
    return inf, res, outs


@dataclass
class Reply:
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def first(self, tag: str) -> dict[str, Any]:
        for ln in self.lines:
            if ln.split(" ", 1)[0] == tag:
                return parse_kv(ln)
        raise DeviceError(f"reply has no '{tag}' line: {self.lines!r}")

    def all(self, tag: str) -> list[dict[str, Any]]:
        return [parse_kv(ln) for ln in self.lines if ln.split(" ", 1)[0] == tag]


class Device:
    """A board running the snapuq firmware, over any pyserial-compatible port."""

    def __init__(self, ser: SerialLike, timeout: float = 10.0, log: list[str] | None = None):
        self.ser = ser
        self.timeout = timeout
        self._buf = bytearray()
        self._tokens = itertools.count(1)
        self.log = log
        self.boot_lines: list[str] = []
        self.frame_fill = 0  # '%' sent before a sync: the largest input frame the device may hold
        self.transport_faults = 0  # damaged replies seen
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

    def read_reply(self, timeout: float | None = None) -> Reply:
        """Lines up to ``m-ready``, every one CRC-checked; TransportError on any damage."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        rep = Reply()
        n = 0
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

    def send(self, data: bytes) -> None:
        self.ser.write(data)

    def command(self, text: str, payload: bytes | None = None, timeout: float | None = None,
                check: bool = True) -> Reply:
        self.send(text.encode("ascii") + b"%" + (payload or b""))
        rep = self.read_reply(timeout)
        if check and rep.errors:
            raise DeviceReplyError(text, rep.errors)
        return rep

    def sync(self, timeout: float = 5.0, attempts: int = 4) -> None:
        """Bring the parser back to a clean state: ``frame_fill`` + 1 '%' end whatever partial
        command or input frame the device holds (in text mode a lone '%' is ignored; a longer
        frame, e.g. a model upload, ends by the device's byte-gap timeout), then sync TOKEN.
        Each attempt waits twice as long as the one before (an emulator under load counts
        its byte-gap timeouts slowly)."""
        last: Exception | None = None
        wait = timeout
        for _ in range(attempts):
            token = f"s{next(self._tokens)}"
            want = f"m-sync-{token}"
            self._buf.clear()
            try:
                self.ser.reset_input_buffer()
            except Exception:  # noqa: BLE001 - not every port implements it
                pass
            self.send(b"%" * (1 + self.frame_fill) + b"sync " + token.encode() + b"%")
            deadline = time.monotonic() + wait
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
        """Wait until the device answers (boot banner or a sync)."""
        deadline = time.monotonic() + timeout
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
        crc = zlib.crc32(data) & 0xFFFFFFFF
        self.command(f"load {len(data)} 0x{crc:08x}", payload=data)

    def load_model(self, tflite: bytes, timeout: float = 60.0) -> dict[str, Any]:
        crc = zlib.crc32(tflite) & 0xFFFFFFFF
        return self.command(f"model {len(tflite)} 0x{crc:08x}", payload=tflite, timeout=timeout).first(
            "m-model-loaded")

    def infer(self, n: int = 1, warmup: int = 0, timeout: float | None = None) -> dict[str, Any]:
        return self.command(f"infer {n} {warmup}", timeout=timeout).first("m-infer")

    def results(self) -> dict[str, Any]:
        return self.command("results").first("m-results")

    def outputs(self) -> dict[int, list[int]]:
        return parse_outputs(self.command("outputs"))

    def send_input(self, data: bytes, check_outputs: bool = True) -> list[str]:
        """Pipeline load + infer + results (+ outputs) in one write; read with receive_input."""
        crc = zlib.crc32(data) & 0xFFFFFFFF
        cmds = [f"load {len(data)} 0x{crc:08x}", "infer 1 0", "results"]
        if check_outputs:
            cmds.append("outputs")
        self.send(cmds[0].encode() + b"%" + data + b"".join(c.encode() + b"%" for c in cmds[1:]))
        return cmds

    def receive_input(self, cmds: list[str], data: bytes) -> tuple[dict, dict, dict[int, list[int]] | None]:
        reps = [self.read_reply() for _ in cmds]
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
