"""A model directory as eval reads it (checked first: config.json, calib.json, its parts), JSON-safe
results and a timer."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.formats import read_calib, read_config
from snapuq.modeldir import ModelPaths, check_parts
from snapuq.nn.saved import load_model_dir


class Timer:
    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    def __call__(self, name: str):
        timer = self

        class _Ctx:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.t[name] = round(timer.t.get(name, 0.0) + time.perf_counter() - self.t0, 3)

        return _Ctx()


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return _jsonable(o.tolist())
    if isinstance(o, (np.floating, float)):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def _check_model_dir(d: Path, calib: bool = True) -> None:
    if not d.exists():
        raise SnapuqError(f"model directory {d} does not exist (create it with `snapuq train --out {d}`)")
    if not d.is_dir():
        raise SnapuqError(f"{d} is not a directory")
    paths = ModelPaths(d)
    for p in (paths.config, paths.keras):
        if not p.is_file():
            raise SnapuqError(f"{d}: missing {p.name} (not a model directory written by `snapuq train`)")
    # the validators every reader runs (snapuq.formats): eval refuses what export refuses, before any work
    cfg = read_config(paths.config)
    if calib and paths.calib.exists():
        read_calib(paths.calib, cfg)
    # one unit (MANIFEST.sha256): the calibration of this model.keras and, where eval reads it (the int8
    # rows), the export of both, refused before any work rather than after the float rows
    with_calib = calib and paths.calib.exists()
    check_parts(d, need=(paths.CONFIG, paths.KERAS) + ((paths.CALIB,) if with_calib else ()),
                also=(paths.INT8, paths.MANIFEST) if calib else ())


def load(d: Path, calib: bool = True):
    """The model directory, config.json and calib.json validated first (`calib=False`: without reading
    calib.json, for `snapuq calibrate`, which replaces it)."""
    _check_model_dir(d, calib)

    try:
        return load_model_dir(d) if calib else load_model_dir(d, calib=False)
    except SnapuqError:
        raise
    except Exception as e:  # a truncated or foreign model.keras
        raise SnapuqError(f"{d}: cannot load the model ({type(e).__name__}: {str(e)[:160]})") from e


def baselines_record(bdir: Path, own: bool) -> dict:
    """Which trained baselines were scored: their folder, whether it is the model directory's own, and the
    seed they were trained with (baselines.json), so a report can say when one set served several seeds."""
    info = {}
    if (bdir / "baselines.json").is_file():
        info = json.loads((bdir / "baselines.json").read_text())
    ens = info.get("ensemble") or {}
    return {"dir": str(bdir) if bdir.is_dir() else None, "own": bool(own), "seed": info.get("seed"),
            "ensemble_seeds": ens.get("seeds") if ens.get("from_model_dirs") else None}  # fmt: skip
