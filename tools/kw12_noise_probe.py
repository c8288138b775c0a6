"""How does a keywords model hear backgrounds its set never rendered? Speech Commands' own `_silence_` test
clips are cut from recordings of dishes, a running tap, an exercise bike, a cat and a television, and of
white and pink noise; the keywords12 set's `_silence_` holds noise colours, hum and babble only. This probe
renders clips of every kind (snapuq.data.augment_audio: the set's colours and hum, and ENV_KINDS: clatter,
water, machine, animal) at -50 to -20 dBFS RMS, passes them through each model's own front end, and
reports per kind: the share called `_silence_`, the class most often given otherwise, the mean U, p_err
and the alarm rate; beside them the same for the test split's own `_silence_` clips.

With `--speech-snr 10,0`: every kind also behind the test split's keyword clips (as rendered, so they carry
the set's own noise already), at each SNR to the clip's active level (as augment_audio.mic mixes its noise):
the keyword accuracy per kind and SNR and what the misses become, so a kind the set never mixes behind
speech shows against the colours it does.

Usage: PYTHONPATH=host:tools python tools/kw12_noise_probe.py MODEL_DIR [MODEL_DIR ...] \\
           [--n 100] [--speech-snr 10,0] [--out runs/kw12_noise_probe.json]
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
from snapuq.data.keywords12 import WORDS
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir

KINDS = ("white", "pink", "brown", "hum") + A.ENV_KINDS
LEVEL_DB = (-50.0, -20.0)


def render(kind: str, n: int, seed: int) -> np.ndarray:
    """n one-second clips of one kind, float in [-1, 1], each at its own level."""
    out = np.empty((n, A.N), np.float64)
    for i in range(n):
        rng = np.random.default_rng([seed, KINDS.index(kind), i])
        x = A.noise_of(kind, A.N, rng, [])
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


def behind_speech(waves: np.ndarray, kind: str, snr_db: float, seed: int) -> np.ndarray:
    """int16 test clips with `kind` added at `snr_db` below each clip's augment_audio.active_rms (as
    augment_audio.mic measures a word); float in [-1, 1]."""
    out = np.empty(waves.shape, np.float64)
    for i, w in enumerate(np.asarray(waves, np.float64) / 32768.0):
        rng = np.random.default_rng([seed, 50, KINDS.index(kind), i])
        x = A.noise_of(kind, A.N, rng, [])
        x = x / (np.sqrt(np.mean(x**2)) + 1e-12)
        out[i] = np.clip(w + x * A.active_rms(w) * 10 ** (-snr_db / 20.0), -1.0, 1.0)
    return out


def speech_row(md, x: np.ndarray, y: np.ndarray) -> dict:
    names = list(md.config["class_names"])
    pred = np.asarray(md.predict(x)["logits"]).argmax(1)
    miss = np.bincount(pred[pred != y], minlength=len(names)) / len(y)
    top = np.argsort(miss)[::-1][:2]
    return {"n": int(len(y)), "accuracy": float(np.mean(pred == y)),
            "misses_to": {names[int(i)]: float(miss[i]) for i in top if miss[i] > 0}}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dirs", nargs="+")
    ap.add_argument("--n", type=int, default=100, help="clips per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speech-snr", default="", help="SNRs in dB (e.g. 10,0): each kind behind the keywords")
    ap.add_argument("--out", default="runs/kw12_noise_probe.json")
    a = ap.parse_args()
    snrs = [float(v) for v in a.speech_snr.split(",") if v.strip()]
    waves = {k: render(k, a.n, a.seed) for k in KINDS}
    plain = {k: audio.mfcc(w) for k, w in waves.items()}
    ds, _ = load_raw(0)
    sil = ds.y_test == list(ds.class_names).index("_silence_")
    res: dict = {"kinds": list(KINDS), "level_dbfs": list(LEVEL_DB), "n": a.n, "models": {}}
    speech: dict[str, np.ndarray] = {}
    if snrs:
        kw = np.nonzero(ds.y_test < len(WORDS))[0]  # the ten keywords
        waves_test = np.load(ds.meta["waves"]["test"])[kw]
        speech = {f"{k} @ {snr:g} dB": audio.mfcc(behind_speech(waves_test, k, snr, a.seed))
                  for snr in snrs for k in KINDS}  # fmt: skip
        res["speech_snr_db"] = snrs
    for d in a.model_dirs:
        md = load_model_dir(d)
        fe = model_frontend(md)
        rows = {"test _silence_": row(md, audio.finish(ds.x_test[sil], fe))}
        for k in KINDS:
            rows[k] = row(md, audio.finish(plain[k], fe))
        res["models"][d] = rows
        if speech:
            kw_rows = {"as rendered": speech_row(md, audio.finish(ds.x_test[kw], fe), ds.y_test[kw])}
            kw_rows.update({k: speech_row(md, audio.finish(v, fe), ds.y_test[kw]) for k, v in speech.items()})
            res.setdefault("behind_speech", {})[d] = kw_rows
        print(d)
        for k, r in rows.items():
            extra = " ".join(f"{m} {r[m]:.3f}" for m in ("mean_U", "mean_p_err", "alarm_rate") if m in r)
            print(f"  {k:16s} silence {r['silence']:.2f}  else mostly {r['most_other']} "
                  f"({r['most_other_share']:.2f})  {extra}", flush=True)  # fmt: skip
        for k, r in res.get("behind_speech", {}).get(d, {}).items():
            print(f"  keywords, {k:18s} accuracy {r['accuracy']:.3f}  misses to {r['misses_to']}", flush=True)
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
