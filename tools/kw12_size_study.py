"""More training data for keywords12: more synthesized utterances per class and / or several independent
microphone renderings ("takes") of each utterance. One build with the most of both (--utts utterances per
class, --takes renderings); every variant trains the DS-CNN backbone alone on a subset of it (the first U
utterances of each class, takes 0..T-1), the same epochs, and is scored on the same speaker-disjoint test
split as tools/kw12_study.py (whole split, flite + festival speakers, foreign readers, shift profile).

Variants are "u<U>_t<T>" (e.g. u400_t1 is the shipped set's size, one rendering). Take 0 of every utterance
is the one-take set's clip, so u400_t1 draws the same kind of clips as `keywords12` with 400 per class.

Usage: PYTHONPATH=host nice -n 5 python tools/kw12_size_study.py --out runs/kw12_size.json
[--variants u400_t1,u800_t1,u400_t3,u800_t3] [--epochs 8] [--seeds 0]. Resumable: finished (variant, seed)
rows in --out are kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from kw12_study import correct, fit_dscnn, test_row  # tools/ is on sys.path when this script runs

from snapuq.data import keywords12 as K
from snapuq.io import write_text
from snapuq.options import TrainOptions


def parse_variant(v: str) -> tuple[int, int]:
    u, t = v.split("_")
    if not (u.startswith("u") and t.startswith("t")):
        raise SystemExit(f"kw12_size_study: variant '{v}' is not u<utterances>_t<takes>")
    return int(u[1:]), int(t[1:])


def select(
    y: np.ndarray, utt: np.ndarray, take: np.ndarray, n_utt: int, n_takes: int, per_class: int
) -> np.ndarray:
    """Train clips of the first n_utt utterances of every class (plan order), takes < n_takes."""
    rank = utt - y * per_class  # plan_split numbers the utterances class after class
    return np.nonzero((rank < n_utt) & (take < n_takes))[0]


def run_one(variant: str, seed: int, ds, ex: dict, epochs: int, per_class: int) -> dict:
    n_utt, n_takes = parse_variant(variant)
    idx = select(ds.y_train, ex["utt_train"], ex["take_train"], n_utt, n_takes, per_class)
    x, y = ds.x_train[idx], ds.y_train[idx]
    opts = TrainOptions(epochs=epochs, batch_size=64, lr=3e-3, schedule="cosine", warmup_epochs=1)
    t0 = time.perf_counter()
    m, _ = fit_dscnn(x, y, opts, seed, variant)
    row = {"variant": variant, "utterances_per_class": n_utt, "takes": n_takes, "seed": seed}
    row["epochs"] = epochs
    row.update(n_train=int(len(y)), train_s=round(time.perf_counter() - t0, 1))
    row["train_acc"] = float(correct(m, x, y).mean())
    row.update(test_row(m, ds, ex))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/kw12_size.json")
    ap.add_argument("--utts", type=int, default=800, help="utterances per class of the build")
    ap.add_argument("--takes", type=int, default=3, help="renderings of every train utterance in the build")
    ap.add_argument("--variants", default="u400_t1,u800_t1,u400_t3,u800_t3")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--seeds", default="0")
    a = ap.parse_args()
    pc = dict(K.PER_CLASS, train=a.utts)
    ds = K.load_keywords12(None, 0, pc, takes=a.takes)
    ex = K.extra_arrays(ds)
    out = Path(a.out)
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    done = {(r["variant"], r["seed"]) for r in rows}
    for seed in [int(s) for s in a.seeds.split(",")]:
        for v in a.variants.split(","):
            n_utt, n_takes = parse_variant(v)
            if n_utt > a.utts or n_takes > a.takes:
                raise SystemExit(f"kw12_size_study: {v} needs a build of at least {n_utt} x {n_takes}")
            if (v, seed) in done:
                continue
            r = run_one(v, seed, ds, ex, a.epochs, a.utts)
            rows.append(r)
            print(json.dumps({k: r[k] for k in r if k != "per_class"}), flush=True)
            write_text(
                out, json.dumps({"build": {"per_class": pc, "takes": a.takes}, "rows": rows}, indent=1)
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
