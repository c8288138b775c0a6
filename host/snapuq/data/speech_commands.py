"""`speech_commands`: Google Speech Commands v0.02 read from a local wav tree (`--data-dir`).

Expected layout (the extracted `speech_commands_v0.02.tar.gz`; DIR itself or DIR/speech_commands_v0.02):

    DIR/validation_list.txt   DIR/testing_list.txt   (paths relative to DIR: "yes/0a7c2a8d_nohash_0.wav")
    DIR/<word>/*.wav          16 kHz mono PCM (16-bit int or float; other rates are resampled)

Task: the 10 words yes no up down left right on off stop go (QUTE / SNAP-UQ protocol), official splits:
train = every file of those words not in either list, dev = validation list, test = testing list. The other
words (bed, bird, cat, ...) are the OOD source (`ood_speech_commands`, from their testing-list files). Clips
are zero-padded / cut to 1 s and turned into MFCC features (snapuq.data.audio.mfcc). Features and the dev/test
int16 waves are cached (`$SNAPUQ_CACHE`, default ~/.cache/snapuq) keyed by the resolved data path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from snapuq.data import SPLIT_ARRAYS, Dataset, audio
from snapuq.data.keywords import OOD_WORDS, WORDS, _write_atomic, cache_root
from snapuq.data.user_readers import read_audio as read_any
from snapuq.errors import DatasetError
from snapuq.io import save_arrays

VERSION = "sc1"
LISTS = ("validation_list.txt", "testing_list.txt")
EXPECTED = (
    "the Speech Commands v0.02 wav tree: <word>/*.wav (16 kHz mono), validation_list.txt, testing_list.txt"
)


def find_root(data_dir: str | None) -> Path:
    """The directory holding validation_list.txt / testing_list.txt (DIR or DIR/speech_commands_v0.02)."""
    if not data_dir:
        raise DatasetError(f"speech_commands: needs --data-dir pointing at {EXPECTED}")
    base = Path(data_dir).expanduser()
    if not base.is_dir():
        raise DatasetError(f"speech_commands: {base} is not a directory (expected {EXPECTED})")
    for cand in (base, base / "speech_commands_v0.02", base / "speech_commands"):
        if all((cand / f).is_file() for f in LISTS):
            return cand
    missing = [f for f in LISTS if not (base / f).is_file()]
    raise DatasetError(f"speech_commands: {base} lacks {', '.join(missing)} (expected {EXPECTED})")


def _read_list(root: Path, name: str) -> set[str]:
    out = set()
    for i, line in enumerate((root / name).read_text().splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if "/" not in line or not line.endswith(".wav"):
            raise DatasetError(
                f"speech_commands: {root / name} line {i} is not '<word>/<file>.wav': {line[:80]!r}"
            )
        out.add(line)
    return out


def read_audio(path: Path) -> np.ndarray:
    """A wav file (any rate from 8 kHz, any channels: user_readers.read_audio) -> int16 at 16 kHz, whole."""
    try:
        return read_any(path)
    except DatasetError as e:
        raise DatasetError(f"speech_commands: {e}") from None


def read_wav(path: Path) -> np.ndarray:
    """A wav clip -> int16 (16000,): 1 s at 16 kHz (resampled, zero-padded / cut)."""
    return audio.fit_length(read_audio(path)).astype(np.int16)


def _split_files(root: Path) -> dict[str, list[tuple[str, int]]]:
    val, test = _read_list(root, LISTS[0]), _read_list(root, LISTS[1])
    out: dict[str, list[tuple[str, int]]] = {"train": [], "dev": [], "test": []}
    for label, word in enumerate(WORDS):
        d = root / word
        if not d.is_dir():
            raise DatasetError(f"speech_commands: {d} is missing (expected {EXPECTED})")
        files = sorted(f"{word}/{p.name}" for p in d.glob("*.wav"))
        if not files:
            raise DatasetError(f"speech_commands: {d} holds no .wav files (expected {EXPECTED})")
        for rel in files:
            split = "test" if rel in test else "dev" if rel in val else "train"
            out[split].append((rel, label))
    for split, items in out.items():
        if not items:
            raise DatasetError(f"speech_commands: {root} gives an empty {split} split for the 10 words")
    return out


def _load_split(root: Path, items: list[tuple[str, int]], desc: str) -> tuple[np.ndarray, np.ndarray]:
    from tqdm import tqdm

    waves = np.empty((len(items), audio.CLIP_SAMPLES), dtype=np.int16)
    for i, (rel, _) in enumerate(tqdm(items, desc=desc, unit="wav", leave=False, disable=len(items) < 500)):
        waves[i] = read_wav(root / rel)
    return waves, np.array([lab for _, lab in items], dtype=np.int64)


def _cache_dir(root: Path, data_dir_cache: Path) -> Path:
    """Cache folder keyed by the tree's path and its two list files (size, mtime)."""
    stamp = [str(root.resolve())] + [
        f"{(root / f).stat().st_size}:{(root / f).stat().st_mtime_ns}" for f in LISTS
    ]
    key = hashlib.sha1("|".join(stamp).encode()).hexdigest()[:12]
    return data_dir_cache / f"speech_commands-{VERSION}-{key}"


