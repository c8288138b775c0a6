"""The harness's reply parser as a fuzzed surface (hypothesis): whatever bytes arrive, it either
returns exactly the reply the device sent or raises a DeviceError (TransportError, timeout) --
never another exception, never a different reply that could be taken for the device's answer."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snapuq.errors import DeviceError
from snapuq.harness.protocol import Device
from snapuq.harness.replies import (
    FIELDS,
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


TAGS = ("m-load-done", "m-infer", "m-results", "m-output")
extra_st = st.lists(lines_st.map(lambda ls: [t for t in ls if t.startswith("m-") and not t.startswith(TAGS)]),
                    min_size=4, max_size=4)


@st.composite
def pipelined(draw):
    """The four replies of one input, each either the right one or a wrong one (other bytes loaded, a
    damaged count, a reply of another command, an out-of-grammar value), plus unrelated lines:
    (data, the lines of each reply, which slots are right, what a parser must return)."""
    data = draw(st.binary(min_size=1, max_size=64))
    crc = zlib.crc32(data)
    m, s = draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6))
    logits = draw(st.lists(st.integers(-128, 127), min_size=1, max_size=12))
    pred, u = draw(st.integers(0, len(logits) - 1)), draw(st.integers(-(2**31), 2**31 - 1))
    out = draw(st.binary(min_size=1, max_size=16))
    lg = ",".join(map(str, logits))
    infer = "m-infer n={} w={} ticks={} model_ticks={} snap_ticks={}"
    good = [f"m-load-done bytes={len(data)} crc={crc:08x}", infer.format(1, 0, m + s, m, s),
            f"m-results pred={pred} logits={lg} u={u}", f"m-output idx=0 name=logits hex={out.hex()}"]
    bit = 1 << draw(st.integers(0, 31))
    bad = [[f"m-load-done bytes={len(data) + 1} crc={crc:08x}",
            f"m-load-done bytes={len(data)} crc={crc ^ bit:08x}", "m-prof on=1"],
           [infer.format(2, 0, m + s, m, s), infer.format(1, 1, m + s, m, s),
            infer.format(1, 0, m + s + 1, m, s), good[2]],
           [f"m-results pred={len(logits)} logits={lg}", f"m-results pred={pred} logits={lg},128",
            "m-prof on=1"],
           [good[3] + "0", good[3] + " idx=1", f"{good[3]}\n{good[3]}"]]
    wrong = draw(st.integers(-1, 3))  # the one wrong reply, if any (a fault damages one reply at a time)
    pick = [draw(st.integers(0, len(b) - 1)) if i == wrong else -1 for i, b in enumerate(bad)]
    extra = draw(extra_st)
    if draw(st.integers(0, 7)) == 0:  # now and then a clean e- answer in one of the replies
        extra[draw(st.integers(0, 3))].append("e-" + draw(PRINTABLE).replace("*", "+"))
    lines = [([good[i]] if k < 0 else bad[i][k].split("\n")) + extra[i] for i, k in enumerate(pick)]
    want = ({"_tag": "m-infer", "n": 1, "w": 0, "ticks": m + s, "model_ticks": m, "snap_ticks": s},
            {"_tag": "m-results", "pred": pred, "logits": logits, "u": u},
            {0: [b - 256 if b > 127 else b for b in out]})
    return data, lines, [k < 0 for k in pick], want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelined())
def test_input_reply_parser_accepts_exactly_the_right_replies(case) -> None:
    """Whatever the four replies hold, parse_input_reply returns exactly what the device said when every
    reply is the one the commands ask for, and raises DeviceReplyError (an ``e-`` line) or TransportError
    otherwise -- never another exception, never a wrong reply taken for an answer."""
    data, lines, right, want = case
    reps = [parse(reply_bytes(ls)) for ls in lines]
    errors = any(r.errors for r in reps)
    try:
        got = parse_input_reply(reps, data, True)
    except DeviceReplyError:
        assert errors
        return
    except TransportError:
        assert not errors and not all(right), (lines, right)
        return
    assert not errors and all(right), (lines, right)
    assert got == want
    for r in reps:
        for ln in r.lines:
            kv = parse_kv(ln)
            assert kv["_tag"] == ln.split()[0]
        try:
            outs = parse_outputs(r)
        except TransportError:
            continue
        assert len(outs) == sum(ln.startswith("m-output ") for ln in r.lines)


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


# ---------------------------------------------------------------- the typed reply grammar
def test_numbers_in_0x_hex_are_numbers() -> None:
    """docs/FIRMWARE.md: numbers are decimal or 0x hex. A profile in hex gives the same counter as in
    decimal (before: int('0x17d7840') raised ValueError in Counter.__init__)."""
    from snapuq.harness.runner import Counter

    dec = Reply(["m-profile fw=snapuq board=qemu_m4 cpu_hz=25000000 counter=qemu_systick_25mhz "
                 "counter_hz=25000000 loaded=1 in_bytes=64"]).first("m-profile")
    hexa = Reply(["m-profile fw=snapuq board=qemu_m4 cpu_hz=0x17D7840 counter=qemu_systick_25mhz "
                  "counter_hz=0x17d7840 loaded=0x1 in_bytes=0x40"]).first("m-profile")
    assert hexa == dec and hexa["counter_hz"] == 25_000_000 and hexa["in_bytes"] == 64
    a, b = Counter(dec, "qemu_m4", True), Counter(hexa, "qemu_m4", True)
    assert (a.hz, a.cpu_hz, a.unit, a.cycles(1000)) == (b.hz, b.cpu_hz, b.unit, b.cycles(1000)) == \
        (25_000_000, 25_000_000, "qemu_instructions", 40_000)
    assert parse_kv("m-x a=0x10 b=-0x2,3 c=0x d=1_0 e=+1")["a"] == 16
    assert parse_kv("m-x b=-0x2,3")["b"] == [-2, 3]
    assert [parse_kv("m-x c=0x d=1_0 e=+1")[k] for k in "cde"] == ["0x", "1_0", "+1"]  # not numbers


INFER = "m-infer n=1 w=0 ticks=5 model_ticks=4 snap_ticks=1 ticks_min=5 ticks_max=5 hz=25000000"


@pytest.mark.parametrize("line", [
    INFER.replace("ticks=5 model_ticks=4", "ticks=-200 model_ticks=-201"),   # negative ticks
    INFER.replace("model_ticks=4", "model_ticks=-4"),
    INFER.replace("ticks=5 ", "ticks=6 "),                                    # != model + snap
    INFER.replace("ticks=5 ", "ticks=5 ticks=5 "),                            # a field twice
    INFER.replace("ticks=5 ", "ticks=1_0 "),                                  # not a number
    INFER.replace("ticks=5 ", ""),                                            # missing
    INFER.replace("hz=25000000", "hz=0"),
    INFER.replace("ticks_min=5", "ticks_min=9"),
    INFER.replace("ticks=5 ", f"ticks={2**64} "),
])
def test_out_of_range_infer_replies_are_transport_faults(line: str) -> None:
    """A clean line whose values break the grammar is refused like a damaged one (before: ticks=-200 went
    into results.jsonl and the summary's median)."""
    data = bytes(range(64))
    crc = f"{zlib.crc32(data):08x}"
    reps = [Reply([f"m-load-done bytes=64 crc={crc}"]), Reply([line]), Reply(["m-results pred=1 u=3"]),
            Reply(["m-output idx=0 name=logits hex=01ff"])]
    with pytest.raises(TransportError):
        parse_input_reply(reps, data, True)
    reps[1] = Reply([INFER])
    assert parse_input_reply(reps, data, True)[0]["ticks"] == 5


@pytest.mark.parametrize("tag,line", [
    ("m-profile", "m-profile fw=snapuq loaded=1 counter_hz=1 model_sha256=abc"),
    ("m-profile", "m-profile fw=snapuq loaded=2 counter_hz=1"),
    ("m-profile", "m-profile fw=snapuq loaded=1 counter_hz=-25000000"),
    ("m-profile", "m-profile fw=snapuq loaded=1 in_bytes=0"),
    ("m-profile", "m-profile loaded=1"),
    ("m-stats", "m-stats flash=-1 arena=10"),
    ("m-stats", "m-stats stack_peak=12x"),
    ("m-results", "m-results pred=-1 logits=1,2"),
    ("m-results", "m-results pred=2 logits=1,2"),
    ("m-results", "m-results pred=0 logits=1,200"),
    ("m-results", "m-results pred=0 u=4294967296"),
    ("m-results", "m-results pred=0 flag=2"),
    ("m-load-done", "m-load-done bytes=64 crc=1234"),
    ("m-output", "m-output idx=0 name=x hex=0g"),
    ("m-model-go", "m-model-go bytes=10"),
])
def test_out_of_grammar_replies_are_refused(tag: str, line: str) -> None:
    with pytest.raises(TransportError):
        Reply([line]).first(tag)


@st.composite
def typed_line(draw, tag: str):
    """A line in the grammar of FIELDS[tag] (every required field, some optional ones, values in range
    and the cross-checks held) and the dict parse_typed must return for it."""
    want: dict = {"_tag": tag}
    for k, f in FIELDS[tag].items():
        if not (f.required or draw(st.booleans())):
            continue
        if f.kind == "int":
            want[k] = draw(st.integers(f.lo, f.hi))
        elif f.kind == "ints":
            want[k] = draw(st.lists(st.integers(f.lo, f.hi), min_size=1, max_size=5))
        elif f.kind in ("hex", "hexbytes"):
            want[k] = draw(st.binary(min_size=1, max_size=16)).hex() if f.kind == "hexbytes" else \
                draw(st.text("0123456789abcdef", min_size=f.digits, max_size=f.digits))
        else:
            want[k] = draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12))
    if tag == "m-infer":
        if want["model_ticks"] + want["snap_ticks"] > FIELDS[tag]["ticks"].hi:
            want["model_ticks"] //= 2
            want["snap_ticks"] //= 2
        want["ticks"] = want["model_ticks"] + want["snap_ticks"]
        if "ticks_min" in want and "ticks_max" in want:
            want["ticks_min"], want["ticks_max"] = sorted((want["ticks_min"], want["ticks_max"]))
    if tag == "m-results" and "pred" in want and "logits" in want and "psum" not in want:
        want["pred"] %= len(want["logits"])
    fmt = {k: ",".join(map(str, v)) if isinstance(v, list) else str(v)
           for k, v in want.items() if k != "_tag"}
    upper = draw(st.booleans())  # hex digits in either case; parse_typed returns them lower case
    line = " ".join([tag] + [f"{k}={v.upper() if upper and FIELDS[tag][k].kind == 'hex' else v}"
                             for k, v in fmt.items()])
    if "crc" in want:
        want["crc_hex"] = line.split("crc=")[1].split()[0]
    return line, want


