"""python host/harness.py --port URL --model DIR|FILE [--dataset NAME --split test --limit N] --out RDIR

URL: any pyserial URL (/dev/ttyACM0, socket://host:port, rfc2217://host:port) or an emulated board,
qemu:m4 / qemu:m7 / qemu:stm32f405 (builds the firmware when needed, boots QEMU on a free loopback
port, tears it down).
--model FILE.tflite: any int8 .tflite, no model directory and no SNAP fields (the stock SNAP=0 firmware with
the file linked in on QEMU; uploaded into a real board's RAM when it runs another model); inputs from
--inputs FILE.npz (x, optional y) or --limit N seeded random int8 inputs (--seed), every output checked
against the host C core.
Writes RDIR/results.jsonl (one line per input, flushed as it goes) and RDIR/summary.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snapuq import tfquiet
from snapuq.errors import SnapuqError
from snapuq.formats import read_config
from snapuq.harness.energy import parse_power
from snapuq.harness.qemu import BOARDS
from snapuq.harness.runner import Options
from snapuq.harness.runner import run as run_harness
from snapuq.io import check_out_dir
from snapuq.modeldir import ModelPaths


def add_arguments(p: argparse.ArgumentParser) -> None:
    emulated = ", ".join(f"qemu:{k} ({b.machine}, budgets of {b.models})" for k, b in BOARDS.items())
    p.add_argument("--port", required=True,
                   help="a serial port or pyserial URL of a real board (/dev/ttyACM0, COM3, "
                   f"socket://HOST:PORT), or an emulated board: {emulated}")
    p.add_argument("--model", required=True, type=Path,
                   help="model directory (after snapuq export), or a bare int8 .tflite file (no SNAP fields)")
    p.add_argument("--inputs", type=Path, default=None, metavar="FILE.npz",
                   help="--model FILE.tflite: inputs from an .npz (x: int8 codes or floats, quantized with "
                   "the input's scale; optional y: integer labels); default: seeded random int8 inputs")
    p.add_argument("--seed", type=int, default=0,
                   help="--model FILE.tflite without --inputs: seed of the random int8 inputs (default 0)")
    p.add_argument("--dataset", default=None, help="dataset name (default: the model's)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.add_argument("--limit", type=int, default=None, help="first N inputs of the split")
    p.add_argument("--start", type=int, default=0, help="skip the first START inputs")
    p.add_argument("--stream", action="store_true",
                   help="send the CID stream built from the split (clean + corrupted segments, as in eval)")
    p.add_argument("--severity", type=int, default=3, help="--stream: corruption severity 1..5")
    p.add_argument("--segment", type=int, default=300, help="--stream: frames per segment")
    p.add_argument("--out", required=True, type=Path, help="result directory")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.add_argument("--retries", type=int, default=5,
                   help="resends per input after a timeout, a damaged reply or a device error (default 5)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per device reply")
    icg = p.add_mutually_exclusive_group()
    icg.add_argument("--icount", dest="icount", action="store_true", default=True,
                     help="QEMU: -icount shift=0, counts are QEMU instructions (default)")
    icg.add_argument("--no-icount", dest="icount", action="store_false")
    p.add_argument("--no-cycle-model", dest="cycle_model", action="store_false",
                   help="qemu:m4 / qemu:m7: do not record the instruction stream for the modelled cycles "
                   "(summary.json cycles_modelled / ms_modelled; QEMU runs faster without it)")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--no-check-outputs", dest="check_outputs", action="store_false",
                   help="compare only the SNAP results, not every int8 output tensor")
    p.add_argument("--power", default=None,
                   help="ppk2:PORT (the PPK2's own serial port, or ppk2:auto): measure energy per inference "
                   "with a Nordic PPK2 in ampere-meter mode, timestamp pin on logic input D0 (energy.json)")
    p.add_argument("--vdd-mv", dest="vdd_mv", type=int, default=3300,
                   help="--power: the supply voltage of the MCU the PPK2 measures, in mV (default 3300)")
    p.add_argument("--build-dir", type=Path, default=None)
    p.add_argument("--firmware", type=Path, default=None,
                   help="qemu ports: boot this ELF (e.g. .pio/build/qemu_m4/program.elf) instead of building")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show TensorFlow's own log lines (import-time oneDNN/absl messages)")


def run(args: argparse.Namespace) -> int:

    # every path the user gave, made absolute once, here: later steps run tools in other directories
    # (make -C firmware, QEMU), and a relative --build-dir used to be built under firmware/
    for name in ("model", "out", "build_dir", "firmware", "inputs"):
        if getattr(args, name) is not None:
            setattr(args, name, Path(getattr(args, name)).expanduser().absolute())
    if args.build_dir is not None:
        check_out_dir(args.build_dir, "--build-dir")
    dataset = args.dataset
    data_dir = str(Path(args.data_dir).expanduser().absolute()) if args.data_dir else None
    if args.model.is_file():  # a bare .tflite: no dataset, no config
        return _run_bare(args, data_dir)
    if args.inputs is not None:
        raise SnapuqError("--inputs goes with --model FILE.tflite; a model directory streams --dataset")
    cfg_path = ModelPaths(args.model).config
    if not args.model.is_dir():
        raise SnapuqError(f"--model {args.model}: no such model directory or .tflite file")
    cfg = read_config(cfg_path, need=()) if cfg_path.exists() else {}  # snapuq.formats: typed and in range
    if dataset is None:
        if "dataset" not in cfg:
            raise SnapuqError(f"--dataset not given and {cfg_path} does not name one")
        dataset = str(cfg["dataset"])
    if data_dir is None and cfg.get("data_dir"):
        data_dir = str(cfg["data_dir"])
    if args.power:
        parse_power(args.power)
    opts = Options(port=args.port, model=args.model, dataset=dataset, split=args.split, out=args.out,
                   limit=args.limit, start=args.start, data_dir=data_dir, resume=args.resume,
                   retries=args.retries, timeout=args.timeout, icount=args.icount, baud=args.baud,
                   check_outputs=args.check_outputs, build_dir=args.build_dir, power=args.power,
                   power_vdd_mv=args.vdd_mv,
                   firmware=args.firmware, progress=args.progress, stream=args.stream,
                   severity=args.severity, segment=args.segment, cycle_model=args.cycle_model)
    s = run_harness(opts)
    _say(s, args.out)
    if args.power:
        if s["energy_uj_per_inf"] is None:  # asked for a measurement: none is no success
            print(f"harness: error: {s['energy_note']}", file=sys.stderr)
            return 1
        print(f"harness: energy {s['energy_uj_per_inf']:.4g} uJ per inference (PPK2) -> "
              f"{args.out}/energy.json")
    return 0 if s["mismatches_vs_host"] == 0 else 1


def _say(s: dict, out: Path) -> None:
    lat = s["latency"]
    acc = "n/a (no labels)" if s["accuracy"] is None else f"{s['accuracy']:.4f}"
    print(f"harness: n={s['n']} board={s['board']} mismatches_vs_host={s['mismatches_vs_host']} "
          f"accuracy={acc} {lat['cycles_unit']}_median={lat['cycles_median']} "
          f"flash={s['flash_bytes']} ram_peak={s['ram_peak_bytes']} -> {out}/summary.json")
    if lat.get("cycles_modelled"):
        print(f"harness: modelled {lat['cycles_modelled']:,} cycles = {lat['ms_modelled']:.3f} ms "
              f"({lat['modelled_note']})")


def _run_bare(args: argparse.Namespace, data_dir: str | None) -> int:
    if args.dataset or data_dir or args.stream or args.power:
        raise SnapuqError("--model FILE.tflite takes its inputs from --inputs FILE.npz or random "
                          "(--seed); --dataset, --data-dir, --stream and --power go with a model directory")
    opts = Options(port=args.port, model=args.model, dataset="", split=args.split, out=args.out,
                   limit=args.limit, start=args.start, resume=args.resume, retries=args.retries,
                   timeout=args.timeout, icount=args.icount, baud=args.baud, check_outputs=True,
                   build_dir=args.build_dir, firmware=args.firmware, progress=args.progress,
                   inputs=args.inputs, seed=args.seed, cycle_model=args.cycle_model)
    s = run_harness(opts)
    _say(s, args.out)
    print(f"harness: inputs: {s['inputs']['label']}")
    return 0 if s["mismatches_vs_host"] == 0 else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tfquiet.install(show=tfquiet.wants_verbose(argv))
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except SnapuqError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("harness: interrupted; summary.json marked incomplete (rerun with --resume to continue)",
              file=sys.stderr)
        return 130
    except OSError as e:
        print(f"harness: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
