"""The harness's result directory (--out): results.jsonl written incrementally, one line per input
index, run.json pinning what the lines belong to, and a lock against a second run.

A resume trusts nothing it reads back: run.json must name the same model files (sha256 of the int8
.tflite, snapuq.json, calib.json and the generated C), the same inputs (sha256 of the int8 codes, labels
and segments) and options, and the same device (board, firmware, kernels, counter); then every line is
checked against the run (`check_line`: index in range, every field of the right type, the label and
segment of that input, the counter unit and cycles of this device, and the device's result equal to
what the host C core computes for that input now). A line that fails any check is dropped and its input
runs again; a torn last line (a kill in the middle of a write) is dropped too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snapuq import modeldir
from snapuq.errors import SnapuqError
from snapuq.io import atomic_open, read_json, write_json

RUN_FORMAT = 2
INFO_KEYS = ("model", "port")  # recorded in run.json, not compared on --resume (what they name is pinned)

# results.jsonl: the device's SNAP fields and the host reference's key for each (snapuq.harness.reference)
DEVICE_FIELDS = {"pred": "pred", "u": "u", "s": "s", "sf": "sf", "m": "m", "ebar": "ebar", "flag": "flag",
                 "p_err": "pe", "alarm": "al"}
COUNT_FIELDS = ("ticks", "cycles", "model_cycles", "snap_cycles", "retries")
LINE_FIELDS = frozenset({"i", "label", "pred_host", "cycles_unit", "match", "diff", "checked", "segment",
                         "retry_reasons", "inputs", *DEVICE_FIELDS, *COUNT_FIELDS})


def sha256_file(p: Path) -> str | None:
    """The file's sha256 (`modeldir.sha256_file`); None where there is no file."""
    return modeldir.sha256_file(p) if p.is_file() else None


@dataclass
class RunView:
    """What a results line must agree with: the run's inputs (positions 0..n-1 are indices start..start+n-1),
    their labels and segments, this device's counter, and the host reference's SNAP result of an input."""

    start: int
    labels: Sequence[int]
    segments: Sequence[str] | None
    cycles_unit: str
    cycles: Callable[[int], int]  # device ticks -> what results.jsonl records as cycles
    host: Callable[[int], dict[str, Any]]  # position -> the host C core's SNAP fields for that input
    fields: Sequence[str] | None = None  # the device fields a line must carry (None: every SNAP field)
    inputs: str | None = None  # a bare .tflite: where its inputs came from ("npz", "random")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_line(rec: Any, run: RunView) -> str | None:
    """None when the line can be kept, else why not (a short reason, the same for lines alike)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    unknown = sorted(set(rec) - LINE_FIELDS)
    if unknown:
        return f"unknown field '{unknown[0]}'"
    i = rec.get("i")
    if not _is_int(i):
        return "index not an integer"
    pos = i - run.start
    if not 0 <= pos < len(run.labels):
        return "index outside this run's inputs"
    if rec.get("checked") is not True:
        return "not from a CRC-checked reply"
    if rec.get("match") is not True or rec.get("diff") != []:
        return "a recorded mismatch (runs again)"
    if not _is_int(rec.get("label")) or rec["label"] != int(run.labels[pos]):
        return "label not the input's"
    want_seg = run.segments[pos] if run.segments is not None else None
    if rec.get("segment") != want_seg:
        return "segment not the input's"
    for k in COUNT_FIELDS:
        if not _is_int(rec.get(k)) or rec[k] < 0:
            return f"'{k}' missing or not a count"
    if rec.get("cycles_unit") != run.cycles_unit or rec["cycles"] != run.cycles(rec["ticks"]):
        return "cycles not this device's"
    rr = rec.get("retry_reasons", [])
    if not isinstance(rr, list) or not all(isinstance(s, str) for s in rr):
        return "retry_reasons not a list of strings"
    if rec.get("inputs") != run.inputs:
        return "inputs not this run's"
    for k in (DEVICE_FIELDS if run.fields is None else run.fields):
        v = rec.get(k)
        if not (_is_int(v) or (isinstance(v, list) and v and all(_is_int(e) for e in v))):
            return f"'{k}' missing or not integer"
    host = run.host(pos)
    if rec.get("pred_host") != host.get("pred"):
        return "pred_host not the host reference's"
    for k, hk in DEVICE_FIELDS.items():
        if hk not in host:
            continue
        hv, dv = host[hk], rec[k]
        if isinstance(hv, list) and not isinstance(dv, list):
            dv = [dv]
        if dv != hv:
            return "device result not the host reference's"
    return None


def read_done(path: Path, run: RunView | None = None) -> tuple[dict[int, dict[str, Any]], Tally]:
    """The lines of an earlier run worth keeping, by input index (the first good one of an index wins),
    and a tally of why the others were dropped. Without `run` (no device yet), only complete JSON lines
    with an integer index, for reading a finished run."""
    done: dict[int, dict[str, Any]] = {}
    dropped: Tally = Tally()
    if not path.exists():
        return done, dropped
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                dropped["torn last line"] += 1  # a killed run's last write
                break
            try:
                rec = json.loads(raw, parse_constant=_no_constant)
            except ValueError:
                dropped["not JSON"] += 1
                continue
            why = check_line(rec, run) if run is not None else (
                None if isinstance(rec, dict) and _is_int(rec.get("i")) else "index not an integer")
            if why is None and rec["i"] in done:
                why = "a second line for the input"
            if why is not None:
                dropped[why] += 1
                continue
            done[rec["i"]] = rec
    return done, dropped


def _no_constant(name: str) -> float:
    """NaN / Infinity: Python's json reads them; a results line must not hold one."""
    raise ValueError(f"{name} is not JSON")


