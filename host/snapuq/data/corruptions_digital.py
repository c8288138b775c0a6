"""Image corruptions (snapuq.data.corruptions): digital (contrast, colour, JPEG, pixelate, elastic)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage
from scipy.fft import dctn, idctn

from snapuq.data._image_ops import _box_resize, _colour, _gauss, _hsv2rgb, _rgb2hsv

# ---- digital -----------------------------------------------------------------------------------------


def contrast(x, p, rng, ctx):
    """(x - channel mean) c + channel mean."""
    m = x.mean(axis=(1, 2), keepdims=True)
    return (x - m) * p[0] + m


def brightness(x, p, rng, ctx):
    """HSV value + c (clipped to 1)."""

    def f(rgb):
        hsv = _rgb2hsv(rgb)
        hsv[..., 2] = np.clip(hsv[..., 2] + p[0], 0, 1)
        return _hsv2rgb(hsv)

    return _colour(np.clip(x, 0, 1), f)


def saturate(x, p, rng, ctx):
    """HSV saturation * a + b (clipped to [0, 1])."""

    def f(rgb):
        hsv = _rgb2hsv(rgb)
        hsv[..., 1] = np.clip(hsv[..., 1] * p[0] + p[1], 0, 1)
        return _hsv2rgb(hsv)

    return _colour(np.clip(x, 0, 1), f)


_JPEG_LUMA = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]).reshape(8, 8)  # fmt: skip
_JPEG_CHROMA = np.full((8, 8), 99)
_JPEG_CHROMA[:4, :4] = [[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99], [47, 66, 99, 99]]


def jpeg_table(base: np.ndarray, quality: int) -> np.ndarray:
    """The IJG quality scaling of a quantization table (baseline: 1..255)."""
    q = min(max(int(quality), 1), 100)
    s = 5000 // q if q < 50 else 200 - 2 * q
    return np.clip((base.astype(np.int64) * s + 50) // 100, 1, 255)


def _jpeg_plane(plane, table):
    """Level shift, 8x8 DCT, quantize (round half away from zero), dequantize, inverse DCT, round, clip;
    the plane is padded by edge replication to whole blocks and cropped back."""
    h, w = plane.shape
    ph, pw = -h % 8, -w % 8
    a = np.pad(plane, ((0, ph), (0, pw)), mode="edge") - 128.0
    bh, bw = a.shape[0] // 8, a.shape[1] // 8
    blocks = a.reshape(bh, 8, bw, 8).transpose(0, 2, 1, 3)
    coef = dctn(blocks, axes=(2, 3), norm="ortho") / table
    coef = np.sign(coef) * np.floor(np.abs(coef) + 0.5) * table
    rec = idctn(coef, axes=(2, 3), norm="ortho").transpose(0, 2, 1, 3).reshape(a.shape)
    return np.clip(np.floor(rec + 128.5), 0, 255)[:h, :w]


def _fancy_up(c):
    """libjpeg's h2v2 'fancy' (triangular) upsampling of a chroma plane, integer arithmetic."""
    c = c.astype(np.int64)
    up = np.vstack([c[:1], c[:-1]])
    down = np.vstack([c[1:], c[-1:]])
    rows = np.empty((2 * c.shape[0], c.shape[1]), np.int64)
    rows[0::2] = 3 * c + up
    rows[1::2] = 3 * c + down
    left = np.hstack([rows[:, :1], rows[:, :-1]])
    right = np.hstack([rows[:, 1:], rows[:, -1:]])
    out = np.empty((rows.shape[0], 2 * rows.shape[1]), np.int64)
    out[:, 0::2] = (3 * rows + left + 8) >> 4
    out[:, 1::2] = (3 * rows + right + 7) >> 4
    return out.astype(np.float64)


