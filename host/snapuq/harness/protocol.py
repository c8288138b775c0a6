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

Values follow docs/FIRMWARE.md: numbers decimal or ``0x`` hex; the fields of the replies the harness
reads (:data:`FIELDS`) are typed and range-checked, and a clean line whose value is out of range (a
negative tick count, a sha256 of the wrong length) is refused like a damaged one (:class:`ReplyValueError`).
Every wait allows the time the bytes it waits for take on the link (:meth:`Device.allow`): the bytes
sent before the reply and those of the reply, at ``rate`` bytes/s.
"""

from __future__ import annotations

import itertools
import re
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


class ReplyValueError(TransportError):
    """A clean (CRC-checked) reply line whose fields do not follow the reply grammar: a value of the
    wrong type or out of range, a field twice, a required field missing."""


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


_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+)\Z")


def parse_int(v: str) -> int | None:
    """A number as docs/FIRMWARE.md writes it (decimal or ``0x`` hex, optionally negative) -> int;
    anything else (``+1``, ``1_0``, ``0x``, blanks) -> None."""
    if not _INT.match(v):
        return None
    neg = v.startswith("-")
    body = v[1:] if neg else v
    n = int(body[2:], 16) if body[:2] in ("0x", "0X") else int(body)
    return -n if neg else n


def _value(v: str) -> Any:
    if "," in v:
        xs = [parse_int(x) for x in v.split(",")]
        return v if None in xs else xs
    n = parse_int(v)
    return v.strip('"') if n is None else n


# ------------------------------------------------------------------ typed replies
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class Field:
    kind: str  # "int" | "ints" (comma list) | "hex" (exactly `digits` hex) | "hexbytes" | "str"
    lo: int = 0
    hi: int = U64_MAX
    digits: int = 0
    required: bool = False


def _u(lo: int = 0, hi: int = U64_MAX, required: bool = False) -> Field:
    return Field("int", lo, hi, required=required)


_BIT = Field("int", 0, 1)
_STR = Field("str")
_I32 = Field("int", *I32)
_I32V = Field("ints", *I32)

# the fields of every reply the harness reads (firmware/app/snapuq_app*.c); keys not listed are kept
# as parse_kv reads them
FIELDS: dict[str, dict[str, Field]] = {
    "m-profile": {"fw": Field("str", required=True), "version": _STR, "board": _STR, "cpu": _STR,
                  "cpu_hz": _u(1, U32_MAX), "clock": _STR, "counter": _STR, "counter_hz": _u(1, U32_MAX),
                  "kernels": _STR, "model": _STR, "model_sha256": Field("hex", digits=64),
                  "snap_sha256": Field("hex", digits=64), "snap": _BIT,
                  "members": _u(0, U32_MAX), "loaded": Field("int", 0, 1, required=True),
                  "in_bytes": _u(1, U32_MAX), "outputs": _u(0, U32_MAX), "ops": _u(0, U32_MAX),
                  "snap_ok": _BIT, "taps": _u(0, U32_MAX), "classes": _u(0, U32_MAX)},
    "m-stats": {k: _u() for k in ("flash", "flash_size", "ram_static", "ram_size", "pool", "arena",
                                   "arena_persist", "arena_act", "arena_act_noreuse", "input", "stack_peak",
                                   "stack_size", "ram_peak", "model_bytes", "model_struct", "commands",
                                   "errors")} | {"direct_input": _BIT, "model_in_ram": _BIT},
    "m-infer": {"n": _u(1, 100_000, True), "w": _u(0, 100_000, True), "ticks": _u(required=True),
                "model_ticks": _u(required=True), "snap_ticks": _u(required=True), "ticks_min": _u(),
                "ticks_max": _u(), "hz": _u(1, U32_MAX), "prof": _BIT, "switch_ticks": _u()},
    "m-load-done": {"bytes": _u(1, U32_MAX, True), "crc": Field("hex", digits=8)},
    "m-results": {"pred": Field("int", 0, I32[1]), "logits": Field("ints", -128, 127), "ebar": _I32V,
                  "z": _I32V, "s": _I32, "sf": _I32, "m": _I32, "u": _I32, "pe": _I32, "al": _I32,
                  "zl": _I32, "flag": _BIT, "alarm": _BIT, "psum": _I32V, "terms": _u(0, U32_MAX)},
    "m-output": {"idx": _u(0, U32_MAX, True), "name": _STR, "hex": Field("hexbytes", required=True)},
    "m-model-go": {"bytes": _u(1, U32_MAX, True), "crc": Field("hex", digits=8, required=True),
                   "max": _u(0, U64_MAX)},
    "m-model-loaded": {"bytes": _u(1, U32_MAX), "snap": _BIT, "arena": _u(), "in_bytes": _u(1, U32_MAX),
                       "builtin": _BIT},
    "m-model-kept": {"builtin": _BIT, "bytes": _u()},
}
_HEXCHARS = frozenset("0123456789abcdefABCDEF")


def _typed(tag: str, key: str, raw: str, f: Field) -> Any:
    bad = f"{tag} {key}={raw[:40]}"
    if f.kind == "str":
        return raw.strip('"')
    if f.kind in ("hex", "hexbytes"):
        ok = _HEXCHARS.issuperset(raw) and (len(raw) == f.digits if f.kind == "hex" else len(raw) % 2 == 0)
        if not ok:
            raise ReplyValueError(f"{bad}: not {f.digits or 'an even number of'} hex digits")
        return raw.lower()
    xs = [parse_int(x) for x in raw.split(",")] if f.kind == "ints" else [parse_int(raw)]
    if None in xs:
        raise ReplyValueError(f"{bad}: not {'a list of integers' if f.kind == 'ints' else 'an integer'}")
    if any(not f.lo <= x <= f.hi for x in xs):  # type: ignore[operator]
        raise ReplyValueError(f"{bad}: out of range [{f.lo}, {f.hi}]")
    return xs if f.kind == "ints" else xs[0]


def parse_typed(line: str) -> dict[str, Any]:
    """parse_kv with the grammar of :data:`FIELDS`: every listed field typed and in range, none twice,
    the required ones present, and the cross-checks a clean reply satisfies (ticks = model_ticks +
    snap_ticks, ticks_min <= ticks_max, pred indexes the logits). ReplyValueError otherwise."""
    out = parse_kv(line)
    tag = out["_tag"]
    spec = FIELDS.get(tag)
    if spec is None:
        return out
    seen: set[str] = set()
    for tok in line.split()[1:]:
        if "=" not in tok:
            continue
        k, v = tok.split("=", 1)
        if k in seen:
            raise ReplyValueError(f"{tag}: field {k} twice")
        seen.add(k)
        if k in spec:
            out[k] = _typed(tag, k, v, spec[k])
    missing = [k for k, f in spec.items() if f.required and k not in seen]
    if missing:
        raise ReplyValueError(f"{tag}: no {', '.join(missing)}")
    if tag == "m-infer":
        if out["ticks"] != out["model_ticks"] + out["snap_ticks"]:
            raise ReplyValueError(f"m-infer ticks={out['ticks']} is not model_ticks + snap_ticks")
        if "ticks_min" in out and "ticks_max" in out and out["ticks_min"] > out["ticks_max"]:
            raise ReplyValueError("m-infer ticks_min > ticks_max")
    if tag == "m-results" and "pred" in out and "logits" in out and "psum" not in out \
            and out["pred"] >= len(out["logits"]):
        raise ReplyValueError(f"m-results pred={out['pred']} with {len(out['logits'])} logits")
    return out


def parse_outputs(rep: Reply) -> dict[int, list[int]]:
    """m-output idx=I name=N hex=... lines -> {I: [int8 codes]}. A malformed line raises
    TransportError."""
    out: dict[int, list[int]] = {}
    for ln in rep.lines:
        if not ln.startswith("m-output "):
            continue
        try:
            fields = parse_typed(ln)
        except ReplyValueError as e:
            raise TransportError(f"malformed output line {ln[:60]!r}: {e}") from None
        raw = bytes.fromhex(fields["hex"])
        idx = fields["idx"]
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
    stopped: bool = False  # read_reply(until=TAG) returned at that line; the rest follows

    def first(self, tag: str) -> dict[str, Any]:
        """The first line with this tag, typed (parse_typed: ReplyValueError when out of grammar)."""
        for ln in self.lines:
            if ln.split(" ", 1)[0] == tag:
                return parse_typed(ln)
        raise DeviceError(f"reply has no '{tag}' line: {self.lines!r}")

    def all(self, tag: str) -> list[dict[str, Any]]:
        return [parse_typed(ln) for ln in self.lines if ln.split(" ", 1)[0] == tag]


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
                if until is not None and line.split(" ", 1)[0] == until:
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
        crc = zlib.crc32(data) & 0xFFFFFFFF
        self.command(f"load {len(data)} 0x{crc:08x}", payload=data)

    def load_model(self, tflite: bytes, timeout: float = 60.0) -> dict[str, Any]:
        """Upload a .tflite or .snapuq blob (`model N CRC`). The device answers the command first:
        ``m-model-go bytes=N crc=CRC`` (then the N bytes are sent) or a refusal (``e-size max=...``
        when N is more than its pool holds beside what it keeps): then nothing is sent and
        DeviceReplyError says why. `timeout`: the device's time to hash and load the model, on top
        of the time the bytes take on the link. A go-ahead that names other bytes (a damaged
        command) is a TransportError after a resync that fills the frame the device expects."""
        crc = zlib.crc32(tflite) & 0xFFFFFFFF
        text = f"model {len(tflite)} 0x{crc:08x}"
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
        crc = zlib.crc32(data) & 0xFFFFFFFF
        cmds = [f"load {len(data)} 0x{crc:08x}", "infer 1 0", "results"]
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
