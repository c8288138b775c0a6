"""How does a keywords model hear backgrounds its set never rendered? Speech Commands' own `_silence_` test
clips are cut from recordings of dishes, a running tap, an exercise bike, a cat and a television, and of
white and pink noise; the keywords12 set's `_silence_` holds noise colours, hum and babble only. This probe
renders clips of every kind (snapuq.data.augment_audio: the set's colours and hum, and ENV_KINDS: clatter,
water, machine, animal) at -50 to -20 dBFS RMS, passes them through each model's own front end, and
reports per kind: the share called `_silence_`, the class most often given otherwise, the mean U, p_err
and the alarm rate; beside them the same for the test split's own `_silence_` clips.

Usage: PYTHONPATH=host:tools python tools/kw12_noise_probe.py MODEL_DIR [MODEL_DIR ...] \\
           [--n 100] [--out runs/kw12_noise_probe.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from kw12_compare import load_raw, model_frontend  # tools/ is on sys.path when this script runs

from snapuq.baselines.snapadapter import make_scorer
from snapuq.data import audio
from snapuq.data import augment_audio as A
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir

KINDS = ("white", "pink", "brown", "hum") + A.ENV_KINDS
LEVEL_DB = (-50.0, -20.0)


def render(kind: str, n: int, seed: int) -> np.ndarray:
    """n one-second clips of one kind, float in [-1, 1], each at its own level."""
    out = np.empty((n, A.N), np.float64)
    for i in range(n):
        rng = np.random.default_rng([seed, KINDS.index(kind), i])
        x = A.environmental_noise(kind, A.N, rng) if kind in A.ENV_KINDS else A.coloured_noise(kind, A.N, rng)
        out[i] = np.clip(x * 10 ** (rng.uniform(*LEVEL_DB) / 20), -1.0, 1.0)
    return out


def row(md, x: np.ndarray) -> dict:
    names = list(md.config["class_names"])
    outs = md.predict(x)
    pred = np.asarray(outs["logits"]).argmax(1)
    r = {"n": int(len(x)), "silence": float(np.mean(pred == names.index("_silence_")))}
    counts = np.bincount(pred, minlength=len(names))
    counts[names.index("_silence_")] = 0
    r["most_other"] = names[int(counts.argmax())] if counts.any() else None
    r["most_other_share"] = float(counts.max() / len(x))
    if md.calib:
        sc, _ = make_scorer(md.calib, None)
        s = sc.score(outs, x)
        r["mean_U"] = float(np.mean(s["U"]))
        if "p_err" in s:
            r["mean_p_err"] = float(np.mean(s["p_err"]))
        if "alarm" in s:
            r["alarm_rate"] = float(np.mean(np.asarray(s["alarm"]) > 0))
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dirs", nargs="+")
    ap.add_argument("--n", type=int, default=100, help="clips per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/kw12_noise_probe.json")
    a = ap.parse_args()
    waves = {k: render(k, a.n, a.seed) for k in KINDS}
    plain = {k: audio.mfcc(w) for k, w in waves.items()}
    ds, _ = load_raw(0)
    sil = ds.y_test == list(ds.class_names).index("_silence_")
    res: dict = {"kinds": list(KINDS), "level_dbfs": list(LEVEL_DB), "n": a.n, "models": {}}
    for d in a.model_dirs:
        md = load_model_dir(d)
        fe = model_frontend(md)
        rows = {"test _silence_": row(md, audio.finish(ds.x_test[sil], fe))}
        for k in KINDS:
            rows[k] = row(md, audio.finish(plain[k], fe))
        res["models"][d] = rows
        print(d)
        for k, r in rows.items():
            extra = " ".join(f"{m} {r[m]:.3f}" for m in ("mean_U", "mean_p_err", "alarm_rate") if m in r)
            print(f"  {k:16s} silence {r['silence']:.2f}  else mostly {r['most_other']} "
                  f"({r['most_other_share']:.2f})  {extra}", flush=True)  # fmt: skip
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
