"""CID stream monitoring (QUTE's protocol). A stream alternates clean segments with corrupted ones (one
corruption family per segment, frames drawn from the test split with replacement). Events are the frames
where the base classifier's trailing-window accuracy (window 100) falls to mu_ID - 3 sigma_ID or below,
mu/sigma measured on a clean stream drawn from the dev split. A method's per-frame alarm score is the
trailing-window mean of its U; we report the AUPRC of that score against the event flags (frames with a
full window) and the detection delay in frames (metrics.detection_delays), with the alarm threshold
tau = mean + 3 sd of the same alarm score on the clean dev stream.

The false-alarm rate on clean segments of one stream rests on one draw of a few thousand highly correlated
windows and one tau: `resampled_clean_false_alarm` averages the same rate over many independent draws of
the clean dev stream (tau) and of the clean test segments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.uq import metrics as M

WINDOW = 100


@dataclass
class Stream:
    """Frames of a CID stream. `src` indexes the clean pool (test split) for clean frames and the corrupted
    frame array for shifted frames (`shifted` tells which). `segments` lists every segment as
    (start, end_exclusive, corruption or "clean")."""

    src: np.ndarray
    shifted: np.ndarray
    y: np.ndarray
    segments: list[tuple[int, int, str]] = field(default_factory=list)
    x_corrupt: np.ndarray | None = None
    window: int = WINDOW

    def __len__(self) -> int:
        return int(self.src.size)

    @property
    def shifted_segments(self) -> list[tuple[int, int]]:
        return [(a, b) for a, b, n in self.segments if n != "clean"]

    def gather(self, clean_values: np.ndarray, corrupt_values: np.ndarray) -> np.ndarray:
        """Per-frame values from per-input values of the clean pool and of the corrupted frames."""
        cv = np.asarray(clean_values)
        out = np.empty((len(self),) + cv.shape[1:], dtype=cv.dtype)
        out[~self.shifted] = cv[self.src[~self.shifted]]
        if self.shifted.any():
            out[self.shifted] = np.asarray(corrupt_values)[self.src[self.shifted]]
        return out


def build_stream(
    x_pool: np.ndarray,
    y_pool: np.ndarray,
    corruptions: list[str],
    corrupt: Callable[[np.ndarray, np.ndarray, str, int, int], np.ndarray],
    severity: int = 3,
    seg_len: int = 300,
    clean_len: int = 300,
    seed: int = 0,
    window: int = WINDOW,
) -> Stream:
    """clean, c_1, clean, c_2, ..., c_K, clean; every segment draws its frames from the pool with
    replacement; `corrupt(x, idx, name, severity, seed)` corrupts the batch x = x_pool[idx] (deterministic by
    seed; idx lets a corruption work from the pool's raw source, e.g. the waves behind audio features)."""
    if clean_len < window:
        raise SnapuqError(f"clean segments ({clean_len}) must be at least one window ({window}) long")
    if seg_len < 1 or len(x_pool) == 0:
        raise SnapuqError("empty stream")
    rng = np.random.default_rng(seed)
    src, shifted, y, segs, xs = [], [], [], [], []
    t, n_corr = 0, 0

    def clean():
        nonlocal t
        idx = rng.integers(0, len(x_pool), clean_len)
        src.append(idx)
        shifted.append(np.zeros(clean_len, bool))
        y.append(np.asarray(y_pool)[idx])
        segs.append((t, t + clean_len, "clean"))
        t += clean_len

    clean()
    for k, name in enumerate(corruptions):
        idx = rng.integers(0, len(x_pool), seg_len)
        xc = np.asarray(corrupt(np.asarray(x_pool)[idx], idx, name, severity, seed * 7919 + k), np.float32)
        if xc.shape != (seg_len,) + tuple(np.asarray(x_pool).shape[1:]):
            raise SnapuqError(f"corruption '{name}' changed the input shape to {xc.shape}")
        xs.append(xc)
        src.append(np.arange(n_corr, n_corr + seg_len))
        shifted.append(np.ones(seg_len, bool))
        y.append(np.asarray(y_pool)[idx])
        segs.append((t, t + seg_len, name))
        t += seg_len
        n_corr += seg_len
        clean()
    x_corrupt = np.concatenate(xs) if xs else np.zeros((0,) + tuple(np.asarray(x_pool).shape[1:]), np.float32)
    return Stream(
        src=np.concatenate(src),
        shifted=np.concatenate(shifted),
        y=np.concatenate(y),
        segments=segs,
        x_corrupt=x_corrupt,
        window=window,
    )


def clean_stream_indices(n_pool: int, length: int, seed: int = 0) -> np.ndarray:
    """Frame indices of a clean calibration stream drawn with replacement from a pool of n_pool inputs."""
    if n_pool < 1:
        raise SnapuqError("empty calibration pool")
    return np.random.default_rng(seed + 1).integers(0, n_pool, length)


@dataclass
class EventSpec:
    mu: float
    sigma: float
    threshold: float
    events: np.ndarray  # per frame of the stream


def stream_events(correct_frames: np.ndarray, clean_correct: np.ndarray, window: int = WINDOW) -> EventSpec:
    """Events of a stream from the per-frame correctness of the base classifier, thresholded at
    mu - 3 sigma of the windowed accuracy on the clean calibration stream."""
    mu, sd, thr = M.event_threshold(clean_correct, window)
    return EventSpec(mu, sd, thr, M.mark_events(correct_frames, thr, window))


def monitor(u_frames: np.ndarray, u_clean: np.ndarray, spec: EventSpec, stream: Stream) -> dict:
    """cid_auprc and cid_delay of one method: alarm = trailing mean of U; tau from the clean stream."""
    w = stream.window
    alarm = M.windowed_alarm(u_frames, w)
    clean_alarm = M.sliding_mean(u_clean, w)
    tau = float(clean_alarm.mean() + 3.0 * clean_alarm.std())
    valid = slice(w - 1, None)
    auprc = M.aupr(alarm[valid], spec.events[valid])
    delays = M.detection_delays(alarm, spec.events, tau, stream.shifted_segments)
    fired = alarm[valid] > tau
    quiet = ~spec.events[valid]
    # frames of the clean segments whose whole trailing window is clean: every alarm there is false
    clean = np.zeros(len(alarm), bool)
    for a, b, name in stream.segments:
        if name == "clean":
            clean[a + w - 1 : b] = True
    return {
        "clean_false_alarm_rate": float(np.mean(alarm[clean] > tau)) if clean.any() else float("nan"),
        "cid_auprc": auprc,
        "cid_delay": float(np.mean(delays)) if delays else float("nan"),
        "tau": tau,
        "n_event_segments": len(delays),
        "delays": delays,
        "false_alarm_rate": float(np.mean(fired[quiet])) if quiet.any() else 0.0,
        "alarm": alarm,
    }


def resampled_clean_false_alarm(
    u_test: np.ndarray,
    u_dev: np.ndarray,
    *,
    n_segments: int,
    seg_len: int,
    dev_len: int,
    window: int = WINDOW,
    draws: int = 20,
    seed: int = 0,
) -> float:
    """Mean over `draws` of the clean-segment false-alarm rate of `monitor`: per draw a clean dev stream of
    dev_len frames (tau = mean + 3 sd of its window means) and n_segments clean test segments of seg_len
    frames, both drawn with replacement; the rate is the fraction of full-window frames above tau."""
    u_test = np.asarray(u_test, np.float64)
    u_dev = np.asarray(u_dev, np.float64)
    if len(u_test) == 0 or len(u_dev) == 0 or n_segments < 1 or seg_len < window:
        return float("nan")
    rates = []
    for r in range(draws):
        rng = np.random.default_rng([seed, r, 4099])
        cal = M.sliding_mean(u_dev[rng.integers(0, len(u_dev), dev_len)], window)
        tau = cal.mean() + 3.0 * cal.std()
        segs = u_test[rng.integers(0, len(u_test), (n_segments, seg_len))]
        csum = np.cumsum(np.pad(segs, ((0, 0), (1, 0))), axis=1)
        means = (csum[:, window:] - csum[:, :-window]) / window
        rates.append(float(np.mean(means > tau)))
    return float(np.mean(rates))
