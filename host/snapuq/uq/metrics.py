"""Uncertainty metrics. Every score follows one convention: higher U = "more likely wrong / shifted".

- `auroc(score, positive)`: area under the ROC curve, ties counted as 1/2 (Mann-Whitney).
- `aupr(score, positive)`: average precision, AP = sum_n (R_n - R_{n-1}) P_n over distinct thresholds.
- `risk_coverage(u, correct)`: selective risk when keeping the k lowest-U samples, k = 1..N, with tied
  U values resolved by their expected order (so the curve does not depend on the input order).
- `aurc(u, correct)`: mean of that risk curve; `risk_at_coverage(u, correct, c)`.
- `ece(conf, correct, n_bins=15)`: expected calibration error of a confidence in [0, 1].
- CID stream monitoring: `sliding_mean` (trailing window), `event_threshold` (mu_ID - 3 sigma_ID of the
  windowed clean accuracy, as QUTE marks events), `mark_events`, `detection_delays`.

Errors are the positive class for the correct-vs-wrong metrics; OOD (shifted) inputs are the positive class
for ID-vs-OOD. A metric that is undefined (a single class present) returns NaN, which metrics.json writes
as null.
"""

from __future__ import annotations

import math

import numpy as np

from snapuq.errors import SnapuqError


def _as_1d(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise SnapuqError(f"{name} contains NaN or inf")
    return a


def _check_pair(score, labels) -> tuple[np.ndarray, np.ndarray]:
    s = _as_1d(score, "score")
    y = np.asarray(labels).reshape(-1).astype(bool)
    if s.shape != y.shape:
        raise SnapuqError(f"score and labels differ in length ({s.size} vs {y.size})")
    return s, y


def auroc(score, positive) -> float:
    """P(score of a random positive > score of a random negative) + 1/2 P(tie)."""
    s, y = _check_pair(score, positive)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(s)
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def _average_ranks(s: np.ndarray) -> np.ndarray:
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(s.size, dtype=np.float64)
    ss = s[order]
    # group boundaries of equal values
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    ends = np.r_[starts[1:], ss.size]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + 1 + b) / 2.0  # mean of ranks a+1..b
    return ranks


