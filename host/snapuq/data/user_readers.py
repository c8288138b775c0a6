"""The readers of your own data folders (snapuq.data.user): images (Pillow) and 16 kHz WAV clips."""

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


def read_wav16k(f: Path) -> np.ndarray:
    """A 16 kHz mono wav -> int16 (16000,) (zero-padded / cut to 1 s)."""
    import struct
    import warnings

    from scipy.io import wavfile


    try:
        with warnings.catch_warnings(record=True) as seen:  # scipy's warnings: no lines of their own
            warnings.simplefilter("always", wavfile.WavFileWarning)
            rate, data = wavfile.read(f)
    except (ValueError, OSError, EOFError, struct.error) as e:
        raise DatasetError(f"{f}: cannot read the wav file (damaged or cut short: {e})") from None
    cut = [str(w.message) for w in seen if "EOF" in str(w.message)]
    if cut:  # a data chunk shorter than its header says (an unknown chunk such as LIST is only skipped)
        raise DatasetError(f"{f}: the wav file is cut short ({cut[0]})")
    if rate != audio.SAMPLE_RATE:
        raise DatasetError(f"{f}: {rate} Hz, expected {audio.SAMPLE_RATE} Hz (resample the clips first)")
    if data.ndim != 1:
        raise DatasetError(f"{f}: {data.shape[1]} channels, expected mono")
    if np.issubdtype(data.dtype, np.floating):
        if not np.all(np.isfinite(data)):
            raise DatasetError(f"{f}: float samples that are NaN or inf")
        w = audio.to_int16(data)
    elif data.dtype == np.int16:
        w = data
    elif data.dtype == np.int32:
        w = (data >> 16).astype(np.int16)
    elif data.dtype == np.uint8:
        w = ((data.astype(np.int16) - 128) << 8).astype(np.int16)
    else:
        raise DatasetError(f"{f}: unsupported sample type {data.dtype}")
    return audio.fit_length(w).astype(np.int16)


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