class ResultsWriter:
    """Appends one JSON object per line and flushes it; on resume first rewrites the file with only the
    lines `check_line` keeps (atomically, via a temporary file and rename)."""

    def __init__(self, path: Path, resume: bool, run: RunView | None = None):
        self.path = path
        self.dropped: Tally = Tally()
        self.done: dict[int, dict[str, Any]] = {}
        if resume:
            self.done, self.dropped = read_done(path, run)
        with atomic_open(path, "w") as f:
            for i in sorted(self.done):
                f.write(json.dumps(self.done[i], sort_keys=True) + "\n")
        self._f = open(path, "a")

    def write(self, rec: dict[str, Any]) -> None:
        i = rec["i"]
        if i in self.done:
            raise SnapuqError(f"internal: input {i} written twice")
        self._f.write(json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")
        self._f.flush()
        self.done[i] = rec

    def close(self) -> None:
        self._f.close()


def dropped_line(kept: int, dropped: Tally) -> str | None:
    """One line saying which lines of results.jsonl a resume dropped and why (None when none was)."""
    if not dropped:
        return None
    why = ", ".join(f"{n} {reason}" for reason, n in dropped.most_common())
    return f"--resume: kept {kept} lines of results.jsonl, dropped {sum(dropped.values())} ({why}); " \
           "their inputs run again"


# ----------------------------------------------------------------------------------------------
# run.json


def _short(v: Any) -> str:
    r = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    if len(r) == 64 and all(c in "0123456789abcdef" for c in r):
        return r[:12]  # a sha256
    return r if len(r) <= 48 else r[:45] + "..."


def meta_diff(old: dict[str, Any], new: dict[str, Any], keys: Sequence[str] | None = None) -> list[str]:
    """What differs between a recorded run.json and this run, one phrase per key (model files by name)."""
    out = []
    for k in keys if keys is not None else sorted(set(old) | set(new)):
        if k in INFO_KEYS or old.get(k) == new.get(k):
            continue
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            for f in sorted(set(a) | set(b)):
                if a.get(f) != b.get(f):
                    was = _short(a.get(f)) if f in a else "(not recorded)"
                    out.append(f"{k}.{f} {was} -> {_short(b.get(f))}")
        else:
            out.append(f"{k} {_short(a) if k in old else '(not recorded)'} -> {_short(b)}")
    return out


def check_resume(out: Path, meta: dict[str, Any], resume: bool) -> bool:
    """Before any device is contacted, read-only: whether this run continues the one recorded in
    --out/run.json (True) or starts afresh (False). --resume refuses, in one line, a run.json written
    for other model files, inputs or options, and results without a run.json to tie them to."""
    if not resume:
        return False
    p = out / "run.json"
    res = out / "results.jsonl"
    if not p.exists():
        if res.exists() and res.stat().st_size > 0:
            raise SnapuqError(f"--resume: {p} is missing, so the lines of {res} cannot be tied to a model "
                              "and inputs; run without --resume to start over")
        return False
    old = read_json(p)
    if not isinstance(old, dict):
        raise SnapuqError(f"--resume: {p}: expected a JSON object")
    diff = meta_diff(old, meta, [k for k in sorted(set(old) | set(meta)) if k != "device"])
    if diff:
        raise SnapuqError(f"--resume: {p} was written for a different run: {'; '.join(diff)} "
                          "(run without --resume to start over)")
    return True


def start_run(out: Path, meta: dict[str, Any], resume: bool) -> None:
    """After the device has answered: on resume, the device must be the recorded one; a fresh run clears
    the old run's summary first (results.jsonl is rewritten by ResultsWriter). Then run.json is written."""
    p = out / "run.json"
    if resume:
        old = read_json(p)
        diff = meta_diff(old.get("device") or {}, meta["device"])
        if diff:
            raise SnapuqError(f"--resume: {p} was written for a different device or firmware: "
                              f"{'; '.join(diff)} (run without --resume to start over)")
    else:
        for name in ("summary.json", "energy.json"):
            (out / name).unlink(missing_ok=True)
    write_json(p, meta, sort_keys=True)


# ----------------------------------------------------------------------------------------------
# the lock


class OutLock:
    """An exclusive flock on --out/.lock for the whole run: a second harness on the same --out stops at
    once with one line instead of interleaving its lines with the first one's. The lock file is the only
    thing the harness creates in --out before the device has answered; a folder it created for nothing
    (the run failed first) is removed again."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.path = self.out / ".lock"
        self.created = not self.out.exists()
        self.out.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._f.close()
            raise SnapuqError(f"--out {self.out}: another harness run is writing it (lock {self.path}); wait "
                              "for it to end or choose another --out") from None

    def release(self) -> None:
        if self._f.closed:
            return
        if self.created and [p.name for p in self.out.iterdir()] == [".lock"]:
            with contextlib.suppress(OSError):
                self.path.unlink()
                self.out.rmdir()
        self._f.close()

