"""Model directories on the keywords12 test split by voice family: accuracy on the 10 keywords (every
model, mapped by class name) and, for 12-class models, on all 12 classes; on the test clips through the
training microphone profile and through the harsher shift profile; each model's inputs through its own front
end (config.json data_meta.frontend: plain MFCC, or with cepstral mean normalization).

Usage: PYTHONPATH=host python tools/kw12_compare.py MODEL_DIR [MODEL_DIR ...] [--out runs/kw12_compare.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from snapuq.data import audio
from snapuq.data import keywords12 as K
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir

FAMILIES = ("espeak_en", "espeak_foreign", "ext")


def family(v: str) -> str:
    return "silence" if not v else "espeak_en" if v.startswith("espeak:en") else (
        "espeak_foreign" if v.startswith("espeak:") else "ext")  # fmt: skip


def model_frontend(md) -> dict:
    """The front end a model directory was trained with (config.json data_meta.frontend)."""
    fe = audio.known_frontend((md.config.get("data_meta") or {}).get("frontend"))
    if fe is None:
        raise SystemExit("the model's front end is none of snapuq.data.audio's")
    return fe


def load_raw(seed: int = 0):
    """The keywords12 build (plain MFCC: each model applies its own front end) and its study arrays."""
    d = K.build_keywords12(K.cache_root(None), seed, dict(K.PER_CLASS), K.TRAIN_TAKES)
    ds = K.load_cache(d, raw=True)
    return ds, K.extra_arrays(ds)


def accuracy_row(name: str, ok: np.ndarray, y: np.ndarray, fam: np.ndarray, all12: bool = True) -> dict:
    """`name`_keywords (the 10 words), per voice family, and with `all12` the 12-class accuracy and per
    class, from the right / wrong flags `ok` of the test clips (labels y, voice families fam)."""
    kw = y < len(K.WORDS)
    row = {f"{name}_keywords": float(ok[kw].mean())}
    for f in FAMILIES:
        row[f"{name}_keywords_{f}"] = float(ok[kw & (fam == f)].mean())
    if all12:
        row[f"{name}_all12"] = float(ok.mean())
        row[f"{name}_per_class"] = {n: float(ok[y == c].mean()) for c, n in enumerate(K.CLASSES)}
    return row


def read_rows(out: Path) -> list[dict]:
    """The rows a resumable study wrote to `out` so far (none when it is not there)."""
    return json.loads(out.read_text())["rows"] if out.exists() else []


def record_row(out: Path, rows: list[dict], row: dict) -> None:
    """Appends a finished variant's row, prints it (without the per-class dicts) and rewrites `out`."""
    rows.append(row)
    print(json.dumps({k: row[k] for k in row if not k.endswith("per_class")}), flush=True)
    write_text(out, json.dumps({"rows": rows}, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--out", default="runs/kw12_compare.json")
    a = ap.parse_args()
    ds, ex = load_raw()
    fam = np.array([family(v) for v in ex["voice_test"]])
    res = {}
    for m in a.models:
        md = load_model_dir(m)
        names = list(md.config["class_names"])
        to_k12 = np.array([K.CLASSES.index(n) for n in names])  # the model's class -> keywords12 label
        row = {"classes": len(names)}
        fe = model_frontend(md)
        for name, x in (("test", ds.x_test), ("test_shift", ex["x_test_shift"])):
            pred = to_k12[np.asarray(md.predict(audio.finish(x, fe))["logits"]).argmax(1)]
            row.update(accuracy_row(name, pred == ds.y_test, ds.y_test, fam, len(names) == len(K.CLASSES)))
        res[m] = row
        print(m, json.dumps({k: v for k, v in row.items() if not k.endswith("per_class")}), flush=True)
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
