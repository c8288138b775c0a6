"""Offline speech synthesizers for the keyword sets: espeak-ng (pip `espeakng-loader`, always there) and,
when installed, Debian's `flite` (its built-in voices) and `festival` (the voices under
/usr/share/festival/voices: the English festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts, and the
recorded speakers of other languages, festvox-italp16k, -itapc16k, -ca-ona-hts, -czech-dita, -czech-krb,
-czech-machac, -czech-ph, -suopuhe-lj, -suopuhe-mv, -ru, who read the English word through their own
language's letter-to-sound rules: accented English from human diphone / HTS recordings). A synthesizer or
voice that is absent is skipped: `available_voices()` says which voices exist on this machine, and the set
records the ones it used.

A voice is "engine:name" ("espeak:en-us+m3", "espeak:de+f1" = German phonemization of the English word,
"flite:slt", "festival:kal_diphone"). Its `group` is the speaker identity used for speaker-disjoint splits
(flite's slt and festival's cmu_us_slt_arctic_hts are the same speaker; flite's kal, kal16 and festival's
kal_diphone too). Every function returns float64 waves at 16 kHz in [-1, 1].
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly

from snapuq.data import audio
from snapuq.data.keywords import ESPEAK_RATE, Espeak
from snapuq.errors import DatasetError

# English accents of espeak-ng and the other languages whose phonemization of the English words is used
# (a speaker of that language reading the word)
EN_ACCENTS = ["en-us", "en", "en-029", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-gb-x-rp",
              "en-us-nyc"]  # fmt: skip
FOREIGN_LANGS = ["de", "nl", "sv", "da", "nb", "fr", "es", "it", "pt", "pl", "hi", "af"]
FLITE_SKIP = {"awb_time"}  # a limited-domain voice (clock times only)
FESTIVAL_VOICE_DIR = Path("/usr/share/festival/voices")
# festival voices that cannot read Latin text: the Hindi, Marathi and Telugu NSK voices crash (SIGSEGV) on it
FESTIVAL_SKIP = {"hindi_NSK_diphone", "marathi_NSK_diphone", "telugu_NSK_diphone"}
SPEAKER_GROUPS = {"kal": "kal", "kal16": "kal", "kal_diphone": "kal", "slt": "slt",
                  "cmu_us_slt_arctic_hts": "slt"}  # fmt: skip


def espeak_variants() -> list[str]:
    """Every voice variant espeak-ng ships ("" = the language's default voice)."""
    import espeakng_loader

    d = Path(espeakng_loader.get_data_path()) / "voices" / "!v"
    return [""] + sorted(p.name for p in d.iterdir() if p.is_file() and " " not in p.name)


@lru_cache(maxsize=1)
def flite_voices() -> list[str]:
    exe = shutil.which("flite")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-lv"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = out.split(":", 1)[-1].split()
    return [n for n in names if n not in FLITE_SKIP]


@lru_cache(maxsize=1)
def festival_voices() -> list[str]:
    if not shutil.which("festival") or not FESTIVAL_VOICE_DIR.is_dir():
        return []
    # a voice is a folder with a festvox/ definition (not e.g. finnish/suopuhe.common, shared files)
    return sorted(p.name for p in FESTIVAL_VOICE_DIR.glob("*/*")
                  if (p / "festvox").is_dir() and p.name not in FESTIVAL_SKIP)  # fmt: skip


def group_of(voice: str) -> str:
    """The speaker identity of a voice (for speaker-disjoint splits)."""
    engine, name = voice.split(":", 1)
    if engine == "espeak":
        return voice
    return f"ext:{SPEAKER_GROUPS.get(name, name)}"


def available_voices(foreign: bool = True) -> dict[str, list[str]]:
    """engine -> voices on this machine."""
    variants = espeak_variants()
    en = [f"espeak:{a}+{v}" if v else f"espeak:{a}" for a in EN_ACCENTS for v in variants]
    out = {"espeak": en}
    if foreign:
        fv = ["", "m3", "f1", "klatt", "m7", "f4", "Andy", "belinda"]
        out["espeak_foreign"] = [f"espeak:{lang}+{v}" if v else f"espeak:{lang}" for lang in FOREIGN_LANGS
                                 for v in fv]  # fmt: skip
    out["flite"] = [f"flite:{v}" for v in flite_voices()]
    out["festival"] = [f"festival:{v}" for v in festival_voices()]
    return out


def _to16k(w: np.ndarray, rate: int) -> np.ndarray:
    w = np.asarray(w, np.float64)
    if rate == audio.SAMPLE_RATE:
        return w
    g = np.gcd(rate, audio.SAMPLE_RATE)
    return resample_poly(w, audio.SAMPLE_RATE // g, rate // g)


def _read(path: str) -> tuple[int, np.ndarray]:
    from scipy.io import wavfile

    rate, d = wavfile.read(path)
    d = d.astype(np.float64) / (32768.0 if d.dtype == np.int16 else 1.0)
    return rate, d if d.ndim == 1 else d.mean(1)


def synth_espeak(text: str, voice: str, rate: int, pitch: int, pitch_range: int) -> np.ndarray:
    raw = Espeak.get().synth(text, voice, rate, pitch, pitch_range).astype(np.float64) / 32768.0
    return _to16k(raw, ESPEAK_RATE)


def synth_flite(text: str, voice: str, stretch: float, f0: float | None) -> np.ndarray:
    with tempfile.TemporaryDirectory(prefix="snapuq-flite") as tmp:
        out = os.path.join(tmp, "o.wav")
        cmd = ["flite", "-voice", voice, "--setf", f"duration_stretch={stretch:.3f}"]
        if f0:
            cmd += ["--setf", f"int_f0_target_mean={f0:.1f}"]
        try:
            subprocess.run(cmd + ["-t", text, "-o", out], check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            raise DatasetError(f"tts: flite failed for voice {voice} on '{text}': {e}") from e
        rate, w = _read(out)
        return _to16k(w, rate)


# duration-stretch retries of an utterance festival crashes on
FESTIVAL_NUDGES = (0.02, -0.02, 0.04, -0.04)


def _festival_run(voice: str, jobs: list[tuple[int, str, float]], tmp: str) -> None:
    """Speaks every (index, text, duration stretch) of `jobs` in one festival process, wave i to tmp/i.wav.
    Festival can die (SIGSEGV) on one utterance (e.g. pc_diphone on "no" at a stretch of 1.29): the waves it
    wrote before stay, the caller sees which are missing."""
    lines = [f"(voice_{voice})"]
    for i, text, stretch in jobs:
        lines += [f"(Parameter.set 'Duration_Stretch {stretch:.3f})",
                  f'(utt.save.wave (utt.synth (Utterance Text "{text.replace(chr(34), "")}")) "{tmp}/{i}.wav"'
                  " 'riff)"]  # fmt: skip
    script = os.path.join(tmp, f"s{jobs[0][0]}.scm")
    Path(script).write_text("\n".join(lines) + "\n")
    try:
        subprocess.run(["festival", "--batch", script], capture_output=True, timeout=1800)
    except (OSError, subprocess.SubprocessError) as e:
        raise DatasetError(f"tts: festival failed for voice {voice}: {e}") from e


def synth_festival_batch(voice: str, items: list[tuple[str, float]]) -> list[np.ndarray]:
    """Festival speaks every (text, duration stretch) with `voice`, in as few processes as it allows: after a
    crash the utterance it died on is retried alone with its stretch nudged (FESTIVAL_NUDGES, deterministic),
    then the batch goes on from the next one."""
    with tempfile.TemporaryDirectory(prefix="snapuq-festival") as tmp:
        made = lambda i: os.path.exists(os.path.join(tmp, f"{i}.wav"))  # noqa: E731
        k = 0
        while k < len(items):
            _festival_run(voice, [(i, *items[i]) for i in range(k, len(items))], tmp)
            while k < len(items) and made(k):
                k += 1
            if k == len(items):
                break
            text, stretch = items[k]
            for nudge in FESTIVAL_NUDGES:
                _festival_run(voice, [(k, text, stretch + nudge)], tmp)
                if made(k):
                    break
            else:
                raise DatasetError(f"tts: festival voice {voice} crashes on '{text}' (duration stretch "
                                   f"{stretch:.3f} and {len(FESTIVAL_NUDGES)} nudges of it)")  # fmt: skip
            k += 1
        outs = []
        for i in range(len(items)):
            rate, w = _read(os.path.join(tmp, f"{i}.wav"))
            outs.append(_to16k(w, rate))
        return outs
