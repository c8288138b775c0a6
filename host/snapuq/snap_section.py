"""The layout of the blob's SNAP section, read from the C core's own description.

``firmware/core/snapuq_snap_section.h`` (shipped in the package as ``snapuq/c``) lists every field
of the section header and of its records as ``X(name, type, offset, since)``. This module parses
that file, so the C reader, the writer (:func:`snapuq.native.blob.snap_section`, which packs by
field name with :func:`pack`) and the pure-MicroPython twin (its copy of the tables is the output of
:func:`twin_block`, checked current by ``tests/host/test_snap_section.py``) share one layout.

    python -m snapuq.snap_section twin           # print the twin's generated block
    python -m snapuq.snap_section twin --write   # rewrite it in micropython_modules/twin/snapuq.py
"""

from __future__ import annotations

import re
import struct
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from snapuq import resources
from snapuq.errors import ModelFormatError

HEADER_FILE = Path(__file__).resolve().parent / "c" / "snapuq_snap_section.h"
TWIN_PATH = resources.PACKAGE / "twin" / "snapuq.py"  # micropython_modules/twin in a checkout
# struct codes and sizes of the field types
CODES = {"b4": "4s", "u8": "B", "u16": "H", "i16": "h", "u32": "I", "i32": "i", "f64": "d"}
TABLES = ("HEADER", "TAP", "OUTPUT", "INTAP", "NORM")
TWIN_BEGIN = "# ---- SNAP section layout: generated from firmware/core/snapuq_snap_section.h"
TWIN_END = "# ---- end of the generated SNAP section layout"


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    offset: int
    since: int

    @property
    def code(self) -> str:
        return CODES[self.type]

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.code)


def parse(text: str) -> dict[str, tuple[Field, ...]]:
    """The tables of a snapuq_snap_section.h text: {"HEADER": (Field, ...), "TAP": ..., ...}, each
    checked: known types, offsets in order and without gaps, names unique, `since` not decreasing."""
    tables: dict[str, tuple[Field, ...]] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"#define SNAPUQ_SNAP_([A-Z]+)_FIELDS\(X\)", lines[i])
        i += 1
        if not m:
            continue
        body = []
        while i < len(lines):
            body.append(lines[i])
            i += 1
            if not body[-1].rstrip().endswith("\\"):
                break
        fields = []
        for row in re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", "\n".join(body)):
            fields.append(Field(row[0], row[1], int(row[2]), int(row[3])))
        tables[m.group(1)] = tuple(fields)
    for t in TABLES:
        if not tables.get(t):
            raise ModelFormatError(f"{HEADER_FILE.name}: no SNAPUQ_SNAP_{t}_FIELDS table")
    for t, fields in tables.items():
        end, since, seen = 0, 1, set()
        for f in fields:
            if f.type not in CODES:
                raise ModelFormatError(f"{HEADER_FILE.name}: {t}.{f.name}: unknown type {f.type}")
            if f.offset != end:
                raise ModelFormatError(f"{HEADER_FILE.name}: {t}.{f.name} at {f.offset}, expected {end}")
            if f.name in seen or f.since < since:
                raise ModelFormatError(f"{HEADER_FILE.name}: {t}.{f.name} repeated or out of version order")
            end, since = f.offset + f.size, f.since
            seen.add(f.name)
    return tables


@cache
def tables() -> dict[str, tuple[Field, ...]]:
    """The tables of the shipped snapuq_snap_section.h."""
    return parse(HEADER_FILE.read_text())


def size(table: str, version: int | None = None) -> int:
    """Bytes of a table (the header of section `version`: its fields with since <= version)."""
    return sum(f.size for f in tables()[table] if version is None or f.since <= version)


def field(table: str, name: str) -> Field:
    for f in tables()[table]:
        if f.name == name:
            return f
    raise KeyError(f"{table}.{name}")


def pack(table: str, values: dict[str, Any], version: int | None = None) -> bytes:
    """The bytes of one header or record: every field of `table` (up to `version`) from `values` by
    name; fields named `reserved` default to 0. An unknown or missing name raises KeyError."""
    fields = [f for f in tables()[table] if version is None or f.since <= version]
    unknown = set(values) - {f.name for f in fields}
    if unknown:
        raise KeyError(f"{table}: no field {', '.join(sorted(unknown))}")
    out = bytearray(size(table, version))
    for f in fields:
        v = values.get(f.name, 0) if f.name == "reserved" else values[f.name]
        struct.pack_into("<" + f.code, out, f.offset, v)
    return bytes(out)


def unpack(table: str, buf: bytes, base: int = 0, version: int | None = None) -> dict[str, Any]:
    """The fields of one header or record at `base` of `buf`, by name."""
    return {f.name: struct.unpack_from("<" + f.code, buf, base + f.offset)[0]
            for f in tables()[table] if version is None or f.since <= version}


def twin_block() -> str:
    """The twin's copy of the tables (MicroPython cannot import host code): Python source, one
    tuple of (name, struct code, offset, since) per table, between TWIN_BEGIN and TWIN_END."""
    lines = [TWIN_BEGIN, "# by `python -m snapuq.snap_section twin --write`; do not edit (docs/BLOB.md)."]
    for t in TABLES:
        lines.append(f"_SNAP_{t} = (")
        for f in tables()[t]:
            lines.append(f"    ({f.name!r}, {f.code!r}, {f.offset}, {f.since}),")
        lines.append(")")
    lines.append(TWIN_END)
    return "\n".join(lines) + "\n"


def twin_current(text: str) -> str | None:
    """The generated block of a twin source, None when it has none."""
    a, b = text.find(TWIN_BEGIN), text.find(TWIN_END)
    if a < 0 or b < a:
        return None
    return text[a:b + len(TWIN_END)] + "\n"


def write_twin(path: Path = TWIN_PATH) -> bool:
    """Replace the twin's generated block by the current one; True when the file changed."""
    text = path.read_text()
    old = twin_current(text)
    if old is None:
        raise ModelFormatError(f"{path}: no generated SNAP section block ({TWIN_BEGIN!r})")
    new = text.replace(old, twin_block(), 1)
    if new == text:
        return False
    path.write_text(new)
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["twin"] or args[1:] not in ([], ["--write"]):
        print("usage: python -m snapuq.snap_section twin [--write]", file=sys.stderr)
        return 2
    if args[1:] == ["--write"]:
        print(f"{TWIN_PATH}: {'updated' if write_twin() else 'already current'}")
    else:
        sys.stdout.write(twin_block())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
