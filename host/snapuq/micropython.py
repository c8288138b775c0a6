"""`python -m snapuq.micropython ...` is `snapuq micropython ...` (snapuq.commands.micropython)."""

from __future__ import annotations

import sys

from snapuq.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["micropython", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
