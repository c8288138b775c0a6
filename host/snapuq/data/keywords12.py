"""`keywords12`: the Speech Commands 12-class task (yes no up down left right on off stop go `_silence_`
`_unknown_`) synthesized offline by every voice the machine has (snapuq.data.tts) and passed through what a
microphone and a room add (snapuq.data.augment_audio).

Voices: espeak-ng's 8 English accents x every variant it ships; the English words read by espeak-ng voices of
12 other languages (their phonemization: accented English); flite's voices and festival's (when the
Debian packages are installed; absent ones are skipped and `meta["voices"]` lists what was used). Splits
are speaker-disjoint: English espeak voices 65 / 15 / 20 %, foreign languages whole by language, flite /
festival by speaker (kal, slt and festival's speakers of other languages: train; awb: dev; rms, ked: test).

Clips: keywords and `_unknown_` words (the 25 Speech Commands words outside the task: bed, bird, ...) with
random prosody (espeak rate / pitch / range; flite duration and f0; festival duration), then speed
perturbation, level, time shift, room reverberation, band-limiting, noise at random SNR (colours, hum,
babble of other synthetic words) and clipping; `_silence_` = background alone. The train split uses the
"train" microphone profile; **the dev split (used for calibration) the harsher "shift" profile on its own
voices**, so that p_err is fitted on a held-out shifted set; the test split the "train" profile on its own
voices. Extra arrays for studies: x_train_clean (the same train words, only placed), x_dev_std (dev with the
train profile), x_test_shift (test with the shift profile), and per-clip voice / engine.

Front end: MFCC 49x10 with cepstral mean normalization (`FRONT_END` = `audio.frontend(cmn=True)`: each
clip's mean over its 49 frames subtracted from every coefficient, so a fixed channel, timbre or level is
gone). The cache holds the plain MFCC; `load_cache` applies the normalization to every feature array it
returns (`raw=True`: the plain MFCC, for studies), and the Dataset's meta records the front end, so a model's
config.json does.

Size: PER_CLASS utterances per class and split, and TRAIN_TAKES independent microphone renderings ("takes")
of every train utterance (take 0 is the one-take clip); the build's meta (so a model's config.json) records
both. Cached under `$SNAPUQ_CACHE` or `--data-dir`: the synthesized speech of each split in
`keywords12-speech-<version>-s<seed>-<sizes>/speech_<split>_<items>.npz` as soon as it is made (<items>: a
digest of the split's plan, i.e. its voices, words and prosody, so a machine with other voices never reads
another's speech; a build that is stopped resumes from there; a change of the microphone profiles or of the
takes re-renders without synthesizing again), the features in
`keywords12-<version>[-<backgrounds>]-s<seed>-<sizes>[-t<takes>]-v<voices>/` (<voices>: a digest of the voice
split; <backgrounds>: the build's BACKGROUNDS name, none for "set").

Backgrounds: the train split's sounds behind the words and in `_silence_` (BACKGROUNDS): the set's colours,
hum and babble ("set"), or with a share of everyday sounds ("everyday-light", DEFAULT_BACKGROUNDS;
"everyday"). A model's config.json records its build (data_meta.backgrounds; `build_options` reads it
back, an absent one being "set", the build before the option).
Synthesis runs in fresh interpreters (espeak-ng keeps state between utterances); voices with a breath-noise
source are not bit-reproducible from build to build, the cache is.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from snapuq.data import SPLIT_ARRAYS, Dataset, audio, tts
from snapuq.data import augment_audio as A
from snapuq.data.keywords import OOD_WORDS, WORDS, _write_atomic, cache_root, run_fresh
from snapuq.errors import DatasetError
from snapuq.io import save_arrays

VERSION = "k12b"  # the features (microphone profiles)
SPEECH_VERSION = "s1"  # the synthesized speech (voices, prosody)
SILENCE, UNKNOWN = "_silence_", "_unknown_"
CLASSES = WORDS + [SILENCE, UNKNOWN]
UNKNOWN_WORDS = list(OOD_WORDS)
# OOD for `snapuq eval`: words in neither the task nor Speech Commands
OOD_EXTRA = ["apple", "window", "water", "music", "yellow", "purple", "table", "orange", "paper", "garden",
             "money", "river", "coffee", "banana", "doctor", "summer", "winter", "camera", "pencil",
             "butter"]  # fmt: skip
PER_CLASS = {"train": 1600, "dev": 80, "test": 100}  # utterances per class
TRAIN_TAKES = 3  # independent microphone renderings of every train utterance
SPLIT_IDS = {"train": 10, "dev": 11, "test": 12, "ood": 13}
ENGINE_SHARE = {"espeak": 0.6, "espeak_foreign": 0.15, "ext": 0.25}
EXT_SPLIT = {"ext:kal": "train", "ext:slt": "train", "ext:awb": "dev", "ext:rms": "test",
             "ext:ked_diphone": "test"}  # fmt: skip
PROFILE_OF = {"train": ("train", "clean"), "dev": ("shift", "train"), "test": ("train", "shift")}
EXTRA_NAME = {"train": "x_train_clean", "dev": "x_dev_std", "test": "x_test_shift"}
# the train split's microphone profile by the build's backgrounds: the set's own (colours, hum, babble), or
# with everyday sounds (augment_audio.ENV_KINDS: dishes, a tap, a machine, animal calls) in a share of the
# noise behind the words and of `_silence_` (0.35, or 0.15 for "everyday-light"); dev and test are the same
# in every build
BACKGROUNDS = {"set": "train", "everyday": "train_env", "everyday-light": "train_env_light"}
DEFAULT_BACKGROUNDS = "everyday-light"  # the set's build since 2026-12-07 ("set" before: what a model's
# data_meta without "backgrounds" was trained on)
FRONT_END = audio.frontend(cmn=True)  # the set's features (the cache holds the plain MFCC of step 1-6)


def _digest(obj) -> str:
    """A short stable digest of a JSON-able plan (voices, items): names the caches made from it."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:10]


