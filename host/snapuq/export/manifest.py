"""snapuq.json: the manifest that ties model_int8.tflite to its SNAP constants, and the checks
that a manifest matches the model it sits next to."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from snapuq.errors import ModelFormatError
from snapuq.modeldir import ModelPaths
from snapuq.native.ccore import CoreModel

MANIFEST_FORMAT = "snapuq-manifest"
MANIFEST_VERSION = 1


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def load_manifest(d: str | Path) -> dict[str, Any]:
    p = ModelPaths(d).manifest
    try:
        m = json.loads(p.read_text())
    except FileNotFoundError:
        raise ModelFormatError(f"{p}: missing (run `snapuq export {d}` first)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFormatError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(m, dict) or m.get("format") != MANIFEST_FORMAT:
        raise ModelFormatError(f"{p}: not a snapuq manifest (format != {MANIFEST_FORMAT!r})")
    if m.get("version") != MANIFEST_VERSION:
        raise ModelFormatError(f"{p}: manifest version {m.get('version')}, expected {MANIFEST_VERSION}")
    return m


def check_manifest(
    manifest: dict[str, Any], tflite_bytes: bytes, where: str = "snapuq.json", model: CoreModel | None = None
) -> CoreModel:
    """One-line ModelFormatError unless the manifest describes exactly this .tflite; returns the
    model as the C core loaded it (pass `model` when it is loaded already)."""
    mm = manifest.get("model") or {}
    if mm.get("sha256") and mm["sha256"] != sha256(tflite_bytes):
        raise ModelFormatError(
            f"{where} does not match the model: sha256 differs "
            f"(manifest {str(mm['sha256'])[:12]}, model {sha256(tflite_bytes)[:12]})"
        )
    model = model if model is not None else CoreModel(tflite_bytes)
    inp = model.inputs[0]
    mi = manifest.get("input") or {}
    if list(mi.get("shape", [])) != list(inp.shape):
        raise ModelFormatError(
            f"{where} does not match the model: input shape {mi.get('shape')} vs {list(inp.shape)}"
        )
    if (
        abs(float(mi.get("scale", 0)) - inp.scale) > 1e-12
        or int(mi.get("zero_point", 999)) != inp.zero_point
    ):
        raise ModelFormatError(f"{where} does not match the model: input quantization differs")
    outs = model.output_map()
    mo = manifest.get("outputs") or {}
    if set(mo) != set(outs):
        raise ModelFormatError(f"{where} does not match the model: outputs {sorted(mo)} vs {sorted(outs)}")
    for name, o in outs.items():
        e = mo[name]
        if (
            int(e.get("index", -1)) != o["index"]
            or list(e.get("shape", [])) != o["shape"]
            or int(e.get("zero_point", 999)) != o["zero_point"]
            or abs(float(e.get("scale", 0)) - o["scale"]) > 1e-12 * max(1.0, abs(o["scale"]))
        ):
            raise ModelFormatError(
                f"{where} does not match the model: output '{name}' differs (index/shape/quantization)"
            )
    if "logits" in outs:
        # the classes are the logits' elements: what the generated C (.n_classes) and the device check
        n = math.prod(int(v) for v in outs["logits"]["shape"])
        if "n_classes" in manifest and int(manifest["n_classes"]) != n:
            raise ModelFormatError(
                f"{where}: n_classes {manifest['n_classes']}, the model's logits have {n} "
                f"(re-export: `snapuq export`)"
            )
        names = manifest.get("class_names")
        if names and len(names) != n:
            raise ModelFormatError(
                f"{where}: {len(names)} class_names, the model's logits have {n} (re-export: `snapuq export`)"
            )
    for tp in (manifest.get("snap") or {}).get("taps", []):
        for role in ("a", "mu", "logvar"):
            if tp.get(role) not in outs:
                raise ModelFormatError(
                    f"{where}: tap {tp.get('name')} names output {tp.get(role)!r} "
                    f"that the model does not have"
                )
    return model
