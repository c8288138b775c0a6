"""Which parts of the keywords12 recipe carry over to real voices? A 10-word task the project can test on real
speech: the digits (zero ... nine) synthesized exactly as keywords12 makes its words (the same voices, split
speaker-disjoint by keywords12.voice_split, the same prosody draws, the same microphone profiles), a DS-CNN
trained per variant, and tested on the synthetic held-out voices and on real recordings of the same words.

Real recordings are not in this repository and nothing here fetches them: --tree is a folder of
`<word>/<speaker>_<anything>.wav` you have (any rate from 8 kHz), e.g. the Free Spoken Digit Dataset (6
speakers, 3,000 clips, 8 kHz, CC BY-SA 4.0) arranged by word (`recordings/7_jackson_32.wav` ->
`seven/jackson_32.wav`).

Variants (name: microphone profile of the train split, front end, voices):
  clean       words only placed (profile "clean"), MFCC + CMN, every engine
  mic         the set's "train" profile, plain MFCC (the front end before CMN), every engine
  mic_cmn     the set's "train" profile, MFCC + CMN (the shipped front end)
  env_cmn     the everyday-light profile ("train_env_light", the set's default build), MFCC + CMN
  espeak_cmn  as mic_cmn with espeak-ng voices only (no flite / festival speakers)
  env_cmn_kl  as env_cmn with the front end "cmn-keep-level" (coefficient 0, the level, kept)
  env_cmn_zpad  as env_cmn, and a quarter of the train clips cut after their word and zero-padded (in the
              MFCC: the frames from a random point after the last loud frame set to those of exact zeros), as
              a reader pads a recording shorter than 1 s
  env_cmn_distill  as env_cmn, distilled (a = 0.7, T = 3, snapuq's --distill-from loss) from an ensemble of
              TEACHERS env_cmn models of their own seeds (trained first when missing)

Usage: PYTHONPATH=host:tools nice -n 19 python tools/kw12_digits_study.py --tree TREE \\
           [--variants mic,mic_cmn,env_cmn] [--seeds 0,1] [--per-class 800] [--takes 2] [--epochs 16] \\
           [--out runs/kw12_digits_study.json]
Real clips are scored as read (each at the start of its second, zero-padded), centered, and both with white
noise at FLOOR_DBFS over the whole second (a microphone's floor in place of the exact zeros around a trimmed
word). Resumable: finished (variant, seed) rows in --out are kept; models are kept in --models and read back
instead of trained again (a new --out re-scores them). The synthesized digits are cached
($SNAPUQ_CACHE/keywords12-digits-...).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from kw12_compare import family  # tools/ is on sys.path when this script runs
from kw12_real_unknown import DIGITS, read_tree
from kw12_study import fit_dscnn

from snapuq.data import audio
from snapuq.data import keywords12 as K
from snapuq.data.keywords import cache_root
from snapuq.io import save_arrays, write_text
from snapuq.options import TrainOptions

VARIANTS = {  # name: (train profile, front end, engines or None for all)
    "clean": ("clean", "cmn", None),
    "mic": ("train", "mfcc", None),
    "mic_cmn": ("train", "cmn", None),
    "env_cmn": ("train_env_light", "cmn", None),
    "espeak_cmn": ("train", "cmn", ["espeak", "espeak_foreign"]),
    "env_cmn_kl": ("train_env_light", "cmn-keep-level", None),
    "env_cmn_distill": ("train_env_light", "cmn", None),
    "env_cmn_zpad": ("train_env_light", "cmn", None),
}
ZPAD_SHARE = 0.25
FLOOR_DBFS = -70.0  # the white noise floor of the real clips' second variant
TEACHERS = (100, 101, 102)  # the seeds of the env_cmn teachers of env_cmn_distill
POOL = 300  # other words for the babble behind a digit (never a digit)
PROFILES = ("clean", "train", "train_env_light", "shift")


def plan(split: str, n_per_class: int, seed: int, voices: dict[str, list[str]]) -> list[dict]:
    """keywords12.plan_split's draws for the ten digits (and, first, POOL other words for the babble):
    label 11 (`_unknown_`) on every item, so keywords12.render treats them all as words; `digit` the class."""
    engines = [e for e in K.ENGINE_SHARE if voices.get(e)]
    share = np.array([K.ENGINE_SHARE[e] for e in engines])
    others = [w for w in K.UNKNOWN_WORDS if w not in DIGITS]
    jobs = [(-1, None)] * POOL + [(c, DIGITS[c]) for c in range(len(DIGITS)) for _ in range(n_per_class)]
    items = []
    for i, (c, word) in enumerate(jobs):
        rng = np.random.default_rng([seed, 40 + K.SPLIT_IDS[split], i])
        eng = engines[int(rng.choice(len(engines), p=share / share.sum()))]
        voice = voices[eng][int(rng.integers(len(voices[eng])))]
        w = word if word is not None else others[int(rng.integers(len(others)))]
        items.append({"label": K.CLASSES.index(K.UNKNOWN), "digit": c, "word": w, "voice": voice,
                      **K.prosody(voice, rng)})  # fmt: skip
    return items


def build(seed: int, per_class: int, takes: int) -> dict[str, np.ndarray]:
    """The digit sets' MFCC (plain), per split and profile; cached."""
    root = cache_root(None)
    d = root / f"keywords12-digits-{K.SPEECH_VERSION}-s{seed}-{per_class}-t{takes}"
    f = d / "features.npz"
    if f.exists():
        return dict(np.load(f))
    vs = K.voice_split(seed)
    out: dict[str, np.ndarray] = {}
    work = root / f"keywords12-digits-speech-{K.SPEECH_VERSION}-s{seed}"
    for split, n, n_takes, profiles in (("train", per_class, takes, ("clean", "train", "train_env_light")),
                                        ("test", 100, 1, ("train", "shift"))):  # fmt: skip
        items = plan(split, n, seed, vs[split])
        t0 = time.perf_counter()
        speech = K._speech(work, split, items)
        print(f"{split}: {len(items)} utterances synthesized in {time.perf_counter() - t0:.0f} s", flush=True)
        idx = np.arange(POOL, len(items))
        clips = np.stack([np.repeat(idx, n_takes), np.tile(np.arange(n_takes), len(idx))], 1)
        for prof in profiles:
            out[f"x_{split}_{prof}"] = K.mfcc_rendered(items, speech, prof, seed, split, clips)
        out[f"y_{split}"] = np.array([items[i]["digit"] for i in clips[:, 0]], np.int64)
        out[f"voice_{split}"] = np.array([items[i]["voice"] for i in clips[:, 0]])
    d.mkdir(parents=True, exist_ok=True)
    save_arrays(f, **out)
    return out


