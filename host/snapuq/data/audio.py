"""Audio front end: 1 s of 16 kHz audio -> MFCC features (49, 10, 1), as the MLPerf Tiny KWS benchmark.

Pipeline (numpy only; the same function feeds training, evaluation and the device path):

1. waveform float in [-1, 1], exactly 16000 samples (shorter clips are zero-padded, longer cut);
2. frames of 40 ms (640 samples), hop 20 ms (320 samples), no padding -> 49 frames;
3. periodic Hann window, 1024-point real FFT, magnitude spectrum (513 bins);
4. 40 triangular mel bands (HTK mel scale, 20..4000 Hz, triangles in the mel domain, DC bin zeroed);
5. natural log of (mel energy + 1e-6);
6. DCT-II of the 40 log-mel values, first 10 coefficients, scaled like
   `tf.signal.mfccs_from_log_mel_spectrograms` (sqrt(2/N) for every coefficient; coefficient 0 therefore
   equals sqrt(2) times the orthonormal DCT).

7. optional, per the front-end record (`frontend(cmn=True)`, the `keywords12` set's): cepstral mean
   normalization, each coefficient's mean over the clip's 49 frames subtracted from it (`cepstral_mean_norm`):
   a fixed channel or timbre colour (microphone, room, speaker) is a constant added to every frame's
   cepstrum, and so is the level in coefficient 0. `frontend(cmn="keep-level")` subtracts the means of
   coefficients 1-9 only: the clip's level (coefficient 0) stays an input, so a model can still see (and U
   flag) a gain change that full CMN makes invisible.

The records by name (`FRONTENDS`, what `snapuq train --frontend` takes): "mfcc" (steps 1-6), "cmn" and
"cmn-keep-level".

Steps 1-6 match `tf.signal.stft(frame_length=640, frame_step=320, fft_length=1024)` +
`tf.signal.linear_to_mel_weight_matrix(40, 513, 16000, 20, 4000)` + `mfccs_from_log_mel_spectrograms`
(the MLPerf Tiny KWS reference front end) to float32 rounding; tests check it against TensorFlow and against
closed-form properties.

The firmware receives these features (the model input); on a device the same steps run on the microphone
buffer before inference (e.g. CMSIS-DSP `arm_rfft_fast_f32` + a precomputed 40x513 sparse mel matrix + a 10x40
DCT matrix: ~0.3 M multiply-adds per second of audio). `mel_matrix()` and `dct_matrix()` give those tables.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SAMPLE_RATE = 16000
CLIP_SAMPLES = 16000
FRAME_LENGTH = 640  # 40 ms
FRAME_STEP = 320  # 20 ms
FFT_LENGTH = 1024
N_MEL = 40
N_MFCC = 10
F_LOW = 20.0
F_HIGH = 4000.0
LOG_OFFSET = 1e-6
N_FRAMES = 1 + (CLIP_SAMPLES - FRAME_LENGTH) // FRAME_STEP  # 49
FEATURE_SHAPE = (N_FRAMES, N_MFCC, 1)

FRONTEND = {
    "sample_rate": SAMPLE_RATE,
    "clip_samples": CLIP_SAMPLES,
    "frame_length": FRAME_LENGTH,
    "frame_step": FRAME_STEP,
    "fft_length": FFT_LENGTH,
    "window": "hann (periodic)",
    "n_mel": N_MEL,
    "mel_range_hz": [F_LOW, F_HIGH],
    "log_offset": LOG_OFFSET,
    "n_mfcc": N_MFCC,
    "dct": "DCT-II, scale sqrt(2/n_mel) (tf.signal.mfccs_from_log_mel_spectrograms)",
    "shape": list(FEATURE_SHAPE),
}


CMN = "per clip: each coefficient's mean over the 49 frames subtracted (cepstral mean normalization)"
CMN_KEEP_LEVEL = ("per clip: the mean over the 49 frames subtracted from coefficients 1-9, coefficient 0 "
                  "(the level) kept (cepstral mean normalization, level kept)")  # fmt: skip
CMN_MODES = {True: CMN, "all": CMN, "keep-level": CMN_KEEP_LEVEL}


def frontend(cmn: bool | str = False) -> dict:
    """The front-end record a dataset and its models carry (config.json data_meta.frontend): the MFCC, then
    `cmn` False (nothing), True / "all" (every coefficient's mean removed) or "keep-level" (all but c0's)."""
    if cmn is False:
        return dict(FRONTEND)
    if cmn not in CMN_MODES:
        raise ValueError(f"unknown cepstral mean normalization {cmn!r} (known: False, True, 'all', "
                         "'keep-level')")
    return {**FRONTEND, "cmn": CMN_MODES[cmn]}


FRONTENDS = {"mfcc": frontend(), "cmn": frontend(True), "cmn-keep-level": frontend("keep-level")}


def frontend_name(fe: dict | None) -> str | None:
    """The FRONTENDS name of a recorded front end (None: not one of them)."""
    rec = known_frontend(fe)
    return next((k for k, v in FRONTENDS.items() if v == rec), None)


def known_frontend(fe: dict | None) -> dict | None:
    """`fe` (a recorded front end, JSON-loaded) as the record of this module it equals, None if it equals
    none (another front end: its features cannot be computed here). No record: the plain MFCC."""
    if not fe:
        return frontend()
    for rec in FRONTENDS.values():
        keys = set(rec) | ({"cmn"} if "cmn" in fe else set())
        want = {k: list(v) if isinstance(v, tuple) else v for k, v in rec.items()}
        if {k: fe.get(k) for k in keys} == want:
            return rec
    return None


def cepstral_mean_norm(x: np.ndarray, keep_level: bool = False) -> np.ndarray:
    """MFCC features (..., 49, 10, 1) -> the same with each coefficient's mean over the 49 frames subtracted
    (`keep_level`: all but coefficient 0's) (mean in float64, result float32: the numbers a device computes
    from the same float32 features)."""
    x = np.asarray(x, np.float32)
    if x.ndim < 3 or x.shape[-3:] != FEATURE_SHAPE:
        raise ValueError(f"cepstral mean normalization takes (..., {N_FRAMES}, {N_MFCC}, 1), got {x.shape}")
    mean = x.mean(axis=-3, keepdims=True, dtype=np.float64)
    if keep_level:
        mean[..., 0, :] = 0.0
    return (x - mean).astype(np.float32)


def finish(x: np.ndarray, fe: dict | None) -> np.ndarray:
    """MFCC features through the rest of front end `fe` (its step 7, if it has one)."""
    mode = (fe or {}).get("cmn")
    if not mode:
        return x
    if mode not in (CMN, CMN_KEEP_LEVEL):
        raise ValueError(f"front end: unknown cepstral mean normalization record {str(mode)[:60]!r}")
    return cepstral_mean_norm(x, keep_level=mode == CMN_KEEP_LEVEL)


def features(waves: np.ndarray, fe: dict | None = None) -> np.ndarray:
    """Waves -> the model input of front end `fe` (a `frontend()` record; None: plain MFCC)."""
    return finish(mfcc(waves), fe)


def _hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)


@lru_cache(maxsize=1)
def hann_window() -> np.ndarray:
    n = np.arange(FRAME_LENGTH, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / FRAME_LENGTH)).astype(np.float64)


@lru_cache(maxsize=1)
def mel_matrix() -> np.ndarray:
    """(513, 40) float64 weights: magnitude spectrum bins -> mel bands."""
    n_bins = FFT_LENGTH // 2 + 1
    bin_mel = _hz_to_mel(np.linspace(0.0, SAMPLE_RATE / 2.0, n_bins))[1:]  # DC bin gets no weight
    edges = np.linspace(_hz_to_mel(F_LOW), _hz_to_mel(F_HIGH), N_MEL + 2)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    up = (bin_mel[:, None] - lower[None, :]) / (center - lower)[None, :]
    down = (upper[None, :] - bin_mel[:, None]) / (upper - center)[None, :]
    w = np.maximum(0.0, np.minimum(up, down))
    return np.vstack([np.zeros((1, N_MEL)), w])


@lru_cache(maxsize=1)
def dct_matrix() -> np.ndarray:
    """(40, 10) float64: log-mel -> MFCC (DCT-II, every coefficient scaled by sqrt(2/N))."""
    n = np.arange(N_MEL, dtype=np.float64)
    k = np.arange(N_MFCC, dtype=np.float64)
    return np.cos(np.pi * (2.0 * n[:, None] + 1.0) * k[None, :] / (2.0 * N_MEL)) * np.sqrt(2.0 / N_MEL)


def fit_length(wave: np.ndarray, n: int = CLIP_SAMPLES) -> np.ndarray:
    """Zero-pad or cut the last axis to exactly n samples."""
    wave = np.asarray(wave)
    if wave.shape[-1] >= n:
        return wave[..., :n]
    pad = [(0, 0)] * (wave.ndim - 1) + [(0, n - wave.shape[-1])]
    return np.pad(wave, pad)


def _as_float(wave: np.ndarray) -> np.ndarray:
    wave = np.asarray(wave)
    if wave.dtype == np.int16:
        return wave.astype(np.float64) / 32768.0
    if not np.issubdtype(wave.dtype, np.floating):
        raise ValueError(f"waveform dtype must be int16 or float, got {wave.dtype}")
    return wave.astype(np.float64)


def log_mel(waves: np.ndarray) -> np.ndarray:
    """(..., 16000) int16 or float waves -> (..., 49, 40) log-mel energies (float64)."""
    x = fit_length(_as_float(waves))
    idx = np.arange(N_FRAMES)[:, None] * FRAME_STEP + np.arange(FRAME_LENGTH)[None, :]
    frames = x[..., idx] * hann_window()
    mag = np.abs(np.fft.rfft(frames, n=FFT_LENGTH, axis=-1))
    return np.log(mag @ mel_matrix() + LOG_OFFSET)


def as_batch(waves: np.ndarray, error: type[Exception] = ValueError) -> tuple[np.ndarray, bool]:
    """One clip (samples,) or a batch (N, samples) -> (the batch (N, samples), whether it was one clip)."""
    w = np.asarray(waves)
    single = w.ndim == 1
    if single:
        w = w[None]
    if w.ndim != 2:
        raise error(f"waves must be (samples,) or (N, samples), got shape {w.shape}")
    return w, single


def mfcc(waves: np.ndarray, batch: int = 64) -> np.ndarray:
    """Waves (16000,) or (N, 16000), int16 (full scale 32768) or float in [-1, 1] -> float32 MFCC features
    (49, 10, 1) or (N, 49, 10, 1)."""
    w, single = as_batch(waves)
    out = np.empty((w.shape[0], N_FRAMES, N_MFCC, 1), dtype=np.float32)
    d = dct_matrix()
    with _one_blas_thread():  # small matrix products: threads only add contention on a shared machine
        for i in range(0, w.shape[0], batch):
            out[i : i + batch, :, :, 0] = (log_mel(w[i : i + batch]) @ d).astype(np.float32)
    return out[0] if single else out


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(1, user_api="blas")


def to_int16(wave: np.ndarray) -> np.ndarray:
    """Float wave in [-1, 1] -> int16 with saturation (the format of a 16-bit wav file)."""
    return np.clip(np.round(np.asarray(wave, dtype=np.float64) * 32768.0), -32768, 32767).astype(np.int16)