def load_speech_commands(data_dir: str | None, seed: int = 0) -> Dataset:
    """Speech Commands v0.02, 10 words, MFCC (49, 10, 1); train order shuffled by seed."""
    root = find_root(data_dir)
    d = _cache_dir(root, cache_root(None))
    if not (d / "meta.json").exists():
        splits = _split_files(root)
        files: dict[str, np.ndarray] = {}
        counts = {}
        for split, items in splits.items():
            waves, y = _load_split(root, items, f"speech_commands {split}")
            files[f"x_{split}"] = audio.mfcc(waves)
            files[f"y_{split}"] = y
            if split in ("dev", "test"):
                files[f"waves_{split}"] = waves
            counts[split] = len(items)
        _write_atomic(d, files, {"version": VERSION, "root": str(root.resolve()), "counts": counts})
    try:
        arrs = {k: np.load(d / f"{k}.npy") for k in SPLIT_ARRAYS}
    except (OSError, ValueError) as e:
        raise DatasetError(f"speech_commands: corrupt cache at {d} ({e}); delete it to rebuild") from e
    perm = np.random.default_rng([seed, 31]).permutation(len(arrs["y_train"]))
    meta = json.loads((d / "meta.json").read_text())
    meta.update(
        {
            "source": f"Speech Commands v0.02 wav tree at {root}",
            "cache_dir": str(d),
            "waves": {s: str(d / f"waves_{s}.npy") for s in ("dev", "test")},
            "frontend": audio.FRONTEND,
            "modality": "audio",
            "ood": "unused Speech Commands v0.02 words (bed, bird, ...) from the testing list",
            "seed": seed,
        }
    )
    arrs.update(x_train=arrs["x_train"][perm], y_train=arrs["y_train"][perm])
    return Dataset(name="speech_commands", **{k: arrs[k] for k in SPLIT_ARRAYS}, class_names=list(WORDS),
                   meta=meta)  # fmt: skip


def ood_speech_commands(data_dir: str | None, n: int, seed: int, ds: Dataset) -> np.ndarray:
    """Unused Speech Commands words (bed, bird, ...) from the testing list (all their files if none there).

    Returns n MFCC features (n, 49, 10, 1), through the Dataset's front end (`snapuq train --frontend`)."""
    if n <= 0:
        raise DatasetError(f"speech_commands: OOD sample count must be positive, got {n}")
    root = find_root(data_dir or (ds.meta.get("root") if ds.meta else None))
    test = _read_list(root, LISTS[1])
    present = [w for w in OOD_WORDS if (root / w).is_dir()]
    if not present:
        raise DatasetError(
            f"speech_commands: {root} has none of the unused-word folders ({', '.join(OOD_WORDS[:5])}, ...)"
        )
    cands = sorted(r for r in test if r.split("/")[0] in present)
    if not cands:
        cands = sorted(f"{w}/{p.name}" for w in present for p in (root / w).glob("*.wav"))
    if not cands:
        raise DatasetError(f"speech_commands: the unused-word folders under {root} hold no .wav files")
    rng = np.random.default_rng([seed, 41])
    pick = rng.choice(len(cands), size=min(n, len(cands)), replace=False)
    d = _cache_dir(root, cache_root(None))
    f = d / f"ood-s{seed}-n{len(pick)}.npy"
    fe = (ds.meta or {}).get("frontend")
    if f.exists():
        return audio.finish(np.load(f), fe)
    waves, _ = _load_split(root, [(cands[i], 0) for i in sorted(pick)], "speech_commands ood")
    x = audio.mfcc(waves)
    d.mkdir(parents=True, exist_ok=True)
    save_arrays(f, x)
    return audio.finish(x, fe)


