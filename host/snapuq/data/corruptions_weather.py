"""Image corruptions (snapuq.data.corruptions): weather (snow, frost, fog, spatter)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from snapuq.data._image_ops import (
    _GREY_CV,
    _clipped_zoom,
    _gauss,
    _grey_of,
    _hysteresis,
    _motion_blur_image,
    _plasma,
    _pow2,
    _px,
)

# frost: per photograph of the reference (frost1.png, frost2.png, frost3.png, frost4.jpg, frost5.jpg, the
# reference draws np.random.randint(5)), (RGB mean, crop-to-crop sd of the RGB mean, within-crop RGB sd) of
# 32x32 crops of the photograph resized by 0.2, measured by us
FROST_PROFILES = [
    ((0.305, 0.582, 0.647), (0.067, 0.037, 0.030), (0.084, 0.052, 0.049)),
    ((0.777, 0.795, 0.831), (0.032, 0.035, 0.036), (0.070, 0.071, 0.073)),
    ((0.777, 0.795, 0.831), (0.032, 0.035, 0.036), (0.070, 0.071, 0.073)),
    ((0.562, 0.619, 0.669), (0.040, 0.040, 0.043), (0.101, 0.101, 0.105)),
    ((0.402, 0.446, 0.492), (0.064, 0.062, 0.058), (0.138, 0.136, 0.133)),
]


# ---- weather -----------------------------------------------------------------------------------------


def snow(x, p, rng, ctx):
    """Snow layer N(loc, scale) per pixel, zoomed, thresholded, uint8, motion-blurred (angle U(-135, -45));
    image = w x + (1 - w) max(x, 1.5 grey(x) + 0.5); out = image + layer + layer rotated by 180 degrees."""
    loc, sc, zm, thr, rad, sig, wt = p
    n, h, w, c = x.shape
    grey = x if c != 3 else np.tensordot(x, _GREY_CV, axes=([-1], [0]))[..., None]
    out = np.empty_like(x)
    ang = rng.uniform(-135, -45, size=n)
    for i in range(n):
        layer = rng.standard_normal((h, w, 1)) * sc + loc
        layer = _clipped_zoom(layer, float(zm))
        layer[layer < thr] = 0
        layer = np.floor(np.clip(layer, 0, 1) * 255) / 255
        layer = np.round(_motion_blur_image(layer, _px(rad, ctx), _px(sig, ctx), ang[i]) * 255) / 255
        img = wt * x[i] + (1 - wt) * np.maximum(x[i], grey[i] * 1.5 + 0.5)
        out[i] = img + layer + layer[::-1, ::-1]
    return out


def _frost_layer(h, w, rng, ctx):
    mean, across, within = (np.array(v) for v in FROST_PROFILES[int(rng.integers(5))])
    sig = 6.4 * ctx.f
    white = rng.standard_normal((h, w))
    smooth = _gauss(rng.standard_normal((h, w)), sig, mode="wrap") if sig > 0 else white
    smooth = (smooth - smooth.mean()) / (smooth.std() + 1e-12)
    t = np.sqrt(0.45) * white + np.sqrt(0.55) * smooth
    t = (t - t.mean()) / (t.std() + 1e-12)
    return np.clip(mean + across * rng.standard_normal() + within * t[..., None], 0, 1)


def frost(x, p, rng, ctx):
    """clip(a x + b frost): the frost layer procedural (module docstring, FROST_PROFILES)."""
    n, h, w, c = x.shape
    out = np.empty_like(x)
    for i in range(n):
        out[i] = p[0] * x[i] + p[1] * _grey_of(_frost_layer(h, w, rng, ctx), c)
    return out


def fog(x, p, rng, ctx):
    """x + c plasma, rescaled by max(x) / (max(x) + c). The plasma map is 32 x 32 (CIFAR-10-C) or
    256 x 256 (MNIST-C), cropped to the image; other sizes take the power of two nearest the map size
    times f (at least the image size)."""
    n, h, w, c = x.shape
    ref_map = 256 if ctx.which == "mnist_c" else 32
    size = max(_pow2(ref_map * ctx.f), _pow2(max(h, w)))
    while size < max(h, w):
        size *= 2
    out = np.empty_like(x)
    for i in range(n):
        mx = x[i].max()
        y = x[i] + p[0] * _plasma(size, p[1], rng)[:h, :w, None]
        out[i] = y * mx / (mx + p[0])
    return out


def _canny_cv(img_u8, low: float, high: float) -> np.ndarray:
    """OpenCV Canny on a uint8 image: 3x3 Sobel (replicated border), L1 magnitude, non-maximum suppression
    over 4 direction sectors, hysteresis (8-connected) at low / high."""
    a = img_u8.astype(np.float64)
    gx = ndimage.sobel(a, axis=1, mode="nearest")
    gy = ndimage.sobel(a, axis=0, mode="nearest")
    mag = np.abs(gx) + np.abs(gy)
    m = np.pad(mag, 1)
    h, w = mag.shape

    def nb(dy, dx):
        return m[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]
    ax, ay = np.abs(gx), np.abs(gy)
    t22 = ax * np.tan(np.pi / 8)
    t67 = ax * np.tan(3 * np.pi / 8)
    horiz = ay < t22
    vert = ~horiz & (ay > t67)
    diag = ~horiz & ~vert
    s = np.where((gx * gy) < 0, -1, 1)
    keep = np.zeros_like(mag, bool)
    keep |= horiz & (mag > nb(0, -1)) & (mag >= nb(0, 1))
    keep |= vert & (mag > nb(-1, 0)) & (mag >= nb(1, 0))
    d_pos = (mag > nb(-1, -1)) & (mag > nb(1, 1))
    d_neg = (mag > nb(-1, 1)) & (mag > nb(1, -1))
    keep |= diag & np.where(s > 0, d_pos, d_neg)
    cand = keep & (mag > low)
    strong = cand & (mag > high)
    return _hysteresis(cand, strong)


def _equalize_hist(u8: np.ndarray) -> np.ndarray:
    """OpenCV equalizeHist of a uint8 image."""
    v = u8.astype(int).ravel()
    hist = np.bincount(v, minlength=256)
    i0 = int(np.nonzero(hist)[0][0])
    if hist[i0] == v.size:
        return np.full(u8.shape, i0, np.float64)
    scale = 255.0 / (v.size - hist[i0])
    lut = np.zeros(256)
    csum = np.cumsum(hist)
    lut[i0 + 1 :] = np.clip(np.rint((csum[i0 + 1 :] - hist[i0]) * scale), 0, 255)
    return lut[v].reshape(u8.shape)


def _water(liquid: np.ndarray) -> np.ndarray:
    """The reference's water texture (CIFAR-10-C spatter, severities 1-3) from the thresholded liquid."""
    lq8 = np.floor(np.clip(liquid * 255, 0, 255))
    edges = _canny_cv(lq8, 50, 150)
    if edges.any():
        dist = ndimage.distance_transform_edt(~edges)
    else:
        dist = np.full(liquid.shape, 20.0)
    dist = np.minimum(dist, 20.0)
    dist = np.floor(ndimage.uniform_filter(dist, 3, mode="mirror"))
    dist = _equalize_hist(dist.astype(np.uint8))
    ker = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float64)
    dist = np.clip(np.rint(ndimage.correlate(dist, ker, mode="mirror")), 0, 255)
    dist = np.rint(ndimage.uniform_filter(dist, 3, mode="mirror"))
    m = liquid * dist
    mx = m.max()
    return m / mx if mx > 0 else np.zeros_like(m)


