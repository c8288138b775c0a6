"""`snapuq verify DIR [--n N]`: the C core (the code the device runs, here built for the host) vs
the TFLM interpreter (the independent oracle) on N test inputs; prints the number of differing
elements per output and exits 1 if any differ."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.io import write_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="exported model directory (model_int8.tflite + snapuq.json)")
    p.add_argument("--n", type=int, default=100, help="number of test inputs")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--random", action="store_true", help="random int8 inputs instead of the test split")
    p.add_argument("--json", default=None, help="also write the counts to this JSON file")


def verify(d: str | Path, n: int = 100, data_dir: str | None = None, random: bool = False) -> dict:
    from tqdm import tqdm

    from snapuq.export import load_exported
    from snapuq.export.convert import quantize_input
    from snapuq.export.tflm import TFLMInterpreter
    from snapuq.modeldir import ModelPaths

    if n < 1:
        raise SnapuqError("--n must be >= 1")
    paths = ModelPaths(d)
    model, _, man, _ = load_exported(paths.root)
    ip = TFLMInterpreter(paths.int8.read_bytes())
    inp = man["input"]
    if random:
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=inp["shape"]).astype(np.int8) for _ in range(n)]
        source = "random int8"
    else:
        from snapuq.data import load_dataset

        ds = load_dataset(man["dataset"], data_dir, 0)
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


def run(args: argparse.Namespace) -> int:
    from snapuq.io import default_data_dir

    if args.n < 1:
        raise SnapuqError(f"--n must be >= 1, got {args.n}")
    args.data_dir = default_data_dir(args.dir, args.data_dir)
    res = verify(args.dir, args.n, args.data_dir, args.random)
    print(f"C core vs TFLM on {res['n']} inputs ({res['source']}):")
    for k in res["differing"]:
        print(f"  {k:<16} {res['differing'][k]:>8} differing of {res['elements'][k]} elements")
    print(f"total differing elements: {res['differing_total']}")
    if args.json:
        write_text(args.json, json.dumps(res, indent=1) + "\n")
    return 1 if res["differing_total"] else 0
