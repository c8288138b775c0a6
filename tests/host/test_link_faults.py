"""The harness's start and end exchanges on a noisy line, against the host build of the firmware (the same
app and core as on a board; tests/e2e/test_fault_proxy.py does the same through QEMU): a damaged `profile`
or `stats` command or reply, at the start or after the last input, is resent after a resync like an input
(before: one bad byte there aborted the run); a profile written in 0x hex is read as numbers; an
out-of-range tick count is refused and asked again, never recorded."""

from __future__ import annotations

import json
import re
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

import snapuq.harness.runner as runner
from snapuq.harness.qemu import PipeSerial, build_host_firmware

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("make") is None,
                                reason="needs gcc and make")

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-firmware"
N = 12


@pytest.fixture(scope="module")
def exe() -> Path:
    if not (MODEL / "snapuq_model.c").exists():
        pytest.skip("models/digits not exported")
    return build_host_firmware(BUILD, MODEL)


class Rule:
    """Damage the k-th (1-based) command written that contains `pattern` (up) or the k-th line received
    that starts with `pattern` (down): 'drop' / 'flip' one byte, or 'rewrite' the line's text (and give it
    a correct CRC: a clean line that says something else)."""

    def __init__(self, way: str, pattern: bytes, k: int, action: str,
                 fn: Callable[[str], str] | None = None) -> None:
        self.way, self.pattern, self.ks, self.action, self.fn = way, pattern, {k} if k else set(), action, fn
        self.every = k == 0
        self.seen = 0
        self.applied = 0


class NoisyLink:
    """A pyserial-like port in front of the host firmware that applies Rules."""

    def __init__(self, exe: Path, rules: list[Rule]) -> None:
        self.inner = PipeSerial(exe)
        self.timeout = self.inner.timeout
        self.rules = rules
        self.pending = bytearray()

    def _hit(self, way: str, data: bytes) -> list[Rule]:
        hits = []
        for r in self.rules:
            if r.way == way and (data.startswith(r.pattern) if way == "down" else r.pattern in data):
                r.seen += 1
                if r.every or r.seen in r.ks:
                    r.applied += 1
                    hits.append(r)
        return hits

    def write(self, data: bytes) -> int:
        out = bytearray(data)
        for r in self._hit("up", data):
            at = data.index(r.pattern) + len(r.pattern) - 1  # the command's last byte (its '%' when given)
            if r.action == "drop":
                del out[at]
            else:
                out[at] ^= 0x04
        self.inner.write(bytes(out))
        return len(data)

    def read(self, size: int = 1) -> bytes:
        self.pending += self.inner.read(size)
        out = bytearray()
        while b"\n" in self.pending:
            nl = self.pending.index(b"\n")
            line = bytes(self.pending[:nl + 1])
            del self.pending[:nl + 1]
            for r in self._hit("down", line):
                if r.action == "rewrite":
                    body = line.rsplit(b"*", 1)[0].decode()
                    new = r.fn(body).encode()
                    line = new + b"*" + f"{zlib.crc32(new):08x}".encode() + b"\r\n"
                else:
                    b = bytearray(line)
                    b[3] ^= 0x20
                    line = bytes(b)
            out += line
        return bytes(out)

    def reset_input_buffer(self) -> None:
        self.pending.clear()
        self.inner.reset_input_buffer()

    def close(self) -> None:
        self.inner.close()


def _run(exe: Path, out: Path, rules: list[Rule], monkeypatch: pytest.MonkeyPatch) -> dict:
    link = NoisyLink(exe, rules)
    monkeypatch.setattr(runner, "open_serial", lambda url, baud: link)
    opts = runner.Options(port="noisy://host", model=MODEL, dataset="digits", split="test", out=out, limit=N,
                          timeout=1.5, retries=6, progress=False)
    try:
        return runner.run(opts)
    finally:
        link.close()


def _recs(out: Path) -> list[dict]:
    keep = ("i", "label", "pred", "pred_host", "u", "s", "sf", "m", "ebar", "flag", "match", "diff")
    lines = (out / "results.jsonl").read_text().splitlines()
    return [{k: r[k] for k in keep} for r in map(json.loads, lines)]


