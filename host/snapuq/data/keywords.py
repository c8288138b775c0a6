"""`keywords`: an offline keyword-spotting set synthesized with espeak-ng (pip `espeakng-loader`).

The ten Speech Commands words (yes no up down left right on off stop go) are spoken by "speakers" = an
English accent (8) x a voice variant (32) = 256 speakers; the splits are speaker-disjoint (like Speech
Commands), so the test set is spoken by voices the model never heard. Each clip varies speaking rate, pitch,
pitch range, gain, time position inside the 1 s window and background noise (white / pink / brown / hum /
none at random SNR). Audio is synthesized at 22050 Hz, resampled to 16 kHz (scipy.signal.resample_poly),
stored as int16 like a wav file and turned into MFCC features (snapuq.data.audio.mfcc, 49x10x1).

Everything is deterministic by seed (each clip draws from its own generator seeded by (seed, split, index);
each split is synthesized in a fresh process because libespeak-ng carries state from one utterance to the
next) and cached on disk under `$SNAPUQ_CACHE` (default ~/.cache/snapuq), or under `--data-dir` when given.
The int16 waves of the dev and test splits are kept (see `snapuq.data.dataset.split_waves`) so
SpeechCmd-C style corruptions can be applied to the raw audio.

OOD (`ood_keywords`): words outside the task (the unused Speech Commands words: bed, bird, cat, ...) spoken by
the test speakers, and the same words spoken by voices of other languages (de, fr, es, ...).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.signal import firwin, resample_poly

from snapuq import resources
from snapuq.data import SPLIT_ARRAYS, Dataset, audio
from snapuq.data.augment_audio import coloured_noise
from snapuq.errors import DatasetError
from snapuq.io import save_arrays

VERSION = "kw2"
WORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
# Speech Commands v0.02 words outside the 10-word task
OOD_WORDS = [
    "bed", "bird", "cat", "dog", "eight", "five", "four", "happy", "house", "marvin", "nine", "one",
    "seven", "sheila", "six", "three", "tree", "two", "wow", "zero", "backward", "forward", "follow",
    "learn", "visual",
]  # fmt: skip
ACCENTS = [
    "en-us", "en", "en-029", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-gb-x-rp", "en-us-nyc",
]  # fmt: skip
# espeak-ng voice variants; those with a "breath" noise source (f2, f3, f5, victor, Alicia, ...) are left out:
# their output is not reproducible from run to run
VARIANTS = [
    "", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "f1", "f4", "Annie", "anika", "belinda", "klatt",
    "klatt2", "klatt3", "adam", "Alex", "Andy", "ed", "edward", "john", "linda", "max", "paul", "quincy",
    "rob", "robert", "steph", "travis", "aunty",
]  # fmt: skip
OOD_LANGS = ["de", "fr", "es", "it", "nl", "pl", "pt", "sv", "ru", "hi", "fi", "tr"]

# clips per word and split of the default set (speaker-disjoint splits: 65 % / 15 % / 20 % of the speakers)
PER_WORD = {"train": 300, "dev": 60, "test": 80}
SPEAKER_FRACTIONS = {"train": 0.65, "dev": 0.15, "test": 0.20}
SPLIT_IDS = {"train": 0, "dev": 1, "test": 2, "ood": 3}
ESPEAK_RATE = 22050
WAVE_SPLITS = ("dev", "test")  # splits whose int16 waves are kept in the cache

# espeak_PARAMETER values (speak_lib.h)
_RATE, _VOLUME, _PITCH, _RANGE = 1, 2, 3, 4
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1


def cache_root(data_dir: str | None = None) -> Path:
    if data_dir:
        return Path(data_dir)
    env = os.environ.get("SNAPUQ_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "snapuq"


class Espeak:
    """Minimal ctypes binding to the libespeak-ng shipped by `espeakng-loader` (synchronous, in-memory)."""

    _instance: Espeak | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as e:  # pragma: no cover - a dependency of the package
            raise DatasetError(
                "keywords: the pip package 'espeakng-loader' is required to synthesize speech"
            ) from e
        lib_path = espeakng_loader.get_library_path()
        data_path = espeakng_loader.get_data_path()
        try:
            self.lib = ctypes.CDLL(lib_path)
        except OSError as e:
            raise DatasetError(f"keywords: cannot load {lib_path}: {e}") from e
        self.lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_void_p, ctypes.c_void_p,
        ]  # fmt: skip
        rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path.encode(), 0)
        if rate != ESPEAK_RATE:
            raise DatasetError(
                f"keywords: espeak-ng initialisation failed with data at {data_path} (got {rate})"
            )
        self._chunks: list[np.ndarray] = []
        cb_type = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
        )

        def _cb(wav, n, _events):
            if n > 0 and wav:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0

        self._cb = cb_type(_cb)  # keep a reference: the library calls it
        self.lib.espeak_SetSynthCallback(self._cb)

    @classmethod
    def get(cls) -> Espeak:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def synth(
        self, text: str, voice: str, rate: int = 175, pitch: int = 50, pitch_range: int = 50
    ) -> np.ndarray:
        """Speak `text` with voice name `voice` (e.g. "en-us+f3"); int16 samples at 22050 Hz."""
        with self._lock:
            if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise DatasetError(f"keywords: espeak-ng has no voice '{voice}'")
            self.lib.espeak_SetParameter(_RATE, int(rate), 0)
            self.lib.espeak_SetParameter(_PITCH, int(pitch), 0)
            self.lib.espeak_SetParameter(_RANGE, int(pitch_range), 0)
            self.lib.espeak_SetParameter(_VOLUME, 100, 0)
            self._chunks = []
            t = text.encode()
            rc = self.lib.espeak_Synth(t, len(t) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
            if rc != 0:
                raise DatasetError(
                    f"keywords: espeak-ng failed to speak '{text}' with '{voice}' (status {rc})"
                )
            return np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)


def _voice_name(accent: str, variant: str) -> str:
    return f"{accent}+{variant}" if variant else accent


def speakers() -> list[str]:
    return [_voice_name(a, v) for a in ACCENTS for v in VARIANTS]


def speaker_split(seed: int) -> dict[str, list[str]]:
    """Speaker-disjoint assignment of the 256 English speakers to train/dev/test (deterministic by seed)."""
    spk = speakers()
    order = np.random.default_rng([seed, 7001]).permutation(len(spk))
    n_dev = int(round(SPEAKER_FRACTIONS["dev"] * len(spk)))
    n_test = int(round(SPEAKER_FRACTIONS["test"] * len(spk)))
    test = [spk[i] for i in order[:n_test]]
    dev = [spk[i] for i in order[n_test : n_test + n_dev]]
    train = [spk[i] for i in order[n_test + n_dev :]]
    return {"train": train, "dev": dev, "test": test}


def _trim(w: np.ndarray, thr: float = 0.02) -> np.ndarray:
    a = np.abs(w)
    peak = a.max() if a.size else 0.0
    if peak <= 0:
        return w
    idx = np.nonzero(a > thr * peak)[0]
    return w[max(idx[0] - 80, 0) : idx[-1] + 80]


@lru_cache(maxsize=1)
def _resample_fir() -> np.ndarray:
    """The FIR scipy.signal.resample_poly designs for 441 -> 320 (Kaiser 5.0), computed once."""
    return firwin(2 * 10 * 441 + 1, 1.0 / 441, window=("kaiser", 5.0))


@dataclass
class ClipParams:
    text: str
    voice: str
    rate: int
    pitch: int
    pitch_range: int
    peak: float
    noise: str
    snr_db: float


def render_clip(p: ClipParams, rng: np.random.Generator) -> np.ndarray:
    """One 1 s clip (int16, 16 kHz): speech at a random position, peak `p.peak`, noise at `p.snr_db`."""
    raw = Espeak.get().synth(p.text, p.voice, p.rate, p.pitch, p.pitch_range).astype(np.float64) / 32768.0
    w = _trim(resample_poly(raw, 320, 441, window=_resample_fir()))  # 22050 -> 16000 Hz
    w = w[: audio.CLIP_SAMPLES]
    peak = np.abs(w).max() if w.size else 0.0
    if peak > 0:
        w = w * (p.peak / peak)
    clip = np.zeros(audio.CLIP_SAMPLES)
    start = int(rng.integers(0, audio.CLIP_SAMPLES - w.size + 1))
    clip[start : start + w.size] = w
    if p.noise != "none":
        sig_rms = np.sqrt(np.mean(w**2)) if w.size else 0.0
        kind = "hum_plain" if p.noise == "hum" else p.noise  # this set's own hum (augment_audio)
        noise = coloured_noise(kind, audio.CLIP_SAMPLES, rng)
        clip = clip + noise * sig_rms * 10.0 ** (-p.snr_db / 20.0)
    return audio.to_int16(clip)


def _draw_params(text: str, voice: str, rng: np.random.Generator) -> ClipParams:
    noise = str(rng.choice(["none", "white", "pink", "brown", "hum"], p=[0.2, 0.2, 0.25, 0.25, 0.1]))
    return ClipParams(
        text=text,
        voice=voice,
        rate=int(rng.integers(120, 260)),
        pitch=int(rng.integers(20, 80)),
        pitch_range=int(rng.integers(20, 90)),
        peak=float(10.0 ** rng.uniform(-1.3, -0.1)),  # -26 .. -2 dBFS
        noise=noise,
        snr_db=float(rng.uniform(5.0, 35.0)),
    )


def synth_split(
    words: list[str], voices: list[str], per_word: int, seed: int, split: str, position: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(int16 waves (N, 16000), labels (N,)) for `per_word` clips of each word, voices drawn from `voices`.
    Clip i uses its own generator seeded by (seed, split, i). Bit-identical only when run from a freshly
    loaded libespeak-ng (`run_fresh`)."""
    from tqdm import tqdm

    n = per_word * len(words)
    waves = np.empty((n, audio.CLIP_SAMPLES), dtype=np.int16)
    labels = np.repeat(np.arange(len(words), dtype=np.int64), per_word)
    bar = tqdm(
        range(n), desc=f"keywords {split}", unit="clip", leave=False, disable=n < 200, position=position
    )
    for i in bar:
        rng = np.random.default_rng([seed, SPLIT_IDS[split], i])
        voice = voices[int(rng.integers(len(voices)))]
        waves[i] = render_clip(_draw_params(words[labels[i]], voice, rng), rng)
    return waves, labels


