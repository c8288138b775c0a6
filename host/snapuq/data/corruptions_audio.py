"""SpeechCmd-C: 11 audio corruptions x 5 severities on the raw 16 kHz waveform (numpy/scipy only).

`corrupt_audio(wave, name, severity, seed)` takes one clip (16000,) or a batch (N, 16000), int16 or float in
[-1, 1], and returns int16 clips of the same shape (the format of a wav file; severity 0 returns the input
unchanged as int16). Clip i of a batch draws from its own generator seeded by (seed, corruption, severity,
i), so the result does not depend on how a set is batched. `corrupted_features(ds, name, severity, seed)`
applies a corruption to a Dataset's stored test (or dev) waves and returns MFCC features shaped like
`ds.x_test`: the CID streams of `snapuq eval` use it exactly like the image corruptions.

Severities (1 mildest .. 5 strongest) and the property that grows with them:
  gaussian_noise  white noise at SNR 20, 12, 6, 0, -6 dB (of the clip's RMS)       SNR falls
  pink_noise      1/f noise at the same SNRs                                         SNR falls
  impulse_noise   clicks on 0.1, 0.3, 1, 3, 6 % of the samples                        fraction of hit samples
  reverb          noise room response, RT60 0.2, 0.4, 0.7, 1.0, 1.5 s, DRR 6..-6 dB  late energy grows
  pitch_shift     +-1, 2, 3, 4, 6 semitones (sign from the seed), duration kept       frequency ratio
  time_stretch    tempo x1.1, 1.2, 1.35, 1.5, 1.8 or its inverse (seed), pitch kept   duration ratio
  gain            -10, -20, -30, -40, -50 dB                                          RMS falls
  clipping        hard clip at 50, 30, 15, 7, 3 % of the peak, peak restored         clipped fraction
  band_pass       4th-order Butterworth around 1 kHz, 3, 2, 1.5, 1, 0.5 octaves wide spectral spread falls
  bit_crush       8, 6, 5, 4, 3 bits relative to the clip peak                        SNR falls
  time_mask       5, 10, 20, 30, 45 % of the second zeroed around the speech          zeroed fraction
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.signal import butter, fftconvolve, resample, sosfiltfilt

from snapuq.data import audio
from snapuq.data.dataset import split_waves
from snapuq.data.user import apply_normalization
from snapuq.errors import SnapuqError

SEVERITIES = {
    "gaussian_noise": [20.0, 12.0, 6.0, 0.0, -6.0],
    "pink_noise": [20.0, 12.0, 6.0, 0.0, -6.0],
    "impulse_noise": [0.001, 0.003, 0.01, 0.03, 0.06],
    "reverb": [0.2, 0.4, 0.7, 1.0, 1.5],
    "pitch_shift": [1.0, 2.0, 3.0, 4.0, 6.0],
    "time_stretch": [1.1, 1.2, 1.35, 1.5, 1.8],
    "gain": [-10.0, -20.0, -30.0, -40.0, -50.0],
    "clipping": [0.5, 0.3, 0.15, 0.07, 0.03],
    "band_pass": [3.0, 2.0, 1.5, 1.0, 0.5],
    "bit_crush": [8, 6, 5, 4, 3],
    "time_mask": [0.05, 0.10, 0.20, 0.30, 0.45],
}
# direct-to-reverberant ratio per reverb severity (longer rooms also sound farther away)
_REVERB_DRR_DB = [6.0, 3.0, 0.0, -3.0, -6.0]
_NAMES = list(SEVERITIES)
N_SEVERITIES = 5


def audio_corruption_names() -> list[str]:
    return list(_NAMES)


def _rng(seed: int, name: str, severity: int, i: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), _NAMES.index(name), int(severity), int(i)])


def _pink(n: int, rng: np.random.Generator) -> np.ndarray:
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1.0 / audio.SAMPLE_RATE)
    f[0] = f[1]
    x = np.fft.irfft(spec / np.sqrt(f), n)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


# ---- STFT phase vocoder (time stretch without pitch change) --------------------------------------
_N_FFT, _HOP = 512, 128


def _stft(x: np.ndarray) -> np.ndarray:
    win = np.hanning(_N_FFT + 1)[:-1]
    xp = np.pad(x, (_N_FFT // 2, _N_FFT // 2))
    n_frames = 1 + (xp.size - _N_FFT) // _HOP
    idx = np.arange(n_frames)[:, None] * _HOP + np.arange(_N_FFT)[None, :]
    return np.fft.rfft(xp[idx] * win, axis=-1)


def _istft(spec: np.ndarray, length: int) -> np.ndarray:
    win = np.hanning(_N_FFT + 1)[:-1]
    frames = np.fft.irfft(spec, n=_N_FFT, axis=-1) * win
    n = _N_FFT + _HOP * (spec.shape[0] - 1)
    out = np.zeros(n)
    norm = np.zeros(n)
    for t in range(spec.shape[0]):
        out[t * _HOP : t * _HOP + _N_FFT] += frames[t]
        norm[t * _HOP : t * _HOP + _N_FFT] += win**2
    out = out / np.maximum(norm, 1e-8)
    out = out[_N_FFT // 2 :]
    return audio.fit_length(out, length)


def time_stretch(x: np.ndarray, rate: float) -> np.ndarray:
    """Phase-vocoder tempo change of a 1-D float signal: rate > 1 is faster (shorter output, len/rate)."""
    spec = _stft(x)
    steps = np.arange(0.0, spec.shape[0] - 1, rate)
    i0 = steps.astype(int)
    frac = (steps - i0)[:, None]
    mag = (1.0 - frac) * np.abs(spec[i0]) + frac * np.abs(spec[i0 + 1])
    advance = 2.0 * np.pi * _HOP * np.arange(spec.shape[1]) / _N_FFT
    ang = np.angle(spec)
    dphi = ang[i0 + 1] - ang[i0] - advance
    dphi = dphi - 2.0 * np.pi * np.round(dphi / (2.0 * np.pi))
    phase = ang[0] + np.concatenate([np.zeros((1, spec.shape[1])), np.cumsum(advance + dphi, 0)[:-1]])
    return _istft(mag * np.exp(1j * phase), int(round(x.size / rate)))


def pitch_shift(x: np.ndarray, semitones: float) -> np.ndarray:
    """Pitch change by `semitones` keeping the duration (stretch by f, then resample by 1/f)."""
    f = 2.0 ** (semitones / 12.0)
    y = time_stretch(x, 1.0 / f)
    return audio.fit_length(resample(y, max(int(round(y.size / f)), 1)), x.size)


def _speech_center(x: np.ndarray) -> int:
    """Sample index at the centre of the loudest 50 ms (the speech), or the middle of a silent clip."""
    c = np.concatenate([[0.0], np.cumsum(x**2)])
    w = min(800, x.size)
    e = c[w:] - c[:-w]
    return int(np.argmax(e)) + w // 2 if e.max() > 0 else x.size // 2


@lru_cache(maxsize=16)
def _band_sos(lo: float, hi: float) -> np.ndarray:
    return butter(4, [lo, hi], btype="bandpass", fs=audio.SAMPLE_RATE, output="sos")


def _energy_centroid(x: np.ndarray) -> int:
    e = x**2
    tot = float(e.sum())
    return int(round(float(np.dot(np.arange(x.size), e)) / tot)) if tot > 0 else x.size // 2


# ---- the corruptions, one clip (float64, [-1, 1]) at a time --------------------------------------
def _one(x: np.ndarray, name: str, p: float, rng: np.random.Generator) -> np.ndarray:
    n = x.size
    rms = float(np.sqrt(np.mean(x**2))) + 1e-9
    peak = float(np.abs(x).max()) + 1e-9
    if name in ("gaussian_noise", "pink_noise"):
        noise = rng.standard_normal(n) if name == "gaussian_noise" else _pink(n, rng)
        noise = noise / (np.sqrt(np.mean(noise**2)) + 1e-12)
        return x + noise * rms * 10.0 ** (-p / 20.0)
    if name == "impulse_noise":
        k = max(1, int(round(p * n)))
        pos = rng.choice(n, size=k, replace=False)
        y = x.copy()
        y[pos] = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 1.0, size=k) * max(peak, 0.1)
        return y
    if name == "reverb":
        length = int(min(1.2 * p, 1.5) * audio.SAMPLE_RATE)
        t = np.arange(length) / audio.SAMPLE_RATE
        h = rng.standard_normal(length) * np.exp(-6.9078 * t / p)
        h[0] = 0.0
        h = h / (np.sqrt(np.sum(h**2)) + 1e-12)
        h[0] = 10.0 ** (
            _REVERB_DRR_DB[SEVERITIES["reverb"].index(p)] / 20.0
        )  # direct path vs unit-energy tail
        y = fftconvolve(x, h)[:n]
        return y * (rms / (float(np.sqrt(np.mean(y**2))) + 1e-12))
    if name == "pitch_shift":
        sign = 1.0 if rng.integers(2) else -1.0
        return pitch_shift(x, sign * p)
    if name == "time_stretch":
        rate = p if rng.integers(2) else 1.0 / p
        y = time_stretch(x, rate)
        # keep the speech where it was: the energy centroid c of x moves to c / rate in y
        c = _energy_centroid(x)
        shift = int(round(c / rate)) - c
        out = np.zeros(n)
        lo, hi = max(0, -shift), min(n, y.size - shift)
        if hi > lo:
            out[lo:hi] = y[lo + shift : hi + shift]
        return out
    if name == "gain":
        return x * 10.0 ** (p / 20.0)
    if name == "clipping":
        thr = p * peak
        return np.clip(x, -thr, thr) / p
    if name == "band_pass":
        lo, hi = 1000.0 * 2.0 ** (-p / 2.0), min(1000.0 * 2.0 ** (p / 2.0), 0.45 * audio.SAMPLE_RATE)
        return sosfiltfilt(_band_sos(lo, hi), x)
    if name == "bit_crush":
        step = peak / 2.0 ** (int(p) - 1)
        return np.round(x / step) * step
    if name == "time_mask":
        w = int(round(p * n))
        c = _speech_center(x) + int(rng.integers(-w // 4, w // 4 + 1))
        s = int(np.clip(c - w // 2, 0, n - w))
        y = x.copy()
        y[s : s + w] = 0.0
        return y
    raise AssertionError(name)  # pragma: no cover


def corrupt_audio(wave: np.ndarray, name: str, severity: int, seed: int = 0) -> np.ndarray:
    """Corrupt one clip (T,) or a batch (N, T) (int16 or float in [-1, 1]); int16 result, same shape."""
    if name not in SEVERITIES:
        raise SnapuqError(f"unknown audio corruption '{name}' (known: {', '.join(_NAMES)})")
    if not 0 <= int(severity) <= N_SEVERITIES:
        raise SnapuqError(f"audio corruption severity must be 0..{N_SEVERITIES}, got {severity}")
    w, single = audio.as_batch(wave, SnapuqError)
    x = audio._as_float(w)
    if int(severity) == 0:
        out = audio.to_int16(x)
    else:
        p = SEVERITIES[name][int(severity) - 1]
        out = np.empty(x.shape, dtype=np.int16)
        for i in range(x.shape[0]):
            out[i] = audio.to_int16(_one(x[i], name, p, _rng(seed, name, int(severity), i)))
    return out[0] if single else out


def corrupted_features(
    ds, name: str, severity: int, seed: int = 0, split: str = "test", idx: np.ndarray | None = None
) -> np.ndarray:
    """Features (n, 49, 10, 1) of the split's waves (rows `idx`, default all) under a corruption, through the
    dataset's recorded front end (MFCC, and CMN where it has it) and normalization (your own model's
    moved-out Normalization layer, if any).
    Severity 0 reproduces ds.x_<split> exactly."""

    norm = (ds.meta or {}).get("normalization") or {"kind": "none"}
    fe = (ds.meta or {}).get("frontend")
    waves = split_waves(ds, split)
    rows = np.arange(waves.shape[0]) if idx is None else np.asarray(idx)
    w = np.asarray(waves[rows])
    if int(severity) == 0:
        return apply_normalization(audio.features(w, fe), norm)
    # per-row generators keyed by the row index in the split, so subsets agree with the full set
    if name not in SEVERITIES:
        raise SnapuqError(f"unknown audio corruption '{name}' (known: {', '.join(_NAMES)})")
    if not 1 <= int(severity) <= N_SEVERITIES:
        raise SnapuqError(f"audio corruption severity must be 0..{N_SEVERITIES}, got {severity}")
    p = SEVERITIES[name][int(severity) - 1]
    x = audio._as_float(w)
    out = np.empty(w.shape, dtype=np.int16)
    for j, r in enumerate(rows):
        out[j] = audio.to_int16(_one(x[j], name, p, _rng(seed, name, int(severity), int(r))))
    return apply_normalization(audio.features(out, fe), norm)
