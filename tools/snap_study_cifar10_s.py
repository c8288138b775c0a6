"""Why SNAP trails on real CIFAR-10 (docs/SNAP_STUDY.md §10): the raw surprisal S of the int8 path vs MSP
and the shipped U, on 2,000 official test images, each OOD set (500) and every CIFAR-10-C corruption at
severity 3 (500). Run: .venv/bin/python tools/snap_study_cifar10_s.py (needs models/cifar10 and
the data in ../shared/data)."""

import json

import numpy as np

from snapuq.data import load_dataset, load_ood_sets
from snapuq.data.corruptions import CIFAR10_C, corrupt
from snapuq.export import int8_predict
from snapuq.uq import metrics as M

ds = load_dataset("cifar10", "../shared/data", 0)
xt, yt = ds.x_test[:2000], ds.y_test[:2000]
r = int8_predict("models/cifar10", xt)
ok = r["pred"] == yt
msp = 1 - r["probs"].max(1)
out = {
    "S_ok_vs_err": M.auroc(r["S"], ~ok),
    "MSP_ok_vs_err": M.auroc(msp, ~ok),
    "alarm_rate": float(r["flag"].mean()),
}
for lab, xo in load_ood_sets("cifar10", ds, "../shared/data", 500, 0).items():
    ro = int8_predict("models/cifar10", xo)
    lo = np.r_[np.zeros(ok.sum()), np.ones(len(xo))]
    out[f"ood {lab}"] = {
        "S": M.auroc(np.r_[r["S"][ok], ro["S"]], lo),
        "MSP": M.auroc(np.r_[msp[ok], 1 - ro["probs"].max(1)], lo),
        "U": M.auroc(np.r_[r["U"][ok], ro["U"]], lo),
        "alarmed": float(ro["flag"].mean()),
    }
sh = {}
for c in CIFAR10_C:
    xc = corrupt(xt[:500], c, 3, seed=1)
    rc = int8_predict("models/cifar10", xc)
    lo = np.r_[np.zeros(len(xt)), np.ones(500)]
    sh[c] = (M.auroc(np.r_[r["S"], rc["S"]], lo), M.auroc(np.r_[msp, 1 - rc["probs"].max(1)], lo))
out["shift S mean"] = float(np.mean([v[0] for v in sh.values()]))
out["shift MSP mean"] = float(np.mean([v[1] for v in sh.values()]))
out["shift per corruption (S, MSP)"] = {k: (round(a, 3), round(b, 3)) for k, (a, b) in sh.items()}
print(json.dumps(out, indent=1, default=float))
