"""Int8 export: `snapuq export` (convert, manifest, C arrays), `snapuq verify` (the C core vs the
TFLM oracle), the TFLM wrapper (`tflm`) and the fixed-point SNAP constants (`fixedpoint`,
docs/FIXED_POINT.md).

`int8_predict(D, x_float)` runs an exported model directory the way the device does: quantize the
input with the manifest, run the C core (snapuq.native.ccore) and score SNAP with the core's integer code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from snapuq.export.convert import quantize_input
from snapuq.export.manifest import check_manifest, load_manifest
from snapuq.modeldir import ModelPaths, check_parts
from snapuq.native.ccore import CoreModel, CoreSnap

_CACHE: dict[tuple[str, float, float], tuple[Any, Any, dict, dict]] = {}


def load_exported(d: str | Path) -> tuple[Any, Any, dict, dict]:
    """(CoreModel, CoreSnap, manifest, {variant: CoreSnap}) of an exported model directory, checked
    against each other and against MANIFEST.sha256 (snapuq.modeldir.check_parts); cached while the files
    are unchanged."""

    paths = ModelPaths(d)
    paths.need_export()
    key = (str(paths.int8.resolve()), paths.int8.stat().st_mtime, paths.manifest.stat().st_mtime,
           paths.parts.stat().st_mtime if paths.parts.exists() else None)
    if key not in _CACHE:
        check_parts(paths.root, need=(paths.INT8, paths.MANIFEST))  # one export of this model and calib
        b = paths.int8.read_bytes()
        man = load_manifest(paths.root)
        model = check_manifest(man, b, str(paths.manifest), CoreModel(b))
        variants = {name: CoreSnap(b, {**man, "snap": s})
                    for name, s in (man.get("snap_variants") or {}).items()}
        _CACHE.clear()
        _CACHE[key] = (model, CoreSnap(b, man), man, variants)
    return _CACHE[key]


def int8_predict(d: str | Path, x: np.ndarray) -> dict[str, Any]:
    """Int8 inference + integer SNAP for float inputs (N, *input_shape), on the C core.

    Returns dequantized outputs ("logits", "probs", "tap{k}_a", "tap{k}_mu", "tap{k}_logvar" =
    true log σ², offset added), "pred" (argmax of the int8 logits), the integer SNAP values as
    floats ("S", "F", "m", "z", "U", "ebar" (N, L)), "flag" (U ≥ threshold), the raw Q16 integers
    under "q16", the int8 codes under "codes" and, per extra calibrated variant, "variants".
    """

    model, snap, man, variants = load_exported(d)
    inp = man["input"]
    x = np.asarray(x, np.float32).reshape(-1, *inp["shape"][1:])
    xq = quantize_input(x, inp["scale"], inp["zero_point"]).reshape(len(x), *inp["shape"][1:])
    outs, r = snap.run(model, xq)
    c = {k: v.reshape(len(x), -1) for k, v in outs.items()}
    res: dict[str, Any] = {}
    off = float(man["snap"]["float"]["logvar_offset"])
    logvar_names = {t["logvar"] for t in man["snap"]["taps"]}
    for k, v in c.items():
        o = man["outputs"][k]
        val = (v.astype(np.float64) - o["zero_point"]) * o["scale"]
        res[k] = val + off if k in logvar_names else val
    res["pred"] = r["pred"]
    res.update(_as_float(r))
    res["q16"] = {k: v for k, v in r.items() if k not in ("flag", "pred")}
    res["codes"] = c
    cx = {**c, "input": xq.reshape(len(x), -1)}
    res["variants"] = {name: _as_float(vs.score(cx)) for name, vs in variants.items()}
    return res


# the float value of each Q16 integer of the core's SNAP score
_Q16 = {"S": "S16", "F": "F16", "m": "m16", "z": "Z16", "U": "U16", "p_err": "P16", "alarm": "A16",
        "ebar": "ebar16", "s": "s16"}  # fmt: skip


def _as_float(r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    q = 1.0 / 65536.0
    return {**{k: r[i] * q for k, i in _Q16.items()}, "flag": r["flag"]}
