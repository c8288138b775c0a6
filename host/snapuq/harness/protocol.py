"""Client side of the firmware protocol (firmware/app/snapuq_proto.h, docs/FIRMWARE.md).

Text commands end in ``%``; the device answers lines ``m-...`` / ``e-...`` and ends every
command with ``m-ready``. Input tensors travel as binary frames: ``load N CRC32%`` followed by
N raw bytes, CRC-32 as :func:`zlib.crc32`. After any error the client resynchronises with
``%sync TOKEN%`` and waits for ``m-sync-TOKEN`` + ``m-ready``.
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


class DeviceReplyError(DeviceError):
    """The device answered a command with an ``e-`` line."""

    def __init__(self, command: str, errors: list[str]):
        super().__init__(f"device rejected '{command}': {'; '.join(errors)}")
        self.command = command
        self.errors = errors


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
    """m-output idx=I name=N hex=... lines -> {I: [int8 codes]}."""
    out: dict[int, list[int]] = {}
    for ln in rep.lines:
        if not ln.startswith("m-output "):
            continue
        fields = dict(t.split("=", 1) for t in ln.split()[1:] if "=" in t)
        raw = bytes.fromhex(fields.get("hex", ""))
        out[int(fields["idx"])] = [b - 256 if b > 127 else b for b in raw]
    return out


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

    # ------------------------------------------------------------ low level
    def _readline(self, deadline: float) -> str:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                raw = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                line = raw.decode("ascii", "replace").strip("\r\x00 ")
                if self.log is not None:
                    self.log.append(line)
                return line
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

    def read_reply(self, timeout: float | None = None) -> Reply:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        rep = Reply()
        while True:
            line = self._readline(deadline)
            if not line:
                continue
            if line == "m-ready":
                return rep
            if line.startswith("e-"):
                rep.errors.append(line)
            elif line.startswith("m-boot"):
                self.boot_lines.append(line)
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

    def sync(self, timeout: float = 5.0, attempts: int = 3) -> None:
        """Bring the parser back to a clean state: '%' ends whatever partial command or frame
        the device holds (a stalled binary frame ends by its own timeout), then sync TOKEN."""
        last: Exception | None = None
        for _ in range(attempts):
            token = f"s{next(self._tokens)}"
            self._buf.clear()
            try:
                self.ser.reset_input_buffer()
            except Exception:  # noqa: BLE001 - not every port implements it
                pass
            self.send(b"%sync " + token.encode() + b"%")
            deadline = time.monotonic() + timeout
            try:
                while True:
                    line = self._readline(deadline)
                    if line == f"m-sync-{token}":
                        break
                # the m-ready that closes the sync
                while self._readline(deadline) != "m-ready":
                    pass
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

    def receive_input(self, cmds: list[str]) -> tuple[dict, dict, dict[int, list[int]] | None]:
        reps = [self.read_reply() for _ in cmds]
        for c, r in zip(cmds, reps):
            if r.errors:
                raise DeviceReplyError(c, r.errors)
        outs = parse_outputs(reps[3]) if len(cmds) > 3 else None
        return reps[1].first("m-infer"), reps[2].first("m-results"), outs

    def run_input(self, data: bytes,
                  check_outputs: bool = True) -> tuple[dict, dict, dict[int, list[int]] | None]:
        return self.receive_input(self.send_input(data, check_outputs))

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
