"""What a real microphone and room add to a clean synthesized word (the `keywords12` set): speed perturbation
(pitch, formants and tempo together), level, time shift, synthetic room impulse responses, band-limiting,
additive noise at a random SNR (white / pink / brown / blue noise, mains hum, babble = mixed synthetic
speech), and occasional clipping. `MicProfile` holds the ranges; "train" is the training set's, "shift"
a harsher one (lower SNR, more reverberation and band-limiting) for the held-out shifted sets, "clean"
only places the word (level, time shift). Every draw comes from the caller's numpy Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import butter, fftconvolve, resample_poly, sosfilt, sosfiltfilt

from snapuq.data import audio

SR = audio.SAMPLE_RATE
N = audio.CLIP_SAMPLES
NOISE_KINDS = ("white", "pink", "brown", "blue", "hum", "babble")


@dataclass(frozen=True)
class MicProfile:
    speed: tuple[float, float] = (0.9, 1.1)
    peak_db: tuple[float, float] = (-30.0, -1.0)
    p_reverb: float = 0.25
    rt60: tuple[float, float] = (0.1, 0.5)
    tail_db: tuple[float, float] = (-20.0, -6.0)  # reverberant tail energy relative to the direct path
    p_band: float = 0.3
    p_noise: float = 0.7
    snr_db: tuple[float, float] = (8.0, 35.0)
    p_clip: float = 0.02
    p_eq: float = 0.0  # a random timbre (voice and microphone colour): peaking filters and a tilt
    eq_db: float = 9.0  # the largest boost or cut of one peaking filter (dB)
    # the share of background draws (the noise behind a word, each component of a `_silence_` clip) that are
    # everyday sounds (ENV_KINDS) instead of colours, hum and babble; 0 draws nothing more from the rng
    env_share: float = 0.0


PROFILES = {
    "clean": MicProfile(speed=(1.0, 1.0), peak_db=(-20.0, -3.0), p_reverb=0.0, p_band=0.0, p_noise=0.0,
                        p_clip=0.0),
    "train": MicProfile(),
    "shift": MicProfile(speed=(0.85, 1.15), peak_db=(-38.0, -1.0), p_reverb=0.7, rt60=(0.2, 1.0),
                        tail_db=(-12.0, 0.0), p_band=0.6, p_noise=1.0, snr_db=(0.0, 20.0), p_clip=0.06),
    # the train profile + a random timbre on most words (last, so the other profiles keep their draws)
    "train_eq": MicProfile(p_eq=0.8),
    # the train profile + everyday backgrounds in a third of the background draws (last, as train_eq)
    "train_env": MicProfile(env_share=0.35),
    # ... in about one draw in seven
    "train_env_light": MicProfile(env_share=0.15),
}  # fmt: skip


def _peaking(f0: float, gain_db: float, q: float) -> np.ndarray:
    """One RBJ peaking-EQ biquad as a second-order section (b0 b1 b2 1 a1 a2)."""
    a = 10 ** (gain_db / 40.0)
    w0 = 2 * np.pi * f0 / SR
    alpha = np.sin(w0) / (2 * q)
    b = np.array([1 + alpha * a, -2 * np.cos(w0), 1 - alpha * a])
    den = np.array([1 + alpha / a, -2 * np.cos(w0), 1 - alpha / a])
    return np.r_[b / den[0], den / den[0]]


def timbre(w: np.ndarray, rng: np.random.Generator, eq_db: float) -> np.ndarray:
    """A random colour on a word: 2-4 peaking filters (150 Hz - 6 kHz, log-uniform; +-eq_db; Q 0.7-3) and a
    first-order spectral tilt of -6..+6 dB per octave-ish (a pre-emphasis or de-emphasis), as another
    speaker's vocal tract or another microphone's response would. Level is restored to the input's peak."""
    n = int(rng.integers(2, 5))
    sos = np.stack([_peaking(float(np.exp(rng.uniform(np.log(150), np.log(6000)))),
                             float(rng.uniform(-eq_db, eq_db)), float(rng.uniform(0.7, 3.0)))
                    for _ in range(n)])  # fmt: skip
    y = sosfilt(sos, w)
    k = rng.uniform(-0.7, 0.7)  # y[t] - k y[t-1]: k > 0 brightens, k < 0 darkens
    y = np.r_[y[:1], y[1:] - k * y[:-1]]
    pk_in, pk_out = np.abs(w).max(initial=0.0), np.abs(y).max(initial=0.0)
    return y * (pk_in / pk_out) if pk_out > 0 else y


