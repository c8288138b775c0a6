"""snapuq: single-pass uncertainty (SNAP) for TinyML - train, export to int8 and C, verify, evaluate,
benchmark, and run on boards, QEMU and MicroPython.

Each subcommand lives in its own module and exposes `add_arguments(parser)` and `run(args) -> int`;
modules are imported lazily so `snapuq --help` stays fast and TensorFlow is only loaded by commands
that need it. Every error a user can cause ends in one line on stderr and a non-zero exit status."""

from __future__ import annotations

import argparse
import importlib
import sys

from snapuq import tfquiet
from snapuq.errors import SnapuqError

# name -> (module, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("snapuq.commands.train", "train a backbone with SNAP heads (and the trained baselines)"),
    "export": ("snapuq.commands.export", "int8 export: model_int8.tflite, snapuq.json, snapuq_model.{c,h}"),
    "verify": ("snapuq.commands.verify", "the C core vs the TFLM interpreter, element by element"),
    "calibrate": (
        "snapuq.commands.calibrate",
        "refit calib.json (p_err, alarm, hinge) on dev, no retraining",
    ),
    "eval": ("snapuq.commands.evaluate", "evaluate SNAP and every baseline; metrics.json, plots, report.md"),
    "bench": ("snapuq.commands.bench", "deployment cost per method and board (JSON)"),
    "harness": ("snapuq.commands.harness", "run a test split on a board or QEMU over serial; check every "
                "result "
                "against the host C core"),
    "micropython": ("snapuq.commands.micropython",
                    "MicroPython: write the model blob, push it to a board, compare"),
    "parts": ("snapuq.commands.parts", "a model directory's parts (MANIFEST.sha256): check them, or record "
              "them for a directory written by an older snapuq"),
    "tokens": ("snapuq.commands.tokens", "Uncert: uncertainty-guided token pruning in a spiking transformer"),
    "reproduce": (
        "snapuq.commands.reproduce",
        "the paper's benchmarks on the real data sets: train, eval over seeds, docs/RESULTS.md",
    ),
}


def _load(name: str):
    modname = COMMANDS[name][0]
    return importlib.import_module(modname)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump): `snapuq train: error: ...`."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="snapuq",
        description="Single-pass uncertainty (SNAP-UQ) for TinyML: train a Keras model with SNAP heads, "
        "export it to int8 + C, verify the C core against TFLite Micro, evaluate, and run it on "
        "microcontrollers, QEMU and MicroPython.",
        epilog="`snapuq COMMAND --help` describes each command. Typical flow: train -> export -> verify "
        "-> eval -> harness / micropython. docs/ARCHITECTURE.md shows how the pieces fit.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, (_mod, help_) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_)
        if only is None or only == name:
            _load(name).add_arguments(sp)
            if "-v" not in sp._option_string_actions:
                sp.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    return p


VERBOSE_HELP = "show TensorFlow's own log lines (import-time oneDNN/absl/CUDA messages, converter output)"


def main(argv: list[str] | None = None) -> int:
    _sigterm_as_interrupt()
    argv = list(sys.argv[1:] if argv is None else argv)
    # before any command module is imported: TensorFlow's import-time lines are held unless -v
    tfquiet.install(show=tfquiet.wants_verbose(argv))
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
    except OSError as e:  # a file or directory the user named (missing, not writable, disk full)
        where = f": {e.filename}" if e.filename else ""
        print(f"snapuq {args.command}: error: {e.strerror or e}{where}", file=sys.stderr)
        return 1


def _sigterm_as_interrupt() -> None:
    """SIGTERM / SIGHUP end a command like Ctrl-C: temporary files are removed, the previous
    results stay, the harness marks its summary incomplete."""
    import signal

    def handler(signum: int, _frame) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass


if __name__ == "__main__":
    sys.exit(main())
