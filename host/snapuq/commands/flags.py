"""The option dataclasses of snapuq.options as command-line flags: the parser is generated from their fields
(help, flag name and choices in each field's metadata), and `to_argv` is its inverse, which is how a second
seed's `snapuq train` command is rebuilt from a model's config.json."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any


def _flag(f: dataclasses.Field) -> str:
    return "--" + (f.metadata.get("flag") or f.name.replace("_", "-"))


_TYPES = {"int": int, "float": float, "str": str}


def add_options(p: argparse.ArgumentParser, cls: type, recipe: bool = False, **defaults: Any) -> None:
    """The options of dataclass `cls` as flags of the argparse parser `p` (bools as --x / --no-x). recipe:
    every default None ("not given": the dataset's recipe fills it in); `defaults` overrides some."""
    for f in dataclasses.fields(cls):
        default = defaults.get(f.name, None if recipe else f.default)
        help = f.metadata["help"]
        help += " (default: the dataset's recipe)" if recipe and "default" not in help else ""
        if f.type == "bool":
            p.add_argument(_flag(f), dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                           help=help)  # fmt: skip
            continue
        shown = "" if recipe or default is None or "default" in help else f" (default {default})"
        p.add_argument(_flag(f), dest=f.name, type=_TYPES[f.type.split(" ")[0]], default=default,
                       choices=f.metadata["choices"], help=help + shown)  # fmt: skip


def given(cls: type, args: Any) -> dict[str, Any]:
    """The options of `cls` a parsed command line set (None = not given)."""
    names = [f.name for f in dataclasses.fields(cls)]
    return {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}


def to_argv(opts: Any) -> list[str]:
    """The command-line flags that rebuild `opts` (None fields left out): add_options' inverse."""
    a: list[str] = []
    for f in dataclasses.fields(opts):
        v = getattr(opts, f.name)
        if isinstance(v, bool):
            a.append(_flag(f) if v else "--no-" + _flag(f)[2:])
        elif v is not None:
            a += [_flag(f), str(v)]
    return a
