"""`snapuq verify DIR [--n N]`: the C core (the code the device runs, here built for the host) vs
the TFLM interpreter (the independent oracle) on N test inputs; prints the number of differing
elements per output and exits 1 if any differ.

`snapuq verify FILE.tflite [--inputs X.npz]` does the same for any int8 TFLite file, no model directory
needed: every output on N seeded random inputs over each input's full integer range (or the arrays of an
.npz), plus the arena each runtime needs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from snapuq.data import load_dataset, read_by
from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.export import load_exported
from snapuq.export.cgen import check_c_header
from snapuq.export.convert import quantize_input
from snapuq.export.tflm import TFLMInterpreter, arena_bytes
from snapuq.io import write_text
from snapuq.modeldir import ModelPaths, check_parts, default_data_dir
from snapuq.native.ccore import CoreModel


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir", type=Path, metavar="DIR|FILE.tflite",
        help="exported model directory (model_int8.tflite + snapuq.json), or any .tflite file",
    )  # fmt: skip
    p.add_argument(
        "--inputs", default=None, metavar="X.npz",
        help="with FILE.tflite: inputs from this .npz (array 'x', or its only array; integer codes, or "
        "floats quantized with the model's input scale)",
    )  # fmt: skip
    p.add_argument("--n", type=int, default=100, help="number of test inputs")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--random", action="store_true", help="random int8 inputs instead of the test split")
    p.add_argument("--json", default=None, help="also write the counts to this JSON file")


def _check_c_classes(c_source: Path, n: int) -> None:
    """The generated C's `.n_classes` is the logits' element count (the device refuses every inference
    otherwise: "buffer size mismatch"); one-line ModelFormatError if not. No generated C: nothing to check."""
    import re


    if not c_source.is_file():
        return
    m = re.search(r"\.n_classes = (\d+),", c_source.read_text(errors="replace"))
    if m is None or int(m.group(1)) != n:
        got = m.group(1) if m else "missing"
        raise ModelFormatError(f"{c_source}: .n_classes {got}, the model's logits have {n} "
                               f"(re-export: `snapuq export`)")  # fmt: skip


def verify(d: str | Path, n: int = 100, data_dir: str | None = None, random: bool = False) -> dict:
    from tqdm import tqdm


    if n < 1:
        raise SnapuqError("--n must be >= 1")
    paths = ModelPaths(d)
    model, _, man, _ = load_exported(paths.root)  # the manifest's n_classes / class_names vs the logits too
    # the generated C and the blob the device runs: of this export (MANIFEST.sha256), not of an earlier one
    check_parts(paths.root, need=(paths.INT8, paths.MANIFEST),
                also=(paths.C_SOURCE, paths.C_HEADER, paths.BLOB))
    check_c_header(paths.c_header, man)
    _check_c_classes(paths.c_source, int(np.prod(man["outputs"]["logits"]["shape"])))
    ip = TFLMInterpreter(paths.int8.read_bytes())
    inp = man["input"]
    if random:
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=inp["shape"]).astype(np.int8) for _ in range(n)]
        source = "random int8"
    else:
        ds = load_dataset(man["dataset"], data_dir, 0, **read_by(paths.root))
        xt = ds.x_test[:n]
        xs = [quantize_input(x, inp["scale"], inp["zero_point"]) for x in xt]
        source = f"{man['dataset']} test split"
    diff = {k: 0 for k in man["outputs"]}
    total = {k: 0 for k in man["outputs"]}
    ours = model.predict(np.stack(xs))
    for i, x in enumerate(tqdm(xs, desc="verify", unit="input")):
        t = ip.invoke(x)
        for k in man["outputs"]:
            v = ours[k][i]
            o = t[man["outputs"][k]["index"]]
            diff[k] += int(np.count_nonzero(v.reshape(-1) != o.reshape(-1)))
            total[k] += v.size
    return {
        "n": len(xs),
        "source": source,
        "differing": diff,
        "elements": total,
        "differing_total": int(sum(diff.values())),
    }


def _npz_inputs(path: str, spec) -> np.ndarray:
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            arrs = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise SnapuqError(f"{path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise SnapuqError(f"{path}: not a readable .npz ({str(e).splitlines()[0][:120]})") from None
    x = arrs.get("x") if "x" in arrs else next(iter(arrs.values())) if len(arrs) == 1 else None
    if x is None:
        raise SnapuqError(f"{path}: give the inputs as array 'x' (it holds {', '.join(sorted(arrs))})")
    x = np.asarray(x)
    shape = tuple(spec.shape)
    if x.shape == shape:
        x = x[None]
    if tuple(x.shape[1:]) != shape:
        raise SnapuqError(f"{path}: inputs of shape {tuple(x.shape[1:])}, the model's input is {shape}")
    info = np.iinfo(spec.dtype)
    if np.issubdtype(x.dtype, np.floating):
        if not np.isfinite(x).all():
            raise SnapuqError(f"{path}: inputs hold NaN or infinite values")
        if spec.scale <= 0:
            raise SnapuqError(f"{path}: float inputs, but the model's input has no quantization scale")
        x = np.round(x / spec.scale) + spec.zero_point
    elif not np.issubdtype(x.dtype, np.integer):
        raise SnapuqError(f"{path}: inputs of dtype {x.dtype} (want integer codes or floats)")
    if x.min() < info.min or x.max() > info.max:
        raise SnapuqError(f"{path}: input codes outside {np.dtype(spec.dtype).name}'s range")
    return x.astype(spec.dtype)


def verify_tflite(path: str | Path, n: int = 100, inputs: str | None = None) -> dict:
    """The C core vs TFLM on any TFLite file: every output, N inputs (seeded random over each input's full
    integer range, or an .npz), and both runtimes' arenas."""
    from tqdm import tqdm


    p = Path(path)
    try:
        buf = p.read_bytes()
    except OSError as e:
        raise SnapuqError(f"{p}: cannot read ({e.strerror})") from None
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise SnapuqError(f"{p}: not a TFLite flatbuffer (no TFL3 identifier)")
    core = CoreModel(buf)
    if len(core.inputs) != 1:
        raise SnapuqError(f"{p}: {len(core.inputs)} inputs; verify FILE.tflite handles one-input models")
    spec = core.inputs[0]
    if inputs:
        xs = _npz_inputs(inputs, spec)[:n]
        source = f"{len(xs)} inputs from {inputs}"
    else:
        info = np.iinfo(spec.dtype)
        rng = np.random.default_rng(0)
        xs = rng.integers(info.min, info.max + 1, size=(n, *spec.shape)).astype(spec.dtype)
        source = f"seeded random {np.dtype(spec.dtype).name}"
    ip = TFLMInterpreter(buf)
    ours = core.predict(xs)
    diff = {t.name: 0 for t in core.outputs}
    total = {t.name: 0 for t in core.outputs}
    for i, x in enumerate(tqdm(xs, desc="verify", unit="input")):
        t = ip.invoke(x)
        for k, spec_o in enumerate(core.outputs):
            v, o = ours[spec_o.name][i].reshape(-1), np.asarray(t[k]).reshape(-1)
            if v.size != o.size:
                raise SnapuqError(f"{p}: output {spec_o.name}: C core {v.size} elements, TFLM {o.size}")
            diff[spec_o.name] += int(np.count_nonzero(v != o))
            total[spec_o.name] += int(v.size)
    return {
        "model": str(p),
        "n": int(len(xs)),
        "source": source,
        "ops": sorted(set(core.op_names())),
        "arena_bytes": {"snapuq": int(core.arena_bytes), "tflm": int(arena_bytes(buf, xs[0]))},
        "differing": diff,
        "elements": total,
        "differing_total": int(sum(diff.values())),
    }


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise SnapuqError(f"--n must be >= 1, got {args.n}")
    if args.dir.is_file():
        res = verify_tflite(args.dir, args.n, args.inputs)
        a = res["arena_bytes"]
        return _report(res, args.json, f", {args.dir}", 24,
                       f"arena: snapuq {a['snapuq']} B, TFLM {a['tflm']} B; ops: {', '.join(res['ops'])}")
    if args.inputs:
        raise SnapuqError("--inputs goes with a .tflite file; a model directory uses its test split")
    args.data_dir = default_data_dir(args.dir, args.data_dir)
    return _report(verify(args.dir, args.n, args.data_dir, args.random), args.json, "", 16)


def _report(res: dict, json_path: str | None, where: str, width: int, extra: str | None = None) -> int:
    """Print the differing elements per output (and `extra`), write --json; status 1 if any differ."""
    print(f"C core vs TFLM on {res['n']} inputs ({res['source']}){where}:")
    for k in res["differing"]:
        print(f"  {k:<{width}} {res['differing'][k]:>8} differing of {res['elements'][k]} elements")
    if extra:
        print(extra)
    print(f"total differing elements: {res['differing_total']}")
    if json_path:
        write_text(json_path, json.dumps(res, indent=1) + "\n")
    return 1 if res["differing_total"] else 0
