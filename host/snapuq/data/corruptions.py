"""MNIST-C (15 corruptions) and CIFAR-10-C (19 corruptions x 5 severities) at their published parameters.

`corrupt(x, name, severity, seed)` takes float32 NHWC images in [0, 1] and returns the same shape and dtype,
clipped to [0, 1], deterministic for a seed. numpy/scipy only: every procedure below is our own
implementation, written from the reference generators' behaviour; no code of theirs is copied.

References (the parameter tables below are their literal numbers):
- MNIST-C: Mu & Gilmer 2019, "MNIST-C: A Robustness Benchmark for Computer Vision",
  github.com/google-research/mnist-c, file `corruptions.py`, one function per corruption
  (`shot_noise`, `impulse_noise`, `glass_blur`, `motion_blur`, `shear`, `scale`, `rotate`, `brightness`,
  `translate`, `stripe`, `fog`, `spatter`, `dotted_line`, `zigzag`, `canny_edges`).
- CIFAR-10-C: Hendrycks & Dietterich 2019, "Benchmarking Neural Network Robustness to Common Corruptions
  and Perturbations", github.com/hendrycks/robustness, file `ImageNet-C/create_c/make_cifar_c.py`, one
  function per corruption (the 15 of the benchmark + speckle_noise, gaussian_blur, spatter, saturate).

Severities. CIFAR-10-C: severity s uses row s of the function's table (all five are published). MNIST-C:
each reference function carries a 5-row table too, but the dataset uses one row per corruption, the
function's default `severity` argument (the generation calls `corruption(image)`); `MNIST_C_SEVERITY`
holds those defaults, so `corrupt(x, name, MNIST_C_SEVERITY[name])` is the published MNIST-C setting and
the other severities are the reference's own other rows. stripe, dotted_line, zigzag and canny_edges have
no table in the reference (one fixed setting): ours puts that setting at severity 3 and adds
extrapolations at 1, 2, 4, 5 (`MNIST_C_EXTRAPOLATED`; below).

Which table: MNIST-C and CIFAR-10-C share seven names with different tables (shot_noise, impulse_noise,
glass_blur, motion_blur, brightness, fog, spatter). `dataset=None` takes MNIST-C's for 1-channel images and
CIFAR-10-C's otherwise (`corruption_names` gives MNIST_C for grey data sets, CIFAR10_C for cifar10).

Image size. The tables are for 28x28 (MNIST-C) and 32x32 (CIFAR-10-C). For another size (8x8 digits,
your images) every length in pixels (blur sigmas and radii, shuffle distances, shifts, motion lengths,
the fog map, the frost texture scale) is multiplied by f = min(H, W) / 28 (or / 32); ratios (zoom
factors, noise levels, blend weights, JPEG quality) are not; integer lengths (glass_blur's shuffle
distance, stripe's columns) are rounded, at least 1, so on 8x8 images some severities coincide.
MNIST-C's line drawings (dotted_line, zigzag) are drawn on the 28x28 grid of the reference and
box-resized to the image size. At the reference sizes f = 1 and the procedures are the references'.

Checked (outside the project, with the references' procedures run on scikit-image 0.26, OpenCV, Pillow 13
and ImageMagick 6.9): the deterministic procedures agree to floating-point or uint8 rounding (canny_edges,
stripe, dotted_line and zigzag masks, shear / rotate / scale / translate, brightness, contrast, saturate,
gaussian / defocus / zoom blur, pixelate, the disk kernel, the Canny / histogram / filter steps of
spatter), motion blur within one grey level of ImageMagick, and every stochastic corruption's mean
squared change per severity within sampling error of the reference's (frost's included).

Grey and colour. Colour-space corruptions (brightness, saturate) on a grey image go grey -> RGB -> the
operation -> grey with scikit-image's rgb2gray weights (0.2125, 0.7154, 0.0721), as MNIST-C's brightness
does; colours that are added (spatter's water and mud, frost) become their grey value the same way. All
other corruptions act on each channel.

Deviations from the references, per corruption (everything not listed follows the reference exactly up
to floating-point rounding; the references write uint8 images at the end, we keep floats):
- motion_blur, snow: the references call ImageMagick's MotionBlurImage through Wand. We implement its
  documented procedure: a one-sided Gaussian kernel of 2 ceil(radius) + 1 taps, weight exp(-i^2/(2
  sigma^2)), sampled at the offsets round-half-down(i cos a), round-half-down(i sin a), edge pixels
  repeated. ImageMagick's 16-bit quantum and PNG round-trip are not reproduced (within one grey level).
- glass_blur: same procedure (blur, uint8 truncation, the reference's sequential local pixel swaps, blur);
  our random draws differ. MNIST-C's blur acts along the rows axis only, as the reference's does (it
  calls skimage's `gaussian(..., multichannel=True)` on a 2-D image, which leaves the last axis unblurred).
- frost: the reference blends crops of five frost photographs (`frost1.png` ... `frost5.jpg`, resized by
  0.2). We cannot ship them, so the frost layer is procedural: per image one of the five photographs'
  profiles (`FROST_PROFILES`: per-channel mean, crop-to-crop sd of the mean and within-crop sd, measured
  by us on 32x32 crops of the 0.2-resized photographs, frost2 and frost3 being the same picture) and a
  texture of white noise (45 % of the variance) plus Gaussian-smoothed noise (sigma 6.4 px, 55 %), which
  matches the photographs' autocorrelation (about 0.6 at 1 px, 0.4 at 8 px). The blend weights are the
  reference's. The ice-crystal structures of the photographs are not reproduced.
- spatter (CIFAR-10-C water, severities 1-3): OpenCV's Canny (3x3 Sobel, L1 norm, thresholds 50/150),
  distance transform, 3x3 blurs, histogram equalization and emboss filter are re-implemented; the
  distance transform is the exact Euclidean one (OpenCV's DIST_L2 mask 5 is a close approximation).
- elastic_transform: OpenCV's warpAffine bilinear works on a 1/32 px grid; ours interpolates exactly.
- jpeg_compression: our own baseline JPEG codec in the manner of libjpeg as called by PIL: JFIF YCbCr,
  4:2:0 chroma (2x2 means with libjpeg's alternating rounding bias) for colour images, the standard (Annex
  K) quantization tables scaled by the IJG quality formula, 8x8 DCT, quantization by rounding, the
  "fancy" triangular chroma upsampling on decoding. The DCTs are exact (libjpeg's are integer
  approximations), so 15-20 % of the pixels differ from PIL's output, nearly all by one grey level (mean
  0.1-0.3 level, where the compression itself moves pixels by 10-16 levels); entropy coding is lossless
  and is skipped.
- pixelate: PIL's BOX resampling (down to int(32 c), back up) is re-implemented on floats (PIL rounds to
  uint8 after each pass).
- canny_edges (MNIST-C): scikit-image's `feature.canny` with its defaults (sigma 1 with normalized
  smoothing, Sobel, interpolated non-maximum suppression, hysteresis 0.1 / 0.2), re-implemented.
- shear: scikit-image's AffineTransform of 2019 (v0.15): shear s gives the matrix [[1, -sin s],
  [0, cos s]] (later releases changed the convention); the image centre stays fixed.
- stripe, dotted_line, zigzag, canny_edges: severity 3 is the reference's one setting; 1, 2, 4, 5 are our
  extrapolations (thinner / more lines, fewer / more inverted columns, a partial blend of the edge map;
  canny_edges 4 and 5 equal 3). See the tables.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from snapuq.data import corruptions_audio as A
from snapuq.data import corruptions_digital, corruptions_mnist, corruptions_noise, corruptions_weather
from snapuq.data._image_ops import _Ctx
from snapuq.data.corruptions_digital import _JPEG_CHROMA, _JPEG_LUMA, jpeg_table  # noqa: F401 (re-exported)
from snapuq.data.corruptions_weather import FROST_PROFILES  # noqa: F401 (re-exported)
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
N_SEVERITIES = 5
REFERENCE_SIZE = {"mnist_c": 28, "cifar10_c": 32}

# ---- parameter tables: name -> the 5 per-severity tuples -------------------------------------------------
# MNIST-C: google-research/mnist-c, corruptions.py; the tuple of each function's `c = [...]` list.
MNIST_C_PARAMS: dict[str, list[tuple]] = {
    "shot_noise": [(60,), (25,), (12,), (5,), (3,)],  # shot_noise: photons per unit intensity
    "impulse_noise": [(0.03,), (0.06,), (0.09,), (0.17,), (0.27,)],  # impulse_noise: s&p amount
    # glass_blur: (sigma, max_delta, iterations)
    "glass_blur": [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)],
    "motion_blur": [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],  # motion_blur: (radius, sigma)
    "shear": [(0.2,), (0.4,), (0.6,), (0.8,), (1.0,)],  # shear: skimage shear angle (rad), random sign
    "scale": [(1 / 0.9, 1 / 0.9), (1 / 0.8, 1 / 0.8), (1 / 0.7, 1 / 0.7), (1 / 0.6, 1 / 0.6),
              (1 / 0.5, 1 / 0.5)],  # scale: skimage inverse-map scale (x, y)
    "rotate": [(0.2,), (0.4,), (0.6,), (0.8,), (1.0,)],  # rotate: radians, random sign
    "brightness": [(0.1,), (0.2,), (0.3,), (0.4,), (0.5,)],  # brightness: HSV value offset
    "translate": [(1,), (2,), (3,), (4,), (5,)],  # translate: pixels along each axis, random signs
    # stripe: columns inverted at each side; the reference's one setting is x[:, :7] and x[:, 21:] (7 of
    # 28 at each side) = severity 3; 3, 5, 9, 11 are our extrapolation
    "stripe": [(3,), (5,), (7,), (9,), (11,)],
    "fog": [(1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)],  # fog: (strength, wibble decay)
    # spatter: (loc, scale, sigma, threshold, sigma_mask, _); MNIST-C always draws mud (ignores the last)
    "spatter": [(0.65, 0.3, 4, 0.69, 0.6, 0), (0.65, 0.3, 3, 0.68, 0.6, 0), (0.65, 0.3, 2, 0.68, 0.5, 0),
                (0.65, 0.3, 1, 0.65, 1.5, 1), (0.67, 0.4, 1, 0.65, 1.5, 1)],
    # dotted_line, zigzag: (lines, profile width); the reference: one line of profile width 2.3 px
    # (line_from_points) = severity 3; thinner (1, 2) and 2-3 lines (4, 5) are our extrapolation
    "dotted_line": [(1, 1.15), (1, 1.725), (1, 2.3), (2, 2.3), (3, 2.3)],
    "zigzag": [(1, 1.15), (1, 1.725), (1, 2.3), (2, 2.3), (3, 2.3)],
    # canny_edges: weight of the edge map (1 - w of the image); the reference returns the edge map (w = 1)
    # = severity 3; 1/3 and 2/3 are our extrapolation, 4 and 5 repeat 3
    "canny_edges": [(1 / 3,), (2 / 3,), (1.0,), (1.0,), (1.0,)],
}
# the severity each MNIST-C corruption is generated at: the default `severity` of the reference function
MNIST_C_SEVERITY: dict[str, int] = {
    "shot_noise": 5, "impulse_noise": 4, "glass_blur": 1, "motion_blur": 1, "shear": 2, "scale": 3,
    "rotate": 2, "brightness": 5, "translate": 3, "stripe": 3, "fog": 5, "spatter": 4, "dotted_line": 3,
    "zigzag": 3, "canny_edges": 3,
}  # fmt: skip
MNIST_C_EXTRAPOLATED = ("stripe", "dotted_line", "zigzag", "canny_edges")  # published at severity 3 only

# CIFAR-10-C: hendrycks/robustness, ImageNet-C/create_c/make_cifar_c.py; each function's `c = [...]`.
CIFAR10_C_PARAMS: dict[str, list[tuple]] = {
    "gaussian_noise": [(0.04,), (0.06,), (0.08,), (0.09,), (0.10,)],  # gaussian_noise: sd
    "shot_noise": [(500,), (250,), (100,), (75,), (50,)],  # shot_noise: photons per unit intensity
    "impulse_noise": [(0.01,), (0.02,), (0.03,), (0.05,), (0.07,)],  # impulse_noise: s&p amount
    "defocus_blur": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)],  # (radius, alias_blur)
    "glass_blur": [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)],  # (sigma, delta, it)
    "motion_blur": [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)],  # motion_blur: (radius, sigma)
    # zoom_blur: np.arange(start, stop, step) of zoom factors (arange's float end point included: 1.06, 1.11)
    "zoom_blur": [(1, 1.06, 0.01), (1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.01), (1, 1.26, 0.01)],
    # snow: (loc, scale, zoom, threshold, blur radius, blur sigma, image weight)
    "snow": [(0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
             (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9), (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
             (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)],
    "frost": [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)],  # (image weight, frost weight)
    "fog": [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],  # fog: (strength, wibble decay)
    "brightness": [(0.05,), (0.1,), (0.15,), (0.2,), (0.3,)],  # brightness: HSV value offset
    "contrast": [(0.75,), (0.5,), (0.4,), (0.3,), (0.15,)],  # contrast: factor about the channel means
    # elastic_transform: (alpha, sigma, affine jitter) as fractions of the image size (IMSIZE * ...)
    "elastic_transform": [(0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                          (0.1, 0.03, 0.03)],
    "pixelate": [(0.95,), (0.9,), (0.85,), (0.75,), (0.65,)],  # pixelate: resize factor
    "jpeg_compression": [(80,), (65,), (58,), (50,), (40,)],  # jpeg_compression: quality
    "speckle_noise": [(0.06,), (0.1,), (0.12,), (0.16,), (0.2,)],  # speckle_noise: sd of x * noise
    "gaussian_blur": [(0.4,), (0.6,), (0.7,), (0.8,), (1,)],  # gaussian_blur: sigma
    # spatter: (loc, scale, sigma, threshold, intensity or mask sigma, mud); 0 = water, 1 = mud
    "spatter": [(0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
                (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1)],
    "saturate": [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)],  # saturate: S * a + b
}
PARAMS = {"mnist_c": MNIST_C_PARAMS, "cifar10_c": CIFAR10_C_PARAMS}


_FAMILIES = (corruptions_noise, corruptions_weather, corruptions_digital, corruptions_mnist)
CORRUPTIONS: dict[str, Callable] = {
    n: next(getattr(m, n) for m in _FAMILIES if hasattr(m, n)) for n in sorted(set(MNIST_C) | set(CIFAR10_C))
}

_SET_ALIASES = {"mnist_c": "mnist_c", "mnist": "mnist_c", "digits": "mnist_c", "fashion_mnist": "mnist_c",
                "cifar10_c": "cifar10_c", "cifar10": "cifar10_c"}


def corruption_names(dataset: str = "digits") -> list[str]:
    if dataset in ("digits", "mnist", "fashion_mnist"):
        return list(MNIST_C)
    if dataset == "cifar10":
        return list(CIFAR10_C)
    if dataset in ("keywords", "speech_commands"):
        return A.audio_corruption_names()
    raise DatasetError(f"no corruption set for dataset '{dataset}'")


def corruption_set(name: str, channels: int, dataset: str | None = None) -> str:
    """"mnist_c" or "cifar10_c": whose table and procedure `corrupt` uses for `name`."""
    if dataset is not None:
        s = _SET_ALIASES.get(dataset)
        if s is None:
            raise DatasetError(f"unknown corruption set '{dataset}' (mnist_c or cifar10_c)")
        if name not in PARAMS[s]:
            raise DatasetError(f"corruption '{name}' is not in {s}")
        return s
    if name in MNIST_C_PARAMS and name in CIFAR10_C_PARAMS:
        return "mnist_c" if channels == 1 else "cifar10_c"
    return "mnist_c" if name in MNIST_C_PARAMS else "cifar10_c"


def corruption_params(name: str, severity: int, channels: int = 1, dataset: str | None = None) -> tuple:
    """The published (or, MNIST_C_EXTRAPOLATED, extrapolated) parameters `corrupt` uses."""
    return PARAMS[corruption_set(name, channels, dataset)][name][int(severity) - 1]


def corrupt(
    x: np.ndarray, name: str, severity: int = 3, seed: int = 0, dataset: str | None = None
) -> np.ndarray:
    """Corrupt float NHWC images in [0, 1] with `name` at `severity` (1..5); `dataset` picks MNIST-C's or
    CIFAR-10-C's table for the shared names (default: MNIST-C for 1 channel, CIFAR-10-C otherwise)."""
    if name not in CORRUPTIONS:
        raise DatasetError(f"unknown corruption '{name}' (known: {', '.join(sorted(CORRUPTIONS))})")
    if not 1 <= int(severity) <= N_SEVERITIES:
        raise DatasetError(f"corruption severity must be 1..{N_SEVERITIES}, got {severity}")
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise DatasetError(f"corrupt() expects NHWC images, got shape {x.shape}")
    s = corruption_set(name, x.shape[-1], dataset)
    p = PARAMS[s][name][int(severity) - 1]
    ctx = _Ctx(which=s, f=min(x.shape[1], x.shape[2]) / REFERENCE_SIZE[s])
    # the seed and the name fix the draws; most draws do not depend on the severity, so severities nest
    rng = np.random.default_rng([int(seed), sorted(CORRUPTIONS).index(name)])
    if len(x) == 0:
        return x.copy()
    y = CORRUPTIONS[name](x.astype(np.float64), p, rng, ctx)
    return np.clip(np.nan_to_num(y, nan=0.0), 0.0, 1.0).astype(np.float32)
