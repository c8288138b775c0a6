"""Int8 firmware variants of a model directory for the deployment table (`snapuq bench --table`).

    D/variants/base.tflite        the backbone alone (outputs logits, probs; no SNAP heads)
    D/variants/ee.tflite          the early-exit model: one int8 SOFTMAX output per exit (+ the final one)
    D/variants/deep_{k}.tflite    the deep-ensemble members, each with one int8 SOFTMAX output
    D/variants/variants.json      files, bytes, sha256, TFLM's arena for each file, source models

The SNAP variant is the model directory's own model_int8.tflite (`snapuq export`). Every variant is
converted from the same training run (D/model.keras, D/baselines/*.keras) with the same representative
train samples as `snapuq export`; the firmware links them (SNAP=0 TFLITE=..., ENSEMBLE=1 for EE-ens / DEEP)
and averages the softmax outputs on the device. Only the int8 files ship; the Keras baselines may stay out
of the repository once the variants exist.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import tfquiet
from snapuq.data import dataset_of
from snapuq.errors import SnapuqError
from snapuq.export.convert import convert_keras
from snapuq.export.tflm import arena_bytes
from snapuq.io import captured_output, write_text
from snapuq.modeldir import ModelPaths
from snapuq.nn.saved import load_model_dir

VARIANTS_FORMAT = 1


def variants_dir(d: Path) -> Path:
    return Path(d) / "variants"


def load_variants(d: Path) -> dict[str, Any] | None:
    p = variants_dir(d) / "variants.json"
    if not p.is_file():
        return None
    try:
        v = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SnapuqError(f"{p}: unreadable ({e})") from e
    if not isinstance(v, dict) or v.get("format") != VARIANTS_FORMAT or "methods" not in v:
        raise SnapuqError(f"{p}: not a variants file of format {VARIANTS_FORMAT}")
    for m in v["methods"].values():
        for f in m["files"]:
            if not (variants_dir(d) / f).is_file():
                raise SnapuqError(
                    f"{variants_dir(d) / f}: missing (re-run `snapuq bench --export-variants {d}`)"
                )
    return v


def variant_files(d: Path, v: dict[str, Any], method: str) -> list[Path]:
    return [variants_dir(d) / f for f in v["methods"][method]["files"]]


def _softmax_model(model, names: dict[str, Any]):
    import keras

    return keras.Model(model.input, {k: keras.layers.Softmax(name=f"sm_{k}")(t) for k, t in names.items()})


def export_variants(
    d: str | Path, data_dir: str | None = None, n_rep: int = 300, log=print
) -> dict[str, Any]:
    """Convert base / ee / deep_k of model directory `d` to int8 and write D/variants/."""
    import keras


    d = Path(d)
    t0 = time.time()
    md = load_model_dir(d)
    cfg = md.config
    bdir = ModelPaths(d).baselines
    if not (bdir / "early_exit.keras").is_file() or not (bdir / "ensemble_0.keras").is_file():
        raise SnapuqError(f"{bdir}: no trained baselines (train without --no-baselines)")
    ds = dataset_of(cfg, data_dir)
    rng = np.random.default_rng(int(cfg.get("seed", 0)))
    idx = rng.choice(len(ds.x_train), size=min(n_rep, len(ds.x_train)), replace=False)
    rep = np.asarray(ds.x_train[np.sort(idx)], np.float32)
    out = variants_dir(d)
    out.mkdir(parents=True, exist_ok=True)
    methods: dict[str, dict[str, Any]] = {}


    def put(method: str, name: str, model, source: str) -> None:
        with captured_output(show=tfquiet.showing()):  # the converter's dump: held (shown with -v)
            b = convert_keras(model, rep, int8=True)
        (out / name).write_bytes(b)
        m = methods.setdefault(
            method, {"files": [], "bytes": [], "sha256": [], "arena_bytes_tflm": [], "source": []}
        )
        m["files"].append(name)
        m["bytes"].append(len(b))
        m["sha256"].append(hashlib.sha256(b).hexdigest())
        m["arena_bytes_tflm"].append(arena_bytes(b))
        m["source"].append(source)
        log(f"  {name}: {len(b)} B int8, TFLM arena {m['arena_bytes_tflm'][-1]} B")

    em = md.export_model()
    base = keras.Model(em.input, {"logits": em.output["logits"], "probs": em.output["probs"]})
    put("base", "base.tflite", base, "model.keras (logits, probs)")
    ee = keras.saving.load_model(bdir / "early_exit.keras", compile=False)
    put(
        "ee",
        "ee.tflite",
        _softmax_model(ee, dict(ee.output)),
        "baselines/early_exit.keras + softmax per exit",
    )
    k = 0
    while (bdir / f"ensemble_{k}.keras").is_file():
        m = keras.saving.load_model(bdir / f"ensemble_{k}.keras", compile=False)
        out_t = m.output["logits"] if isinstance(m.output, dict) else m.output
        put(
            "deep",
            f"deep_{k}.tflite",
            _softmax_model(m, {"probs": out_t}),
            f"baselines/ensemble_{k}.keras + softmax",
        )
        k += 1
    snap = ModelPaths(d).int8
    if snap.is_file():
        sb = snap.read_bytes()
        methods["snap"] = {
            "files": ["../model_int8.tflite"],
            "bytes": [len(sb)],
            "sha256": [hashlib.sha256(sb).hexdigest()],
            "arena_bytes_tflm": [arena_bytes(sb)],
            "source": ["model_int8.tflite (snapuq export)"],
        }
    info = {
        "format": VARIANTS_FORMAT,
        "model": d.name,
        "dataset": cfg["dataset"],
        "backbone": cfg.get("backbone"),
        "n_rep": int(len(rep)),
        "members": k,
        "methods": methods,
    }
    write_text(out / "variants.json", json.dumps(info, indent=1) + "\n")
    log(f"wrote {out} ({time.time() - t0:.0f} s)")
    return info
