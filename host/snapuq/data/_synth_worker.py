"""Runs one espeak-ng synthesis job in a fresh interpreter (see snapuq.data.keywords.run_fresh).

libespeak-ng keeps internal state between utterances (the same call gives slightly different audio depending
on what was spoken before, and re-initialising does not reset it), so each job starts from a freshly loaded
library: identical jobs then give bit-identical waves.

Usage: python -m snapuq.data._synth_worker '{"fn": "synth_split", "kwargs": {...}, "out": "/path/prefix",
"position": 0}' (or @FILE holding that JSON)
"""

from __future__ import annotations

import json
import sys

import numpy as np

from snapuq.data import keywords, keywords12


def main(argv: list[str]) -> int:
    spec = argv[0]
    if spec.startswith("@"):  # the job in a file
        with open(spec[1:]) as f:
            spec = f.read()
    job = json.loads(spec)
    fn = {"synth_split": keywords.synth_split, "ood_waves": keywords.ood_waves,
          "synth_items": keywords12.synth_items}[job["fn"]]  # fmt: skip
    try:
        result = fn(**job["kwargs"], position=int(job.get("position", 0)))
    except Exception as e:  # reported by the parent as a DatasetError
        with open(f"{job['out']}.err", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        return 1
    arrays = result if isinstance(result, tuple) else (result,)
    for i, a in enumerate(arrays):
        np.save(f"{job['out']}_{i}.npy", a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