def run_fresh(jobs: list[tuple[str, dict]], workers: int | None = None) -> list[tuple[np.ndarray, ...]]:
    """Run synthesis jobs ("synth_split" / "ood_waves", kwargs) each in a fresh interpreter (a freshly loaded
    libespeak-ng, see `_synth_worker`), at most `workers` at a time; returns each job's arrays."""
    import subprocess
    import sys

    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    host = str(resources.python_path())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [host, os.environ.get("PYTHONPATH")])))
    results: list[tuple[np.ndarray, ...]] = []
    with tempfile.TemporaryDirectory(prefix="snapuq-synth") as tmp:
        outs = [os.path.join(tmp, f"job{j}") for j in range(len(jobs))]
        pending = list(range(len(jobs)))
        running: list[subprocess.Popen] = []
        while pending or running:
            while pending and len(running) < workers:
                j = pending.pop(0)
                spec = json.dumps(
                    {"fn": jobs[j][0], "kwargs": jobs[j][1], "out": outs[j], "position": j % workers}
                )
                Path(f"{outs[j]}.json").write_text(spec)  # a file: long item lists exceed argv's limit
                cmd = [sys.executable, "-m", "snapuq.data._synth_worker", f"@{outs[j]}.json"]
                running.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL))
            running.pop(0).wait()
        for (fn, _), out in zip(jobs, outs):
            if not os.path.exists(f"{out}_0.npy"):
                err = Path(f"{out}.err").read_text().strip() if os.path.exists(f"{out}.err") else "no output"
                raise DatasetError(f"keywords: speech synthesis job {fn} failed: {err}")
            arrs = []
            k = 0
            while os.path.exists(f"{out}_{k}.npy"):
                arrs.append(np.load(f"{out}_{k}.npy"))
                k += 1
            results.append(tuple(arrs))
    return results


