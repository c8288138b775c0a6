"""The harness's reply parser as a fuzzed surface (hypothesis): whatever bytes arrive, it either
returns exactly the reply the device sent or raises a DeviceError (TransportError, timeout) --
never another exception, never a different reply that could be taken for the device's answer."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snapuq.errors import DeviceError
from snapuq.harness.protocol import (
    Device,
    DeviceReplyError,
    Reply,
    TransportError,
    check_line,
    parse_input_reply,
    parse_kv,
    parse_outputs,
)

PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=120)


def frame(text: str) -> bytes:
    b = text.encode("ascii")
    return b + b"*" + f"{zlib.crc32(b):08x}".encode() + b"\r\n"


def reply_bytes(lines: list[str]) -> bytes:
    return b"".join(frame(t) for t in lines) + frame(f"m-ready lines={len(lines)}")


class NoSerial:
    timeout = 0.0

    def write(self, data: bytes) -> int:
        return len(data)

    def read(self, size: int = 1) -> bytes:
        return b""

    def reset_input_buffer(self) -> None:
        pass

    def close(self) -> None:
        pass


def parse(data: bytes) -> Reply:
    dev = Device(NoSerial(), timeout=0.0)
    dev._buf.extend(data)
    return dev.read_reply(timeout=0.0)


lines_st = st.lists(st.builds(lambda p, t: p + t.replace("*", "+"), st.sampled_from(["m-", "e-"]), PRINTABLE)
                    .filter(lambda t: not t.startswith("m-ready")), max_size=6)


def test_firmware_line_format() -> None:
    # the exact bytes the firmware sends (firmware/app/snapuq_proto.c, checked there by test_protocol)
    assert check_line(b"m-name-snapuq-host*e5bff2ea\r") == "m-name-snapuq-host"
    assert check_line(b"m-name-snapuq-host*e5bff2eb\r") is None
    assert check_line(b"m-name-snapuq-host") is None
    rep = parse(b"m-name-snapuq-host*e5bff2ea\r\nm-ready lines=1*b1923ce5\r\n")
    assert rep.lines == ["m-name-snapuq-host"]
    with pytest.raises(TransportError):  # a lost line: m-ready says 1, none arrived
        parse(b"m-ready lines=1*b1923ce5\r\n")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_escape_as_other_errors(data: bytes) -> None:
    assert check_line(data) is None or isinstance(check_line(data), str)
    try:
        parse(data)
    except DeviceError:
        pass


@settings(max_examples=150, deadline=None)
@given(lines_st)
def test_clean_reply_roundtrip(lines: list[str]) -> None:
    rep = parse(reply_bytes(lines))
    assert rep.lines == [t for t in lines if t.startswith("m-")]
    assert rep.errors == [t for t in lines if t.startswith("e-")]


FAULT = st.tuples(st.sampled_from(["drop", "flip", "insert", "cut"]), st.integers(0, 10_000),
                  st.integers(0, 255))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_st, st.lists(FAULT, min_size=1, max_size=4))
def test_damaged_reply_is_the_original_or_a_transport_error(lines: list[str], faults) -> None:
    clean = reply_bytes(lines)
    data = bytearray(clean)
    for kind, pos, val in faults:
        pos %= len(data) + 1
        if kind == "drop" and pos < len(data):
            del data[pos]
        elif kind == "flip" and pos < len(data):
            data[pos] ^= 1 << (val % 8)
        elif kind == "insert":
            data[pos:pos] = bytes([val])
        elif kind == "cut":  # a whole chunk lost (e.g. a dropped TCP segment)
            del data[pos:pos + val]
    try:
        rep = parse(bytes(data))
    except DeviceError:
        return
    want = parse(clean)
    # accepted only when it is the reply that was sent (e.g. an extra empty line, or junk
    # between replies that the fault did not touch)
    assert (rep.lines, rep.errors) == (want.lines, want.errors)


@settings(max_examples=150, deadline=None)
@given(st.lists(lines_st, min_size=4, max_size=4), st.binary(min_size=1, max_size=64))
def test_input_reply_parser_only_raises_device_errors(replies: list[list[str]], data: bytes) -> None:
    reps = [parse(reply_bytes(ls)) for ls in replies]
    try:
        parse_input_reply(reps, data, True)
    except DeviceError:
        pass
    for r in reps:
        for ln in r.lines:
            parse_kv(ln)
        try:
            parse_outputs(r)
        except TransportError:
            pass


def test_input_reply_checks_what_was_loaded() -> None:
    data = bytes(range(64))
    crc = f"{zlib.crc32(data):08x}"
    ok = [Reply([f"m-load-done bytes=64 crc={crc}"]),
          Reply(["m-infer n=1 w=0 ticks=5 model_ticks=4 snap_ticks=1 ticks_min=5 ticks_max=5 hz=1"]),
          Reply(["m-results pred=1 u=3"]), Reply(["m-output idx=0 name=logits hex=01ff"])]
    inf, res, outs = parse_input_reply(ok, data, True)
    assert res["pred"] == 1 and outs == {0: [1, -1]}
    bad_crc = [Reply([f"m-load-done bytes=64 crc={int(crc, 16) ^ 1:08x}"])] + ok[1:]
    with pytest.raises(TransportError):
        parse_input_reply(bad_crc, data, True)
    with pytest.raises(TransportError):  # infer 9 0 instead of infer 1 0 (a damaged command)
        parse_input_reply([ok[0], Reply([ok[1].lines[0].replace("n=1", "n=9")])] + ok[2:], data, True)
    with pytest.raises(TransportError):  # the results reply of another command
        parse_input_reply(ok[:2] + [Reply(["m-prof on=1"])] + ok[3:], data, True)
    with pytest.raises(DeviceReplyError):
        parse_input_reply([Reply([], ["e-crc want=1 got=2"])] + ok[1:], data, True)
