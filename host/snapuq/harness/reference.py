"""The host int8 reference the harness checks every device result against: the numpy
TFLite-arithmetic model (snapuq.export.reference) and the integer SNAP spec
(snapuq.export.fixedpoint, docs/FIXED_POINT.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import ModelFormatError


@dataclass
class HostResult:
    outputs: list[np.ndarray]          # int8 outputs in model output order
    snap: dict[str, Any]               # pred, ebar (list), s, sf, m, u, flag (integers)


class HostReference:
    def __init__(self, model_dir: Path):
        from snapuq.export.reference import Int8Model
        from snapuq.export.tflite_reader import read_tflite

        self.model_dir = Path(model_dir)
        tfl_path = self.model_dir / "model_int8.tflite"
        man_path = self.model_dir / "snapuq.json"
        for p in (tfl_path, man_path):
            if not p.exists():
                raise ModelFormatError(f"{p} missing: run `snapuq export {self.model_dir}` first")
        self.tflite = tfl_path.read_bytes()
        self.manifest = json.loads(man_path.read_text())
        self.graph = read_tflite(self.tflite)
        self.model = Int8Model(self.tflite)
        tin = self.graph.tensors[self.graph.inputs[0]]
        if tin.quant is None:
            raise ModelFormatError(f"{tfl_path}: input tensor has no quantization parameters")
        self.in_shape = tuple(int(s) for s in tin.shape)
        self.in_scale = float(tin.quant.scale[0])
        self.in_zp = int(tin.quant.zero_point[0])
        self.output_names = self.graph.output_names()

    @property
    def in_bytes(self) -> int:
        return int(np.prod(self.in_shape))

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """float input (one sample, without batch axis) -> int8 with the model's input params."""
        try:
            from snapuq.export.reference import quantize_input  # the exporter's own rounding
        except ImportError:
            quantize_input = None
        if quantize_input is not None:
            q = quantize_input(x, self.in_scale, self.in_zp)
        else:
            q = np.clip(np.round(np.asarray(x, np.float64) / self.in_scale) + self.in_zp, -128, 127)
        return np.asarray(q, np.int8).reshape(self.in_shape)

    def run(self, xq: np.ndarray) -> HostResult:
        from snapuq.export.fixedpoint import snap_int

        outs = self.model.invoke(xq.reshape(self.in_shape))
        by_index = [np.asarray(outs[name], np.int8).reshape(-1) for name in self.output_names]
        s = snap_int({k: np.asarray(v) for k, v in outs.items()}, self.manifest)
        return HostResult(outputs=by_index, snap=normalize_snap(s))


def _scalar(v: Any) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def normalize_snap(s: Any) -> dict[str, Any]:
    """snap_int's result -> {pred, ebar, s, sf, m, u, flag} with Python ints."""
    d = dict(s) if isinstance(s, dict) else dict(vars(s))
    alias = {"pred": ("pred",), "ebar": ("ebar", "ebar16"), "s": ("s", "S", "S16"),
             "sf": ("sf", "F16", "s_feat", "F"), "m": ("m", "m16"), "u": ("u", "U", "U16"),
             "flag": ("flag",), "z": ("z", "s16", "z_tap")}
    out: dict[str, Any] = {}
    for key, names in alias.items():
        for n in names:
            if n in d:
                v = d[n]
                out[key] = [int(t) for t in np.asarray(v).reshape(-1)] if key in ("ebar", "z") else _scalar(v)
                break
    return out