def zero_padded(x: np.ndarray, seed: int, share: float = ZPAD_SHARE) -> np.ndarray:
    """Plain-MFCC clips (N, 49, 10, 1) with `share` of them cut after their word and padded with exact zeros:
    the frames from a random point after the last frame within 30 units of c0 (about 15 dB) of the clip's
    loudest take the MFCC of a frame of zeros."""
    x = np.array(x, copy=True)
    zero = audio.mfcc(np.zeros((1, audio.CLIP_SAMPLES), np.int16))[0, 0]
    rng = np.random.default_rng([seed, 77])
    for i in np.nonzero(rng.random(len(x)) < share)[0]:
        c0 = x[i, :, 0, 0]
        last = int(np.nonzero(c0 >= c0.max() - 30.0)[0].max())
        if last + 1 < x.shape[1]:
            x[i, int(rng.integers(last + 1, x.shape[1])) :] = zero
    return x


def train(x: np.ndarray, y: np.ndarray, epochs: int, seed: int, name: str, models: Path,
          soft: np.ndarray | None = None):  # fmt: skip
    """The DS-CNN of (variant `name`, seed): models/<name>_s<seed>.keras when a run saved it, else trained
    (distilled when `soft` gives the teachers' probabilities at T = 3) and saved there."""
    import keras

    f = models / f"{name}_s{seed}.keras"
    if f.exists():
        return keras.models.load_model(f, compile=False)
    opts = TrainOptions(epochs=epochs, batch_size=64, lr=3e-3, schedule="cosine", warmup_epochs=1,
                        distill_alpha=0.7 if soft is not None else 0.0, distill_temperature=3.0)  # fmt: skip
    m, _ = fit_dscnn(x, y, opts, seed, name, n_classes=len(DIGITS), soft=soft)
    models.mkdir(parents=True, exist_ok=True)
    m.save(f)
    return m


