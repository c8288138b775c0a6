"""A noisy serial line between the harness and the board: a TCP proxy between the harness and
QEMU drops, flips, injects garbage and stalls bytes in both directions, at three fault rates, in the
inputs and in the exchanges before the first input (boot sync, profile, stats) and after the last
(stats). Every run must complete, no fault may become a mismatch, and the results must equal those of
a clean run through the same proxy."""

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

from snapuq.harness.qemu import QemuProcess, board_spec, build_firmware
from snapuq.harness.runner import Options, run

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

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
    at: int       # byte offset in its direction (with `after`: offset after the last pattern's end)
    kind: str     # drop | flip | garbage | stall
    arg: float = 0.0
    done: bool = False
    after: tuple[bytes, ...] = ()  # patterns the direction's bytes must show in this order first
    stage: str = "inputs"          # for the report: startup | inputs | final
    armed: int = 0                 # patterns of `after` seen so far
    tail: bytearray = field(default_factory=bytearray)  # its direction's last bytes since the last pattern


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
        for f in up + down:
            if f.after:
                f.at, f.arg_at = 1 << 62, f.at  # fires only once its patterns were seen
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
                self._arm(d, b)
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

    @staticmethod
    def _arm(d: Direction, b: int) -> None:
        """Pattern-triggered faults: once the bytes before `b` end with the next pattern of `after`, step
        on; after the last one the fault fires `at` bytes after it."""
        for f in d.faults:
            if not f.after or f.armed == len(f.after):
                continue
            if f.tail.endswith(f.after[f.armed]):
                f.armed += 1
                f.tail.clear()
                if f.armed == len(f.after):
                    f.at = d.count + int(f.arg_at)
                    continue
            f.tail.append(b)
            del f.tail[:-32]

    def close(self) -> None:
        self.stop.set()
        for s in (self.lsock, self.dev):
            try:
                s.close()
            except OSError:
                pass
        for t in self.threads:
            t.join(timeout=2)


def _harness(url: str, out: Path, retries: int = 12) -> dict:
    opts = Options(port=url, model=MODEL, dataset="digits", split="test", out=out, limit=N, timeout=2.0,
                   retries=retries, progress=False)
    return run(opts)


KINDS = ["drop", "flip", "garbage", "stall"]


def _fault(kind: str, at: int, rng: random.Random, **kw) -> Fault:
    return Fault(at, kind, 2.5 if kind == "stall" else rng.randrange(1, 12), **kw)


def _schedule(total: int, seed: int, per_kind: int = 3) -> list[Fault]:
    """`per_kind` faults of each kind at random offsets in the middle 80 % of a direction's traffic."""
    rng = random.Random(seed)
    return [_fault(k, rng.randrange(total // 10, total * 9 // 10), rng) for k in KINDS * per_kind]


def _edges(way: str, r: int, seed: int) -> list[Fault]:
    """Faults in the exchanges around the inputs, one kind each (rotated with the rate `r`): the first
    boot sync, the first profile and stats (startup) and the stats after the last input (final: the first
    stats after a load), twice in it. Up: the command's '%' (or the sync token); down: inside the line."""
    rng = random.Random(seed)
    k = [KINDS[(r + i) % 4] for i in range(5)]
    if way == "up":
        pats = [((b"sync s",), 0, "startup"), ((b"profile",), 0, "startup"), ((b"stats",), 0, "startup"),
                ((b"load ", b"stats"), 0, "final"), ((b"load ", b"sta"), 0, "final")]
    else:
        pats = [((b"m-sync-",), 1, "startup"), ((b"m-profile",), 30, "startup"),
                ((b"m-stats",), 40, "startup"), ((b"m-load-done", b"m-stats"), 10, "final"),
                ((b"m-load-done", b"m-stats"), 120, "final")]
    return [_fault(kind, at, rng, after=after, stage=stage) for kind, (after, at, stage) in zip(k, pats)]


def _recs(out: Path) -> list[dict]:
    keep = ("i", "label", "pred", "pred_host", "u", "s", "sf", "m", "ebar", "flag", "match", "diff")
    lines = (out / "results.jsonl").read_text().splitlines()
    return [{k: r[k] for k in keep} for r in map(json.loads, lines)]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int, int, Path]:
    spec = board_spec("qemu:m4")
    elf = build_firmware(spec, MODEL, BUILD)
    out = tmp_path_factory.mktemp("clean") / "R"
    with QemuProcess(spec, elf, icount=True) as q:
        clean = FaultProxy(q.port, [], [])
        try:
            s0 = _harness(clean.url, out)
        finally:
            clean.close()
    assert s0["n"] == N and s0["mismatches_vs_host"] == 0 and s0["complete"]
    assert clean.up.count > 1000 and clean.down.count > 10_000
    return elf, s0, clean.up.count, clean.down.count, out


# faults of each kind per direction in the inputs -> (rotation of the edge faults, --retries). At 6 of each
# kind about 1 % of the bytes towards the device are hit: most attempts of an input meet a fault, so the
# noisiest line is given the retries it needs (the faults are finite: every input gets through)
RATES = {1: (0, 12), 3: (1, 12), 6: (2, 40)}


@pytest.mark.parametrize("per_kind", list(RATES))
def test_faults_both_directions_complete_without_false_mismatches(clean_run, tmp_path: Path,
                                                                  per_kind: int) -> None:
    elf, s0, up_total, down_total, clean_out = clean_run
    r, retries = RATES[per_kind]
    up = _schedule(up_total, 1 + 10 * r, per_kind) + _edges("up", r, 5 + r)
    down = _schedule(down_total, 2 + 10 * r, per_kind) + _edges("down", r, 7 + r)
    with QemuProcess(board_spec("qemu:m4"), elf, icount=True) as q:
        noisy = FaultProxy(q.port, up, down, seed=3 + r)
        try:
            s1 = _harness(noisy.url, tmp_path / "noisy", retries)
        finally:
            noisy.close()
    table = {}
    for way, faults in (("up", up), ("down", down)):
        for f in faults:
            table.setdefault((way, f.stage), []).append(f"{f.kind}{'' if f.done else '(not applied)'}")
    print(f"\nrate {per_kind}/kind: complete={s1['complete']} n={s1['n']} "
          f"mismatches={s1['mismatches_vs_host']} "
          f"retries={s1['retries']} exchange_retries={s1['exchange_retries']} "
          f"transport_faults={s1['transport_faults']} "
          + " ".join(f"{w}/{st}={','.join(v)}" for (w, st), v in sorted(table.items())))
    # every fault was really applied (the traffic went past every offset and every pattern)
    assert all(f.done for f in up + down), table
    assert sorted(noisy.up.applied) == sorted(f.kind for f in up)
    assert sorted(noisy.down.applied) == sorted(f.kind for f in down)
    assert s1["n"] == N and s1["complete"]
    assert s1["mismatches_vs_host"] == 0
    assert s1["retries"] > 0 and s1["transport_faults"] > 0
    assert s1["exchange_retries"] >= 2  # the startup and the final exchanges hit were asked again
    assert _recs(tmp_path / "noisy") == _recs(clean_out)
    for k in ("board", "counter", "cpu_hz", "model_sha256", "flash_bytes", "arena_bytes", "ram_budget_bytes"):
        assert s1[k] == s0[k], k
    # QEMU instructions, read off a 25 MHz SysTick: the same inferences within a tick (40 instructions)
    assert abs(s1["latency"]["cycles_median"] - s0["latency"]["cycles_median"]) <= 40
