"""Int8 export: the bit-exact numpy reference (`reference.Int8Model`), the TFLM oracle
(`tflm`), the integer SNAP path (`fixedpoint`, docs/FIXED_POINT.md), `snapuq export` / `verify`.

`int8_predict(D, x_float)` runs an exported model directory the way the device does: quantize the
input with the manifest, run the int8 reference, score SNAP in fixed point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

_CACHE: dict[tuple[str, float, float], tuple[Any, dict]] = {}


def _load(d: Path):
    from snapuq.errors import SnapuqError
    from snapuq.export.manifest import check_manifest, load_manifest
    from snapuq.export.reference import Int8Model

    p = d / "model_int8.tflite"
    if not p.is_file():
        raise SnapuqError(f"{p}: missing (run `snapuq export {d}` first)")
    key = (
        str(p.resolve()),
        p.stat().st_mtime,
        (d / "snapuq.json").stat().st_mtime if (d / "snapuq.json").exists() else 0.0,
    )
    if key not in _CACHE:
        b = p.read_bytes()
        man = load_manifest(d)
        check_manifest(man, b, str(d / "snapuq.json"))
        _CACHE.clear()
        _CACHE[key] = (Int8Model(b), man)
    return _CACHE[key]


def int8_predict(d: str | Path, x: np.ndarray) -> dict[str, Any]:
    """Int8 inference + integer SNAP for float inputs (N, *input_shape).

    Returns dequantized outputs ("logits", "probs", "tap{k}_a", "tap{k}_mu", "tap{k}_logvar" =
    true log σ², offset added), "pred" (argmax of the int8 logits), the integer SNAP values as
    floats ("S", "F", "m", "z", "U", "ebar" (N, L)), "flag" (U ≥ threshold), the raw Q16 integers
    under "q16", the int8 codes under "codes" and, per extra calibrated variant, "variants".
    """
    from snapuq.export.convert import quantize_input
    from snapuq.export.fixedpoint import snap_int

    d = Path(d)
    model, man = _load(d)
    inp = man["input"]
    x = np.asarray(x, np.float32).reshape(-1, *inp["shape"][1:])
    codes: dict[str, list[np.ndarray]] = {k: [] for k in man["outputs"]}
    for xi in x:
        out = model.invoke(quantize_input(xi[None], inp["scale"], inp["zero_point"]))
        for k, v in out.items():
            codes[k].append(v.reshape(-1))
    c = {k: np.stack(v) for k, v in codes.items()}
    res: dict[str, Any] = {}
    off = float(man["snap"]["float"]["logvar_offset"])
    logvar_names = {t["logvar"] for t in man["snap"]["taps"]}
    for k, v in c.items():
        o = man["outputs"][k]
        val = (v.astype(np.float64) - o["zero_point"]) * o["scale"]
        res[k] = val + off if k in logvar_names else val
    res["pred"] = c["logits"].argmax(1)
    r = snap_int(c, man["snap"])
    res.update(_as_float(r))
    res["q16"] = {k: v for k, v in r.items() if k != "flag"}
    res["codes"] = c
    res["variants"] = {
        name: _as_float(snap_int(c, s)) for name, s in (man.get("snap_variants") or {}).items()
    }
    return res


def _as_float(r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    q = 1.0 / 65536.0
    return {
        "S": r["S16"] * q,
        "F": r["F16"] * q,
        "m": r["m16"] * q,
        "z": r["Z16"] * q,
        "U": r["U16"] * q,
        "ebar": r["ebar16"] * q,
        "s": r["s16"] * q,
        "flag": r["flag"],
    }
