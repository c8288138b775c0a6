"""SNAP shift study (docs/SNAP_STUDY.md): for each model directory, recalibrate SNAP on dev (the same code as
`snapuq calibrate`, in memory) and print one JSON line with AUROC clean test vs each corrupted copy of the
test split (severity 3) for U, S and MSP, ID/OOD AUROC, the test U - MSP AUROC on correct/wrong and the head
parameter count; `--summary FILE.jsonl` prints per-variant means (variant = the directory name without its
seed suffix).

    python tools/snap_study.py runs/digits_s0 runs/st_digits_huber_s0 ... > study.jsonl
    python tools/snap_study.py --summary study.jsonl
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np


def study(d: str) -> dict:
    from snapuq.data import load_dataset, load_ood
    from snapuq.data.shifts import corruption_api
    from snapuq.nn.saved import load_model_dir
    from snapuq.uq import calibration as C
    from snapuq.uq import metrics as M
    from snapuq.uq.score import SnapScorer

    md = load_model_dir(d)
    cfg = md.config
    ds = load_dataset(cfg["dataset"], None, seed=int(cfg.get("seed", 0)))
    xt = np.asarray(ds.x_test, np.float32)
    y = np.asarray(ds.y_test)
    ot = md.predict(xt)
    p = ot["probs"]
    err = p.argmax(1) != y
    seed = int(md.config.get("seed", 0))
    sc = SnapScorer(C.calibrate(md.predict, md.config, ds.x_dev, ds.y_dev, seed=seed, x_ref=ds.x_train,
                                y_ref=ds.y_train))
    r = sc.score(ot)
    names, corrupt = corruption_api(ds)
    idx = np.arange(len(y))
    lab = np.r_[np.zeros(len(y)), np.ones(len(y))]
    res: dict = {"dir": d, "acc": float(1 - err.mean()), "shift": {}, "shift_S": {}, "shift_msp": {}}
    res["test_gap"] = M.auroc(r["U"], err) - M.auroc(1 - p.max(1), err)
    res["hinge_q"] = sc.params["hinge"]["quantile"]
    for nm in names:
        oc = md.predict(np.asarray(corrupt(xt, idx, nm, 3, 0), np.float32))
        rc = sc.score(oc)
        res["shift"][nm] = M.auroc(np.r_[r["U"], rc["U"]], lab)
        res["shift_S"][nm] = M.auroc(np.r_[r["S"], rc["S"]], lab)
        res["shift_msp"][nm] = M.auroc(np.r_[1 - p.max(1), 1 - oc["probs"].max(1)], lab)
    xo = np.asarray(load_ood(cfg["dataset"], ds, None, n=500, seed=0), np.float32)
    oo = md.predict(xo)
    lo = np.r_[np.zeros(len(y)), np.ones(len(xo))]
    res["ood"] = M.auroc(np.r_[r["U"], sc.score(oo)["U"]], lo)
    res["ood_msp"] = M.auroc(np.r_[1 - p.max(1), 1 - oo["probs"].max(1)], lo)
    for k, src in (("shift_mean", "shift"), ("shift_mean_S", "shift_S"), ("shift_mean_msp", "shift_msp")):
        res[k] = float(np.mean(list(res[src].values())))
    heads = [w for lay in md.model.layers if lay.name.startswith("tap") for w in lay.weights]
    res["head_params"] = int(sum(int(np.prod(w.shape)) for w in heads))
    res["taps"] = [t["layer"] for t in cfg["taps"]]
    res["nll"] = cfg.get("nll")
    return res


def summary(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(re.sub(r"_s\d+$", "", r["dir"].rstrip("/").split("/")[-1]), []).append(r)
    def ms(rs: list, k: str) -> str:
        a = np.array([r[k] for r in rs])
        return f"{a.mean():.3f} ± {a.std(ddof=1) if len(a) > 1 else 0:.3f}"

    for v, rs in groups.items():
        print(f"{v}: n={len(rs)} acc {ms(rs, 'acc')} test U-MSP {ms(rs, 'test_gap')} shift U "
              f"{ms(rs, 'shift_mean')} S {ms(rs, 'shift_mean_S')} MSP {ms(rs, 'shift_mean_msp')} OOD "
              f"{ms(rs, 'ood')} (MSP {ms(rs, 'ood_msp')}) "
              f"head params {rs[0]['head_params']}")
        print("   per corruption U / S: " + " ".join(
            f"{c} {np.mean([r['shift'][c] for r in rs]):.2f}/{np.mean([r['shift_S'][c] for r in rs]):.2f}"
            for c in rs[0]["shift"]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2])
    else:
        for d in sys.argv[1:]:
            print(json.dumps(study(d)), flush=True)