def _shuffle(seed: int, split: str, *arrays: np.ndarray) -> list[np.ndarray]:
    perm = np.random.default_rng([seed, SPLIT_IDS[split], 99]).permutation(len(arrays[0]))
    return [a[perm] for a in arrays]


def _cache_dir(root: Path, seed: int, per_word: dict[str, int]) -> Path:
    tag = "-".join(str(per_word[s]) for s in ("train", "dev", "test"))
    return root / f"keywords-{VERSION}-s{seed}-{tag}"


def _write_atomic(final: Path, files: dict[str, np.ndarray], meta: dict) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp", dir=final.parent))
    try:
        for name, arr in files.items():
            np.save(tmp / f"{name}.npy", arr)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first
            if not (final / "meta.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _read_cache(d: Path) -> dict[str, np.ndarray] | None:
    if not (d / "meta.json").exists():
        return None
    try:
        return {k: np.load(d / f"{k}.npy") for k in SPLIT_ARRAYS}
    except (OSError, ValueError) as e:
        raise DatasetError(f"keywords: corrupt cache at {d} ({e}); delete it to rebuild") from e


def build_keywords(root: Path, seed: int, per_word: dict[str, int]) -> Path:
    """Synthesize the set into the cache (if not there yet) and return its directory."""
    d = _cache_dir(root, seed, per_word)
    if (d / "meta.json").exists():
        return d
    t0 = time.perf_counter()
    split_spk = speaker_split(seed)
    files: dict[str, np.ndarray] = {}
    splits = ("train", "dev", "test")
    jobs = [
        (
            "synth_split",
            {"words": WORDS, "voices": split_spk[s], "per_word": per_word[s], "seed": seed, "split": s},
        )
        for s in splits
    ]
    for split, (waves, y) in zip(splits, run_fresh(jobs)):
        waves, y = _shuffle(seed, split, waves, y)
        files[f"x_{split}"] = audio.mfcc(waves)
        files[f"y_{split}"] = y
        if split in WAVE_SPLITS:
            files[f"waves_{split}"] = waves
    meta = {
        "version": VERSION,
        "seed": seed,
        "per_word": per_word,
        "speakers": split_spk,
        "build_s": round(time.perf_counter() - t0, 2),
        "frontend": audio.FRONTEND,
    }
    _write_atomic(d, files, meta)
    return d


def load_keywords(data_dir: str | None, seed: int = 0, per_word: dict[str, int] | None = None) -> Dataset:
    """The synthesized 10-word set: MFCC features float32 (N, 49, 10, 1), labels 0..9 in WORDS order."""
    pw = dict(PER_WORD if per_word is None else per_word)
    d = build_keywords(cache_root(data_dir), seed, pw)
    arrs = _read_cache(d)
    if arrs is None:  # pragma: no cover - build_keywords just wrote it
        raise DatasetError(f"keywords: cache at {d} is missing meta.json")
    meta = json.loads((d / "meta.json").read_text())
    meta.update(
        {
            "source": "espeak-ng synthesis (espeakng-loader), speaker-disjoint splits",
            "cache_dir": str(d),
            "waves": {s: str(d / f"waves_{s}.npy") for s in WAVE_SPLITS},
            "modality": "audio",
            "ood": "unused Speech Commands words (bed, bird, ...) by the test speakers and by voices of "
            "12 other languages (espeak-ng)",
        }
    )
    return Dataset(name="keywords", **{k: arrs[k] for k in SPLIT_ARRAYS}, class_names=list(WORDS), meta=meta)


def ood_waves(n: int, seed: int, test_voices: list[str], position: int = 0) -> np.ndarray:
    """n int16 OOD clips: even indices = unused words by the test speakers, odd = unused words by voices of
    other languages (with English-style variation)."""
    from tqdm import tqdm

    foreign = [_voice_name(lang, v) for lang in OOD_LANGS for v in ("", "m3", "f1", "klatt", "m7", "f4")]
    waves = np.empty((n, audio.CLIP_SAMPLES), dtype=np.int16)
    for i in tqdm(
        range(n), desc="keywords ood", unit="clip", leave=False, disable=n < 200, position=position
    ):
        rng = np.random.default_rng([seed, SPLIT_IDS["ood"], i])
        voices = test_voices if i % 2 == 0 else foreign
        voice = voices[int(rng.integers(len(voices)))]
        word = OOD_WORDS[int(rng.integers(len(OOD_WORDS)))]
        waves[i] = render_clip(_draw_params(word, voice, rng), rng)
    return waves


def ood_keywords(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    """Unused Speech Commands words (bed, bird, ...) by the test speakers and by 12 other-language voices.

    Returns OOD MFCC features (n, 49, 10, 1) for a `keywords` Dataset (cached beside the dataset), through the
    Dataset's front end (`snapuq train --frontend`)."""
    if n <= 0:
        raise DatasetError(f"keywords: OOD sample count must be positive, got {n}")
    ds_seed = int(ds.meta.get("seed", seed))
    voices = ds.meta.get("speakers", {}).get("test") or speaker_split(ds_seed)["test"]
    d = Path(ds.meta["cache_dir"]) if "cache_dir" in ds.meta else cache_root(data_dir)
    f = d / f"ood-s{seed}-n{n}.npy"
    fe = (ds.meta or {}).get("frontend")
    if f.exists():
        return audio.finish(np.load(f), fe)
    (waves,) = run_fresh([("ood_waves", {"n": n, "seed": seed, "test_voices": list(voices)})])[0]
    x = audio.mfcc(waves)
    d.mkdir(parents=True, exist_ok=True)
    save_arrays(f, x)
    return audio.finish(x, fe)