def coloured_noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise, the one generator of both synthetic keyword sets: white, pink (1/f power), brown
    (1/f^2), blue (f), mains hum with harmonics 1-5 at random levels ("hum", keywords12), or the plain hum
    of the `keywords` set ("hum_plain": harmonics 1, 2, 3, 5 at 1/h and a louder hiss; kept as it was so
    that set renders the same clips)."""
    if kind in ("hum", "hum_plain"):
        t = np.arange(n) / SR
        f0 = float(rng.choice([50.0, 60.0]))
        if kind == "hum":
            x = sum(rng.uniform(0.2, 1.0) * np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 2 * np.pi)) / h
                    for h in (1, 2, 3, 4, 5))  # fmt: skip
            x = x + 0.05 * rng.standard_normal(n)
        else:
            x = sum(np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 2 * np.pi)) / h for h in (1, 2, 3, 5))
            x = x + 0.1 * rng.standard_normal(n)
    else:
        if kind not in ("white", "pink", "brown", "blue"):
            raise ValueError(f"unknown noise kind '{kind}'")
        white = rng.standard_normal(n)
        if kind == "white":
            x = white
        else:
            spec = np.fft.rfft(white)
            f = np.fft.rfftfreq(n, 1.0 / SR)
            f[0] = f[1]
            tilt = {"pink": -0.5, "brown": -1.0, "blue": 0.5}[kind]
            x = np.fft.irfft(spec * f**tilt, n)
    x = np.asarray(x, np.float64)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


# Backgrounds of everyday places, the kinds Speech Commands' own noise recordings hold (dishes, a running tap,
# an exercise bike, a cat and a television) but no generator above makes; not in NOISE_KINDS (the sets'
# renderings stay as they are): tools/kw12_noise_probe.py asks how a model hears them.
ENV_KINDS = ("clatter", "water", "machine", "animal")


def _band(x: np.ndarray, lo: float, hi: float, order: int = 2) -> np.ndarray:
    return sosfilt(butter(order, [lo, min(hi, 0.45 * SR)], btype="band", fs=SR, output="sos"), x)


def environmental_noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS background of one ENV_KINDS kind:

    - clatter (dishes, cutlery): 2-15 impacts a second at random times, each a ringing band of noise
      (1-7 kHz, 10-80 ms decay) at levels spread over 20 dB, over a faint room noise;
    - water (a running tap): pink-to-white noise in 300 Hz-6 kHz whose level bubbles (an envelope of
      low-passed noise at 5-40 Hz);
    - machine (an exercise bike, a fan): a 0.6-2.5 Hz cycle: a whirr (band noise, its level following the
      cycle), a click per cycle, a low drone (20-80 Hz and its harmonics);
    - animal (a cat, a bird): 1-3 harmonic calls of 0.2-0.8 s, f0 rising and falling within 300-1200 Hz,
      over faint noise (a voice that is no word).
    """
    t = np.arange(n) / SR
    if kind == "clatter":
        x = 0.03 * coloured_noise("pink", n, rng)
        for _ in range(max(1, int(rng.poisson(rng.uniform(2, 15) * n / SR)))):
            d = int(rng.uniform(0.01, 0.08) * SR)
            f0 = rng.uniform(1000, 7000)
            hit = _band(rng.standard_normal(4 * d), 0.7 * f0, 1.3 * f0) * np.exp(-np.arange(4 * d) / d)
            s = int(rng.integers(0, n))
            e = min(n, s + len(hit))
            x[s:e] += 10 ** (rng.uniform(-20, 0) / 20) * hit[: e - s] / (np.abs(hit).max() + 1e-12)
    elif kind == "water":
        tilt = rng.uniform(0.0, 0.5)
        base = rng.uniform(0, 1) * coloured_noise("pink", n, rng) + (1 - tilt) * rng.standard_normal(n)
        x = _band(base, 300, 6000)
        rate = rng.uniform(5, 40)
        env = sosfiltfilt(butter(2, rate, fs=SR, output="sos"), rng.standard_normal(n))
        x = x * np.clip(1.0 + 1.5 * env / (np.abs(env).max() + 1e-12), 0.1, None)
    elif kind == "machine":
        rate, ph = rng.uniform(0.6, 2.5), rng.uniform(0, 2 * np.pi)
        cyc = 0.5 + 0.5 * np.sin(2 * np.pi * rate * t + ph)
        lo = rng.uniform(200, 1500)
        x = _band(rng.standard_normal(n), lo, lo * rng.uniform(2, 5)) * (0.3 + cyc)
        f0 = rng.uniform(20, 80)
        x += rng.uniform(0.2, 1.0) * sum(np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 6.3)) / h
                                         for h in (1, 2, 3, 4))  # fmt: skip
        click = _band(rng.standard_normal(int(0.01 * SR)), 2000, 6000)
        for c in np.arange((ph / (2 * np.pi)) / rate, n / SR, 1 / rate):
            s = int(c * SR)
            e = min(n, s + len(click))
            x[s:e] += rng.uniform(0.5, 2.0) * click[: e - s] / (np.abs(click).max() + 1e-12)
    elif kind == "animal":
        x = 0.02 * coloured_noise("pink", n, rng)
        for _ in range(int(rng.integers(1, 4))):
            d = int(rng.uniform(0.2, 0.8) * SR)
            s = int(rng.integers(0, max(1, n - d)))
            u = np.linspace(0, 1, d)
            lo, hi = sorted(rng.uniform(300, 1200, 2))
            f = lo + (hi - lo) * np.sin(np.pi * u) ** rng.uniform(0.5, 2)  # up, then down
            phase = 2 * np.pi * np.cumsum(f) / SR
            call = sum(rng.uniform(0.2, 1.0) / h * np.sin(h * phase) for h in range(1, 7))
            call = call * np.sin(np.pi * u) ** 0.5
            e = min(n, s + d)
            x[s:e] += call[: e - s] / (np.abs(call).max() + 1e-12)
    else:
        raise ValueError(f"unknown environmental noise kind '{kind}' (known: {', '.join(ENV_KINDS)})")
    x = np.asarray(x, np.float64)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


