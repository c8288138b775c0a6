"""`snapuq harness --model FILE.tflite`: a bare int8 TFLite file, no model directory and no SNAP fields.

The host reference is the C core built for the host running the file (snapuq.native.ccore), the same
runtime the stock SNAP=0 firmware runs; every output tensor of the device is compared with it. The
inputs come from an `.npz` (`x`: int8 codes as they are, or floats quantized with the input tensor's
scale / zero point; optional `y`: integer labels) or are seeded uniform random int8 codes. Where they
came from is written into run.json, summary.json and every results.jsonl line ("inputs").

pred (device and host) is the index of the largest code of output 0, the first one on ties; accuracy
is reported only when the inputs carry labels (`y`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.export.convert import quantize_input
from snapuq.native.ccore import CoreModel

DEFAULT_RANDOM_INPUTS = 10


@dataclass
class BareResult:
    outputs: list[np.ndarray]  # int8 outputs in model output order, flattened
    snap: dict[str, Any]  # only "pred" (argmax of output 0): a bare model has no SNAP fields


def is_bare_model(path: Path) -> bool:
    """A file given to --model (a model directory is a folder)."""
    return Path(path).is_file()


class BareReference:
    """The HostReference of a bare .tflite (same attributes the runner reads)."""

    manifest = None

    def __init__(self, path: Path):
        self.path = Path(path)
        self.model_dir = self.path
        self.tflite = self.path.read_bytes()
        if len(self.tflite) < 8 or self.tflite[4:8] != b"TFL3":
            raise SnapuqError(f"--model {self.path}: neither a model directory nor a TFLite flatbuffer "
                              "(no TFL3 identifier)")
        self.model = CoreModel(self.tflite)  # the loader's own one-line reason for a file it refuses
        if len(self.model.inputs) != 1 or self.model.inputs[0].dtype != np.int8:
            raise SnapuqError(f"--model {self.path}: the firmware runs models with one int8 input "
                              f"(this one has {len(self.model.inputs)} input(s) of "
                              f"{', '.join(np.dtype(t.dtype).name for t in self.model.inputs)})")
        bad = [t.name for t in self.model.outputs if t.dtype != np.int8]
        if bad:
            raise SnapuqError(f"--model {self.path}: output(s) {', '.join(bad)} are not int8; the harness "
                              "compares int8 outputs")
        tin = self.model.inputs[0]
        self.in_shape = tuple(int(s) for s in tin.shape)
        self.in_scale = tin.scale
        self.in_zp = tin.zero_point
        self.output_names = self.model.output_names
        self.sha256 = hashlib.sha256(self.tflite).hexdigest()

    @property
    def in_bytes(self) -> int:
        return int(np.prod(self.in_shape))

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Inputs are int8 codes already (load_inputs quantizes float `.npz` inputs once)."""
        return np.asarray(x, np.int8).reshape(self.in_shape)

    def run(self, xq: np.ndarray) -> BareResult:
        outs = self.model.invoke(np.asarray(xq, np.int8).reshape(self.in_shape))
        by_index = [np.asarray(outs[name], np.int8).reshape(-1) for name in self.output_names]
        return BareResult(outputs=by_index, snap={"pred": argmax(by_index[0])})

    def device_result(self, res: dict[str, Any], outs: dict[int, list[int]] | None) -> dict[str, Any]:
        """The stock SNAP=0 firmware answers `results` with output 0's codes (logits=) and no pred: the
        device's pred is their argmax, as on the host."""
        return {**res, "pred": argmax(outs[0] if outs and 0 in outs else res.get("logits", []))}


def argmax(codes: Any) -> int:
    a = np.asarray(codes).reshape(-1)
    return int(np.argmax(a)) if a.size else 0


def load_inputs(ref: BareReference, npz: Path | None, seed: int, limit: int | None,
                start: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(x int8 (N, *input shape), y int64 (N,), -1 where unlabelled, the inputs' description)."""
    if npz is None:
        n = limit if limit is not None else DEFAULT_RANDOM_INPUTS
        rng = np.random.default_rng(seed)
        x = rng.integers(-128, 128, size=(start + n, *ref.in_shape[1:]), dtype=np.int64).astype(np.int8)
        y = np.full(len(x), -1, np.int64)
        desc: dict[str, Any] = {"source": "random", "seed": int(seed), "labelled": False,
                                "label": f"random int8 (numpy default_rng({seed}), uniform -128..127)"}
        return x[start:], y[start:], desc
    npz = Path(npz)
    if not npz.is_file():
        raise SnapuqError(f"--inputs {npz}: no such file")
    try:
        with np.load(npz, allow_pickle=False) as z:
            if "x" not in z.files:
                raise SnapuqError(f"--inputs {npz}: no array 'x' (has: {', '.join(z.files) or 'none'})")
            x = np.asarray(z["x"])
            y = np.asarray(z["y"]) if "y" in z.files else None
    except (OSError, ValueError) as e:
        raise SnapuqError(f"--inputs {npz}: not a readable .npz ({e})") from None
    want = ref.in_shape[1:]
    per = int(np.prod(want))
    if x.ndim >= 1 and tuple(x.shape[1:]) != tuple(want) and x.size % per == 0 and x.ndim >= 2 \
            and int(np.prod(x.shape[1:])) == per:
        x = x.reshape(len(x), *want)  # same element count per input, another layout (e.g. flattened)
    if x.ndim < 1 or tuple(x.shape[1:]) != tuple(want):
        raise SnapuqError(f"--inputs {npz}: x has shape {tuple(x.shape)}, the model takes (N, "
                          f"{', '.join(str(d) for d in want)})")
    if x.dtype == np.int8:
        kind = "int8 codes"
    elif np.issubdtype(x.dtype, np.floating):
        x = np.asarray(quantize_input(x, ref.in_scale, ref.in_zp), np.int8)
        kind = f"float, quantized with the input's scale {ref.in_scale:g} / zero point {ref.in_zp}"
    else:
        raise SnapuqError(f"--inputs {npz}: x is {x.dtype}; give int8 codes or floats")
    if y is not None:
        y = np.asarray(y).reshape(-1)
        if len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            raise SnapuqError(f"--inputs {npz}: y must hold one integer label per input ({len(x)}), "
                              f"got {y.dtype} of shape {tuple(y.shape)}")
        n_cls = int(np.prod(ref.model.outputs[0].shape))
        out = y[(y < 0) | (y >= n_cls)]
        if len(out):
            raise SnapuqError(f"--inputs {npz}: label {int(out[0])} is outside the model's {n_cls} "
                              "classes (output 0)")
    end = len(x) if limit is None else min(len(x), start + limit)
    yy = np.full(len(x), -1, np.int64) if y is None else y.astype(np.int64)
    desc = {"source": "npz", "path": str(npz.resolve()), "labelled": y is not None, "x": kind,
            "label": f"{npz.name} ({kind}{', labelled' if y is not None else ', no labels'})"}
    return x[start:end], yy[start:end], desc


def linked_copy(ref: BareReference, build_dir: Path) -> Path:
    """The file under a plain name (its content hash) in the build folder: make takes paths of letters,
    digits and ._-/ only (a path with a space or ':' would be split)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    p = build_dir / f"model_{ref.sha256[:16]}.tflite"
    if not p.is_file() or p.read_bytes() != ref.tflite:
        p.write_bytes(ref.tflite)
    return p
