"""The reply grammar of the firmware protocol (docs/FIRMWARE.md): every line ends with ``*`` and the
CRC-32 of the bytes before it (:func:`check_line`); values are decimal or ``0x`` hex; the fields of the
replies the harness reads (:data:`FIELDS`) are typed and range-checked, and a clean line whose value is
out of range (a negative tick count, a sha256 of the wrong length) is refused like a damaged one
(:class:`ReplyValueError`)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from snapuq.errors import DeviceError


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


def _pairs(line: str) -> list[list[str]]:
    return [tok.split("=", 1) for tok in line.split()[1:] if "=" in tok]


def parse_kv(line: str) -> dict[str, Any]:
    """``m-results pred=3 logits=1,-2 u=5`` -> {"_tag": "m-results", "pred": 3, "logits": [1, -2], "u": 5}.
    Values are ints, lists of ints (comma separated) or strings."""
    parts = line.split()
    out: dict[str, Any] = {"_tag": parts[0] if parts else ""}
    for k, v in _pairs(line):
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
    for k, v in _pairs(line):
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


def tag_of(line: str) -> str:
    return line.split(" ", 1)[0]


@dataclass
class Reply:
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped: bool = False  # read_reply(until=TAG) returned at that line; the rest follows

    def first(self, tag: str) -> dict[str, Any]:
        """The first line with this tag, typed (parse_typed: ReplyValueError when out of grammar)."""
        for ln in self.lines:
            if tag_of(ln) == tag:
                return parse_typed(ln)
        raise DeviceError(f"reply has no '{tag}' line: {self.lines!r}")

    def all(self, tag: str) -> list[dict[str, Any]]:
        return [parse_typed(ln) for ln in self.lines if tag_of(ln) == tag]