TYPED = sorted(FIELDS)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TYPED).flatmap(typed_line))
def test_typed_replies_in_the_grammar_are_read_exactly(case) -> None:
    line, want = case
    assert Reply([line]).first(want["_tag"]) == want


@st.composite
def out_of_range_line(draw, tag: str) -> str:
    """A line in the grammar but for one number just outside its field's range."""
    line, want = draw(typed_line(tag))
    ints = [k for k, f in FIELDS[tag].items() if f.kind in ("int", "ints")]
    keys = [k for k in want if k in ints]
    if not keys:  # only optional fields, none drawn
        line, keys = f"{line} {ints[0]}=0", [ints[0]]
    k = draw(st.sampled_from(keys))
    f = FIELDS[tag][k]
    v = draw(st.sampled_from([f.lo - 1, f.hi + 1]))
    return " ".join(f"{k}={v}" if t.startswith(k + "=") else t for t in line.split())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TYPED).flatmap(out_of_range_line))
def test_typed_replies_out_of_range_are_refused(line: str) -> None:
    with pytest.raises(TransportError):
        Reply([line]).first(line.split()[0])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TYPED), PRINTABLE)
def test_typed_replies_are_a_reply_or_a_transport_error(tag: str, body: str) -> None:
    """Any body: either a TransportError or a dict whose every listed field has its type and range."""
    try:
        got = Reply([f"{tag} {body}"]).first(tag)
    except TransportError:
        return
    assert got["_tag"] == tag
    for k, f in FIELDS[tag].items():
        if k not in got:
            assert not f.required, (k, got)
            continue
        v = got[k]
        if f.kind in ("int", "ints"):
            for x in v if f.kind == "ints" else [v]:
                assert isinstance(x, int) and f.lo <= x <= f.hi, (k, got)
        elif f.kind in ("hex", "hexbytes"):
            assert isinstance(v, str) and all(c in "0123456789abcdef" for c in v), (k, got)
