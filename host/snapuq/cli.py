"""The `snapuq` command line. Each subcommand lives in its own module and exposes
`add_arguments(parser)` and `run(args) -> int`; modules are imported lazily so `snapuq --help`
stays fast and TensorFlow is only loaded by commands that need it."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("snapuq.train", "train a backbone with SNAP heads (and the trained baselines)"),
    "export": ("snapuq.export.cli", "int8 export: model_int8.tflite, snapuq.json, snapuq_model.{c,h}"),
    "verify": ("snapuq.export.verify", "the C core vs the TFLM interpreter, element by element"),
    "calibrate": (
        "snapuq.calibrate",
        "refit calib.json (p_err, alarm, hinge) on dev, no retraining",
    ),
    "eval": ("snapuq.evaluate", "evaluate SNAP and every baseline; metrics.json, plots, report.md"),
    "bench": ("snapuq.bench", "deployment cost per method and board (JSON)"),
    "harness": ("snapuq.harness.cli", "run a test split on a board or QEMU over serial; check every result "
                "against the host C core"),
    "micropython": ("snapuq.micropython", "MicroPython: write the model blob, push it to a board, compare"),
    "tokens": ("snapuq.tokens.cli", "Uncert: uncertainty-guided token pruning in a spiking transformer"),
}


def _load(name: str):
    modname = COMMANDS[name][0]
    return importlib.import_module(modname)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="snapuq",
        description="Single-pass uncertainty (SNAP-UQ) for TinyML: train a Keras model with SNAP heads, "
        "export it to int8 + C, verify the C core against TFLite Micro, evaluate, and run it on "
        "microcontrollers, QEMU and MicroPython.",
        epilog="`snapuq COMMAND --help` describes each command. Typical flow: train -> export -> verify "
        "-> eval -> harness / micropython. docs/ARCHITECTURE.md shows how the pieces fit.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_mod, help_) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_)
        if only is None or only == name:
            _load(name).add_arguments(sp)
    return p


def main(argv: list[str] | None = None) -> int:
    from snapuq.errors import SnapuqError

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(only)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(_load(args.command).run(args) or 0)
    except SnapuqError as e:
        print(f"snapuq {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"snapuq {args.command}: interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as e:
        print(f"snapuq {args.command}: error: {e.strerror or e}: {e.filename}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