def run_one(name: str, seed: int, data: dict, real: dict, epochs: int, models: Path) -> dict:
    prof, fe_name, engines = VARIANTS[name]
    fe = audio.FRONTENDS[fe_name]
    x, y = data[f"x_train_{prof}"], data["y_train"]
    if name == "env_cmn_zpad":
        x = zero_padded(x, seed)
    if engines is not None:
        keep = np.array([family(v) != "ext" for v in data["voice_train"]])
        x, y = x[keep], y[keep]
    x = audio.finish(x, fe)
    t0 = time.perf_counter()
    soft = None
    if name == "env_cmn_distill":
        from snapuq.nn.distill import soft_targets

        teachers = [train(x, y, epochs, s, "env_cmn", models) for s in TEACHERS]
        soft = soft_targets(teachers, x.astype(np.float32), 3.0)
    m = train(x, y, epochs, seed, name, models, soft)
    row: dict = {"variant": name, "seed": seed, "n_train": int(len(y)),
                 "train_s": round(time.perf_counter() - t0)}  # fmt: skip

    def acc(xs: np.ndarray) -> np.ndarray:
        z = audio.finish(xs, fe).astype(np.float32)
        return np.asarray(m.predict(z, batch_size=512, verbose=0)).argmax(1)

    ok = acc(data["x_test_train"]) == data["y_test"]
    fam = np.array([family(v) for v in data["voice_test"]])
    row["synthetic_test"] = float(ok.mean())
    row.update({f"synthetic_{f}": float(ok[fam == f].mean()) for f in ("espeak_en", "espeak_foreign", "ext")})
    row["synthetic_shift"] = float(np.mean(acc(data["x_test_shift"]) == data["y_test"]))
    for where, x_real in real["x"].items():
        rok = acc(x_real) == real["y"]
        key = "real" if where == "start" else f"real_{where.replace('start_', '')}"
        row[key] = float(rok.mean())
        row[f"{key}_per_speaker"] = {s: float(rok[real["speakers"] == s].mean())
                                     for s in sorted(set(real["speakers"]))}  # fmt: skip
        row[f"{key}_per_word"] = {w: float(rok[real["y"] == c].mean()) for c, w in enumerate(DIGITS)}
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", required=True, help="<digit word>/<speaker>_*.wav clips (real recordings)")
    ap.add_argument("--variants", default="mic,mic_cmn,env_cmn")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--per-class", type=int, default=800)
    ap.add_argument("--takes", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--out", default="runs/kw12_digits_study.json")
    ap.add_argument("--models", default="runs/kw12_digits_models", help="trained models, kept for a rerun")
    ap.add_argument("--saved-only", action="store_true", help="score the saved models; train nothing")
    a = ap.parse_args()
    names = a.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown} (known: {', '.join(VARIANTS)})")
    x_real = {}
    for where in ("start", "center"):  # each real clip at the start of its second (as read) and centered
        waves, words, speakers = read_tree(Path(a.tree), where)
        x_real[where] = audio.mfcc(waves)
        # and with a microphone's noise floor over the second in place of the exact zeros around the word
        floor = np.random.default_rng(0).standard_normal(waves.shape) * 10 ** (FLOOR_DBFS / 20)
        x_real[f"{where}_floor70"] = audio.mfcc(audio.to_int16(waves / 32768.0 + floor))
    real = {"x": x_real, "y": np.array([DIGITS.index(w) for w in words]), "speakers": speakers}
    out = Path(a.out)
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    done = {(r["variant"], r["seed"]) for r in rows}
    data = build(0, a.per_class, a.takes)
    for seed in [int(s) for s in a.seeds.split(",")]:
        for name in names:
            saved = (Path(a.models) / f"{name}_s{seed}.keras").exists()
            if (name, seed) in done or a.saved_only and not saved:
                continue
            r = run_one(name, seed, data, real, a.epochs, Path(a.models))
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if "_per_" not in k}), flush=True)
            for key in ("real", "real_center", "real_floor70", "real_center_floor70"):
                per = r[f"{key}_per_speaker"]
                print(f"   {key} per speaker " + " ".join(f"{k} {v:.2f}" for k, v in per.items()), flush=True)
            meta = {"tree": a.tree, "n_real": int(len(words)), "per_class": a.per_class, "takes": a.takes,
                    "epochs": a.epochs}  # fmt: skip
            write_text(out, json.dumps(dict(meta, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
