"""Sensor-C: 7 corruptions x 5 severities for 1-D sensor windows (accelerometer, vibration, ECG, ...).

`corrupt_sensor(x, name, severity, seed)` takes float windows (N, T, C) (or feature vectors (N, F), treated
as (N, F, 1)) in the model's units and returns float32 of the same shape, deterministic for a seed. Every
amplitude is relative to the clean window's per-channel standard deviation (sd), so the set works for any
units and normalisation. The random draws do not depend on the severity, so the severities of one seed nest
(the distortion, measured as the mean squared change, grows with the severity; tested).

  gaussian_noise  additive white noise, 0.1, 0.2, 0.35, 0.5, 0.8 sd                     noise level
  spikes          impulses of +-(3..8) sd on 0.5, 1, 2, 4, 8 % of the samples             hit fraction, size
  drift           offset + linear drift, 0.2, 0.4, 0.7, 1.0, 1.5 sd (per channel sign)   offset and slope
  gain            per-channel gain exp(+-0.15, 0.3, 0.5, 0.8, 1.2) (sign per channel)     log gain
  dropout         one segment of 5, 10, 20, 30, 45 % of the window reads 0               zeroed fraction
  time_warp       smooth monotone warp t -> t + a T sin(pi t / T) / pi, a = 0.1 .. 0.7    warp strength
  axis_swap       channel pairs (0,1), (2,3), ... rotated by 15, 30, 50, 70, 90 degrees   mounting angle
                  (90 degrees swaps the axes, one sign flipped); one channel: mixed with
                  its time reversal by the same angle
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from snapuq.errors import DatasetError

SEVERITIES: dict[str, list[float]] = {
    "gaussian_noise": [0.1, 0.2, 0.35, 0.5, 0.8],
    "spikes": [0.005, 0.01, 0.02, 0.04, 0.08],
    "drift": [0.2, 0.4, 0.7, 1.0, 1.5],
    "gain": [0.15, 0.3, 0.5, 0.8, 1.2],
    "dropout": [0.05, 0.10, 0.20, 0.30, 0.45],
    "time_warp": [0.1, 0.2, 0.35, 0.5, 0.7],
    "axis_swap": [15.0, 30.0, 50.0, 70.0, 90.0],
}
SPIKE_SIZE = [3.0, 4.0, 5.0, 6.0, 8.0]
N_SEVERITIES = 5


def sensor_corruption_names() -> list[str]:
    return list(SEVERITIES)


def _sd(x: np.ndarray) -> np.ndarray:
    """Per-window, per-channel standard deviation (N, 1, C); a flat channel counts as 1."""
    s = x.std(axis=1, keepdims=True)
    return np.where(s > 1e-8, s, 1.0)


def gaussian_noise(x, s, rng):
    return x + rng.normal(size=x.shape) * SEVERITIES["gaussian_noise"][s - 1] * _sd(x)


def spikes(x, s, rng):
    u = rng.uniform(size=x.shape)
    sign = np.where(rng.uniform(size=x.shape) < 0.5, -1.0, 1.0)
    hit = u < SEVERITIES["spikes"][s - 1]
    return x + hit * sign * SPIKE_SIZE[s - 1] * _sd(x)


def drift(x, s, rng):
    n, t, c = x.shape
    sign_o = np.where(rng.uniform(size=(n, 1, c)) < 0.5, -1.0, 1.0)
    sign_d = np.where(rng.uniform(size=(n, 1, c)) < 0.5, -1.0, 1.0)
    ramp = np.linspace(0.0, 1.0, t)[None, :, None]
    a = SEVERITIES["drift"][s - 1]
    return x + a * _sd(x) * (sign_o + sign_d * ramp)


def gain(x, s, rng):
    n, _, c = x.shape
    sign = np.where(rng.uniform(size=(n, 1, c)) < 0.5, -1.0, 1.0)
    return x * np.exp(sign * SEVERITIES["gain"][s - 1])


def dropout(x, s, rng):
    n, t, _ = x.shape
    centre = rng.uniform(size=n)  # the segment grows around a fixed centre (nested severities)
    w = max(1, int(round(SEVERITIES["dropout"][s - 1] * t)))
    y = x.copy()
    for i in range(n):
        a = int(round(centre[i] * (t - w)))
        y[i, a : a + w] = 0.0
    return y


def time_warp(x, s, rng):
    n, t, c = x.shape
    a = SEVERITIES["time_warp"][s - 1]
    sign = np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)
    grid = np.arange(t, dtype=np.float64)
    y = np.empty_like(x)
    for i in range(n):
        # derivative 1 + sign a cos(...) > 0 for a < 1: a monotone resampling of the window
        src = grid + sign[i] * a * (t - 1) * np.sin(np.pi * grid / (t - 1)) / np.pi if t > 1 else grid
        for ch in range(c):
            y[i, :, ch] = np.interp(src, grid, x[i, :, ch])
    return y


def axis_swap(x, s, rng):
    del rng  # deterministic: the mounting angle is the severity
    th = np.deg2rad(SEVERITIES["axis_swap"][s - 1])
    co, si = np.cos(th), np.sin(th)
    y = x.copy()
    c = x.shape[2]
    if c == 1:
        return co * x + si * x[:, ::-1]
    for a in range(0, c - 1, 2):
        u, v = x[:, :, a], x[:, :, a + 1]
        y[:, :, a] = co * u - si * v
        y[:, :, a + 1] = si * u + co * v
    return y


CORRUPTIONS: dict[str, Callable] = {name: globals()[name] for name in SEVERITIES}


def corrupt_sensor(x: np.ndarray, name: str, severity: int = 3, seed: int = 0) -> np.ndarray:
    """Corrupt windows (N, T, C) or vectors (N, F); float32, same shape."""
    if name not in CORRUPTIONS:
        raise DatasetError(f"unknown sensor corruption '{name}' (known: {', '.join(SEVERITIES)})")
    if not 1 <= int(severity) <= N_SEVERITIES:
        raise DatasetError(f"corruption severity must be 1..{N_SEVERITIES}, got {severity}")
    x = np.asarray(x)
    if x.ndim not in (2, 3) or x.shape[0] == 0:
        raise DatasetError(
            f"corrupt_sensor() expects windows (N, T, C) or vectors (N, F), got shape {x.shape}"
        )
    shape = x.shape
    x3 = x.astype(np.float64).reshape(shape[0], shape[1], -1)
    rng = np.random.default_rng([int(seed), list(SEVERITIES).index(name), 7])
    return CORRUPTIONS[name](x3, int(severity), rng).reshape(shape).astype(np.float32)
