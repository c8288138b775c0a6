"""The host int8 reference the harness checks every device result against: the C core built for
the host (snapuq.native.ccore: the same runtime and integer SNAP code the firmware runs, checked against
TFLM by `snapuq verify` and the tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import ModelFormatError
from snapuq.export import load_exported
from snapuq.export.cgen import check_c_header
from snapuq.export.convert import quantize_input
from snapuq.modeldir import ModelPaths, check_parts


@dataclass
class HostResult:
    outputs: list[np.ndarray]          # int8 outputs in model output order
    snap: dict[str, Any]               # pred, ebar (list), s, sf, m, u, flag (integers)


class HostReference:
    def __init__(self, model_dir: Path):
        paths = ModelPaths(model_dir)
        self.model_dir = paths.root
        self.model, self.snap, self.manifest, _ = load_exported(paths.root)
        # the firmware is built from the generated C: it must be the export the host reference reads
        check_parts(paths.root, need=(paths.INT8, paths.MANIFEST), also=(paths.C_SOURCE, paths.C_HEADER))
        check_c_header(paths.c_header, self.manifest)
        self.tflite = paths.int8.read_bytes()
        tin = self.model.inputs[0]
        if tin.dtype != np.int8:
            raise ModelFormatError(f"{paths.int8}: input tensor is not quantized int8")
        self.in_shape = tuple(int(s) for s in tin.shape)
        self.in_scale = tin.scale
        self.in_zp = tin.zero_point
        self.output_names = self.model.output_names

    @property
    def in_bytes(self) -> int:
        return int(np.prod(self.in_shape))

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """float input (one sample, without batch axis) -> int8 exactly as the exporter and the
        TFLite QUANTIZE kernel do (float32 division, round half away from zero, clamp)."""

        return np.asarray(quantize_input(x, self.in_scale, self.in_zp), np.int8).reshape(self.in_shape)

    def device_result(self, res: dict[str, Any], outs: dict[int, list[int]] | None) -> dict[str, Any]:
        """The device's result fields as the firmware gives them (a SNAP build reports pred itself)."""
        return res

    def run(self, xq: np.ndarray) -> HostResult:
        outs, r = self.snap.run(self.model, np.asarray(xq, np.int8).reshape(self.in_shape))
        by_index = [np.asarray(outs[name], np.int8).reshape(-1) for name in self.output_names]
        snap = normalize_snap(r)
        snap["pred"] = int(r["pred"][0])
        return HostResult(outputs=by_index, snap=snap)


def _scalar(v: Any) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def normalize_snap(r: dict[str, Any]) -> dict[str, Any]:
    """The C core's Q16 arrays (batch of one) -> the device's result fields as Python ints:
    ebar (per tap), z (per-tap score s_l), s (S), sf (F), m, u (U), pe (p_err), al (alarm), flag."""
    return {"ebar": [int(v) for v in np.asarray(r["ebar16"]).reshape(-1)],
            "z": [int(v) for v in np.asarray(r["s16"]).reshape(-1)],
            "s": _scalar(r["S16"]), "sf": _scalar(r["F16"]), "m": _scalar(r["m16"]),
            "u": _scalar(r["U16"]), "pe": _scalar(r.get("P16", r["U16"])), "al": _scalar(r.get("A16", 0)),
            "flag": _scalar(r["flag"])}
