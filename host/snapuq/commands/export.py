"""`snapuq export DIR`: full-integer int8 model (batch 1), float model, snapuq.json manifest and
the C arrays (snapuq_model.{c,h}) for a model directory written by `snapuq train`, written as one unit
(`snapuq.modeldir.PartsUpdate`: staged beside DIR, swapped in, recorded in DIR/MANIFEST.sha256); a blob
DIR already holds (model.snapuq) is rewritten with them, snapuq_model.{c,h} are removed with --no-c."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.data import dataset_of, with_model_classes
from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.export.cgen import write_c_model
from snapuq.export.convert import convert_keras, quantize_input
from snapuq.export.fixedpoint import build_snap
from snapuq.export.manifest import MANIFEST_FORMAT, MANIFEST_VERSION, check_manifest, sha256
from snapuq.export.tflm import TFLMInterpreter, arena_bytes
from snapuq.io import captured_output, write_bytes, write_text
from snapuq.modeldir import ModelPaths, PartsUpdate, check_parts, default_data_dir
from snapuq.native.blob import write_blob
from snapuq.native.ccore import CoreModel
from snapuq.nn.saved import load_model_dir


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="model directory written by `snapuq train`")
    p.add_argument("--data-dir", default=None, help="dataset directory (for datasets read from files)")
    p.add_argument("--n-rep", type=int, default=500, help="representative train samples for int8 calibration")
    p.add_argument(
        "--n-check", type=int, default=20, help="test inputs checked C core vs TFLM after export"
    )
    p.add_argument("--no-c", action="store_true",
                   help="do not write snapuq_model.{c,h} (those of an earlier export are removed: stale)")
    p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's converter output")


def export_model(
    d: str | Path,
    data_dir: str | None = None,
    n_rep: int = 500,
    n_check: int = 20,
    write_c: bool = True,
    log=print,
    verbose: bool = False,
    calib: dict | None = None,
    update: Any = None,
) -> dict[str, Any]:
    """`calib`: the calibration to export instead of DIR/calib.json, and `update`: an open
    snapuq.modeldir.PartsUpdate to write into (`snapuq calibrate`: the new calib.json and its export are
    one unit); without them the export is its own PartsUpdate."""

    d = Path(d)
    paths = ModelPaths(d)
    t0 = time.time()
    check_counts(n_rep, n_check)
    own_calib = calib is None and paths.calib.exists()
    check_parts(d, need=(paths.CONFIG, paths.KERAS) + ((paths.CALIB,) if own_calib else ()))
    own = update is None
    if own:
        update = PartsUpdate(d)
        update.open()  # before the work: a second writer of DIR is refused now, not after the conversion
    try:
        return _export(d, update, own, t0, data_dir, n_rep, n_check, write_c, log, verbose, calib)
    finally:
        if own:
            update.close()


def _export(d: Path, update: Any, own: bool, t0: float, data_dir: str | None, n_rep: int, n_check: int,
            write_c: bool, log, verbose: bool, calib: dict | None) -> dict[str, Any]:
    from tqdm import tqdm


    paths = ModelPaths(d)
    md = load_model_dir(d, calib=calib is None)
    if calib is not None:
        md.calib = calib
    if md.calib is None:
        raise SnapuqError(f"{paths.calib}: missing (the SNAP constants come from `snapuq train`)")
    cfg = md.config
    ds = dataset_of(cfg, data_dir)
    # the classes are the logits' width (what the device checks its buffers against; check_manifest holds the
    # converted model to it), never the labels the data happen to have: a label outside them is refused here
    n_classes = int(md.model.output["logits"].shape[-1])
    ds = with_model_classes(ds, n_classes, str(cfg["dataset"]))
    rng = np.random.default_rng(int(cfg.get("seed", 0)))
    idx = rng.choice(len(ds.x_train), size=min(n_rep, len(ds.x_train)), replace=False)
    rep = ds.x_train[np.sort(idx)]
    em = md.export_model()
    steps = ["int8 model", "float model", "manifest", "arena", "check"]
    bar = tqdm(total=len(steps), desc=f"export {d.name}", unit="step")

    with captured_output(show=verbose):  # TensorFlow's converter logs: shown with -v
        int8 = convert_keras(em, rep, int8=True)
    bar.update()
    with captured_output(show=verbose):
        flt = convert_keras(em, None, int8=False)
    bar.update()
    model = CoreModel(int8)  # the one parse of the new model: the C core's loader
    outs = model.output_map()
    inp = model.inputs[0]
    if inp.dtype != np.int8 or not inp.scale > 0:
        raise ModelFormatError("converted model has an unquantized input")
    calib = md.calib
    qin = {"scale": float(inp.scale), "zero_point": int(inp.zero_point), "shape": [int(v) for v in inp.shape]}
    snap = build_snap(calib, outs, inp=qin)
    variants = {}
    for name in calib.get("variants") or {}:
        if name != snap["variant"]:
            variants[name] = build_snap(calib, outs, variant=name, inp=qin)
    bar.update()
    x_chk = ds.x_test[: max(1, n_check)]
    xq = [quantize_input(x, inp.scale, inp.zero_point).reshape(inp.shape) for x in x_chk]
    arena = arena_bytes(int8, xq[0])
    bar.update()
    ip = TFLMInterpreter(int8)
    differing = 0
    ours = model.predict(np.stack(xq))
    for i, x in enumerate(xq):
        t = ip.invoke(x)
        differing += sum(
            int(np.count_nonzero(v[i].reshape(-1) != t[outs[n]["index"]].reshape(-1)))
            for n, v in ours.items()
        )
    bar.update()
    bar.close()
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "name": d.name,
        "dataset": cfg["dataset"],
        "backbone": cfg.get("backbone"),
        "model": {
            "file": paths.INT8,
            "bytes": len(int8),
            "sha256": sha256(int8),
            "float_file": paths.FLOAT,
            "float_bytes": len(flt),
            "arena_bytes_tflm": arena,
            "ops": sorted(set(model.op_names())),  # also SNAPUQ_MODEL_OPS in snapuq_model.h (an op table)
            "n_ops": len(model.op_names()),
            "capacities": model.capacities(),  # = firmware/tools/caps.py's CAPS=fit flags
        },
        "input": {
            "shape": list(inp.shape),
            "dtype": "int8",
            "layout": "NHWC",
            "scale": inp.scale,
            "zero_point": inp.zero_point,
            "preprocessing": ds.meta.get("preprocessing", "float32 NHWC as returned by the dataset loader"),
            "quantize": "q = clamp(round_half_away(x / scale) + zero_point, -128, 127)",
            # raw reading -> model input, applied before `quantize` (your own data; see snapuq.data.user)
            "normalization": ds.meta.get("normalization")
            or {"kind": "none", "formula": "x_model = x as returned by the dataset loader"},
            "modality": ds.meta.get("modality"),
        },
        "outputs": outs,
        "class_names": list(ds.class_names),
        "n_classes": n_classes,
        "taps": [
            {"name": f"tap{k}", "d": int(t["d"]), "layer": t.get("layer"), "prev": t.get("prev")}
            for k, t in enumerate(cfg["taps"])
        ],
        "weights": [float(w) for w in calib["weights"]],
        "beta": [float(b) for b in calib["beta"]],
        "confidence_proxy": calib.get("conf"),
        "logvar_offset": float(calib.get("logvar_offset", 0.0)),
        "lut_bytes": 4 * 256 * len(snap["taps"]) + 4 * 513,
        "snap": snap,
        "snap_variants": variants,
        "verify": {"n": len(xq), "differing_elements": differing, "oracle": "tflite-micro",
                   "checked": "C core"},
    }
    check_manifest(manifest, int8, model=model)
    stage = ModelPaths(update.path)  # every part staged beside DIR, swapped in together (PartsUpdate.commit)
    write_bytes(stage.int8, int8)
    write_bytes(stage.float_tflite, flt)
    write_text(stage.manifest, json.dumps(manifest, indent=1) + "\n")
    written = [paths.INT8, paths.FLOAT, paths.MANIFEST]
    if write_c:
        write_c_model(stage.root, manifest, int8)
        written += [paths.C_SOURCE, paths.C_HEADER]
    else:  # made from the previous export: stale now
        update.remove(paths.C_SOURCE)
        update.remove(paths.C_HEADER)
    if paths.blob.exists():  # the blob DIR holds is made from what this replaces: rewritten with it

        write_bytes(stage.blob, write_blob(int8, manifest))
        written.append(paths.BLOB)
    if own:
        update.commit()
    log(
        f"wrote {', '.join(written)} to {d} ({time.time() - t0:.1f} s); "
        f"int8 {len(int8)} B, float {len(flt)} B, "
        f"TFLM arena {arena} B, C core vs TFLM on {len(xq)} test inputs: {differing} differing elements"
    )
    return manifest


def check_counts(n_rep: int, n_check: int) -> None:
    """--n-rep >= 1 (int8 calibration needs samples), --n-check >= 0 (0 checks one input, as 1 does)."""
    if n_rep < 1:
        raise SnapuqError(f"--n-rep must be >= 1 (representative samples for int8 calibration), got {n_rep}")
    if n_check < 0:
        raise SnapuqError(f"--n-check must be >= 0, got {n_check}")


def run(args: argparse.Namespace) -> int:
    check_counts(args.n_rep, args.n_check)  # before the model directory is read
    args.data_dir = default_data_dir(args.dir, args.data_dir)
    m = export_model(args.dir, args.data_dir, args.n_rep, args.n_check, not args.no_c,
                     verbose=getattr(args, "verbose", False))
    return 1 if m["verify"]["differing_elements"] else 0
