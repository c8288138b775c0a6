"""Image corruptions (snapuq.data.corruptions): MNIST-C's geometry and drawings."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from snapuq.data._image_ops import _GREY_SK, _affine_warp, _box_resize, _gauss, _hysteresis, _px, _sign

# ---- MNIST-C geometry and drawings ---------------------------------------------------------------------


def shear(x, p, rng, ctx):
    """skimage AffineTransform(shear=+-s) as the inverse map, centre fixed."""
    sg = _sign(rng, len(x)) * p[0]
    return _affine_warp(x, [np.array([[1.0, -np.sin(s)], [0.0, np.cos(s)]]) for s in sg])


def rotate(x, p, rng, ctx):
    """skimage AffineTransform(rotation=+-r) as the inverse map, centre fixed."""
    ang = _sign(rng, len(x)) * p[0]
    return _affine_warp(x, [np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) for a in ang])


def scale(x, p, rng, ctx):
    """skimage AffineTransform(scale=(sx, sy)) as the inverse map, centre fixed (sx > 1 shrinks)."""
    return _affine_warp(x, np.diag([float(p[0]), float(p[1])]))


def translate(x, p, rng, ctx):
    """skimage AffineTransform(translation=(+-t, +-t)) as the inverse map: the content moves by (-dx, -dy)."""
    t = _px(p[0], ctx)
    d = [np.array([a, b]) * t for a, b in zip(_sign(rng, len(x)), _sign(rng, len(x)))]
    return _affine_warp(x, np.eye(2), centre_fixed=False, shift=d)


def stripe(x, p, rng, ctx):
    """1 - x on the k left-most and k right-most columns (k of 28, scaled to the width)."""
    w = x.shape[2]
    k = min(max(1, int(round(p[0] * w / 28))), w // 2)
    y = x.copy()
    y[:, :, :k] = 1 - y[:, :, :k]
    y[:, :, w - k :] = 1 - y[:, :, w - k :]
    return y


def _line(c0, r0, c1, r1, width=2.3, n=28):
    """The reference's line_from_points on the n x n grid: intensity log(1 - d / width) + 1 (clipped to
    [0, 1]) of the vertical distance d to the line through the points, zero outside columns
    floor(c0) .. ceil(c1) - 1."""
    if c1 == c0:
        return np.zeros((n, n))
    cc = np.arange(n, dtype=np.float64)[None, :]
    rr = np.arange(n, dtype=np.float64)[:, None]
    slope = (r1 - r0) / (c1 - c0)
    dist = np.clip(np.abs(rr - (slope * (cc - c0) + r0)), 0, width - 1e-10)
    out = np.clip(np.log(1 - dist / width) + 1, 0, 1)
    out[:, : int(np.floor(c0))] = 0
    out[:, int(np.ceil(c1)) :] = 0
    return out


def _add_mask(x, masks):
    """x + the 28x28 masks (summed, clipped), box-resized to the image size when it is not 28x28."""
    n, h, w, c = x.shape
    y = x.copy()
    for i, m in enumerate(masks):
        if (h, w) != (28, 28):
            m = _box_resize(m, h, w)
        y[i] = np.clip(y[i] + m[..., None], 0, 1)
    return y


def dotted_line(x, p, rng, ctx):
    """A line from (0, r0) to (27, r1), r0, r1 uniform in 0..26, of profile width `width`, with every other
    pair of columns blanked (columns 0-1, 4-5, ...); `lines` such lines."""
    lines, width = int(p[0]), float(p[1])
    dash = (np.arange(28) // 2) % 2 == 0  # blanked column pairs
    masks = []
    for _ in range(len(x)):
        rs = rng.integers(0, 27, size=(3, 2))  # drawn for 3 lines at every severity: severities nest
        m = np.zeros((28, 28))
        for r0, r1 in rs[:lines]:
            ln = _line(0, r0, 27, r1, width)
            ln[:, dash] = 0
            m += ln
        masks.append(m)
    return _add_mask(x, masks)


def _zigzag_points(r0, r1, a=2.0, b=2.0, c0=2.0, c1=25.0):
    """The reference's zigzag vertices: teeth of length a and height b along the segment (c0, r0) ->
    (c1, r1), including its odd last vertex (d, r_last / (2 (d - max_c)))."""
    theta = np.arctan((r1 - r0) / (c1 - c0))
    d = (c1 - c0) / np.cos(theta)
    pts = [(0.0, 0.0)]
    r_i = 0.0
    for i in range(int((d - a) // (2 * a)) + 1):
        r_i = (-1) ** i * b
        pts.append(((2 * i + 1) * a, r_i))
    max_c = (2 * a) * (d // (2 * a))
    if d != max_c:
        pts.append((d, r_i / (2 * (d - max_c))))
    pc, pr = np.array(pts).T
    cs = np.cos(theta) * pc - np.sin(theta) * pr + c0
    rs = np.sin(theta) * pc + np.cos(theta) * pr + r0
    return cs, rs


def zigzag(x, p, rng, ctx):
    """A zigzag from column 2 to 25 starting at row r0 (0..26), ending at r0 + (-5..4); `lines` of them."""
    lines, width = int(p[0]), float(p[1])
    masks = []
    for _ in range(len(x)):
        r0s, drs = rng.integers(0, 27, size=3), rng.integers(-5, 5, size=3)
        m = np.zeros((28, 28))
        for r0, dr in list(zip(r0s, drs))[:lines]:
            cs, rs = _zigzag_points(float(r0), float(r0 + dr))
            for k in range(1, len(cs)):
                m += _line(cs[k - 1], rs[k - 1], cs[k], rs[k], width)
        masks.append(m)
    return _add_mask(x, masks)


def _canny_sk(img, sigma=1.0, low=0.1, high=0.2) -> np.ndarray:
    """scikit-image feature.canny of a float image with its defaults."""
    mask = np.ones(img.shape, bool)
    if sigma > 0:
        bleed = _gauss(mask.astype(np.float64), sigma, mode="constant")
        sm = _gauss(img, sigma, mode="constant") / (bleed + np.finfo(float).eps)
    else:
        sm = img.astype(np.float64)
    gi, gj = ndimage.sobel(sm, axis=0), ndimage.sobel(sm, axis=1)
    mag = np.hypot(gi, gj)
    inner = ndimage.binary_erosion(mask, np.ones((3, 3), bool), border_value=0) & (mag > 0)
    h, w = img.shape
    m = np.pad(mag, 1)

    def at(dr, dc):
        rr = np.arange(h)[:, None] + 1 + dr
        cc = np.arange(w)[None, :] + 1 + dc
        return m[rr, cc]

    ai, aj = np.abs(gi), np.abs(gj)
    si, sj = np.sign(gi).astype(int), np.sign(gj).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        rows_major = ai >= aj
        wgt = np.where(rows_major, aj / np.where(ai == 0, 1, ai), ai / np.where(aj == 0, 1, aj))
    # neighbours along the gradient: the axis neighbour and the diagonal one, interpolated by wgt
    ax_r, ax_c = np.where(rows_major, si, 0), np.where(rows_major, 0, sj)
    plus = (1 - wgt) * at(ax_r, ax_c) + wgt * at(si, sj)
    minus = (1 - wgt) * at(-ax_r, -ax_c) + wgt * at(-si, -sj)
    local_max = inner & (plus <= mag) & (minus <= mag)
    low_m = local_max & (mag >= low)
    high_m = local_max & (mag >= high)
    return _hysteresis(low_m, high_m).astype(np.float64)


def canny_edges(x, p, rng, ctx):
    """The Canny edge map (skimage defaults, sigma scaled by f) of the image (grey value for colour),
    weighted w against the image (w = 1: the edge map alone, the reference)."""
    n, h, w, c = x.shape
    if c == 3:
        g = np.tensordot(x, _GREY_SK, axes=([-1], [0]))
    else:
        g = x.mean(-1)
    e = np.stack([_canny_sk(img, sigma=_px(1.0, ctx)) for img in g])[..., None]
    return (1 - p[0]) * x + p[0] * e
