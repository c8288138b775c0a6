"""Image corruptions (snapuq.data.corruptions): noise and blur."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from snapuq.data._image_ops import _clipped_zoom, _gauss, _motion_blur_image, _px

# ---- noise -------------------------------------------------------------------------------------------


def gaussian_noise(x, p, rng, ctx):
    """x + N(0, c^2)."""
    return x + rng.standard_normal(x.shape) * p[0]


def shot_noise(x, p, rng, ctx):
    """Poisson(x c) / c."""
    return rng.poisson(np.clip(x, 0, None) * p[0]) / float(p[0])


def impulse_noise(x, p, rng, ctx):
    """skimage random_noise(mode='s&p', amount=c): each value independently replaced with probability c,
    by 0 or 1 with equal odds."""
    u, salt = rng.uniform(size=x.shape), rng.uniform(size=x.shape) < 0.5
    y = x.copy()
    hit = u < p[0]
    y[hit & salt] = 1.0
    y[hit & ~salt] = 0.0
    return y


def speckle_noise(x, p, rng, ctx):
    """x + x N(0, c^2)."""
    return x + x * rng.standard_normal(x.shape) * p[0]


# ---- blur --------------------------------------------------------------------------------------------


def gaussian_blur(x, p, rng, ctx):
    """skimage gaussian (mode nearest, truncate 4) of sigma c on each channel."""
    s = _px(p[0], ctx)
    return _gauss(x, (0, s, s, 0))


def glass_blur(x, p, rng, ctx):
    """Gaussian blur, uint8 truncation, `iterations` sweeps of local swaps (rows H - d .. d + 1 and columns
    likewise, bottom-right first; each pixel swapped with the one at (dy, dx) drawn from [-d, d - 1]; MNIST-C
    swaps each with probability 1/2, CIFAR-10-C always), Gaussian blur again. MNIST-C blurs along the rows
    axis only (see the module docstring)."""
    sig, d, iters = _px(p[0], ctx), max(1, int(round(p[1] * ctx.f))), int(p[2])
    sigma = (0, sig, 0, 0) if ctx.which == "mnist_c" else (0, sig, sig, 0)
    y = np.floor(np.clip(_gauss(x, sigma), 0, 1) * 255) / 255
    n, h, w, _ = x.shape
    ids = np.arange(n)
    for _ in range(iters):
        for r in range(h - d, d, -1):
            for c in range(w - d, d, -1):
                dy = np.floor(rng.uniform(size=n) * 2 * d).astype(int) - d
                dx = np.floor(rng.uniform(size=n) * 2 * d).astype(int) - d
                sel = ids if ctx.which != "mnist_c" else ids[rng.uniform(size=n) < 0.5]
                if sel.size == 0:
                    continue
                r2, c2 = r + dy[sel], c + dx[sel]
                a = y[sel, r, c].copy()
                y[sel, r, c] = y[sel, r2, c2]
                y[sel, r2, c2] = a
    return _gauss(y, sigma)


def _disk(radius: float, alias_blur: float) -> np.ndarray:
    """The references' defocus kernel: the pixels within `radius` of the centre on a grid of half-size
    max(8, radius), normalized, then a 3x3 (radius <= 8) or 5x5 Gaussian of sd alias_blur (OpenCV
    GaussianBlur, reflect-101 border); cropped to its non-zero support."""
    half = 8 if radius <= 8 else int(np.ceil(radius))
    ks = 3 if radius <= 8 else 5
    yy, xx = np.mgrid[-half : half + 1, -half : half + 1]
    d = ((xx**2 + yy**2) <= radius**2).astype(np.float64)
    d /= d.sum()
    g = np.exp(-((np.arange(ks) - (ks - 1) / 2) ** 2) / (2 * alias_blur**2))
    g /= g.sum()
    d = ndimage.correlate(d, np.outer(g, g), mode="mirror")
    nz = np.argwhere(d > 0)
    e = int(np.abs(nz - half).max()) if len(nz) else 0
    return d[half - e : half + e + 1, half - e : half + e + 1]


def defocus_blur(x, p, rng, ctx):
    """OpenCV filter2D (reflect-101 border) of each channel with the disk kernel (radius, alias_blur)."""
    k = _disk(_px(p[0], ctx), max(_px(p[1], ctx), 1e-6))
    return ndimage.correlate(x, k[None, :, :, None], mode="mirror")


def motion_blur(x, p, rng, ctx):
    """ImageMagick motion blur (radius, sigma) at an angle drawn from U(-45, 45) degrees per image."""
    ang = rng.uniform(-45, 45, size=len(x))
    return np.stack([_motion_blur_image(img, _px(p[0], ctx), _px(p[1], ctx), a) for img, a in zip(x, ang)])


def zoom_blur(x, p, rng, ctx):
    """(x + sum over the zoom factors np.arange(*p) of the centre zoom of x) / (len + 1)."""
    zs = np.arange(*p)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        acc = img.copy()
        for z in zs:
            acc += _clipped_zoom(img, float(z))
        out[i] = acc / (len(zs) + 1)
    return out
