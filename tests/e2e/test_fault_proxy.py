"""A noisy serial line between the harness and the board: a TCP proxy between the harness and
QEMU drops, flips, injects garbage and stalls bytes in both directions (a few faults of each
kind). Every input must complete, no fault may become a mismatch, and the results must equal
those of a clean run through the same proxy."""

from __future__ import annotations

import json
import random
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from snapuq.harness.qemu import ROOT, QemuProcess, board_spec, build_firmware
from snapuq.harness.runner import Options, run

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-firmware"
N = 30

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing"),
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc missing"),
    pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported"),
]


@dataclass
class Fault:
    at: int       # byte offset in its direction
    kind: str     # drop | flip | garbage | stall
    arg: float = 0.0
    done: bool = False


@dataclass
class Direction:
    faults: list[Fault] = field(default_factory=list)
    count: int = 0          # bytes seen (before faults)
    applied: list[str] = field(default_factory=list)


class FaultProxy:
    """127.0.0.1:<port> -> target: forwards both directions, applying the faults of each
    direction when its byte counter passes their offsets."""

    def __init__(self, target: int, up: list[Fault], down: list[Fault], seed: int = 0):
        self.target = target
        self.up = Direction(sorted(up, key=lambda f: f.at))      # harness -> device
        self.down = Direction(sorted(down, key=lambda f: f.at))  # device -> harness
        self.rng = random.Random(seed)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.dev = socket.create_connection(("127.0.0.1", target))
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        self.lsock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                cli, _ = self.lsock.accept()
            except OSError:
                continue
            cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst, d in ((cli, self.dev, self.up), (self.dev, cli, self.down)):
                t = threading.Thread(target=self._pump, args=(src, dst, d), daemon=True)
                t.start()
                self.threads.append(t)
            return

    def _pump(self, src: socket.socket, dst: socket.socket, d: Direction) -> None:
        src.settimeout(0.2)
        while not self.stop.is_set():
            try:
                chunk = src.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            out = bytearray()
            for b in chunk:
                pending = [f for f in d.faults if not f.done and f.at <= d.count]
                d.count += 1
                keep = True
                for f in pending:
                    f.done = True
                    d.applied.append(f.kind)
                    if f.kind == "drop":
                        keep = False
                    elif f.kind == "flip":
                        b ^= 1 << self.rng.randrange(8)
                    elif f.kind == "garbage":
                        out += bytes(self.rng.randrange(256) for _ in range(int(f.arg) or 5))
                    elif f.kind == "stall":
                        try:
                            dst.sendall(bytes(out))
                        except OSError:
                            return
                        out.clear()
                        time.sleep(f.arg)
                if keep:
                    out.append(b)
            try:
                dst.sendall(bytes(out))
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        for s in (self.lsock, self.dev):
            try:
                s.close()
            except OSError:
                pass
        for t in self.threads:
            t.join(timeout=2)


def _harness(url: str, out: Path) -> dict:
    opts = Options(port=url, model=MODEL, dataset="digits", split="test", out=out, limit=N, timeout=2.0,
                   retries=12, progress=False)
    return run(opts)


def _schedule(total: int, seed: int) -> list[Fault]:
    """3 faults of each kind at random offsets in the middle 80 % of a direction's traffic."""
    rng = random.Random(seed)
    kinds = ["drop", "flip", "garbage", "stall"] * 3
    return [Fault(rng.randrange(total // 10, total * 9 // 10), k,
                  2.5 if k == "stall" else rng.randrange(1, 12)) for k in kinds]


def _recs(out: Path) -> list[dict]:
    keep = ("i", "label", "pred", "pred_host", "u", "s", "sf", "m", "ebar", "flag", "match", "diff")
    lines = (out / "results.jsonl").read_text().splitlines()
    return [{k: r[k] for k in keep} for r in map(json.loads, lines)]


def test_faults_both_directions_complete_without_false_mismatches(tmp_path: Path) -> None:
    spec = board_spec("qemu:m4")
    elf = build_firmware(spec, MODEL, BUILD)
    with QemuProcess(spec, elf, icount=True) as q:
        clean = FaultProxy(q.port, [], [])
        try:
            s0 = _harness(clean.url, tmp_path / "clean")
        finally:
            clean.close()
        up_total, down_total = clean.up.count, clean.down.count
    assert s0["n"] == N and s0["mismatches_vs_host"] == 0 and s0["complete"]
    assert up_total > 1000 and down_total > 10_000

    with QemuProcess(spec, elf, icount=True) as q:
        noisy = FaultProxy(q.port, _schedule(up_total, 1), _schedule(down_total, 2), seed=3)
        try:
            s1 = _harness(noisy.url, tmp_path / "noisy")
        finally:
            noisy.close()
    # every fault was really applied (the traffic went past every offset)
    assert sorted(noisy.up.applied) == sorted(["drop", "flip", "garbage", "stall"] * 3)
    assert sorted(noisy.down.applied) == sorted(["drop", "flip", "garbage", "stall"] * 3)
    assert s1["n"] == N and s1["complete"]
    assert s1["mismatches_vs_host"] == 0
    assert s1["retries"] > 0 and s1["transport_faults"] > 0
    assert _recs(tmp_path / "noisy") == _recs(tmp_path / "clean")