def voice_split(seed: int, engines: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
    """split -> engine ("espeak", "espeak_foreign", "ext") -> voices; speaker-disjoint, deterministic by
    seed. `engines`: restrict to these engines (a study); external voices of unknown speakers go to train."""
    av = tts.available_voices()
    out = {s: {"espeak": [], "espeak_foreign": [], "ext": []} for s in SPLIT_IDS if s != "ood"}
    en = av["espeak"]
    order = np.random.default_rng([seed, 7101]).permutation(len(en))
    n_test, n_dev = round(0.2 * len(en)), round(0.15 * len(en))
    for k, i in enumerate(order):
        out["test" if k < n_test else "dev" if k < n_test + n_dev else "train"]["espeak"].append(en[i])
    langs = list(np.random.default_rng([seed, 7102]).permutation(tts.FOREIGN_LANGS))
    lang_split = {lang: "test" if k < 2 else "dev" if k < 4 else "train" for k, lang in enumerate(langs)}
    for v in av["espeak_foreign"]:
        out[lang_split[v.split(":", 1)[1].split("+")[0]]]["espeak_foreign"].append(v)
    for v in av["flite"] + av["festival"]:
        out[EXT_SPLIT.get(tts.group_of(v), "train")]["ext"].append(v)
    if engines is not None:
        for s in out:
            out[s] = {e: (v if e in engines else []) for e, v in out[s].items()}
    return out


def plan_split(split: str, n_per_class: int, seed: int, voices: dict[str, list[str]],
               words: list[str] | None = None) -> list[dict]:  # fmt: skip
    """One item per clip: class, word, voice and prosody (drawn from (seed, split, i))."""
    items = []
    engines = [e for e in ENGINE_SHARE if voices.get(e)]
    share = np.array([ENGINE_SHARE[e] for e in engines])
    classes = range(len(CLASSES)) if words is None else [CLASSES.index(UNKNOWN)]
    for c in classes:
        for _ in range(n_per_class):
            i = len(items)
            rng = np.random.default_rng([seed, SPLIT_IDS[split], i])
            if CLASSES[c] == SILENCE:
                items.append({"label": c, "word": "", "voice": ""})
                continue
            eng = engines[int(rng.choice(len(engines), p=share / share.sum()))]
            voice = voices[eng][int(rng.integers(len(voices[eng])))]
            pool = words or UNKNOWN_WORDS
            word = CLASSES[c] if c < len(WORDS) else pool[int(rng.integers(len(pool)))]
            items.append({"label": c, "word": word, "voice": voice, **prosody(voice, rng)})
    return items


def prosody(voice: str, rng: np.random.Generator) -> dict:
    """The prosody of one utterance by `voice` (the item's last draws): espeak-ng rate / pitch / range, else
    a duration stretch and (half of the time) an f0 mean."""
    if voice.startswith("espeak:"):
        return {"rate": int(rng.integers(110, 270)), "pitch": int(rng.integers(10, 90)),
                "range": int(rng.integers(10, 95))}  # fmt: skip
    return {"stretch": float(rng.uniform(0.75, 1.45)),
            "f0": float(rng.uniform(85, 220)) if rng.random() < 0.5 else None}  # fmt: skip


def synth_items(items: list[dict], position: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The clean speech of every item (float32 16 kHz, concatenated) and the offsets (len(items) + 1)."""
    from tqdm import tqdm

    waves: list[np.ndarray] = [np.zeros(0)] * len(items)
    fest: dict[str, list[int]] = {}
    for i, it in enumerate(tqdm(items, desc="keywords12 speech", unit="clip", leave=False,
                                disable=len(items) < 200, position=position)):  # fmt: skip
        v = it["voice"]
        if not v:
            continue
        eng, name = v.split(":", 1)
        if eng == "espeak":
            waves[i] = tts.synth_espeak(it["word"], name, it["rate"], it["pitch"], it["range"])
        elif eng == "flite":
            waves[i] = tts.synth_flite(it["word"], name, it["stretch"], it["f0"])
        else:
            fest.setdefault(name, []).append(i)
    for name, idx in fest.items():
        said = tts.synth_festival_batch(name, [(items[i]["word"], items[i]["stretch"]) for i in idx])
        for i, w in zip(idx, said):
            waves[i] = w
    waves = [A.trim(np.asarray(w, np.float64)) for w in waves]
    off = np.r_[0, np.cumsum([len(w) for w in waves])].astype(np.int64)
    flat = np.concatenate(waves).astype(np.float32) if off[-1] else np.zeros(0, np.float32)
    return flat, off


def _speech(d: Path, split: str, items: list[dict], workers: int = 2) -> list[np.ndarray]:
    """The split's synthesized speech: d/speech_<split>_<digest of items>.npz, or made now (fresh
    interpreters) and saved."""
    f = d / f"speech_{split}_{_digest(items)}.npz"
    if f.exists():
        z = np.load(f)
        flat, off = z["flat"], z["off"]
    else:
        chunks = np.array_split(np.arange(len(items)), workers)
        jobs = [("synth_items", {"items": [items[i] for i in c]}) for c in chunks if len(c)]
        parts = run_fresh(jobs, workers=workers)
        flats, offs, base = [], [np.zeros(1, np.int64)], 0
        for fl, of in parts:
            flats.append(fl)
            offs.append(of[1:] + base)
            base += int(of[-1])
        flat, off = np.concatenate(flats), np.concatenate(offs)
        d.mkdir(parents=True, exist_ok=True)
        save_arrays(f, flat=flat, off=off)
    return [flat[off[i] : off[i + 1]].astype(np.float64) for i in range(len(off) - 1)]


def render(items: list[dict], speech: list[np.ndarray], profile: str, seed: int, split: str,
           clips: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """int16 clips (N, 16000): each word through the microphone profile; silence items: background alone.
    `clips`: (utterance, take) rows to render (default: every item once, take 0); take t > 0 is an
    independent rendering of the same utterance, take 0 the one-take set's clip (the same bytes)."""
    prof = A.PROFILES[profile]
    # babble from other words only (never a keyword: a keyword in the background would blur the label)
    pool = [w for w, it in zip(speech, items) if len(w) and it["label"] == CLASSES.index(UNKNOWN)][:300]
    if clips is None:
        clips = np.stack([np.arange(len(items)), np.zeros(len(items), np.int64)], 1)
    out = np.empty((len(clips), audio.CLIP_SAMPLES), np.int16)
    for j, (i, take) in enumerate(clips):
        key = [seed, SPLIT_IDS[split], int(i), 1 + list(A.PROFILES).index(profile)]
        rng = np.random.default_rng(key + [int(take)] if take else key)
        it, w = items[i], speech[i]
        if it["label"] == CLASSES.index(SILENCE) or not len(w):
            x = A.silence(rng, pool, prof)
        else:
            x = A.mic(w, prof, rng, pool)
        out[j] = audio.to_int16(x)
    return out


def mfcc_rendered(items: list[dict], speech: list[np.ndarray], profile: str, seed: int, split: str,
                  clips: np.ndarray, chunk: int = 2048) -> np.ndarray:  # fmt: skip
    """The MFCC of `render(..., clips)`, rendered in chunks (a many-take split never holds all its waves)."""
    parts = [audio.mfcc(render(items, speech, profile, seed, split, clips[a : a + chunk]))
             for a in range(0, len(clips), chunk)]  # fmt: skip
    return np.concatenate(parts)


def _sizes_tag(per_class: dict[str, int]) -> str:
    return "-".join(str(per_class[s]) for s in ("train", "dev", "test"))


def _cache_dir(root: Path, seed: int, per_class: dict[str, int], takes: int = 1,
               voices: dict | None = None, backgrounds: str = DEFAULT_BACKGROUNDS) -> Path:  # fmt: skip
    """The feature cache of a build; `voices`: its voice split (default: this machine's voice_split(seed))."""
    tag = _sizes_tag(per_class)
    vtag = _digest(voice_split(seed) if voices is None else voices)
    bg = "" if backgrounds == "set" else f"-{backgrounds}"
    return root / (f"keywords12-{VERSION}{bg}-s{seed}-{tag}" + (f"-t{takes}" if takes > 1 else "")
                   + f"-v{vtag}")  # fmt: skip


def build_keywords12(root: Path, seed: int, per_class: dict[str, int], takes: int = 1,
                     progress: bool = True, backgrounds: str = DEFAULT_BACKGROUNDS) -> Path:  # fmt: skip
    """The feature cache of one build: `takes` independent microphone renderings of every train utterance
    (dev and test: one each); `backgrounds` (BACKGROUNDS) picks the train split's microphone profile."""
    if takes < 1:
        raise DatasetError(f"keywords12: train takes must be >= 1, got {takes}")
    if backgrounds not in BACKGROUNDS:
        raise DatasetError(f"keywords12: unknown backgrounds '{backgrounds}' (expected one of "
                           f"{', '.join(BACKGROUNDS)})")  # fmt: skip
    profile_of = dict(PROFILE_OF, train=(BACKGROUNDS[backgrounds], PROFILE_OF["train"][1]))
    vs = voice_split(seed)
    d = _cache_dir(root, seed, per_class, takes, vs, backgrounds)
    if (d / "meta.json").exists():
        return d
    t0 = time.perf_counter()
    # kept: the speech made so far (resumable)
    work = root / f"keywords12-speech-{SPEECH_VERSION}-s{seed}-{_sizes_tag(per_class)}"
    files: dict[str, np.ndarray] = {}
    for split in ("train", "dev", "test"):
        items = plan_split(split, per_class[split], seed, vs[split])
        speech = _speech(work, split, items)
        n_takes = takes if split == "train" else 1
        clips = np.stack(
            [np.repeat(np.arange(len(items)), n_takes), np.tile(np.arange(n_takes), len(items))], 1
        )
        perm = np.random.default_rng([seed, SPLIT_IDS[split], 99]).permutation(len(clips))
        clips = clips[perm]
        main, extra = profile_of[split]
        for prof, key in ((main, f"x_{split}"), (extra, EXTRA_NAME[split])):
            if split == "train":
                files[key] = mfcc_rendered(items, speech, prof, seed, split, clips)
            else:
                waves = render(items, speech, prof, seed, split, clips)
                files[key] = audio.mfcc(waves)
                if key == f"x_{split}":
                    files[f"waves_{split}"] = waves
        files[f"y_{split}"] = np.array([it["label"] for it in items], np.int64)[clips[:, 0]]
        files[f"voice_{split}"] = np.array([it["voice"] for it in items])[clips[:, 0]]
        if split == "train":  # which utterance and which of its renderings each train clip is
            files["utt_train"], files["take_train"] = clips[:, 0], clips[:, 1]
    meta = {
        "version": VERSION, "seed": seed, "per_class": per_class, "train_takes": takes, "classes": CLASSES,
        "voices": {s: {e: v for e, v in vs[s].items()} for s in vs},
        "engines_missing": [e for e in ("flite", "festival") if not tts.available_voices()[e]],
        "profiles": {s: profile_of[s][0] for s in profile_of}, "build_s": round(time.perf_counter() - t0, 2),
        "frontend": audio.FRONTEND, "backgrounds": backgrounds,
    }  # fmt: skip
    _write_atomic(d, files, meta)
    return d


def load_keywords12(data_dir: str | None, seed: int = 0, per_class: dict[str, int] | None = None,
                    takes: int | None = None, backgrounds: str = DEFAULT_BACKGROUNDS) -> Dataset:  # fmt: skip
    """The 12-class synthesized set: MFCC (N, 49, 10, 1), labels in CLASSES order. Defaults: PER_CLASS
    utterances per class and split, TRAIN_TAKES microphone renderings of each train utterance, the
    DEFAULT_BACKGROUNDS of BACKGROUNDS."""
    pc = dict(PER_CLASS if per_class is None else per_class)
    n_takes = TRAIN_TAKES if takes is None else takes
    return load_cache(build_keywords12(cache_root(data_dir), seed, pc, n_takes, backgrounds=backgrounds))


def build_options(build: dict) -> dict:
    """The loader's options of a recorded build (a Dataset's meta, a model's data_meta, or the options
    `snapuq train --backgrounds` gives): its backgrounds, "set" where the record has none (a build made
    before the option)."""
    return {"backgrounds": str(build.get("backgrounds", "set"))}


def load_cache(d: Path, raw: bool = False, frontend: dict | None = None) -> Dataset:
    """The Dataset of one built feature cache folder (any voice inventory or size: a study may name one), its
    features through the set's front end (`raw`: the plain MFCC the cache holds; `frontend`: another
    snapuq.data.audio record)."""
    fe = frontend if frontend is not None else audio.frontend() if raw else FRONT_END
    try:
        arr = {k: np.load(d / f"{k}.npy") for k in SPLIT_ARRAYS}
    except (OSError, ValueError) as e:
        raise DatasetError(f"keywords12: corrupt cache at {d} ({e}); delete it to rebuild") from e
    arr.update({k: audio.finish(arr[k], fe) for k in SPLIT_ARRAYS if k.startswith("x_")})
    meta = json.loads((d / "meta.json").read_text())
    meta.update({
        "frontend": fe, "cache_features": "plain MFCC (steps 1-6); the front end's CMN is applied on load",
        "source": "espeak-ng / flite / festival synthesis, microphone augmentation, speaker-disjoint splits",
        "cache_dir": str(d), "modality": "audio",
        "waves": {s: str(d / f"waves_{s}.npy") for s in ("dev", "test")},
        "ood": "words in neither the task nor Speech Commands (apple, window, ...) by the test voices",
    })  # fmt: skip
    return Dataset(name="keywords12", **{k: arr[k] for k in SPLIT_ARRAYS}, class_names=list(CLASSES),
                   meta=meta)  # fmt: skip


def with_frontend(ds: Dataset, fe: dict) -> Dataset:
    """The same build through front end `fe` (a snapuq.data.audio record): e.g. for a model trained before the
    set's front end became MFCC + CMN, or one trained with `--frontend cmn-keep-level`."""
    rec = audio.known_frontend(fe)
    if rec is None:
        raise DatasetError("keywords12: the front end asked for is none of snapuq.data.audio.FRONTENDS")
    return load_cache(Path(ds.meta["cache_dir"]), frontend=rec)


def extra_arrays(ds: Dataset) -> dict[str, np.ndarray]:
    """The study arrays of a keywords12 Dataset: x_train_clean, x_dev_std, x_test_shift, voice_<split>,
    utt_train / take_train (the utterance and the rendering of every train clip; caches built before takes
    existed have neither); the feature arrays through the Dataset's front end."""
    d = Path(ds.meta["cache_dir"])
    names = (
        list(EXTRA_NAME.values())
        + [f"voice_{s}" for s in ("train", "dev", "test")]
        + ["utt_train", "take_train"]
    )
    out = {n: np.load(d / f"{n}.npy") for n in names if (d / f"{n}.npy").exists()}
    fe = ds.meta.get("frontend")
    return {n: audio.finish(a, fe) if n.startswith("x_") else a for n, a in out.items()}


def ood_keywords12(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    """Words in neither the task nor Speech Commands (apple, window, ...) by the test voices, through the
    train profile and the Dataset's front end (the cached file holds the plain MFCC)."""
    if n <= 0:
        raise DatasetError(f"keywords12: OOD sample count must be positive, got {n}")
    d = Path(ds.meta["cache_dir"]) if "cache_dir" in ds.meta else cache_root(data_dir)
    f = d / f"ood-s{seed}-n{n}.npy"
    fe = ds.meta.get("frontend")
    if f.exists():
        return audio.finish(np.load(f), fe)
    vs = voice_split(int(ds.meta.get("seed", 0)))["test"]
    items = plan_split("ood", n, seed, vs, words=OOD_EXTRA)
    ((flat, off),) = run_fresh([("synth_items", {"items": items})])
    speech = [flat[off[i] : off[i + 1]].astype(np.float64) for i in range(len(items))]
    x = audio.mfcc(render(items, speech, "train", seed, "ood"))
    save_arrays(f, x)
    return audio.finish(x, fe)
