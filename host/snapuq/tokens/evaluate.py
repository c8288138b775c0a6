"""`snapuq tokens eval`: train a tiny spiking transformer, sweep token reduction, write the report.

The data splits, the sweep over (mode, criterion, ρ), the report files, the accuracy tables and the plots
are shared by both architectures; this module runs the flat one (`--arch flat`: patch tokens, one reduction
point), `hier_eval` the hierarchical one (reduction at every stage).

Outputs in RDIR: tokens.json, tokens.md, accuracy_prune.png, accuracy_merge.png, sops.png,
ablation.png, model.weights.h5 + model_config.json (reused with --reuse).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np

from snapuq.data import load_dataset
from snapuq.errors import DatasetError, SnapuqError
from snapuq.io import atomic_open, save_figure, write_json
from snapuq.tokens.model import TokenSNNConfig, forward, forward_from, load_model, train_model
from snapuq.tokens.reduce import ABLATION, CRITERIA, MODES, criterion_scores, keep_count, make_reducer
from snapuq.tokens.snaptok import TokenSnap, gap_features
from snapuq.tokens.sops import model_sops

RHOS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)
# Evaluate(criterion, mode, rho, seed) -> {"acc", "sops", "block_sops", ...}: one cell of the sweep, one seed
Evaluate = Callable[[str, str, float, int], dict]


def load_splits(args, dev_max: int, sort: bool):
    """The data set of --dataset and its (x, y) train / dev / test splits, subsampled to --max-train, dev_max
    and --max-test samples (sort: the subsample keeps the data set's order). Creates --out."""
    os.makedirs(args.out, exist_ok=True)
    ds = load_dataset(args.dataset, args.data_dir, args.seed)
    if len(ds.input_shape) != 3:
        raise DatasetError(f"tokens eval needs image inputs (H, W, C), got {ds.input_shape}")
    rng = np.random.default_rng(args.seed)

    def sub(x, y, n):
        if n and len(x) > n:
            i = rng.permutation(len(x))[:n]
            i = np.sort(i) if sort else i
            return x[i], y[i]
        return x, y

    return (ds, sub(ds.x_train, ds.y_train, args.max_train), sub(ds.x_dev, ds.y_dev, dev_max),
            sub(ds.x_test, ds.y_test, args.max_test))


def sweep(evaluate: Evaluate, rows: dict[str, list[str]], args, full_row: dict, timings: dict,
          desc: str) -> dict:
    """results[mode][criterion][str(ρ)] for every mode, its criteria `rows[mode]` and ρ in --rhos: ρ = 1 is
    full_row; below, the mean of every number evaluate() returns (a list: element by element) over
    --random-seeds seeds for `random` and one for the others, with acc_sd (the sd of the accuracies) and n
    (the seeds)."""
    from tqdm import tqdm

    rhos = [r for r in args.rhos if r < 1.0]
    jobs = [(c, mode, rho, s) for mode in MODES for c in rows[mode] for rho in rhos
            for s in range(args.random_seeds if c == "random" else 1)]
    t = time.time()
    raw: dict = {}
    for c, mode, rho, s in tqdm(jobs, desc=desc):
        raw.setdefault((mode, c, rho), []).append(evaluate(c, mode, rho, s))
    timings["sweep_s"] = time.time() - t
    results: dict = {m: {} for m in MODES}
    for (mode, c, rho), rs in raw.items():
        accs = [r["acc"] for r in rs]
        cell = {"acc": float(np.mean(accs)), "acc_sd": float(np.std(accs)), "n": len(rs)}
        for k, v in rs[0].items():
            if isinstance(v, list):
                cell[k] = [float(np.mean([r[k][i] for r in rs])) for i in range(len(v))]
            elif k != "acc":
                cell[k] = float(np.mean([r[k] for r in rs]))
        results[mode].setdefault(c, {"1.0": dict(full_row)})[str(rho)] = cell
    return results


def write_report(rep: dict, out_dir: str, markdown: str) -> dict:
    """tokens.json, tokens.md and the plots in out_dir; returns rep."""
    write_json(os.path.join(out_dir, "tokens.json"), rep, indent=1)
    with atomic_open(os.path.join(out_dir, "tokens.md"), "w") as f:
        f.write(markdown)
    write_plots(rep, out_dir)
    return rep


def _auroc(y_err: np.ndarray, score: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    if y_err.min() == y_err.max():
        return None
    return float(roc_auc_score(y_err, score))


def run_eval(args) -> dict:
    t0 = time.time()
    timings: dict[str, float] = {}
    ds, (xtr, ytr), (xdv, ydv), (xte, yte) = load_splits(args, args.max_test, sort=False)
    h = ds.input_shape[0]
    patch = args.patch or (2 if h <= 8 else 4)
    cfg = TokenSNNConfig(input_shape=ds.input_shape, n_classes=ds.n_classes, patch=patch, dim=args.dim,
                         depth=args.depth, heads=args.heads, T=args.T)
    cfg.validate()
    block = cfg.depth - 1 if args.block is None else args.block
    if not 0 <= block < cfg.depth:
        raise SnapuqError(f"--block {block} outside 0..{cfg.depth - 1}")
    wpath = os.path.join(args.out, "model.weights.h5")
    cpath = os.path.join(args.out, "model_config.json")
    history: dict = {}
    if args.reuse and os.path.exists(wpath) and os.path.exists(cpath):
        with open(cpath) as f:
            cfg = TokenSNNConfig.from_dict(json.load(f))
        model = load_model(cfg, wpath)
        timings["train_s"] = 0.0
    else:
        t = time.time()
        model, history = train_model(cfg, xtr, ytr, epochs=args.epochs, batch=args.batch, lr=args.lr,
                                     seed=args.seed, verbose=1,
                                     label_smoothing=args.label_smoothing)
        timings["train_s"] = time.time() - t
        model.save_weights(wpath)
        write_json(cpath, cfg.to_dict(), indent=1)

    # --- the full model: accuracy, SOPs, token states at every block
    t = time.time()
    full = forward(model, xte, record=True)
    acc_full = float((full["logits"].argmax(1) == yte).mean())
    sops_full = model_sops(full, cfg)
    timings["full_forward_s"] = time.time() - t
    z = full["block_in"][block]
    pre_spikes = full["spikes"][:block]

    def evaluate(criterion: str, mode: str, rho: float, seed: int = 0) -> dict:
        zn, mn = make_reducer(criterion, mode, rho, seed, args.lam)(z, model)
        o = forward_from(model, zn, block, mn, record=True)
        o["spikes"] = pre_spikes + o["spikes"]
        sp = model_sops(o, cfg)
        return {"acc": float((o["logits"].argmax(1) == yte).mean()), "sops": float(sp["total"].mean()),
                "block_sops": float(sum(b.mean() for b in sp["blocks"][block:]))}

    full_row = {"acc": acc_full, "sops": float(sops_full["total"].mean()),
                "block_sops": float(sum(b.mean() for b in sops_full["blocks"][block:]))}
    prune_rows = list(CRITERIA) + ["uncert_mean", "uncert_std", "uncert_int8", "uncert_inverse"]
    results = sweep(evaluate, {"prune": prune_rows, "merge": list(CRITERIA)}, args,
                    full_row | {"acc_sd": 0.0}, timings, "token reduction sweep")

    # --- SNAP heads on the token stream, fault detection ok vs err
    t = time.time()
    taps = [1, 2] if cfg.depth >= 2 else [1]
    tr_states = forward(model, xtr)["block_in"]
    dv_states = forward(model, xdv)["block_in"]
    snap = TokenSnap(rank=args.rank).fit(gap_features(tr_states), taps, epochs=args.snap_epochs,
                                         seed=args.seed)
    snap.calibrate(gap_features(dv_states))
    sc = snap.score(gap_features(full["block_in"]))
    p = np.exp(full["logits"] - full["logits"].max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    err = (full["logits"].argmax(1) != yte).astype(int)
    ps = np.sort(p, 1)
    fd = {
        "n_test": int(len(yte)), "n_err": int(err.sum()),
        "auroc_ok_vs_err": {
            "msp": _auroc(err, 1.0 - p.max(1)),
            "margin": _auroc(err, 1.0 - (ps[:, -1] - ps[:, -2])),
            "snap": _auroc(err, sc["snap"]),
            "snap_nll2": _auroc(err, sc["snap_nll2"]),
            **{f"snap_tap{i}_ebar": _auroc(err, sc["ebar"][:, i]) for i in range(sc["ebar"].shape[1])},
        },
        "taps": [{"prev": f"block{t - 1} input", "target": f"block{t - 1} output", "d": cfg.dim}
                 for t in taps],
        "rank": args.rank,
    }
    timings["snap_s"] = time.time() - t

    # --- token-uncertainty diagnostics: does U separate informative tokens?
    u_imp = criterion_scores("uncert", z, model, lam=args.lam)
    mag = criterion_scores("magnitude", z, model)
    spk = criterion_scores("spikes", z, model)
    diag = {
        "spearman_uncert_vs_magnitude": _spearman(u_imp, mag),
        "spearman_uncert_vs_spikes": _spearman(u_imp, spk),
        "mean_importance_per_token": [float(v) for v in u_imp.mean(0)],
        "input_ink_per_token": [float(v) for v in _ink(xte, cfg).mean(0)],
        "spearman_uncert_vs_ink": _spearman(u_imp, _ink(xte, cfg)),
    }
    timings["total_s"] = time.time() - t0
    rep = {
        "dataset": ds.name, "n_train": int(len(ytr)), "n_test": int(len(yte)),
        "config": cfg.to_dict(), "reduce_block": block, "lambda": args.lam, "rhos": list(args.rhos),
        "keep_counts": {str(r): keep_count(cfg.n_tokens, r) for r in args.rhos},
        "accuracy_full": acc_full, "sops_full": full_row["sops"], "embed_macs": sops_full["embed_macs"],
        "block_sops_full": full_row["block_sops"], "results": results, "fault_detection": fd,
        "token_diagnostics": diag, "history": history, "timings_s": timings,
        "random_seeds": args.random_seeds,
    }
    return write_report(rep, args.out, write_markdown(rep))


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    vals = [spearmanr(x, y).statistic for x, y in zip(a, b) if np.std(x) > 0 and np.std(y) > 0]
    return float(np.mean(vals)) if vals else float("nan")


def _ink(x: np.ndarray, cfg: TokenSNNConfig) -> np.ndarray:
    """Sum of input intensity per patch (B, N): how much of the digit a token covers."""
    h, w, c = cfg.input_shape
    p = cfg.patch
    xr = x.reshape(len(x), h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    return xr.reshape(len(x), cfg.n_tokens, -1).sum(-1)


LABELS = {
    "uncert": "Uncert (mean+λ·std)", "random": "random", "magnitude": "activation magnitude",
    "spikes": "spike count", "similarity": "feature similarity", "uncert_mean": "Uncert mean only",
    "uncert_std": "Uncert std only", "uncert_int8": "Uncert, int8 device kernel",
    "uncert_inverse": "inverse Uncert (keep least uncertain; diagnostic)",
}


def accuracy_tables(rep: dict, labels: dict[str, str],
                    with_sd: Callable[[str, str, dict], bool]) -> list[str]:
    """The prune and merge accuracy tables (%) of a token-reduction report, a row per criterion, a column per
    ρ (K: the tokens kept, per stage where there are stages); a cell is mean ± sd over seeds where
    with_sd(criterion, rho, cell) says so."""
    rhos = [str(r) for r in rep["rhos"]]
    ks = {r: "/".join(map(str, k)) if isinstance(k, list) else k for r, k in rep["keep_counts"].items()}
    head = "| criterion | " + " | ".join(f"ρ={r} (K={ks[r]})" for r in rhos) + " |\n"
    head += "|---|" + "---|" * len(rhos) + "\n"
    out = []
    for mode in ("prune", "merge"):
        out.append(f"\n## Accuracy (%) — {mode}\n\n" + head)
        for c, row in rep["results"][mode].items():
            cells = []
            for r in rhos:
                v = row.get(r)
                if v is None:
                    cells.append("")
                elif with_sd(c, r, v):
                    cells.append(f"{100 * v['acc']:.2f} ± {100 * v['acc_sd']:.2f}")
                else:
                    cells.append(f"{100 * v['acc']:.2f}")
            out.append(f"| {labels.get(c, c)} | " + " | ".join(cells) + " |\n")
    return out


def timings_line(rep: dict) -> str:
    return "\nTimings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in rep["timings_s"].items()) + "\n"


def write_markdown(rep: dict) -> str:
    rhos = [str(r) for r in rep["rhos"]]
    kc = rep["keep_counts"]
    out = [f"# Uncert token reduction — {rep['dataset']}\n",
           f"Spiking transformer: {rep['config']['depth']} blocks, dim {rep['config']['dim']}, "
           f"T={rep['config']['T']}, {rep['config']['patch']}×{rep['config']['patch']} patches "
           f"({kc['1.0'] if '1.0' in kc else ''} tokens); reduction before the attention of block "
           f"{rep['reduce_block']}; λ={rep['lambda']}. Test samples: {rep['n_test']}. "
           f"Full-model accuracy **{100 * rep['accuracy_full']:.2f} %**, "
           f"{rep['sops_full']:.0f} SOPs / inference (+{rep['embed_macs']} embedding MACs).\n"]
    out += accuracy_tables(rep, LABELS, lambda c, r, v: c == "random" and bool(v.get("acc_sd")))
    out.append("\n## SOPs saved by Uncert pruning (vs full model)\n\n"
               "| ρ | SOPs / inference | saved (total) | saved (blocks from the reduction on) |\n"
               "|---|---|---|---|\n")
    row = rep["results"]["prune"]["uncert"]
    for r in rhos:
        v = row[r]
        out.append(f"| {r} | {v['sops']:.0f} | {100 * (1 - v['sops'] / rep['sops_full']):.1f} % | "
                   f"{100 * (1 - v['block_sops'] / rep['block_sops_full']):.1f} % |\n")
    fd = rep["fault_detection"]
    out.append(f"\n## SNAP heads on the token stream: fault detection (ok vs err), AUROC\n\n"
               f"{fd['n_err']} errors among {fd['n_test']} test samples.\n\n| score | AUROC |\n|---|---|\n")
    for k, v in fd["auroc_ok_vs_err"].items():
        out.append(f"| {k} | {'n/a' if v is None else f'{v:.3f}'} |\n")
    d = rep["token_diagnostics"]
    out.append(f"\n## Token diagnostics\n\nMean per-sample Spearman correlation of the Uncert importance "
               f"with activation magnitude {d['spearman_uncert_vs_magnitude']:.2f}, with spike count "
               f"{d['spearman_uncert_vs_spikes']:.2f}, with the input ink of the patch "
               f"{d['spearman_uncert_vs_ink']:.2f}.\n")
    out.append(timings_line(rep))
    return "".join(out)


def write_plots(rep: dict, out_dir: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rhos = [float(r) for r in rep["rhos"]]
    for mode in ("prune", "merge"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for c, row in rep["results"][mode].items():
            if c in ("uncert_mean", "uncert_std"):
                continue
            ax.plot(rhos, [100 * row[str(r)]["acc"] for r in rhos], marker="o", label=LABELS.get(c, c))
        ax.axhline(100 * rep["accuracy_full"], color="k", lw=0.8, ls="--", label="full model")
        ax.set_xlabel("keep ratio ρ")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{rep['dataset']}: token {mode}")
        ax.invert_xaxis()
        ax.legend(fontsize=7)
        save_figure(fig, os.path.join(out_dir, f"accuracy_{mode}.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(6, 4))
    row = rep["results"]["prune"]["uncert"]
    full, bfull = max(rep["sops_full"], 1e-9), max(rep["block_sops_full"], 1e-9)
    ax.plot(rhos, [100 * (1 - row[str(r)]["sops"] / full) for r in rhos], marker="o", label="total")
    ax.plot(rhos, [100 * (1 - row[str(r)]["block_sops"] / bfull) for r in rhos], marker="s",
            label="transformer blocks" if rep.get("arch") == "hier" else "blocks after the reduction")
    ax.set_xlabel("keep ratio ρ")
    ax.set_ylabel("SOPs saved (%)")
    ax.invert_xaxis()
    ax.legend()
    save_figure(fig, os.path.join(out_dir, "sops.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(6, 4))
    for c in ABLATION:
        r_ = rep["results"]["prune"][c]
        ax.plot(rhos, [100 * r_[str(r)]["acc"] for r in rhos], marker="o", label=LABELS[c])
    ax.set_xlabel("keep ratio ρ")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("ablation: mean / std / both (prune)")
    ax.invert_xaxis()
    ax.legend(fontsize=8)
    save_figure(fig, os.path.join(out_dir, "ablation.png"), dpi=120)
