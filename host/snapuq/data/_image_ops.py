"""Shared helpers of the image corruptions (snapuq.data.corruptions): colour spaces, resampling, blurs,
warps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

_GREY_SK = np.array([0.2125, 0.7154, 0.0721])  # skimage rgb2gray
_GREY_CV = np.array([0.299, 0.587, 0.114])  # OpenCV RGB2GRAY / JFIF luma


@dataclass(frozen=True)
class _Ctx:
    which: str  # "mnist_c" or "cifar10_c": whose table and procedure
    f: float  # image size / reference size


# ---- helpers -----------------------------------------------------------------------------------------


def _px(v: float, ctx: _Ctx) -> float:
    return float(v) * ctx.f


def _colour(x, fn):
    """fn on RGB images; a grey image goes grey -> RGB -> fn -> grey (skimage weights); other channel
    counts: each channel as a grey image."""
    c = x.shape[-1]
    if c == 3:
        return fn(x)
    outs = [np.tensordot(fn(np.repeat(x[..., k : k + 1], 3, axis=-1)), _GREY_SK, axes=([-1], [0]))
            for k in range(c)]
    return np.stack(outs, axis=-1)


def _grey_of(colour_rgb, c: int):
    """A colour (..., 3) as the image's channels: itself for RGB, its grey value otherwise."""
    colour_rgb = np.asarray(colour_rgb, np.float64)
    if c == 3:
        return colour_rgb
    return np.repeat(np.tensordot(colour_rgb, _GREY_SK, axes=([-1], [0]))[..., None], c, axis=-1)


def _rgb2hsv(rgb):
    v = rgb.max(-1)
    delta = v - rgb.min(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(delta == 0, 0.0, delta / np.where(v == 0, 1, v))
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        d = np.where(delta == 0, 1, delta)
        h = np.where(r == v, (g - b) / d, 0.0)
        h = np.where(g == v, 2.0 + (b - r) / d, h)  # later cases win ties, as in skimage
        h = np.where(b == v, 4.0 + (r - g) / d, h)
    h = (h / 6.0) % 1.0
    h = np.where(delta == 0, 0.0, h)
    return np.stack([h, s, v], axis=-1)


def _hsv2rgb(hsv):
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    h6 = h * 6.0
    i = np.floor(h6).astype(int) % 6
    f = h6 - np.floor(h6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.empty(hsv.shape, np.float64)
    for ch in range(3):
        out[..., ch] = np.choose(i, [c[ch] for c in choices])
    return out


def _motion_taps(radius: float, sigma: float, angle_deg: float):
    """ImageMagick MotionBlurImage: one-sided Gaussian over 2 ceil(radius) + 1 taps along the angle."""
    width = int(2 * np.ceil(radius) + 1) if radius > 1e-12 else 3
    sig = max(abs(sigma), 1e-12)
    i = np.arange(width, dtype=np.float64)
    k = np.exp(-(i * i) / (2 * sig * sig))
    k /= k.sum()
    a = np.deg2rad(angle_deg)
    ox = np.ceil(i * np.cos(a) - 0.5).astype(int)  # along x (columns)
    oy = np.ceil(i * np.sin(a) - 0.5).astype(int)  # along y (rows)
    return k, ox, oy


def _motion_blur_image(img, radius, sigma, angle_deg):
    """img (H, W, C): out(y, x) = sum_i k_i img(y + oy_i, x + ox_i), edge pixels repeated."""
    h, w = img.shape[:2]
    k, ox, oy = _motion_taps(radius, sigma, angle_deg)
    rows, cols = np.arange(h), np.arange(w)
    out = np.zeros_like(img, dtype=np.float64)
    for ki, dx, dy in zip(k, ox, oy):
        out += ki * img[np.clip(rows + dy, 0, h - 1)][:, np.clip(cols + dx, 0, w - 1)]
    return out


def _box_matrix(n_in: int, n_out: int) -> np.ndarray:
    """PIL's BOX resampling weights (n_out, n_in): a box of the output pixel's footprint (at least one input
    pixel wide) evaluated at the input pixel centres, normalized."""
    scale = n_in / n_out
    fs = max(scale, 1.0)
    support = 0.5 * fs
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        centre = (o + 0.5) * scale
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), n_in)
        t = (np.arange(lo, hi) - centre + 0.5) / fs
        wts = ((t > -0.5) & (t <= 0.5)).astype(np.float64)
        if wts.sum() > 0:
            m[o, lo:hi] = wts / wts.sum()
    return m