def babble(pool: list[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS babble: 3 to 7 utterances from `pool` at random positions and levels, summed."""
    x = np.zeros(n)
    if not pool:
        return coloured_noise("pink", n, rng)
    for _ in range(int(rng.integers(3, 8))):
        u = pool[int(rng.integers(len(pool)))]
        u = u[:n] / (np.sqrt(np.mean(u[:n] ** 2)) + 1e-12)
        s = int(rng.integers(-len(u) // 2, n))
        a, b = max(s, 0), min(s + len(u), n)
        if b > a:
            x[a:b] += rng.uniform(0.3, 1.0) * u[a - s : b - s]
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


def noise_of(kind: str, n: int, rng: np.random.Generator, pool: list[np.ndarray]) -> np.ndarray:
    if kind in ENV_KINDS:
        return environmental_noise(kind, n, rng)
    return babble(pool, n, rng) if kind == "babble" else coloured_noise(kind, n, rng)


def room_impulse(rng: np.random.Generator, rt60: float,
                 tail_db: tuple[float, float] = (-12.0, 0.0)) -> np.ndarray:  # fmt: skip
    """A synthetic room response: the direct path, a few early reflections (3-30 ms) and an exponentially
    decaying noise tail with time constant from `rt60` (-60 dB at rt60 seconds), low-passed a little."""
    n = int(min(rt60, 1.2) * SR)
    t = np.arange(n) / SR
    tail = rng.standard_normal(n) * np.exp(-6.9078 * t / rt60)
    h = tail * 10 ** (rng.uniform(*tail_db) / 20.0) / (np.sqrt(np.sum(tail**2)) + 1e-12)
    h[0] = 1.0
    for _ in range(int(rng.integers(2, 7))):
        k = int(rng.uniform(0.003, 0.03) * SR)
        if k < n:
            h[k] += rng.uniform(-0.7, 0.7)
    sos = butter(2, rng.uniform(3500, 7900), "low", fs=SR, output="sos")
    return sosfiltfilt(sos, h)


def band_limit(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A cheap microphone / telephone channel: high-pass 60-400 Hz and low-pass 2.8-7.5 kHz."""
    lo, hi = rng.uniform(60, 400), rng.uniform(2800, 7500)
    sos = butter(int(rng.integers(2, 5)), [lo, hi], "band", fs=SR, output="sos")
    return sosfiltfilt(sos, x)


def speed(w: np.ndarray, factor: float) -> np.ndarray:
    """Speed perturbation by resampling: pitch and formants x factor, duration / factor."""
    if abs(factor - 1.0) < 1e-3:
        return w
    up = 100
    down = int(round(100 * factor))
    return resample_poly(w, up, down)


def trim(w: np.ndarray, thr: float = 0.02) -> np.ndarray:
    a = np.abs(w)
    if not a.size or a.max() <= 0:
        return w
    idx = np.nonzero(a > thr * a.max())[0]
    return w[max(idx[0] - 80, 0) : idx[-1] + 80]


def place(w: np.ndarray, rng: np.random.Generator, peak_db: tuple[float, float]) -> np.ndarray:
    """The word at a random position of 1 s, scaled to a random peak level."""
    w = w[:N]
    pk = np.abs(w).max() if w.size else 0.0
    if pk > 0:
        w = w * (10 ** (rng.uniform(*peak_db) / 20.0) / pk)
    clip = np.zeros(N)
    s = int(rng.integers(0, N - w.size + 1))
    clip[s : s + w.size] = w
    return clip


def active_rms(clip: np.ndarray) -> float:
    """The RMS of a word's active samples (those above 2 % of its peak): the level an SNR is measured to."""
    active = np.abs(clip) > 0.02 * (np.abs(clip).max() + 1e-12)
    return float(np.sqrt(np.mean(clip[active] ** 2))) if active.any() else 0.0


def mic(word: np.ndarray, prof: MicProfile, rng: np.random.Generator, pool: list[np.ndarray]) -> np.ndarray:
    """A clean word (float, 16 kHz) through the profile: a 1 s float clip."""
    w = trim(speed(word, rng.uniform(*prof.speed)))
    if prof.p_eq and rng.random() < prof.p_eq:
        w = timbre(w, rng, prof.eq_db)
    clip = place(w, rng, prof.peak_db)
    level = np.abs(clip).max()
    if rng.random() < prof.p_reverb:
        clip = fftconvolve(clip, room_impulse(rng, rng.uniform(*prof.rt60), prof.tail_db))[:N]
        clip *= level / (np.abs(clip).max() + 1e-12)
    if rng.random() < prof.p_band:
        clip = band_limit(clip, rng)
    if rng.random() < prof.p_noise:
        sig = active_rms(clip)
        kind = _everyday(rng, prof, str(rng.choice(NOISE_KINDS, p=[0.2, 0.25, 0.15, 0.1, 0.1, 0.2])))
        clip = clip + noise_of(kind, N, rng, pool) * sig * 10 ** (-rng.uniform(*prof.snr_db) / 20.0)
    if rng.random() < prof.p_clip:
        c = np.abs(clip).max() * rng.uniform(0.3, 0.8)
        clip = np.clip(clip, -c, c)
    return clip


def _everyday(rng: np.random.Generator, prof: MicProfile, kind: str) -> str:
    """`kind`, or with probability prof.env_share one of ENV_KINDS instead (no draw when env_share is 0, so
    the profiles without it render what they always did)."""
    if prof.env_share and rng.random() < prof.env_share:
        return str(rng.choice(ENV_KINDS))
    return kind


def silence(rng: np.random.Generator, pool: list[np.ndarray], prof: MicProfile,
            kinds: tuple[str, ...] = NOISE_KINDS) -> np.ndarray:  # fmt: skip
    """A `_silence_` clip: background alone (a noise colour, hum, babble or a mix; `kinds` may add ENV_KINDS,
    and so may the profile's env_share; sometimes filtered or reverberated) at a level from a
    near-digital-silence -80 dBFS to a loud -12 dBFS RMS."""
    k = int(rng.integers(1, 3))
    x = sum(rng.uniform(0.3, 1.0) * noise_of(_everyday(rng, prof, str(rng.choice(kinds))), N, rng, pool)
            for _ in range(k))  # fmt: skip
    if rng.random() < 0.3:
        x = x * (1.0 + 0.8 * np.sin(2 * np.pi * rng.uniform(0.2, 3.0) * np.arange(N) / SR))  # swelling
    if rng.random() < prof.p_band:
        x = band_limit(x, rng)
    if rng.random() < 0.2:
        x = fftconvolve(x, room_impulse(rng, rng.uniform(0.2, 0.8)))[:N]
    x = np.asarray(x, np.float64)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12) * 10 ** (rng.uniform(-80.0, -12.0) / 20.0)


def spec_augment(x: np.ndarray, rng: np.random.Generator, time_masks: int = 2, max_t: int = 8,
                 freq_masks: int = 1, max_f: int = 2) -> np.ndarray:  # fmt: skip
    """SpecAugment on MFCC batches (N, frames, coefs, 1): `time_masks` runs of up to `max_t` frames and
    `freq_masks` runs of up to `max_f` coefficients set to the example's mean of that coefficient."""
    x = np.array(x, np.float32, copy=True)
    n, t, f = x.shape[:3]
    mean = x.mean(axis=1, keepdims=True)  # per example and coefficient
    for i in range(n):
        for _ in range(time_masks):
            w = int(rng.integers(0, max_t + 1))
            s = int(rng.integers(0, t - w + 1))
            x[i, s : s + w] = mean[i, 0]
        for _ in range(freq_masks):
            w = int(rng.integers(0, max_f + 1))
            s = int(rng.integers(1, f - w + 1)) if f > w else 0  # coefficient 0 (energy) is left alone
            x[i, :, s : s + w] = mean[i, :, s : s + w]
    return x


WARP_RANGE = (0.85, 1.15)  # envelope warp factors: about the spread of adult vocal-tract lengths
_WARP_GRID = 61


def envelope_warp_matrix(alpha: float) -> np.ndarray:
    """(10, 10) float64 M with mfcc @ M = the MFCCs of the same frames with their spectral envelope warped in
    frequency by `alpha` (vocal-tract length perturbation on the cepstrum): the 10 coefficients -> the smooth
    40-band log-mel envelope they describe (the DCT's pseudo-inverse) -> each band reads the envelope at its
    centre frequency / alpha (linear interpolation on the mel axis, held at the edges; alpha > 1 moves
    formants up) -> DCT. Linear, so it commutes with cepstral mean normalization."""
    d = audio.dct_matrix()  # (40, 10), d.T @ d = diag(2, 1, ..., 1)
    pinv = np.linalg.pinv(d)  # (10, 40)
    lo, hi = audio._hz_to_mel(audio.F_LOW), audio._hz_to_mel(audio.F_HIGH)
    centres = np.linspace(lo, hi, audio.N_MEL + 2)[1:-1]  # band centres, mel
    hz = 700.0 * np.expm1(centres / 1127.0)
    src = (audio._hz_to_mel(hz / float(alpha)) - centres[0]) / (centres[1] - centres[0])  # fractional band
    src = np.clip(src, 0.0, audio.N_MEL - 1.0)
    j0 = np.minimum(np.floor(src).astype(int), audio.N_MEL - 2)
    t = src - j0
    w = np.zeros((audio.N_MEL, audio.N_MEL))  # w[source band, target band]
    w[j0, np.arange(audio.N_MEL)] += 1.0 - t
    w[j0 + 1, np.arange(audio.N_MEL)] += t
    return pinv @ w @ d


def _warp_grid() -> tuple[np.ndarray, np.ndarray]:
    alphas = np.linspace(*WARP_RANGE, _WARP_GRID)
    return alphas, np.stack([envelope_warp_matrix(a) for a in alphas]).astype(np.float32)


_GRID: tuple[np.ndarray, np.ndarray] | None = None


def envelope_warp(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """MFCC batches (N, frames, 10, 1): every example's spectral envelope warped by its own factor drawn
    uniformly from WARP_RANGE (on a grid of 61 values), i.e. a speaker with a shorter or longer vocal tract
    saying the same thing at the same pitch and tempo (speed perturbation changes all three together)."""
    global _GRID
    if _GRID is None:
        _GRID = _warp_grid()
    x = np.asarray(x, np.float32)
    if x.ndim != 4 or x.shape[2] != audio.N_MFCC:
        raise ValueError(f"envelope warp takes MFCC batches (N, frames, {audio.N_MFCC}, 1), got {x.shape}")
    m = _GRID[1][rng.integers(0, _WARP_GRID, x.shape[0])]  # (N, 10, 10)
    return np.einsum("ntc,ncd->ntd", x[..., 0], m)[..., None].astype(np.float32)
