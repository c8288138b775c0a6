"""CID stream study (docs/SNAP_STUDY.md §12): why U's CID AUPRC can trail MSP's on a data set where U sees
the shift better. Rebuilds exactly the stream `snapuq eval` scores (same split, seed, corruptions, severity,
events) for one model directory and prints one JSON object:

- per corrupted segment: the base model's accuracy, the fraction of its frames that are events (windowed
  accuracy at or below mu - 3 sigma of the clean dev stream), the mean p_err, alarm rate (alarm > 0), mean
  alarm, mean U and mean MSP-U (1 - max p), and the fraction of the segment's frames whose windowed score is
  above its method's tau (mean + 3 sd on the clean dev stream);
- CID AUPRC / delay / clean false alarms of U, of p_err alone, of the alarm alone, and of MSP;
- the same AUPRC over only the segments with events plus the clean ones, and over the "silent-shift"
  segments (no event frame) plus the clean ones, as the fraction of above-tau frames there.

    python tools/cid_study.py models/mnist --data-dir ../shared/data > cid.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def study(model_dir: str, data_dir: str | None, seed: int = 0, segment: int = 300) -> dict:
    from snapuq.baselines.methods import EvalContext, make_method
    from snapuq.data import load_dataset
    from snapuq.data.corruptions import MNIST_C_SEVERITY
    from snapuq.data.shifts import corruption_api
    from snapuq.evaluation.loading import load
    from snapuq.uq import metrics as M
    from snapuq.uq import stream as S

    md = load(Path(model_dir))
    cfg = md.config
    ds = load_dataset(cfg["dataset"], data_dir, seed=int(cfg.get("seed", 0)))
    x_test, y_test = np.asarray(ds.x_test, np.float32), np.asarray(ds.y_test).astype(np.int64)
    x_dev, y_dev = np.asarray(ds.x_dev, np.float32), np.asarray(ds.y_dev).astype(np.int64)
    cnames, corrupt = corruption_api(ds)
    published = cfg["dataset"] in ("mnist", "fashion_mnist")

    def corrupt_at(x, idx, name, severity, s):  # the severity `snapuq eval` uses by default
        return corrupt(x, idx, name, MNIST_C_SEVERITY[name] if published else severity, s)

    st = S.build_stream(
        x_test, y_test, cnames, corrupt_at, severity=3, seg_len=segment, clean_len=segment, seed=seed
    )
    parts = {"test": x_test, "dev": x_dev, "corrupt": st.x_corrupt}
    bounds, o = {}, 0
    for k, v in parts.items():
        bounds[k] = slice(o, o + len(v))
        o += len(v)
    x_all = np.concatenate(list(parts.values()))
    ctx = EvalContext(
        model=md.model,
        n_classes=int(md.model.output["logits"].shape[-1]),
        x_train=np.asarray(ds.x_train, np.float32),
        y_train=np.asarray(ds.y_train),
        x_dev=x_dev,
        y_dev=y_dev,
        predict=md.predict,
        calib=getattr(md, "calib", None),
        model_dir=Path(model_dir),
        backbone=cfg.get("backbone"),
        seed=seed,
    )
    outs = ctx.run(x_all)
    ctx._cache["dev"] = {k: v[bounds["dev"]] for k, v in outs.items()}
    pred = outs["logits"].argmax(1)
    ok = pred == np.r_[y_test, y_dev, st.y[st.shifted]]
    ok_test, ok_dev, ok_cor = ok[bounds["test"]], ok[bounds["dev"]], ok[bounds["corrupt"]]
    clean_idx = S.clean_stream_indices(len(x_dev), max(20 * S.WINDOW, 2 * len(x_dev)), seed)
    spec = S.stream_events(st.gather(ok_test, ok_cor), ok_dev[clean_idx], S.WINDOW)

    scores: dict[str, np.ndarray] = {}
    for name in ("snap", "msp"):
        m = make_method(name)
        m.fit(ctx)
        r = m.score(ctx, x_all, outs)
        scores["U" if name == "snap" else "msp"] = np.asarray(r.u, np.float64)
        if name == "snap":
            scores["p_err"] = np.asarray(r.extra["p_err"], np.float64)
            scores["alarm"] = np.asarray(r.extra["alarm"], np.float64)

    frames = {k: st.gather(v[bounds["test"]], v[bounds["corrupt"]]) for k, v in scores.items()}
    mon = {k: S.monitor(frames[k], v[bounds["dev"]][clean_idx], spec, st) for k, v in scores.items()}
    w = st.window
    segs = []
    for a, b, name in st.segments:
        if name == "clean":
            continue
        sl = slice(a, b)
        row = {
            "corruption": name,
            "accuracy": float(np.mean(st.gather(ok_test, ok_cor)[sl])),
            "event_frac": float(np.mean(spec.events[sl])),
            "alarm_rate": float(np.mean(frames["alarm"][sl] > 0)),
        }
        for k in ("p_err", "alarm", "U", "msp"):
            row[f"mean_{k}"] = float(np.mean(frames[k][sl]))
        for k in ("U", "p_err", "msp"):
            row[f"above_tau_{k}"] = float(np.mean(mon[k]["alarm"][sl] > mon[k]["tau"]))
        segs.append(row)

    # AUPRC restricted to frames of clean segments plus (a) event-bearing segments, (b) silent-shift ones
    valid = np.zeros(len(st), bool)
    valid[w - 1 :] = True
    seg_of = np.full(len(st), "clean", dtype=object)
    for a, b, name in st.segments:
        seg_of[a:b] = name
    silent = {r["corruption"] for r in segs if r["event_frac"] == 0.0}
    subsets = {
        "clean+event_segments": valid & ~np.isin(seg_of, list(silent)),
        "clean+silent_shift_segments": valid & ((seg_of == "clean") | np.isin(seg_of, list(silent))),
    }
    summary = {}
    for k, r in mon.items():
        summary[k] = {
            "cid_auprc": r["cid_auprc"],
            "cid_delay": r["cid_delay"],
            "clean_false_alarm_rate": r["clean_false_alarm_rate"],
            "tau": r["tau"],
        }
        for label, mask in subsets.items():
            if label.startswith("clean+event"):
                summary[k][f"auprc[{label}]"] = M.aupr(r["alarm"][mask], spec.events[mask])
            else:  # no events there: every frame above tau is a frame ranked above the clean ones
                summary[k][f"above_tau[{label}]"] = float(np.mean(r["alarm"][mask] > r["tau"]))
    return {
        "model_dir": str(model_dir),
        "dataset": cfg["dataset"],
        "seed": seed,
        "frames": len(st),
        "event_frames": int(spec.events.sum()),
        "silent_shift_segments": sorted(silent),
        "methods": summary,
        "segments": segs,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model_dir")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    json.dump(study(a.model_dir, a.data_dir, a.seed), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