@pytest.fixture(scope="module")
def clean(exe: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("clean") / "R"
    with pytest.MonkeyPatch.context() as mp:
        s = _run(exe, out, [], mp)
    assert s["complete"] and s["n"] == N and s["mismatches_vs_host"] == 0
    return s, out


def _same(s: dict, out: Path, clean: tuple[dict, Path]) -> None:
    s0, out0 = clean
    assert s["complete"] and s["n"] == N and s["mismatches_vs_host"] == 0
    assert _recs(out) == _recs(out0)
    for k in ("board", "counter", "cpu_hz", "model_sha256", "flash_bytes", "arena_bytes", "ram_budget_bytes"):
        assert s[k] == s0[k], k


# the startup profile and stats are the 1st; with the first stats damaged, its resend is the 2nd and the
# stats after the last input the 3rd
START_AND_END = [
    [Rule("down", b"m-profile", 1, "flip"), Rule("down", b"m-stats", 1, "flip"),
     Rule("down", b"m-stats", 3, "flip")],
    [Rule("up", b"profile%", 1, "drop"), Rule("up", b"stats%", 1, "flip"), Rule("up", b"stats%", 3, "drop")],
    # the final stats command damaged, then the reply to its resend
    [Rule("up", b"profile%", 1, "flip"), Rule("down", b"m-stats", 1, "flip"),
     Rule("up", b"stats%", 3, "flip"), Rule("down", b"m-stats", 3, "flip")],
]


@pytest.mark.parametrize("rules", START_AND_END, ids=["replies", "commands", "both"])
def test_damaged_start_and_end_exchanges_are_resent(exe: Path, clean, tmp_path: Path, rules: list[Rule],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    s = _run(exe, tmp_path / "R", rules, monkeypatch)
    assert all(r.applied == 1 for r in rules), [(r.pattern, r.seen, r.applied) for r in rules]
    _same(s, tmp_path / "R", clean)


def _hex(body: str) -> str:
    return re.sub(r"\b(cpu_hz|counter_hz|in_bytes|flash|ram_size|arena|pool)=(\d+)",
                  lambda m: f"{m.group(1)}=0x{int(m.group(2)):x}", body)


def test_a_profile_and_stats_in_hex_run_as_in_decimal(exe: Path, clean, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [Rule("down", b"m-profile", 0, "rewrite", _hex), Rule("down", b"m-stats", 0, "rewrite", _hex)]
    s = _run(exe, tmp_path / "R", rules, monkeypatch)
    assert rules[0].applied >= 1 and rules[1].applied >= 2
    _same(s, tmp_path / "R", clean)


def _negative(body: str) -> str:
    return re.sub(r"\bticks=\d+", "ticks=-200", body, count=1)


def test_a_negative_tick_count_is_refused_and_asked_again(exe: Path, clean, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2nd and 5th infer replies say ticks=-200 (with a correct CRC): refused, the input resent; no
    negative count reaches results.jsonl or the summary (before: median -200 with enough of them)."""
    rules = [Rule("down", b"m-infer", 2, "rewrite", _negative),
             Rule("down", b"m-infer", 5, "rewrite", _negative)]
    rules[1].ks.add(6)
    s = _run(exe, tmp_path / "R", rules, monkeypatch)
    assert rules[0].applied == 1 and rules[1].applied == 2
    _same(s, tmp_path / "R", clean)
    recs = [json.loads(x) for x in (tmp_path / "R" / "results.jsonl").read_text().splitlines()]
    assert min(r["cycles"] for r in recs) > 0 and s["latency"]["cycles_median"] > 0
    assert sum(r["retries"] for r in recs) >= 3


@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "0"])
def test_timeout_must_be_finite(capsys, tmp_path: Path, value: str) -> None:
    """Every wait is the timeout + the time its bytes take on the link; --timeout inf (a wait that never
    ends) is refused in one line before anything runs."""
    from snapuq import cli

    rc = cli.main(["harness", "--port", "socket://127.0.0.1:9", "--model", str(MODEL), "--dataset", "digits",
                   "--no-progress", "--out", str(tmp_path / "R"), "--timeout", value])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "--timeout must be a finite number" in err, err
    assert not (tmp_path / "R").exists()
