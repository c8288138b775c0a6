"""results.jsonl written incrementally, one line per input index, with a resume that neither
loses nor duplicates a line, even after a kill in the middle of a write."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from snapuq.errors import SnapuqError
from snapuq.io import read_json, write_json


def read_done(path: Path, recheck: bool = True) -> dict[int, dict[str, Any]]:
    """Complete, well-formed lines of an interrupted run, keyed by input index (first wins).
    With recheck, suspect lines are left out so that the input runs again: a recorded mismatch
    and any line not from a CRC-checked reply (``"checked": true``, older harnesses)."""
    done: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return done
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line of a killed run
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("i"), int) or rec["i"] in done:
                continue
            if recheck and (rec.get("match") is not True or rec.get("checked") is not True):
                continue
            done[rec["i"]] = rec
    return done


class ResultsWriter:
    """Appends one JSON object per line and flushes it; on resume first rewrites the file with
    only the complete, unique lines (atomically, via a temporary file and rename)."""

    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.done: dict[int, dict[str, Any]] = read_done(path) if resume else {}
        tmp = path.with_suffix(".jsonl.tmp")
        with open(tmp, "w") as f:
            for i in sorted(self.done):
                f.write(json.dumps(self.done[i], sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._f = open(path, "a")

    def write(self, rec: dict[str, Any]) -> None:
        i = rec["i"]
        if i in self.done:
            raise SnapuqError(f"internal: input {i} written twice")
        self._f.write(json.dumps(rec, sort_keys=True) + "\n")
        self._f.flush()
        self.done[i] = rec

    def close(self) -> None:
        self._f.close()


def check_run_meta(out: Path, meta: dict[str, Any], resume: bool) -> None:
    """run.json pins what a resumed run must match (model, dataset, split, limit, board)."""
    p = out / "run.json"
    if resume and p.exists():
        old = read_json(p)
        if not isinstance(old, dict):
            raise SnapuqError(f"--resume: {p}: expected a JSON object")
        diff = {k: (old.get(k), v) for k, v in meta.items() if old.get(k) != v}
        if diff:
            raise SnapuqError(f"--resume: {p} was written for a different run: {diff}")
    elif not resume:
        # a fresh run in a used directory: the old run's files go first, so that the directory
        # never mixes two runs (results.jsonl is rewritten by ResultsWriter)
        for name in ("summary.json", "energy.json"):
            (out / name).unlink(missing_ok=True)
    write_json(p, meta, sort_keys=True)