def spatter(x, p, rng, ctx):
    """Liquid layer N(loc, scale), blurred (sigma) and thresholded. Mud (MNIST-C always; CIFAR-10-C
    severities 4-5): mask = blur(layer > threshold, sigma_mask) where >= 0.8, image replaced by the mud
    colour there (RGB 63, 42, 20; MNIST-C grey 63). Water (CIFAR-10-C 1-3): x + intensity * texture *
    pale turquoise (RGB 175, 238, 238)."""
    loc, sc, sig, thr, s2, mud = p
    n, h, w, c = x.shape
    mud = 1 if ctx.which == "mnist_c" else int(mud)
    out = np.empty_like(x)
    for i in range(n):
        liquid = _gauss(rng.standard_normal((h, w)) * sc + loc, _px(sig, ctx))
        liquid[liquid < thr] = 0
        if mud:
            m = _gauss((liquid > thr).astype(np.float64), _px(s2, ctx))
            m[m < 0.8] = 0
            mud_rgb = np.array([63, 63, 63] if ctx.which == "mnist_c" else [63, 42, 20]) / 255
            colour = _grey_of(mud_rgb, c)
            out[i] = x[i] * (1 - m[..., None]) + colour * m[..., None]
        else:
            m = _water(liquid) * s2
            out[i] = x[i] + m[..., None] * _grey_of(np.array([175, 238, 238]) / 255, c)
    return out