def jpeg_roundtrip(img_u8, quality: int):
    """Baseline JPEG encode + decode of one (H, W, C) image of integer values 0..255 (C = 1: greyscale,
    C = 3: YCbCr 4:2:0), as libjpeg does it with its default settings (module docstring)."""
    h, w, c = img_u8.shape
    lum, chrom = jpeg_table(_JPEG_LUMA, quality), jpeg_table(_JPEG_CHROMA, quality)
    if c != 3:
        return np.stack([_jpeg_plane(img_u8[..., k], lum) for k in range(c)], axis=-1)
    r, g, b = img_u8[..., 0], img_u8[..., 1], img_u8[..., 2]
    y = np.floor(0.299 * r + 0.587 * g + 0.114 * b + 0.5)
    cb = np.floor(-0.168735892 * r - 0.331264108 * g + 0.5 * b + 128 + 0.5 - 2**-16)
    cr = np.floor(0.5 * r - 0.418687589 * g - 0.081312411 * b + 128 + 0.5 - 2**-16)
    y2 = _jpeg_plane(y, lum)
    hh, ww = 16 * -(-h // 16), 16 * -(-w // 16)
    chans = []
    for p in (cb, cr):
        pp = np.pad(p, ((0, hh - h), (0, ww - w)), mode="edge")
        s = pp.reshape(hh // 2, 2, ww // 2, 2).sum(axis=(1, 3))
        bias = np.tile([1, 2], ww // 4)[None, :]
        d = (s + bias) // 4
        d = _jpeg_plane(d, chrom)[: -(-h // 2), : -(-w // 2)]
        chans.append(_fancy_up(d)[:h, :w] - 128.0)
    cb2, cr2 = chans
    rgb = np.stack([y2 + 1.402 * cr2, y2 - 0.344136286 * cb2 - 0.714136286 * cr2, y2 + 1.772 * cb2], -1)
    return np.clip(np.floor(rgb + 0.5), 0, 255)


def jpeg_compression(x, p, rng, ctx):
    """JPEG at quality q of the image rounded to uint8 (our codec, `jpeg_roundtrip`)."""
    u8 = np.rint(np.clip(x, 0, 1) * 255)
    return np.stack([jpeg_roundtrip(img, int(p[0])) for img in u8]) / 255.0


def pixelate(x, p, rng, ctx):
    """PIL BOX resize to (int(H c), int(W c)) and back."""
    n, h, w, c = x.shape
    hs, ws = max(1, int(h * p[0])), max(1, int(w * p[0]))
    return np.stack([_box_resize(_box_resize(img, hs, ws), h, w) for img in x])


def elastic_transform(x, p, rng, ctx):
    """Random affine (the 3 points (cx + s, cy + s), (cx + s, cy - s), (cx - s, cy - s), s = size // 3,
    jittered by U(-j, j); OpenCV warpAffine, bilinear, reflect-101), then the displacement field
    alpha * gaussian(U(-1, 1), sigma, reflect, truncate 3) along each axis (map_coordinates, bilinear,
    reflect); alpha, sigma, j = the table's fractions times the image size."""
    n, h, w, c = x.shape
    size = min(h, w)
    alpha, sigma, jit = (v * size for v in p)
    cx, cy = float(w // 2), float(h // 2)
    s = size // 3
    src = np.array([[cx + s, cy + s], [cx + s, cy - s], [cx - s, cy - s]])
    rr, cc = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.empty_like(x)
    for i in range(n):
        dst = src + rng.uniform(-jit, jit, size=src.shape)
        # forward map A: [x', y'] = A @ [x, y, 1] with A src_k = dst_k; the warp samples A^-1 of the output
        a = np.linalg.solve(np.hstack([src, np.ones((3, 1))]), dst).T
        inv = np.linalg.inv(np.vstack([a, [0, 0, 1]]))
        xs = inv[0, 0] * cc + inv[0, 1] * rr + inv[0, 2]
        ys = inv[1, 0] * cc + inv[1, 1] * rr + inv[1, 2]
        img = np.stack([ndimage.map_coordinates(x[i, :, :, k], [ys, xs], order=1, mode="mirror")
                        for k in range(c)], axis=-1)
        u1, u2 = rng.uniform(-1, 1, size=(h, w)), rng.uniform(-1, 1, size=(h, w))
        dx = _gauss(u1, sigma, mode="reflect", truncate=3) * alpha if sigma > 0 else u1 * alpha
        dy = _gauss(u2, sigma, mode="reflect", truncate=3) * alpha if sigma > 0 else u2 * alpha
        for k in range(c):
            out[i, :, :, k] = ndimage.map_coordinates(img[:, :, k], [rr + dy, cc + dx], order=1,
                                                      mode="reflect")
    return out
