"""The keywords12 backbone recipe and voice inventory, one variant at a time: a DS-CNN backbone trained on a
built feature cache (the speaker-disjoint split of one voice inventory) with a width and a number of epochs,
scored on the test split (the same clips in every cache: adding train voices leaves dev and test alone) as
tools/kw12_study.py and tools/kw12_compare.py do: 12 classes, the 10 keywords per voice family, the shift
profile.

A variant is "<cache>:f<filters>:e<epochs>:s<seed>[:cmn|:cmvn][:warp]", <cache> a name given with --cache
NAME=DIR (a folder `keywords12-k12b-...` under the cache root; e.g. the build before and after festival's
speakers of other languages were installed). The cache's plain MFCC go in as they are unless ":cmn"
subtracts every clip's own mean over time from each MFCC coefficient (cepstral mean normalization, the
`keywords12` front end since 2026-12-07: a fixed channel or timbre colour is a constant there), in training
and test alike; ":cmvn" also divides by that standard deviation; ":warp" trains with the "warp" augmentation
(a random spectral-envelope warp: vocal-tract length perturbation). Usage:
  PYTHONPATH=host:tools nice python tools/kw12_recipe_study.py --out runs/kw12_recipe.json \
      --cache base=~/.cache/snapuq/keywords12-k12b-s0-1600-80-100-t3 \
      --cache fest=~/.cache/snapuq/keywords12-k12b-s0-1600-80-100-t3-v1eabaa1cb1 \
      --variants base:f64:e16:s0,fest:f64:e8:s1
Resumable: finished variants in --out are kept.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from kw12_compare import (  # tools/ is on sys.path when this script runs
    accuracy_row,
    family,
    read_rows,
    record_row,
)
from kw12_study import fit_dscnn

from snapuq.data import Dataset, audio
from snapuq.data import keywords12 as K
from snapuq.options import TrainOptions


def load_cache(d: Path) -> tuple[Dataset, dict]:
    """A built cache folder (its plain MFCC: the variants choose the normalization) and its study arrays
    (x_test_shift, voice_test, ...)."""
    ds = K.load_cache(d, raw=True)
    return ds, K.extra_arrays(ds)


def run_one(variant: str, ds: Dataset, arr: dict) -> dict:
    cache, f, e, s, *flags = variant.split(":")
    filters, epochs, seed = int(f[1:]), int(e[1:]), int(s[1:])
    cmn, cmvn, warp = "cmn" in flags, "cmvn" in flags, "warp" in flags

    def feats(x: np.ndarray) -> np.ndarray:
        x = audio.cepstral_mean_norm(x) if cmn or cmvn else x.astype(np.float32)
        return x / (x.std(axis=1, keepdims=True) + 1e-3) if cmvn else x

    opts = TrainOptions(epochs=epochs, batch_size=64, lr=3e-3, schedule="cosine", warmup_epochs=1,
                        augment="warp" if warp else "none")  # fmt: skip
    t0 = time.perf_counter()
    m, hist = fit_dscnn(feats(ds.x_train), ds.y_train, opts, seed, variant, filters=filters)
    row = {"variant": variant, "cache": cache, "filters": filters, "epochs": epochs, "seed": seed, "cmn": cmn,
           "cmvn": cmvn, "augment": opts.augment,
           "params": int(m.count_params()), "n_train": int(len(ds.y_train)),
           "train_s": round(time.perf_counter() - t0, 1),
           "train_acc_last_epoch": hist[-1]["accuracy"]}  # fmt: skip
    fam = np.array([family(v) for v in arr["voice_test"]])
    for name, x in (("test", ds.x_test), ("test_shift", arr["x_test_shift"])):
        ok = np.asarray(m.predict(feats(x), batch_size=512, verbose=0)).argmax(1) == ds.y_test
        row.update(accuracy_row(name, ok, ds.y_test, fam))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/kw12_recipe.json")
    ap.add_argument("--cache", action="append", default=[], help="NAME=DIR (a built cache)")
    ap.add_argument("--variants", required=True)
    a = ap.parse_args()
    caches = {n: Path(p).expanduser() for n, p in (c.split("=", 1) for c in a.cache)}
    out = Path(a.out)
    rows = read_rows(out)
    done = {r["variant"] for r in rows}
    loaded: dict[str, tuple[Dataset, dict]] = {}
    for v in a.variants.split(","):
        if v in done:
            continue
        name = v.split(":")[0]
        if name not in caches:
            raise SystemExit(f"kw12_recipe_study: variant {v} names cache '{name}': give --cache {name}=DIR")
        if name not in loaded:
            loaded = {name: load_cache(caches[name])}  # one cache in memory at a time
        r = run_one(v, *loaded[name])
        r["cache_dir"] = str(caches[name])
        record_row(out, rows, r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