# --- a folder of test clips alone (`snapuq eval DIR --data-dir TREE --split test`) -------------------------

SILENCE, UNKNOWN = "_silence_", "_unknown_"
NOISE_DIR = "_background_noise_"
TREE_SPLITS = ("test", "dev", "all")
UNKNOWN_TO_MODEL = -1  # label of a clip whose word the model has no class for (and no `_unknown_` class)


def noise_pieces(f: Path) -> np.ndarray:
    """A long background-noise recording -> its whole 1 s pieces (int16, (k, 16000)); a shorter file: one
    zero-padded clip."""
    w = read_audio(f)
    k = max(1, len(w) // audio.CLIP_SAMPLES)
    return np.stack([audio.fit_length(w[i * audio.CLIP_SAMPLES : (i + 1) * audio.CLIP_SAMPLES])
                     for i in range(k)])  # fmt: skip


def read_test_tree(data_dir: str | None, class_names: list[str], split: str = "test") -> dict:
    """The clips of a Speech Commands-style folder for a model with `class_names`.

    Folder words are mapped by name: a model class -> its index; `_background_noise_` (long recordings cut
    into 1 s pieces) and `_silence_` -> `_silence_`; any other word -> `_unknown_` when the model has that
    class, else UNKNOWN_TO_MODEL (-1). `split`: "test" = the files in testing_list.txt when the folder has
    one (else every clip), "dev" = validation_list.txt, "all" = every clip. Background noise is in no list
    and is always read. Returns {"waves" int16 (N, 16000), "labels" (N,), "words" (N,) folder names, "files"
    (N,) `<word>/<file>.wav` (a background recording's pieces: `...wav#k`), "root", "listed" (the list used or
    None)}."""
    if split not in TREE_SPLITS:
        raise DatasetError(f"speech_commands: --split must be one of {', '.join(TREE_SPLITS)}, got {split!r}")
    if not data_dir:
        raise DatasetError("speech_commands: --split needs --data-dir pointing at a folder of <word>/*.wav")
    base = Path(data_dir).expanduser()
    if not base.is_dir():
        raise DatasetError(f"speech_commands: {base} is not a directory (expected <word>/*.wav)")
    nested = (base / "speech_commands_v0.02", base / "speech_commands_test_set_v0.02")
    root = next((c for c in nested if c.is_dir()), base)
    list_name = {"test": LISTS[1], "dev": LISTS[0]}.get(split)
    listed = _read_list(root, list_name) if list_name and (root / list_name).is_file() else None
    if split == "dev" and listed is None:
        raise DatasetError(f"speech_commands: --split dev needs {root / LISTS[0]}")
    index = {n: i for i, n in enumerate(class_names)}
    waves, labels, words, names = [], [], [], []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = sorted(d.glob("*.wav"))
        if d.name == NOISE_DIR:
            for f in files:
                w = noise_pieces(f)
                waves.extend(w)
                labels += [index.get(SILENCE, UNKNOWN_TO_MODEL)] * len(w)
                words += [SILENCE] * len(w)
                names += [f"{d.name}/{f.name}#{k}" for k in range(len(w))]
            continue
        if listed is not None and d.name != SILENCE:
            files = [f for f in files if f"{d.name}/{f.name}" in listed]
        lab = index.get(d.name, index.get(UNKNOWN, UNKNOWN_TO_MODEL))
        for f in files:
            waves.append(read_wav(f))
            labels.append(lab)
            words.append(d.name)
            names.append(f"{d.name}/{f.name}")
    if not waves:
        what = f"listed in {list_name}" if listed is not None else "in <word>/ folders"
        raise DatasetError(f"speech_commands: {root} holds no .wav clips {what}")
    return {
        "waves": np.stack(waves).astype(np.int16),
        "labels": np.asarray(labels, np.int64),
        "words": np.asarray(words),
        "files": np.asarray(names),
        "root": str(root),
        "listed": list_name if listed is not None else None,
    }
