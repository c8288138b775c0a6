"""Corruptions in the spirit of MNIST-C (15) and CIFAR-10-C (19 x 5 severities), numpy/scipy only.

`corrupt(x, name, severity, seed)` takes float32 NHWC images in [0, 1] (any size, 8x8 digits included)
and returns the same shape and dtype, clipped to [0, 1], deterministic for a seed. Severity 1..5; every
corruption's distortion grows with severity (tested as the mean squared change from the clean image).
These are re-implementations from the corruption descriptions, scaled to each image size, not copies of
the original generators; frost and snow use procedural textures instead of the original photographs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage

from snapuq.errors import DatasetError

MNIST_C = [
    "shot_noise", "impulse_noise", "glass_blur", "motion_blur", "shear", "scale", "rotate", "brightness",
    "translate", "stripe", "fog", "spatter", "dotted_line", "zigzag", "canny_edges",
]  # fmt: skip
CIFAR10_C = [
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
]  # fmt: skip


def _sev(values, severity: int):
    return values[int(severity) - 1]


def _per_image(x, fn):
    return np.stack([fn(img) for img in x])


def _size(x) -> float:
    return float(min(x.shape[1], x.shape[2]))


def gaussian_noise(x, s, rng):
    return x + rng.normal(size=x.shape) * _sev([0.08, 0.12, 0.18, 0.26, 0.38], s)


def shot_noise(x, s, rng):
    lam = _sev([60, 25, 12, 5, 3], s)
    return rng.poisson(np.clip(x, 0, 1) * lam) / lam


def impulse_noise(x, s, rng):
    p = _sev([0.03, 0.06, 0.09, 0.17, 0.27], s)
    m = rng.uniform(size=x.shape)
    y = x.copy()
    y[m < p / 2] = 0.0
    y[(m >= p / 2) & (m < p)] = 1.0
    return y


def speckle_noise(x, s, rng):
    return x + x * rng.normal(size=x.shape) * _sev([0.15, 0.25, 0.35, 0.5, 0.7], s)


def gaussian_blur(x, s, rng):
    sig = _sev([0.4, 0.6, 0.8, 1.0, 1.3], s) * max(_size(x) / 16, 0.75)
    return ndimage.gaussian_filter(x, sigma=(0, sig, sig, 0))


def defocus_blur(x, s, rng):
    r = _sev([0.6, 0.9, 1.2, 1.6, 2.0], s) * max(_size(x) / 16, 1.0)
    k = int(np.ceil(r)) + 1
    yy, xx = np.mgrid[-k : k + 1, -k : k + 1]
    disk = np.clip(r + 0.5 - np.hypot(xx, yy), 0.0, 1.0)  # anti-aliased disk: grows continuously with r
    disk /= disk.sum()
    return ndimage.convolve(x, disk[None, :, :, None], mode="reflect")


def motion_blur(x, s, rng):
    n = int(round(_sev([1.5, 2.0, 2.8, 3.6, 4.5], s) * _size(x) / 10)) + 1
    out = []
    for img in x:
        ang = rng.uniform(0, np.pi)
        k = np.zeros((2 * n + 1, 2 * n + 1))
        for t in np.linspace(0, n, 2 * n + 1):
            k[int(round(n + t * np.sin(ang))), int(round(n + t * np.cos(ang)))] = 1.0
        k /= k.sum()
        out.append(ndimage.convolve(img, k[:, :, None], mode="nearest"))
    return np.stack(out)


def glass_blur(x, s, rng):
    """Blur, then swap a growing fraction of pixels with a random neighbour, then blur again."""
    sig = _sev([0.3, 0.4, 0.5, 0.6, 0.7], s)
    frac = _sev([0.2, 0.35, 0.5, 0.7, 0.9], s)
    d = max(1, int(round(_size(x) / 28)))
    y = ndimage.gaussian_filter(x, sigma=(0, sig, sig, 0))
    n, h, w, _ = x.shape
    for i in range(n):
        for _it in range(2):
            dy = rng.integers(-d, d + 1, size=(h, w))
            dx = rng.integers(-d, d + 1, size=(h, w))
            move = rng.uniform(size=(h, w)) < frac
            yy = np.clip(np.arange(h)[:, None] + dy * move, 0, h - 1)
            xx = np.clip(np.arange(w)[None, :] + dx * move, 0, w - 1)
            y[i] = y[i][yy, xx]
    return ndimage.gaussian_filter(y, sigma=(0, sig, sig, 0))


def zoom_blur(x, s, rng):
    zs = np.arange(1.0, _sev([1.06, 1.11, 1.16, 1.21, 1.26], s) + 1e-9, 0.02)
    acc = x.astype(np.float64).copy()
    for z in zs[1:]:
        acc += _zoom_center(x, z)
    return acc / len(zs)


def _zoom_center(x, z):
    n, h, w, c = x.shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cy, cx = (h - 1) / 2, (w - 1) / 2
    coords = [(yy - cy) / z + cy, (xx - cx) / z + cx]
    out = np.empty_like(x)
    for i, img in enumerate(x):
        for ch in range(c):
            out[i, :, :, ch] = ndimage.map_coordinates(img[:, :, ch], coords, order=1, mode="nearest")
    return out


def _affine(x, mat_fn, rng, fill=0.0):
    n, h, w, c = x.shape
    cy, cx = (h - 1) / 2, (w - 1) / 2
    out = np.empty_like(x)
    for i in range(n):
        m, off = mat_fn(rng)
        center = np.array([cy, cx])
        offset = center - m @ center + off
        for ch in range(c):
            out[i, :, :, ch] = ndimage.affine_transform(x[i, :, :, ch], m, offset=offset, order=1, cval=fill)
    return out


def rotate(x, s, rng):
    deg = _sev([12, 22, 32, 45, 60], s)

    def f(r):
        a = np.deg2rad(deg) * rng.choice([-1, 1])
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]), np.zeros(2)

    return _affine(x, f, rng)


def shear(x, s, rng):
    k = _sev([0.15, 0.25, 0.35, 0.5, 0.65], s)

    def f(r):
        return np.array([[1.0, k * rng.choice([-1, 1])], [0.0, 1.0]]), np.zeros(2)

    return _affine(x, f, rng)


def scale(x, s, rng):
    z = _sev([0.85, 0.75, 0.65, 0.55, 0.45], s)
    return _affine(x, lambda r: (np.eye(2) / z, np.zeros(2)), rng)


def translate(x, s, rng):
    t = _sev([0.1, 0.15, 0.2, 0.27, 0.35], s) * _size(x)

    def f(r):
        ang = rng.uniform(0, 2 * np.pi)
        return np.eye(2), np.array([t * np.sin(ang), t * np.cos(ang)])

    return _affine(x, f, rng)


def elastic_transform(x, s, rng):
    alpha, sig = _sev([(0.6, 0.5), (0.9, 0.5), (1.2, 0.45), (1.5, 0.4), (1.8, 0.35)], s)
    n, h, w, c = x.shape
    alpha = alpha * _size(x) / 8
    sig = sig * _size(x) / 4
    out = np.empty_like(x)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    for i in range(n):
        dy = ndimage.gaussian_filter(rng.uniform(-1, 1, (h, w)), sig) * alpha
        dx = ndimage.gaussian_filter(rng.uniform(-1, 1, (h, w)), sig) * alpha
        for ch in range(c):
            out[i, :, :, ch] = ndimage.map_coordinates(
                x[i, :, :, ch], [yy + dy, xx + dx], order=1, mode="reflect"
            )
    return out


def brightness(x, s, rng):
    return x + _sev([0.1, 0.2, 0.3, 0.4, 0.5], s)


def contrast(x, s, rng):
    c = _sev([0.6, 0.45, 0.3, 0.2, 0.12], s)
    m = x.mean(axis=(1, 2, 3), keepdims=True)
    return (x - m) * c + m


def saturate(x, s, rng):
    if x.shape[-1] != 3:  # grey images: saturation acts as a contrast stretch about mid-grey
        return (x - 0.5) * _sev([1.5, 2.0, 3.0, 4.5, 6.0], s) + 0.5
    g = x.mean(axis=-1, keepdims=True)
    return g + (x - g) * _sev([2.0, 3.0, 5.0, 8.0, 12.0], s)


def fog(x, s, rng):
    a = _sev([0.25, 0.4, 0.55, 0.7, 0.85], s)
    n, h, w, c = x.shape
    f = ndimage.gaussian_filter(rng.uniform(0, 1, (n, h, w, 1)), sigma=(0, h / 6, w / 6, 0))
    f = (f - f.min(axis=(1, 2, 3), keepdims=True)) / (np.ptp(f, axis=(1, 2, 3), keepdims=True) + 1e-8)
    return x * (1 - a) + a * (0.5 + 0.5 * f)


def frost(x, s, rng):
    a = _sev([0.25, 0.35, 0.45, 0.55, 0.65], s)
    n, h, w, c = x.shape
    t = rng.uniform(0, 1, (n, h, w, 1)) ** 3
    t = ndimage.gaussian_filter(t, sigma=(0, 0.7, 0.7, 0))
    t = t / (t.max(axis=(1, 2, 3), keepdims=True) + 1e-8)
    return x * (1 - a) + a * np.maximum(x, t)


def snow(x, s, rng):
    p = _sev([0.04, 0.07, 0.1, 0.14, 0.18], s)
    n, h, w, c = x.shape
    flakes = (rng.uniform(size=(n, h, w, 1)) < p).astype(np.float64)
    flakes = np.clip(ndimage.uniform_filter(flakes, size=(1, 2, 1, 1)) * 2, 0, 1)
    return np.maximum(x * (1 - 0.3 * p * 5), flakes)


def spatter(x, s, rng):
    p = _sev([0.05, 0.09, 0.13, 0.18, 0.24], s)
    n, h, w, c = x.shape
    blobs = ndimage.gaussian_filter(rng.uniform(size=(n, h, w, 1)), sigma=(0, 0.8, 0.8, 0))
    thr = np.quantile(blobs, 1 - p, axis=(1, 2, 3), keepdims=True)
    m = blobs > thr
    return np.where(m, 0.35, x)


def pixelate(x, s, rng):
    """Block means over a grid of blocks growing with severity (the last block of a row may be smaller)."""
    n, h, w, c = x.shape
    b = max(2, int(round(_sev([0.1, 0.15, 0.2, 0.3, 0.4], s) * _size(x))))
    a = _sev([0.5, 0.75, 1.0, 1.0, 1.0], s)
    y = x.copy()
    for r in range(0, h, b):
        for cc in range(0, w, b):
            y[:, r : r + b, cc : cc + b] = x[:, r : r + b, cc : cc + b].mean(axis=(1, 2), keepdims=True)
    return (1 - a) * x + a * y


def jpeg_compression(x, s, rng):
    """8x8 (or image-size) block DCT with JPEG-style luminance quantization scaled by quality."""
    from scipy.fft import dctn, idctn

    q = _sev([1.0, 2.0, 3.5, 5.5, 8.0], s)
    base = 1 + np.add.outer(np.arange(8), np.arange(8)) * 1.5  # grows with frequency
    n, h, w, c = x.shape
    b = min(8, h, w)
    Q = base[:b, :b] * q / 255.0 * 4
    y = x.astype(np.float64).copy()
    for r in range(0, h - h % b, b):
        for cc in range(0, w - w % b, b):
            blk = y[:, r : r + b, cc : cc + b, :] - 0.5
            d = dctn(blk, axes=(1, 2), norm="ortho")
            d = np.round(d / Q[None, :, :, None]) * Q[None, :, :, None]
            y[:, r : r + b, cc : cc + b, :] = idctn(d, axes=(1, 2), norm="ortho") + 0.5
    return y


def stripe(x, s, rng):
    """Inverts a growing set of columns (the same random order at every severity)."""
    n, h, w, c = x.shape
    k = max(1, int(round(_sev([0.1, 0.2, 0.3, 0.4, 0.5], s) * w)))
    y = x.copy()
    for i in range(n):
        cols = rng.permutation(w)[:k]
        y[i, :, cols] = 1.0 - y[i, :, cols]
    return y


def _draw_polyline(h, w, pts):
    m = np.zeros((h, w))
    for (y0, x0), (y1, x1) in zip(pts[:-1], pts[1:]):
        k = int(max(abs(y1 - y0), abs(x1 - x0)) * 2) + 2
        for t in np.linspace(0, 1, k):
            yy, xx = int(round(y0 + t * (y1 - y0))), int(round(x0 + t * (x1 - x0)))
            if 0 <= yy < h and 0 <= xx < w:
                m[yy, xx] = 1.0
    return m


def dotted_line(x, s, rng):
    n, h, w, c = x.shape
    k = _sev([1, 1, 2, 2, 3], s)
    keep = _sev([0.5, 0.7, 0.6, 0.8, 0.8], s)
    y = x.copy()
    for i in range(n):
        for _ in range(k):
            m = _draw_polyline(h, w, [(rng.uniform(0, h), 0), (rng.uniform(0, h), w - 1)])
            m *= rng.uniform(size=m.shape) < keep
            y[i] = np.maximum(y[i], m[:, :, None])
    return y


def zigzag(x, s, rng):
    n, h, w, c = x.shape
    k = _sev([1, 1, 2, 2, 3], s)
    segs = _sev([3, 4, 4, 5, 6], s)
    y = x.copy()
    for i in range(n):
        for _ in range(k):
            xs = np.linspace(0, w - 1, segs + 1)
            pts = [(rng.uniform(0, h - 1), xv) for xv in xs]
            y[i] = np.maximum(y[i], _draw_polyline(h, w, pts)[:, :, None])
    return y


def canny_edges(x, s, rng):
    """Gradient-magnitude edge map (Sobel + threshold), blended in with growing weight."""
    a = _sev([0.4, 0.55, 0.7, 0.85, 1.0], s)
    g = x.mean(axis=-1)
    mag = np.hypot(ndimage.sobel(g, axis=1), ndimage.sobel(g, axis=2))
    mag = mag / (mag.max(axis=(1, 2), keepdims=True) + 1e-8)
    e = (mag > 0.3).astype(np.float64)[..., None]
    return (1 - a) * x + a * np.broadcast_to(e, x.shape)


CORRUPTIONS: dict[str, Callable] = {name: globals()[name] for name in sorted(set(MNIST_C) | set(CIFAR10_C))}


def corruption_names(dataset: str = "digits") -> list[str]:
    if dataset in ("digits", "mnist", "fashion_mnist"):
        return list(MNIST_C)
    if dataset == "cifar10":
        return list(CIFAR10_C)
    if dataset in ("keywords", "speech_commands"):
        from snapuq.data import corruptions_audio as A

        fn = getattr(A, "feature_corruption_names", None) or getattr(A, "audio_corruption_names", None)
        if fn is None:
            raise DatasetError("audio corruptions are not available")
        return list(fn())
    raise DatasetError(f"no corruption set for dataset '{dataset}'")


def corrupt(x: np.ndarray, name: str, severity: int = 3, seed: int = 0) -> np.ndarray:
    if name not in CORRUPTIONS:
        raise DatasetError(f"unknown corruption '{name}' (known: {', '.join(sorted(CORRUPTIONS))})")
    if not 1 <= int(severity) <= 5:
        raise DatasetError(f"corruption severity must be 1..5, got {severity}")
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise DatasetError(f"corrupt() expects NHWC images, got shape {x.shape}")
    # the random draws do not depend on the severity, so severities of one seed nest (monotone distortion)
    rng = np.random.default_rng([int(seed), sorted(CORRUPTIONS).index(name)])
    y = CORRUPTIONS[name](x.astype(np.float64), int(severity), rng)
    return np.clip(y, 0.0, 1.0).astype(np.float32)
