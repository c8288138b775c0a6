"""TensorFlow's import-time log lines (absl's "All log messages before absl::InitializeLog()",
oneDNN's "custom operations are on", CUDA probing) go to file descriptor 2 from C++ while the
library loads; TF_CPP_MIN_LOG_LEVEL does not reach them. `install(show=False)` puts an import hook
in front of ``import tensorflow`` (wherever it first happens: keras, the converter, a command) that
holds fd 1 and fd 2 in a temporary file for the duration of that import only: dropped when the
import succeeds, written to stderr when it fails. ``show=True`` (``snapuq -v``) leaves them alone."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from snapuq.io import captured_output

_PKG = "tensorflow"


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with captured_output(show=False):
            self._inner.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # is_package, get_resource_reader, ...
        return getattr(self._inner, name)


class _QuietFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy = False

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if name != _PKG or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _QuietLoader(spec.loader)
        return spec


_SHOW = False


def showing() -> bool:
    """True after ``install(show=True)`` (``snapuq -v``): TensorFlow's output, the converter's dumps
    included, is shown; else code that converts holds them (`snapuq.io.captured_output`)."""
    return _SHOW


def install(show: bool = False) -> None:
    """Quiet TensorFlow's import unless ``show``; also the Python-side log level (warnings and
    info from TF's own logger stay hidden unless ``show``). Idempotent; a no-op once TF is loaded."""
    global _SHOW
    _SHOW = bool(show)
    if show:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if _PKG in sys.modules or any(isinstance(f, _QuietFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietFinder())


def wants_verbose(argv: list[str]) -> bool:
    """-v / --verbose anywhere before a bare `--` (decided before parsing: TensorFlow may be imported
    while the command's parser is built)."""
    for a in argv:
        if a == "--":
            return False
        if a in ("-v", "--verbose"):
            return True
    return False
