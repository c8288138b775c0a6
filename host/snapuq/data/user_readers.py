"""The readers of your own data folders (snapuq.data.user): images (Pillow) and WAV clips (to 16 kHz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from snapuq.data import audio
from snapuq.errors import DatasetError

IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp")
AUDIO_EXT = (".wav",)
# the largest image decoded (width x height): a header that claims more is refused before any decoding
MAX_IMAGE_PIXELS = 4096 * 4096


def _class_dirs(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))


def _files(d: Path) -> list[Path]:
    return sorted(f for f in d.rglob("*") if f.is_file() and f.suffix.lower() in IMAGE_EXT + AUDIO_EXT)


def _read_image(f: Path, shape: tuple[int, ...] | None) -> np.ndarray:
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # Pillow's own bomb warning: an error here (refused below)
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im0 = Image.open(f)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise DatasetError(f"{f}: refused before decoding: {str(e).split(' exceeds')[0]}, more than "
                           f"MAX_IMAGE_PIXELS = {MAX_IMAGE_PIXELS} (4096 x 4096)") from None  # fmt: skip
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as e:
        raise DatasetError(f"{f}: cannot decode the image ({e})") from None
    try:
        with im0 as im:
            w, h = im.size
            if w * h > MAX_IMAGE_PIXELS:  # from the header: nothing decoded yet
                raise DatasetError(f"{f}: {w}x{h} pixels, more than MAX_IMAGE_PIXELS = {MAX_IMAGE_PIXELS} "
                                   "(4096 x 4096): refused before decoding")  # fmt: skip
            c = int(shape[-1]) if shape and len(shape) == 3 else None
            im = im.convert("L" if c == 1 else "RGB") if c in (1, 3, None) else None
            if im is None:
                raise DatasetError(f"{f}: the model takes {c} channels; images give 1 (L) or 3 (RGB)")
            if shape and len(shape) == 3 and im.size != (int(shape[1]), int(shape[0])):
                im = im.resize((int(shape[1]), int(shape[0])), Image.BILINEAR)
            a = np.asarray(im, np.uint8)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as e:
        raise DatasetError(f"{f}: cannot decode the image ({e})") from None
    return a[..., None] if a.ndim == 2 else a


MIN_RATE = 8000  # below it the front end's 20-4000 Hz mel bands are not in the recording


def read_audio(f: Path) -> np.ndarray:
    """A WAV file at any sample rate from 8 kHz up, mono or several channels (averaged), 8/16/32-bit PCM or
    float -> int16 at 16 kHz, its whole length (resampled by scipy.signal.resample_poly when the file has
    another rate: a phone's 8 kHz, a laptop's 44.1 / 48 kHz). Every problem is one DatasetError naming `f`."""
    import struct
    import warnings
    from math import gcd

    from scipy.io import wavfile
    from scipy.signal import resample_poly

    try:
        with warnings.catch_warnings(record=True) as seen:  # scipy's warnings: no lines of their own
            warnings.simplefilter("always", wavfile.WavFileWarning)
            rate, data = wavfile.read(f)
    except (ValueError, OSError, EOFError, struct.error) as e:
        raise DatasetError(f"{f}: cannot read the wav file (damaged or cut short: {e})") from None
    cut = [str(w.message) for w in seen if "EOF" in str(w.message)]
    if cut:  # a data chunk shorter than its header says (an unknown chunk such as LIST is only skipped)
        raise DatasetError(f"{f}: the wav file is cut short ({cut[0]})")
    if rate < MIN_RATE:
        raise DatasetError(f"{f}: {rate} Hz; the front end needs at least {MIN_RATE} Hz (its mel bands reach "
                           "4 kHz)")  # fmt: skip
    if data.ndim == 2 and data.shape[1] == 0 or data.ndim > 2:
        raise DatasetError(f"{f}: no channels of samples (shape {data.shape})")
    if np.issubdtype(data.dtype, np.floating):
        if not np.all(np.isfinite(data)):
            raise DatasetError(f"{f}: float samples that are NaN or inf")
        x = np.asarray(data, np.float64)
    elif data.dtype == np.int16:
        x = data.astype(np.float64) / 32768.0
    elif data.dtype == np.int32:
        x = data.astype(np.float64) / 2147483648.0
    elif data.dtype == np.uint8:
        x = (data.astype(np.float64) - 128.0) / 128.0
    else:
        raise DatasetError(f"{f}: unsupported sample type {data.dtype}")
    if x.ndim == 2:
        x = x.mean(axis=1)  # several channels of one scene: their average
    if rate != audio.SAMPLE_RATE and x.size:
        g = gcd(int(rate), audio.SAMPLE_RATE)
        x = resample_poly(x, audio.SAMPLE_RATE // g, int(rate) // g)
    return audio.to_int16(x)


def read_wav16k(f: Path) -> np.ndarray:
    """A WAV clip (read_audio: any rate, any channels) -> int16 (16000,): 1 s at 16 kHz (padded / cut)."""
    return audio.fit_length(read_audio(f)).astype(np.int16)


def _read_files(files: list[Path], kind: str, shape: tuple[int, ...] | None) -> np.ndarray:
    if kind == "image":
        imgs = [_read_image(f, shape) for f in files]
        sizes = {a.shape for a in imgs}
        if len(sizes) > 1:
            raise DatasetError(
                f"images have different sizes {sorted(sizes)[:3]}; give the model (its input size) to resize"
            )
        return np.stack(imgs)
    return np.stack([read_wav16k(f) for f in files])


def _kind(files: list[Path], where: Path) -> str:
    kinds = {"image" if f.suffix.lower() in IMAGE_EXT else "audio" for f in files}
    if not kinds:
        raise DatasetError(f"{where}: no PNG/JPEG images or WAV clips found")
    if len(kinds) > 1:
        raise DatasetError(f"{where}: mixes images and WAV clips; use one kind per data set")
    return kinds.pop()
