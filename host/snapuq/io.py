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
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from snapuq.errors import SnapuqError


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """``with atomic_open(p) as f: f.write(...)``: p appears complete, or not changed at all."""
    path = Path(path)
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open: mode must be 'w' or 'wb'")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results get the usual permissions
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


def save_arrays(path: str | Path, arr: Any = None, **named: Any) -> Path:
    """np.save of `arr` (np.savez of `named`), atomically: a cache a killed run leaves is whole or absent."""
    with atomic_open(path, "wb") as f:
        if named:
            np.savez(f, **named)
        else:
            np.save(f, arr)
    return Path(path)


def write_json(path: str | Path, obj: Any, indent: int | None = 2, sort_keys: bool = False,
               default: Any = None) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default) + "\n")


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> Path:
    """A finished matplotlib figure: ``fig.tight_layout()``, ``fig.savefig`` through a temporary file (the
    format from the target's suffix), then the figure is closed (pyplot lets go of it)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    fmt = kwargs.pop("format", None) or path.suffix.lstrip(".") or "png"
    fig.tight_layout()
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt, **kwargs)
    plt.close(fig)
    return path


@contextlib.contextmanager
def staged_dir(target: str | Path, stale: tuple[str, ...] = ("*.png", "*.json", "*.md")) -> Iterator[Path]:
    """``with staged_dir(rdir) as stage:`` write a run's files into ``stage`` (a fresh hidden
    directory next to ``rdir``); when the block ends normally they replace the previous run's
    files in ``rdir`` (its files matching ``stale`` are removed first, so the directory never
    mixes two runs). When the block raises (or the process is killed), ``rdir`` keeps the
    previous run untouched."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".staging", dir=target.parent))
    try:
        yield stage
        new = sorted(p.name for p in stage.iterdir())
        for pat in stale:
            for old in target.glob(pat):
                if old.is_file() and old.name not in new:
                    old.unlink()
        # the machine-readable results last: their presence means the rest is there
        for name in sorted(new, key=lambda n: (n.endswith(".json"), n)):
            os.replace(stage / name, target / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


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


@contextlib.contextmanager
def captured_output(show: bool = False, log_failure: bool = True) -> Iterator[None]:
    """Hold what C++ libraries and Python print to stdout/stderr (TensorFlow's converter dumps,
    absl warnings, TFLM's chatter) in a temporary file at the file-descriptor level; it is shown when
    ``show``, else dropped. When the block raises, the held text is kept in a log file and the error names
    it in its one line (a SnapuqError gains " (log: PATH)"; any other error is preceded by one line naming
    PATH): never a screenful of converter output before the message. ``log_failure=False`` drops it then
    too (a caller that retries, as the TFLM arena search does)."""
    import sys

    if show:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        except Exception as e:
            _restore_fds(saved)
            log = _keep_held(tmp) if log_failure else None
            if log is None:
                raise
            if isinstance(e, SnapuqError):
                try:
                    again = type(e)(f"{e} (log: {log})")
                except TypeError:  # a subclass with its own constructor
                    again = SnapuqError(f"{e} (log: {log})")
                raise again from e
            print(f"snapuq: the failed step's own output is in {log}", file=sys.stderr)
            raise
        finally:
            _restore_fds(saved)


def _restore_fds(saved: list[int]) -> None:
    """Put stdout/stderr back (once: a second call finds the saved descriptors closed)."""
    import sys

    if saved[0] < 0:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in saved:
        os.close(fd)
    saved[0] = saved[1] = -1


def _keep_held(tmp) -> str | None:
    """The held output as a log file in the temporary folder (None when nothing was printed)."""
    tmp.seek(0)
    data = tmp.read()
    if not data.strip():
        return None
    fd, path = tempfile.mkstemp(prefix="snapuq-", suffix=".log")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path
