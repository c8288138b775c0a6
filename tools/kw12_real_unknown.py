"""Real voices on words the keywords models must call `_unknown_`: the ten digits (zero ... nine, in the
Speech Commands 12-class task `_unknown_` words) spoken by real people, beside the same words spoken by the
keywords12 test split's synthetic voices.

Real recordings are not in this repository and nothing here fetches them: TREE is a folder of
`<word>/<speaker>_<anything>.wav` clips you have (any rate from 8 kHz, snapuq.data.user_readers.read_audio),
e.g. the Free Spoken Digit Dataset (6 speakers, 3,000 clips at 8 kHz, CC BY-SA 4.0) arranged by word:
`recordings/7_jackson_32.wav` -> `seven/jackson_32.wav`. Speech Commands file names
(`<speaker hash>_nohash_<n>.wav`) give the speaker the same way.

Per model directory (each through its own front end; each real clip at the start of its second, as
the readers zero-pad it, and in its center): the share of the real clips called `_unknown_` (the
right answer), per word and per speaker, what the misses become, mean p_err against the error rate, the ECE
of p_err, U's and MSP's AUROC right-vs-wrong, the alarm rate; and the share of the synthetic test split's
clips of the same words called `_unknown_` (the synthetic -> real gap on the same words).

Usage: PYTHONPATH=host:tools python tools/kw12_real_unknown.py MODEL_DIR [MODEL_DIR ...] --tree TREE
           [--out runs/kw12_real_unknown.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from kw12_compare import load_raw, model_frontend  # tools/ is on sys.path when this script runs

from snapuq.baselines.snapadapter import make_scorer
from snapuq.data import audio
from snapuq.data import keywords12 as K
from snapuq.data.user_readers import read_audio
from snapuq.evaluation.testdir import speaker_of
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir
from snapuq.uq import metrics as M
from snapuq.uq.score import softmax

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def place(w: np.ndarray, where: str) -> np.ndarray:
    """A clip (int16, 16 kHz, any length) in a 1 s window: at its "start" (as the readers zero-pad) or in
    its "center"."""
    w = w[: audio.CLIP_SAMPLES]
    out = np.zeros(audio.CLIP_SAMPLES, np.int16)
    s = 0 if where == "start" else (audio.CLIP_SAMPLES - len(w)) // 2
    out[s : s + len(w)] = w
    return out


def read_tree(tree: Path, where: str = "start") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int16 (N, 16000) clips of the digit folders (each `place`d at `where`), their words and speakers
    (file name before the first '_')."""
    waves, words, files = [], [], []
    for w in DIGITS:
        for f in sorted((tree / w).glob("*.wav")):
            waves.append(place(read_audio(f), where))
            words.append(w)
            files.append(f"{w}/{f.name}")
    if not waves:
        raise SystemExit(f"{tree} holds no <digit word>/*.wav clips")
    speakers = speaker_of(np.asarray(files))
    return np.stack(waves), np.asarray(words), speakers if speakers is not None else np.full(len(files), "")


def synthetic_digits(ds) -> tuple[np.ndarray, np.ndarray]:
    """The test split's clips of the digit words (plain MFCC) and their words: the split's plan drawn again
    (keywords12.plan_split, the build's clip order); checked against the cache's voices."""
    items = K.plan_split("test", K.PER_CLASS["test"], 0, K.voice_split(0)["test"])
    perm = np.random.default_rng([0, K.SPLIT_IDS["test"], 99]).permutation(len(items))
    voices = np.array([items[i]["voice"] for i in perm])
    if not np.array_equal(voices, K.extra_arrays(ds)["voice_test"]):
        raise SystemExit("the test split's plan drawn again does not match the cache's voices")
    words = np.array([items[i]["word"] for i in perm])
    sel = np.isin(words, DIGITS)
    return ds.x_test[sel], words[sel]


