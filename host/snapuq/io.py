"""Atomic result files and output-path checks, shared by every command that writes results.

A reader (or a later run) sees either the old file or the new one, never a torn or empty one:
each write goes to a temporary file in the same directory, is flushed to disk and renamed over
the target (``os.replace`` is atomic on POSIX and Windows). Output directories are checked
before any work starts, so a bad ``--out`` fails in a second, not after minutes of training.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from snapuq.errors import SnapuqError


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """``with atomic_open(p) as f: f.write(...)``: p appears complete, or not changed at all."""
    path = Path(path)
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open: mode must be 'w' or 'wb'")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> Path:
    with atomic_open(path, "w") as f:
        f.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_open(path, "wb") as f:
        f.write(data)
    return Path(path)


def write_json(path: str | Path, obj: Any, indent: int | None = 2, sort_keys: bool = False,
               default: Any = None) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default) + "\n")


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> Path:
    """matplotlib ``fig.savefig`` through a temporary file (the format from the target's suffix)."""
    path = Path(path)
    fmt = kwargs.pop("format", None) or path.suffix.lstrip(".") or "png"
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt, **kwargs)
    return path


def read_json(path: str | Path, what: str = "") -> Any:
    """JSON from a file, or a one-line SnapuqError naming the file."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise SnapuqError(f"{p}: missing{f' ({what})' if what else ''}") from None
    except IsADirectoryError:
        raise SnapuqError(f"{p}: is a directory, expected a JSON file") from None
    except PermissionError:
        raise SnapuqError(f"{p}: not readable (permission denied)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SnapuqError(f"{p}: not valid JSON ({e})") from None


def check_out_dir(path: str | Path, option: str = "--out") -> Path:
    """Refuse, before any work, an output directory that cannot be created or written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SnapuqError(f"{option} {p}: exists and is not a directory")
    # the nearest existing ancestor must let us create what is missing
    q = p
    while not q.exists():
        if q.parent == q:
            break
        q = q.parent
    if q.exists() and not q.is_dir():
        raise SnapuqError(f"{option} {p}: {q} is a file, not a directory")
    try:  # a real probe: os.access says yes to root on a read-only mount or a 0555 directory
        fd, tmp = tempfile.mkstemp(prefix=".snapuq-probe.", dir=q)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise SnapuqError(f"{option} {p}: {q} is not writable ({e.strerror})") from None
    return p


def check_out_file(path: str | Path, option: str = "--out") -> Path:
    """Refuse, before any work, an output file whose directory cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise SnapuqError(f"{option} {p}: is a directory, expected a file name")
    check_out_dir(p.parent if str(p.parent) else Path("."), option)
    if p.exists() and not os.access(p, os.W_OK):
        raise SnapuqError(f"{option} {p}: exists and is not writable")
    return p
