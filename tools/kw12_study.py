"""Which parts of the keywords12 set help on held-out voices: a DS-CNN backbone trained per variant of the
training set (same number of clips per class in every variant), scored on the speaker-disjoint test split
by voice family (English espeak-ng voices, foreign phonemizations, flite / festival speakers never heard),
and on the test split through the harsher "shift" microphone profile.

Variants (cumulative):
  en_clean   English espeak-ng voices only, words only placed in the second (no microphone augmentation)
  en_mic     + microphone augmentation (noise, babble, reverberation, band-limit, speed, level)
  en_for     + the foreign phonemizations (espeak-ng voices of other languages)
  all        + flite and festival voices
  all_spec   + SpecAugment on the MFCCs during training (the keywords12 recipe)

Usage: PYTHONPATH=host nice -n 19 python tools/kw12_study.py --out runs/kw12_study.json [--seeds 0,1]
[--epochs 12]. Resumable: finished (variant, seed) rows in --out are kept.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from snapuq.data import keywords12 as K
from snapuq.io import write_text
from snapuq.options import TrainOptions

VARIANTS = ["en_clean", "en_mic", "en_for", "all", "all_spec"]
SIL = K.CLASSES.index(K.SILENCE)


def family(voices: np.ndarray) -> np.ndarray:
    fam = np.full(len(voices), "ext", dtype=object)
    for i, v in enumerate(voices):
        if not v:
            fam[i] = "silence"
        elif v.startswith("espeak:en"):
            fam[i] = "espeak_en"
        elif v.startswith("espeak:"):
            fam[i] = "espeak_foreign"
    return fam


def select(variant: str, fam: np.ndarray, y: np.ndarray, n_per_class: int, seed: int) -> np.ndarray:
    allowed = {"en_clean": {"espeak_en", "silence"}, "en_mic": {"espeak_en", "silence"},
               "en_for": {"espeak_en", "espeak_foreign", "silence"}}.get(variant)  # fmt: skip
    ok = np.ones(len(y), bool) if allowed is None else np.isin(fam, list(allowed))
    rng = np.random.default_rng([seed, 5])
    idx = []
    for c in range(len(K.CLASSES)):
        cand = np.nonzero(ok & (y == c))[0]
        idx.append(rng.choice(cand, size=min(n_per_class, len(cand)), replace=False))
    return np.sort(np.concatenate(idx))


def fit_dscnn(x: np.ndarray, y: np.ndarray, opts: TrainOptions, seed: int, variant: str, filters: int = 64,
              n_classes: int = len(K.CLASSES), soft: np.ndarray | None = None) -> tuple:  # fmt: skip
    """The DS-CNN backbone alone (`filters` wide, `n_classes` outputs, x's input shape), trained on (x, y) by
    `opts` (a scratch checkpoint folder; distilled when `soft` gives the teachers' probabilities): (the model,
    its per-epoch history)."""
    import keras

    from snapuq.nn.backbones import build_backbone
    from snapuq.nn.recipe import fit_backbone_resumable

    keras.utils.set_random_seed(seed)
    m = build_backbone("dscnn", x.shape[1:], n_classes, filters=filters)
    with tempfile.TemporaryDirectory(prefix="kw12study") as tmp:
        hist = fit_backbone_resumable(m, x.astype(np.float32), y, opts, seed=seed, ckpt_dir=tmp, soft=soft,
                                      identity={"variant": variant}, progress=False,
                                      log=lambda *a: None)  # fmt: skip
    return m, hist


def correct(m, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    return np.asarray(m.predict(xs.astype(np.float32), batch_size=512, verbose=0)).argmax(1) == ys


def test_row(m, ds, ex: dict) -> dict:
    """Accuracy on the test split and on it through the shift profile: whole, keywords, per voice family
    and per class."""
    ok, ok_shift = correct(m, ds.x_test, ds.y_test), correct(m, ex["x_test_shift"], ds.y_test)
    row = {"test": float(ok.mean()), "test_shift": float(ok_shift.mean()),
           "test_keywords": float(ok[ds.y_test < len(K.WORDS)].mean())}  # fmt: skip
    fam_te = family(ex["voice_test"])
    for f in ("espeak_en", "espeak_foreign", "ext", "silence"):
        sel = fam_te == f
        if sel.any():
            row[f"test_{f}"] = float(ok[sel].mean())
            row[f"test_shift_{f}"] = float(ok_shift[sel].mean())
    row["per_class"] = {n: float(ok[ds.y_test == c].mean()) for c, n in enumerate(K.CLASSES)}
    return row


def run_one(variant: str, seed: int, ds, ex: dict, epochs: int, n_per_class: int) -> dict:
    fam_tr = family(ex["voice_train"])
    idx = select(variant, fam_tr, ds.y_train, n_per_class, seed)
    x = (ex["x_train_clean"] if variant == "en_clean" else ds.x_train)[idx]
    y = ds.y_train[idx]
    opts = TrainOptions(epochs=epochs, batch_size=64, lr=3e-3, schedule="cosine", warmup_epochs=1,
                        augment="specaugment" if variant == "all_spec" else "none")  # fmt: skip
    t0 = time.perf_counter()
    m, _ = fit_dscnn(x, y, opts, seed, variant)
    row = {"variant": variant, "seed": seed, "n_train": int(len(y)),
           "train_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    row.update(test_row(m, ds, ex))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/kw12_study.json")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    a = ap.parse_args()
    # the build this study was measured on: 400 train utterances per class, one rendering each
    ds = K.load_keywords12(None, 0, {"train": 400, "dev": 80, "test": 100}, takes=1)
    ex = K.extra_arrays(ds)
    fam_tr = family(ex["voice_train"])
    # the same clips per class in every variant: as many as the smallest (English espeak-ng) has
    spoken = [c for c in range(len(K.CLASSES)) if c != SIL]
    n_pc = min(int(np.sum((fam_tr == "espeak_en") & (ds.y_train == c))) for c in spoken)
    out = Path(a.out)
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    done = {(r["variant"], r["seed"]) for r in rows}
    for seed in [int(s) for s in a.seeds.split(",")]:
        for v in a.variants.split(","):
            if (v, seed) in done:
                continue
            r = run_one(v, seed, ds, ex, a.epochs, n_pc)
            rows.append(r)
            print(json.dumps({k: r[k] for k in r if k != "per_class"}), flush=True)
            write_text(out, json.dumps({"n_per_class": n_pc, "epochs": a.epochs, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
