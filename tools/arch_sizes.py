"""The size tables of docs/ARCHITECTURE.md, counted from the tree (never typed by hand).

    python tools/arch_sizes.py            # print the tables
    python tools/arch_sizes.py --write    # replace them in docs/ARCHITECTURE.md (between the markers)
    python tools/arch_sizes.py --check    # exit 1 when the document's tables differ from the tree

Host: lines of Python per layer of host/snapuq (the layers of import-linter's contract in pyproject.toml)
and per module, largest first. C: lines per folder of firmware/core."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "host" / "snapuq"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
BEGIN, END = "<!-- arch_sizes: begin (tools/arch_sizes.py --write) -->", "<!-- arch_sizes: end -->"
LINKS = ("c", "firmware", "twin")  # links to firmware/core, firmware/, micropython_modules/twin


def _lines(p: Path) -> int:
    return len(p.read_text().splitlines())


def host_modules() -> dict[str, int]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if rel.parts[0] in LINKS:
            continue
        out[str(rel)] = _lines(p)
    return out


def layers() -> list[list[str]]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[m.strip() for m in layer.replace("|", ":").split(":")] for layer in contract["layers"]]


def _owner(rel: str, names: list[str]) -> str | None:
    mod = "snapuq." + rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    best = [n for n in names if mod == n or mod.startswith(n + ".")]
    return max(best, key=len) if best else None


def tables() -> str:
    mods = host_modules()
    lay = layers()
    names = [n for layer in lay for n in layer]
    rows = ["| layer (top to bottom) | modules | files | lines | largest file |", "|---|---|---|---|---|"]
    for i, layer in enumerate(lay, 1):
        own = {r: n for r, n in mods.items() if _owner(r, names) in layer}
        big = max(own, key=own.get) if own else "-"
        rows.append(f"| {i} | {', '.join(f'`{n}`' for n in layer)} | {len(own)} | {sum(own.values()):,} | "
                    f"`{big}` {own.get(big, 0):,} |")
    rest = {r: n for r, n in mods.items() if _owner(r, names) is None}
    rows.append(f"| - | outside the layers: {', '.join(f'`{r}`' for r in sorted(rest))} | {len(rest)} | "
                f"{sum(rest.values()):,} | |")
    rows.append(f"| | **host/snapuq** | {len(mods)} | {sum(mods.values()):,} | |")
    top = sorted(mods.items(), key=lambda kv: -kv[1])[:12]
    rows += ["", "| largest host modules | lines |", "|---|---|"]
    rows += [f"| `host/snapuq/{r}` | {n:,} |" for r, n in top]
    core = ROOT / "firmware" / "core"
    groups: dict[str, list[int]] = {}
    for p in sorted(core.rglob("*.[ch]")):
        key = str(p.parent.relative_to(ROOT))
        groups.setdefault(key, []).append(_lines(p))
    rows += ["", "| C core folder | files | lines |", "|---|---|---|"]
    rows += [f"| `{k}/` | {len(v)} | {sum(v):,} |" for k, v in sorted(groups.items())]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    t = tables()
    if not (args.write or args.check):
        print(t, end="")
        return 0
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{t}{END}{tail}"
    if args.check:
        if new != doc:
            print(f"{DOC}: size tables differ from the tree (tools/arch_sizes.py --write)", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