def scores(md, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    outs = md.predict(x)
    logits = np.asarray(outs["logits"], np.float64)
    sc, _ = make_scorer(md.calib, None)
    return logits.argmax(1), 1.0 - softmax(logits).max(1), sc.score(outs, x)


def model_row(md, fe: dict, real: dict, syn_x: np.ndarray, syn_words: np.ndarray) -> dict:
    names = list(md.config["class_names"])
    unk = names.index(K.UNKNOWN)
    pred, msp_u, s = scores(md, audio.finish(real["x"], fe))
    ok = pred == unk
    pe = np.asarray(s["p_err"], np.float64)
    miss = np.bincount(pred[~ok], minlength=len(names))
    row = {
        "n": int(len(ok)),
        "unknown_rate": float(ok.mean()),
        "per_word": {w: float(ok[real["words"] == w].mean()) for w in DIGITS},
        "per_speaker": {v: float(ok[real["speakers"] == v].mean()) for v in sorted(set(real["speakers"]))},
        "misses_to": {names[i]: int(miss[i]) for i in np.argsort(miss)[::-1][:4] if miss[i]},
        "error_rate": float(1.0 - ok.mean()),
        "mean_p_err": float(pe.mean()),
        "ece_p_err": float(M.ece(np.clip(1.0 - pe, 0, 1), ok)),
        "auroc_ok_vs_err_U": float(M.auroc(np.asarray(s["U"], np.float64), ~ok)),
        "auroc_ok_vs_err_MSP": float(M.auroc(msp_u, ~ok)),
        "alarm_rate": float(np.mean(np.asarray(s.get("alarm", np.zeros(len(ok)))) > 0)),
    }
    spred, _, ss = scores(md, audio.finish(syn_x, fe))
    sok = spred == unk
    row["synthetic"] = {
        "n": int(len(sok)),
        "unknown_rate": float(sok.mean()),
        "per_word": {w: float(sok[syn_words == w].mean()) for w in DIGITS if (syn_words == w).any()},
        "mean_p_err": float(np.mean(ss["p_err"])),
    }
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dirs", nargs="+")
    ap.add_argument("--tree", required=True, help="<digit word>/<speaker>_*.wav clips (real recordings)")
    ap.add_argument("--where", default="start,center", help="where each real clip sits in its second")
    ap.add_argument("--out", default="runs/kw12_real_unknown.json")
    a = ap.parse_args()
    ap_where = a.where.split(",")
    reals = {}
    for where in ap_where:
        waves, words, speakers = read_tree(Path(a.tree), where)
        reals[where] = {"x": audio.mfcc(waves), "words": words, "speakers": speakers}
    ds, _ = load_raw(0)
    syn_x, syn_words = synthetic_digits(ds)
    res: dict = {"tree": str(a.tree), "n_real": int(len(words)), "speakers": sorted(set(speakers.tolist())),
                 "n_synthetic": int(len(syn_words)), "models": {}}  # fmt: skip
    for d, where in [(d, w) for d in a.model_dirs for w in ap_where]:
        md = load_model_dir(d)
        r = model_row(md, model_frontend(md), reals[where], syn_x, syn_words)
        res["models"].setdefault(d, {})[where] = r
        print(f"{d} ({where}): real `_unknown_` {r['unknown_rate']:.3f} (synthetic test, same words "
              f"{r['synthetic']['unknown_rate']:.3f}); mean p_err {r['mean_p_err']:.3f} vs error "
              f"{r['error_rate']:.3f}, ECE {r['ece_p_err']:.3f}; AUROC U {r['auroc_ok_vs_err_U']:.3f} "
              f"MSP {r['auroc_ok_vs_err_MSP']:.3f}; misses {r['misses_to']}", flush=True)  # fmt: skip
        print("   per speaker " + " ".join(f"{k} {v:.2f}" for k, v in r["per_speaker"].items()))
        print("   per word    " + " ".join(f"{k} {v:.2f}" for k, v in r["per_word"].items()))
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