def roc_curve(score, positive) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) at every distinct threshold, from (0, 0) to (1, 1)."""
    s, y = _check_pair(score, positive)
    order = np.argsort(-s, kind="mergesort")
    ss, yy = s[order], y[order]
    last = np.r_[ss[1:] != ss[:-1], True]
    tp = np.cumsum(yy)[last]
    fp = np.cumsum(~yy)[last]
    n_pos, n_neg = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    return np.r_[0.0, fp / n_neg], np.r_[0.0, tp / n_pos]


def aupr(score, positive) -> float:
    """Average precision with the positives as the retrieved class (ties form one threshold)."""
    s, y = _check_pair(score, positive)
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        return float("nan")
    order = np.argsort(-s, kind="mergesort")
    ss, yy = s[order], y[order]
    last = np.r_[ss[1:] != ss[:-1], True]
    tp = np.cumsum(yy)[last].astype(np.float64)
    k = (np.flatnonzero(last) + 1).astype(np.float64)
    precision = tp / k
    recall = tp / n_pos
    dr = np.diff(np.r_[0.0, recall])
    return float(np.sum(dr * precision))


def risk_coverage(u, correct) -> tuple[np.ndarray, np.ndarray]:
    """(coverage k/N, risk of the k lowest-U samples) for k = 1..N; ties in U use the expected error count."""
    s, ok = _check_pair(u, correct)
    n = s.size
    if n == 0:
        raise SnapuqError("risk_coverage of an empty set")
    err = (~ok).astype(np.float64)
    order = np.argsort(s, kind="mergesort")
    ss, ee = s[order], err[order]
    cum = np.empty(n, dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    ends = np.r_[starts[1:], n]
    before = 0.0
    for a, b in zip(starts, ends):
        g = ee[a:b].sum()
        cum[a:b] = before + g * np.arange(1, b - a + 1) / (b - a)
        before += g
    k = np.arange(1, n + 1, dtype=np.float64)
    return k / n, cum / k


def aurc(u, correct) -> float:
    """Area under the risk-coverage curve (mean selective risk over k = 1..N); lower is better."""
    _, risk = risk_coverage(u, correct)
    return float(risk.mean())


def risk_at_coverage(u, correct, coverage: float) -> float:
    """Selective risk when the ceil(coverage*N) lowest-U samples are kept."""
    if not 0.0 < coverage <= 1.0:
        raise SnapuqError(f"coverage must be in (0, 1], got {coverage}")
    cov, risk = risk_coverage(u, correct)
    k = max(1, math.ceil(coverage * cov.size - 1e-9))
    return float(risk[k - 1])


def ece(conf, correct, n_bins: int = 15) -> float:
    """sum_b |B_b|/N |acc(B_b) - conf(B_b)| over equal-width bins (i/B, (i+1)/B], the first closed at 0."""
    c, ok = _check_pair(conf, correct)
    if c.size == 0:
        raise SnapuqError("ece of an empty set")
    if np.any(c < -1e-9) or np.any(c > 1 + 1e-9):
        raise SnapuqError("ece needs confidences in [0, 1]")
    c = np.clip(c, 0.0, 1.0)
    b = np.clip(np.ceil(c * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    total = 0.0
    for i in range(n_bins):
        m = b == i
        if m.any():
            total += m.sum() / c.size * abs(ok[m].mean() - c[m].mean())
    return float(total)


# --------------------------------------------------------------------------- CID stream monitoring


def sliding_mean(x, window: int) -> np.ndarray:
    """Trailing-window mean; element t averages x[t-window+1 .. t]. Only full windows: length N-window+1."""
    a = _as_1d(x, "x")
    if window < 1 or window > a.size:
        raise SnapuqError(f"window {window} does not fit a stream of {a.size} frames")
    c = np.r_[0.0, np.cumsum(a)]
    return (c[window:] - c[:-window]) / window


def event_threshold(clean_correct, window: int = 100) -> tuple[float, float, float]:
    """(mu_ID, sigma_ID, threshold) of the windowed accuracy on a clean ID stream; threshold =
    mu_ID - 3 sigma_ID, and at most mu_ID - 1/window (so that a classifier that never errs on the clean
    stream, sigma_ID = 0, needs at least one more error per window for an event)."""
    acc = sliding_mean(np.asarray(clean_correct, dtype=np.float64), window)
    mu, sd = float(acc.mean()), float(acc.std())
    return mu, sd, min(mu - 3.0 * sd, mu - 1.0 / window)


def mark_events(correct, threshold: float, window: int = 100) -> np.ndarray:
    """Per-frame event flags (length N): windowed accuracy ending at frame t <= threshold.
    The first window-1 frames (no full window yet) are never events."""
    acc = sliding_mean(np.asarray(correct, dtype=np.float64), window)
    ev = np.zeros(len(np.asarray(correct).reshape(-1)), dtype=bool)
    ev[window - 1 :] = acc <= threshold
    return ev


def windowed_alarm(u, window: int = 100) -> np.ndarray:
    """Per-frame alarm score: trailing mean of U over the same window as the events, padded at the start
    with the running mean so that every frame has a score."""
    a = _as_1d(u, "u")
    c = np.cumsum(a)
    out = np.empty_like(a)
    w = min(window, a.size)
    out[:w] = c[:w] / np.arange(1, w + 1)
    if a.size > w:
        out[w:] = (c[w:] - c[:-w]) / w
    return out


def event_runs(events) -> list[tuple[int, int]]:
    """Contiguous runs of True as (start, end_exclusive)."""
    e = np.asarray(events, dtype=bool).reshape(-1).astype(np.int8)
    d = np.diff(np.r_[0, e, 0])
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def detection_delays(alarm, events, tau: float, segments: list[tuple[int, int]]) -> list[float]:
    """One delay per shifted segment [a, b) that contains an event onset: frames from the first event frame
    in the segment to the first alarm (alarm > tau) raised since the segment began. An alarm before the
    onset (the detector saw the shift before the accuracy dropped) counts as 0; no alarm in the segment
    counts as b - onset (a miss is never cheaper than a late alarm). Events outside shifted segments
    (chance dips on clean data) get no delay."""
    a = _as_1d(alarm, "alarm")
    ev = np.asarray(events, dtype=bool).reshape(-1)
    if ev.size != a.size:
        raise SnapuqError(f"alarm and events differ in length ({a.size} vs {ev.size})")
    fire = a > tau
    out: list[float] = []
    for a0, b0 in segments:
        onsets = np.flatnonzero(ev[a0:b0])
        if not onsets.size:
            continue
        onset = a0 + int(onsets[0])
        hits = np.flatnonzero(fire[a0:b0])
        out.append(float(max(0, a0 + int(hits[0]) - onset)) if hits.size else float(b0 - onset))
    return out
