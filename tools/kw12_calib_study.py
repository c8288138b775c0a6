"""p_err calibrated on a held-out *shifted* synthetic set vs on a clean one, for a keywords12 model directory.

The keywords12 dev split is spoken by voices of its own through the harsher "shift" microphone profile
(lower SNR, more reverberation and band-limiting); x_dev_std is the same dev clips through the training
profile. The SNAP constants are fitted on each (snapuq.uq.calibration.calibrate, as `snapuq train` does),
then scored on the test split (its own voices, training profile) and on x_test_shift (the same test clips
through the shift profile): ECE of p_err, mean p_err vs the error rate, AUROC right-vs-wrong of U and
of MSP, and the alarm rate, for each calibration.

The inputs go through the model's own front end (config.json data_meta.frontend).

Usage: PYTHONPATH=host:tools python tools/kw12_calib_study.py MODEL_DIR [--out runs/kw12_calib.json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from kw12_compare import load_raw, model_frontend  # tools/ is on sys.path when this script runs

from snapuq.baselines.snapadapter import make_scorer
from snapuq.data import audio
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir
from snapuq.options import CalibOptions
from snapuq.uq import metrics as M
from snapuq.uq.calibration import calibrate


def score(calib: dict, outs: dict, x: np.ndarray, y: np.ndarray) -> dict:
    scorer, _ = make_scorer(calib, None)
    r = scorer.score(outs, x)
    u = np.asarray(r["U"], np.float64).reshape(-1)
    pe = np.asarray(r.get("p_err", u), np.float64).reshape(-1)
    al = np.asarray(r.get("alarm", np.zeros_like(u)), np.float64).reshape(-1)
    logits = np.asarray(outs["logits"], np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ok = p.argmax(1) == y
    return {
        "accuracy": float(ok.mean()),
        "error_rate": float(1 - ok.mean()),
        "mean_p_err": float(pe.mean()),
        "ece_p_err": M.ece(1.0 - pe, ok),
        "ece_msp": M.ece(p.max(1), ok),
        "auroc_ok_vs_err_U": M.auroc(u, ~ok),
        "auroc_ok_vs_err_msp": M.auroc(1 - p.max(1), ~ok),
        "alarm_rate": float(np.mean(al > 0)),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--out", default="runs/kw12_calib.json")
    a = ap.parse_args()
    md = load_model_dir(a.model_dir)
    cfg = md.config
    ds, ex = load_raw(int(cfg.get("seed", 0)))
    fe = model_frontend(md)
    ds = replace(ds, **{k: audio.finish(getattr(ds, k), fe) for k in ("x_train", "x_dev", "x_test")})
    ex = {k: audio.finish(v, fe) if k.startswith("x_") else v for k, v in ex.items()}
    opts = CalibOptions(variant=str(cfg.get("variant", "best")))
    sets = {"test": ds.x_test, "test_shift": ex["x_test_shift"]}
    outs = {k: md.predict(v) for k, v in sets.items()}
    res = {}
    for name, xdev in (("dev_shifted", ds.x_dev), ("dev_clean", ex["x_dev_std"])):
        cal = calibrate(md.predict, cfg, xdev, ds.y_dev, opts, seed=int(cfg.get("seed", 0)),
                        x_ref=ds.x_train, y_ref=ds.y_train)  # fmt: skip
        res[name] = {k: score(cal, outs[k], sets[k], ds.y_test) for k in sets}
        print(name, json.dumps(res[name]), flush=True)
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