def _box_resize(img, h_out: int, w_out: int):
    """img (H, W, ...) resized with PIL's BOX filter (separable)."""
    mh, mw = _box_matrix(img.shape[0], h_out), _box_matrix(img.shape[1], w_out)
    rows = np.tensordot(mh, img, axes=([1], [0]))  # (h_out, W, ...)
    return np.moveaxis(np.tensordot(mw, rows, axes=([1], [1])), 0, 1)


def _plasma(n: int, decay: float, rng) -> np.ndarray:
    """Diamond-square height map on an n x n torus (n a power of two), normalized to [0, 1]: the midpoint
    of every square, then of every diamond, is the mean of its 4 neighbours plus a uniform displacement
    of half-width wibble^2, wibble starting at 100 and divided by `decay` at each halving."""
    a = np.zeros((n, n))
    step, wib = n, 100.0
    while step >= 2:
        half = step // 2
        corners = a[0::step, 0::step]
        down = np.roll(corners, -1, axis=0)
        sq = corners + down + np.roll(corners, -1, axis=1) + np.roll(down, -1, axis=1)
        a[half::step, half::step] = sq / 4 + wib * rng.uniform(-wib, wib, sq.shape)
        centres = a[half::step, half::step]
        # points on the square edges: two corners and two centres each
        top = corners + np.roll(corners, -1, axis=1) + centres + np.roll(centres, 1, axis=0)
        a[0::step, half::step] = top / 4 + wib * rng.uniform(-wib, wib, top.shape)
        left = corners + np.roll(corners, -1, axis=0) + centres + np.roll(centres, 1, axis=1)
        a[half::step, 0::step] = left / 4 + wib * rng.uniform(-wib, wib, left.shape)
        step = half
        wib /= decay
    a -= a.min()
    return a / a.max()


def _pow2(v: float) -> int:
    return int(2 ** max(0, round(np.log2(max(v, 1.0)))))


def _clipped_zoom(img, z: float):
    """img (H, W, ...) zoomed by z about the centre (crop of ceil(H / z), linear zoom, centre trim)."""
    h, w = img.shape[:2]
    ch, cw = int(np.ceil(h / z)), int(np.ceil(w / z))
    t, le = (h - ch) // 2, (w - cw) // 2
    crop = img[t : t + ch, le : le + cw]
    out = ndimage.zoom(crop, (z, z) + (1,) * (img.ndim - 2), order=1)
    tt, tl = (out.shape[0] - h) // 2, (out.shape[1] - w) // 2
    return out[tt : tt + h, tl : tl + w]


def _gauss(a, sigma, mode="nearest", truncate=4.0):
    return ndimage.gaussian_filter(a, sigma=sigma, mode=mode, truncate=truncate)


def _affine_warp(x, mat, centre_fixed=True, shift=(0.0, 0.0)):
    """skimage `warp(x, inverse_map=A)`: output (col, row) samples the input at mat @ (col, row) + t,
    t keeping the image centre fixed (plus `shift`), bilinear, zero outside (neighbours outside = 0)."""
    n, h, w, c = x.shape
    cx, cy = (w - 1) / 2, (h - 1) / 2
    rr, cc = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.empty_like(x)
    for i in range(n):
        m = mat[i] if isinstance(mat, list) else mat
        t = np.array([cx, cy]) - m @ np.array([cx, cy]) if centre_fixed else np.zeros(2)
        t = t + np.asarray(shift[i] if isinstance(shift, list) else shift)
        xs = m[0, 0] * cc + m[0, 1] * rr + t[0]
        ys = m[1, 0] * cc + m[1, 1] * rr + t[1]
        for k in range(c):
            out[i, :, :, k] = ndimage.map_coordinates(x[i, :, :, k], [ys, xs], order=1, mode="grid-constant",
                                                      cval=0.0)
    return out


def _sign(rng, n):
    return rng.choice(np.array([-1.0, 1.0]), size=n)


def _hysteresis(cand, strong):
    """The 8-connected components of `cand` that hold a `strong` pixel."""
    lab, k = ndimage.label(cand, structure=np.ones((3, 3)))
    good = np.zeros(k + 1, bool)
    good[np.unique(lab[strong])] = True
    good[0] = False
    return good[lab]
