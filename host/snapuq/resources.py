"""Where the package finds what it ships besides Python: the C core, the firmware tree, the MicroPython twin.

One locator, the same in a checkout and in an installed package: `snapuq/c` (the C core), `snapuq/firmware`
(app, ports, linker scripts, Makefile) and `snapuq/twin` are links to `firmware/core`, `firmware` and
`micropython_modules/twin` in a checkout, and real folders in a wheel (package data). Build outputs go
under the checkout's `build/` when there is one, else under the user's cache folder."""

from __future__ import annotations

import os
from pathlib import Path

from snapuq.errors import SnapuqError

PACKAGE = Path(__file__).resolve().parent


def checkout_root() -> Path | None:
    """The repository root when the package runs from a checkout (editable install, PYTHONPATH), else None."""
    root = PACKAGE.parents[1]
    if (root / "pyproject.toml").is_file() and (root / "firmware" / "core").is_dir():
        return root
    return None


def _shipped(rel: str) -> Path:
    p = PACKAGE / rel
    if not p.exists():
        raise SnapuqError(f"{p}: missing from the snapuq package (reinstall it: pip install snapuq)")
    return p.resolve()


def core_dir() -> Path:
    """The C core's sources (firmware/core): compiled by snapuq.native.ccore, the firmware and the module."""
    return _shipped("c")


def firmware_dir() -> Path:
    """The firmware tree (Makefile, app/, port/, ld/, core/) that the harness and bench build."""
    return _shipped("firmware")


def twin_path() -> Path:
    """The pure-MicroPython twin (micropython_modules/twin/snapuq.py), pushed to boards without the module."""
    return _shipped("twin/snapuq.py")


def python_path() -> Path:
    """The folder holding the snapuq package (for a child interpreter's PYTHONPATH)."""
    return PACKAGE.parent


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "snapuq"


def work_dir(*parts: str) -> Path:
    """Where build outputs go by default: <checkout>/build/<parts> in a checkout, else the user cache."""
    root = checkout_root()
    base = root / "build" if root is not None else cache_dir()
    return base.joinpath(*parts)


def project_dir() -> Path:
    """Relative paths a user names (models/digits) are read from here: the checkout root, else the cwd."""
    return checkout_root() or Path.cwd()
