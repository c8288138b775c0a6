"""The host int8 reference the harness checks every device result against: the numpy
TFLite-arithmetic model (snapuq.export.reference) and the integer SNAP spec
(snapuq.export.fixedpoint, docs/FIXED_POINT.md)."""

from __future__ import annotations

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
        from snapuq.export.manifest import check_manifest, load_manifest

        self.tflite = tfl_path.read_bytes()
        self.manifest = load_manifest(self.model_dir)
        check_manifest(self.manifest, self.tflite, str(man_path))  # the same check as verify / eval
        if not isinstance(self.manifest.get("snap"), dict):
            raise ModelFormatError(f"{man_path}: no 'snap' section (export the model with its SNAP heads)")
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
        """float input (one sample, without batch axis) -> int8 exactly as the exporter and the
        TFLite QUANTIZE kernel do (float32 division, round half away from zero, clamp)."""
        from snapuq.export.convert import quantize_input

        return np.asarray(quantize_input(x, self.in_scale, self.in_zp), np.int8).reshape(self.in_shape)

    def run(self, xq: np.ndarray) -> HostResult:
        from snapuq.export.fixedpoint import snap_int

        outs = self.model.invoke(xq.reshape(self.in_shape))
        by_index = [np.asarray(outs[name], np.int8).reshape(-1) for name in self.output_names]
        codes = {k: np.asarray(v, np.int8).reshape(1, -1) for k, v in outs.items()}
        snap = normalize_snap(snap_int(codes, self.manifest["snap"]))
        snap["pred"] = int(np.argmax(codes["logits"][0]))
        return HostResult(outputs=by_index, snap=snap)


def _scalar(v: Any) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def normalize_snap(r: dict[str, Any]) -> dict[str, Any]:
    """snap_int's Q16 arrays (batch of one) -> the device's result fields as Python ints:
    ebar (per tap), z (per-tap score s_l), s (S), sf (F), m, u (U), flag."""
    return {"ebar": [int(v) for v in np.asarray(r["ebar16"]).reshape(-1)],
            "z": [int(v) for v in np.asarray(r["s16"]).reshape(-1)],
            "s": _scalar(r["S16"]), "sf": _scalar(r["F16"]), "m": _scalar(r["m16"]),
            "u": _scalar(r["U16"]), "flag": _scalar(r["flag"])}
