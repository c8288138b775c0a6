"""Helpers for the C-core tests: build the core with the host compiler, make small int8 TFLite
models with Keras, and run them through the C runtime and the tflite-micro interpreter."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
TESTS_C = ROOT / "tests" / "c"
BUILD = ROOT / "build" / "c-core-tests"

CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g", "-O1"]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def core_sources(*groups: str) -> list[str]:
    """Sources (relative to firmware/core) of the core.mk groups named, e.g. "RUNTIME", "SNAP":
    core.mk is the one list of core files every build reads."""
    found: dict[str, list[str]] = {}
    for line in (CORE / "core.mk").read_text().splitlines():
        m = re.match(r"^SNAPUQ_CORE_([A-Z]+)_SRC\s*\+=\s*(\S+)\s*$", line)
        if m:
            found.setdefault(m.group(1), []).append(m.group(2))
    missing = [g for g in groups if g not in found]
    if missing:
        raise RuntimeError(f"firmware/core/core.mk lists no SNAPUQ_CORE_{missing[0]}_SRC")
    return [f for g in groups for f in found[g]]


RUNTIME_SRC = core_sources("RUNTIME", "DSP")
SNAP_SRC = core_sources("SNAP")


def build_binary(name: str, sources: list[str], defines: tuple[str, ...] = (),
                 sanitize: bool = True, extra: tuple[str, ...] = ()) -> Path:
    """Compile tests/c/<sources> + the core into build/c-core-tests/<name> (cached by mtime)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / name
    core = [CORE / s for s in RUNTIME_SRC + SNAP_SRC if (CORE / s).exists() and (CORE / s).stat().st_size]
    srcs = core + [TESTS_C / s for s in sources]
    deps = srcs + list(CORE.glob("**/*.h")) + [CORE / "core.mk"]
    if out.exists() and all(out.stat().st_mtime >= p.stat().st_mtime for p in deps):
        return out
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = ["gcc", *CFLAGS, *(SAN if sanitize else []), *[f"-D{d}" for d in defines], *extra,
           f"-I{CORE}", *map(str, srcs), "-o", tmp, "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    os.replace(tmp, out)
    return out


def run_model_c(binary: Path, tflite: bytes,
                inputs: list[np.ndarray]) -> tuple[dict[str, Any], list[list[np.ndarray]]]:
    """Run N input records (one int8 array per record; single-input models) through run_model."""
    with tempfile.TemporaryDirectory() as td:
        m = Path(td) / "m.tflite"
        m.write_bytes(tflite)
        if not inputs:
            p = subprocess.run([str(binary), str(m)], capture_output=True, text=True)
            return json.loads(p.stdout.splitlines()[0]), []
        xi = Path(td) / "in.bin"
        xo = Path(td) / "out.bin"
        xi.write_bytes(b"".join(np.ascontiguousarray(x, dtype=np.int8).tobytes() for x in inputs))
        p = subprocess.run([str(binary), str(m), str(xi), str(xo), str(len(inputs))],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"run_model failed ({p.returncode}): {p.stderr.strip()} {p.stdout.strip()}")
        info = json.loads(p.stdout.splitlines()[0])
        raw = np.frombuffer(xo.read_bytes(), dtype=np.int8)
    sizes = [o["bytes"] for o in info["outputs"]]
    rec = sum(sizes)
    outs = []
    for r in range(len(inputs)):
        base = r * rec
        parts = []
        for o, s in zip(info["outputs"], sizes):
            dtype = np.float32 if o.get("type") == 0 else np.int8  # TFLite type 0 = FLOAT32
            parts.append(raw[base:base + s].view(dtype).reshape(o["shape"]))
            base += s
        outs.append(parts)
    return info, outs


def run_model_tflm(tflite: bytes, inputs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Every output of TFLM (the oracle, through snapuq.export.tflm) for each input."""
    from snapuq.export.tflm import TFLMInterpreter
    it = TFLMInterpreter(tflite, arena_size=1 << 22)
    return [it.invoke(x) for x in inputs]


def tflm_min_arena(tflite: bytes, x: np.ndarray) -> int:
    """Smallest arena_size (bytes, 16-byte granularity) with which TFLM allocates and invokes."""
    from snapuq.export.tflm import arena_bytes
    return arena_bytes(tflite, np.ascontiguousarray(x, dtype=np.int8))


def convert_int8(model: Any, rep: Callable[[], Any] | np.ndarray, per_tensor: str = "") -> bytes:
    """Full-integer int8 conversion (int8 input and output) of a Keras model. per_tensor: "" (the
    converter's per-channel weights), "dense" (per-tensor FULLY_CONNECTED weights) or "all"
    (per-tensor weights everywhere, conv and depthwise included)."""
    import tensorflow as tf
    if isinstance(rep, np.ndarray):
        data = rep

        def rep_fn() -> Any:
            for i in range(len(data)):
                yield [data[i:i + 1].astype(np.float32)]
    else:
        rep_fn = rep
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep_fn
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    if per_tensor == "dense":
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    elif per_tensor == "all":
        conv._experimental_disable_per_channel = True
    elif per_tensor:
        raise ValueError(f"per_tensor must be '', 'dense' or 'all', not {per_tensor!r}")
    return bytes(conv.convert())


def have_tools(*names: str) -> bool:
    return all(shutil.which(n) for n in names)


def cached_model(key: str, make: Callable[[], bytes]) -> bytes:
    """Converted models are cached under build/ (conversion costs seconds; the key names the
    architecture and seed completely)."""
    d = BUILD / "models"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{key}.tflite"
    if p.exists():
        return p.read_bytes()
    data = make()
    tmp = p.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, p)
    return data


def compare_outputs(ours: list[list[np.ndarray]], ref: list[list[np.ndarray]]) -> list[int]:
    """Number of differing elements per output over all records."""
    n_out = len(ref[0])
    diffs = [0] * n_out
    for a, b in zip(ours, ref):
        for k in range(n_out):
            if a[k].dtype == np.float32:  # float outputs (DEQUANTIZE): compare bit patterns
                x, y = a[k].view(np.uint32), np.asarray(b[k], np.float32).view(np.uint32)
            else:
                x, y = a[k].astype(np.int32), b[k].astype(np.int32)
            diffs[k] += int((x.ravel() != y.ravel()).sum())
    return diffs
