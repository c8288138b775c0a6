"""`snapuq tokens eval --arch hier`: train the hierarchical spiking transformer (resumable), sweep token
pruning / merging at every stage, write the report.

Outputs in RDIR: tokens.json, tokens.md, accuracy_prune.png, accuracy_merge.png, sops.png, ablation.png,
model.weights.h5 + model_config.json (the weights the sweep used), checkpoint/ (every epoch; --resume).
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.io import write_json
from snapuq.nn.recipe import fit_backbone_resumable
from snapuq.options import TrainOptions
from snapuq.tokens.evaluate import (
    LABELS as FLAT_LABELS,
)
from snapuq.tokens.evaluate import (
    RHOS,
    _spearman,
    accuracy_tables,
    load_splits,
    sweep,
    timings_line,
    write_report,
)
from snapuq.tokens.hier import (
    HierConfig,
    build_hier,
    config_for,
    fit_stage_heads,
    hier_forward,
    hier_sops,
    hier_token_logits,
    n_params,
)
from snapuq.tokens.model import recalibrate_bn
from snapuq.tokens.reduce import (
    CRITERIA,
    MODES,
    UNCERT,
    criterion_scores,
    keep_count,
    merge,
    prune,
    topk_indices,
    uncert_scores,
)

__all__ = ["RHOS", "run_eval_hier", "stage_scores", "train_hier"]

PRUNE_ROWS = list(CRITERIA) + ["uncert_mean", "uncert_std", "uncert_int8", "uncert_stagehead"]
MERGE_ROWS = list(CRITERIA)
DEFAULTS = {  # per dataset: stem, dims, depths, heads, recipe
    "cifar10": {"dims": (64, 128), "depths": (1, 2), "heads": (2, 4), "augment": "crop-flip"},
    "mnist": {"dims": (64, 128), "depths": (1, 1), "heads": (2, 4), "augment": "shift"},
}


def stage_scores(name: str, z: np.ndarray, model, stage: int, lam: float, seed: int = 0,
                 stage_heads: list | None = None) -> np.ndarray:
    """(B,T,N_s,D_s) states entering stage `stage` -> (B, N_s) scores, higher = keep. The Uncert rows read
    the stage's token-level classifier (`hier_token_logits`); the others are `reduce.criterion_scores`."""
    if name in UNCERT:
        return uncert_scores(name, hier_token_logits(model, z, stage), lam)
    if name == "uncert_stagehead":
        if stage_heads is None:
            raise SnapuqError("uncert_stagehead needs the fitted stage heads")
        return uncert_scores("uncert", hier_token_logits(model, z, stage, stage_heads[stage]), lam)
    return criterion_scores(name, z, model, np.random.default_rng([seed, stage]), lam)


def make_stage_reducer(criterion: str, mode: str, rho: float, lam: float, seed: int = 0,
                       stage_heads: list | None = None):
    """A reducer for `hier_forward`: keep the top K = ⌈ρ·N_s⌉ tokens of every stage, prune or merge."""
    if mode not in MODES:
        raise SnapuqError(f"unknown reduction mode '{mode}' (known: {', '.join(MODES)})")

    def reducer(z: np.ndarray, model, stage: int):
        idx = topk_indices(stage_scores(criterion, z, model, stage, lam, seed, stage_heads),
                           keep_count(z.shape[2], rho))
        return prune(z, idx) if mode == "prune" else merge(z, idx)

    return reducer


def train_hier(cfg: HierConfig, x, y, opts: TrainOptions, *, seed: int, ckpt_dir: str, identity: dict,
               resume: bool, stop_after: int | None = None, validation_data=None, log=print):
    """Build the model and fit it with the project's resumable recipe (checkpoint every epoch; a resumed run
    sees the same batches and learning rates as an unbroken one); then re-estimate the BN statistics."""
    import keras

    keras.utils.set_random_seed(seed)
    model = build_hier(cfg)
    hist = fit_backbone_resumable(model, x, y, opts, seed=seed, ckpt_dir=ckpt_dir, identity=identity,
                                  resume=resume, validation_data=validation_data, log=log,
                                  desc="hierarchical spiking transformer", stop_after=stop_after)
    n = min(len(x), 8192)
    passes = max(3, math.ceil(40 / math.ceil(n / 256)))  # >= 40 updates at momentum 0.9, small sets too
    recalibrate_bn(model, x[np.random.default_rng(seed).permutation(len(x))[:n]], passes=passes, seed=seed)
    return model, hist


def run_eval_hier(args) -> dict:
    t0 = time.time()
    timings: dict[str, float] = {}
    ds, (xtr, ytr), (xdv, ydv), (xte, yte) = load_splits(args, min(args.max_test, 1000), sort=True)
    dflt = DEFAULTS.get(ds.name, DEFAULTS["mnist"])
    h = ds.input_shape[0]
    cfg = config_for(ds.input_shape, ds.n_classes, patch=args.patch or (2 if h <= 8 else 4),
                     dims=args.dims or dflt["dims"], depths=args.depths or dflt["depths"],
                     heads=args.stage_heads or dflt["heads"], stem=args.stem, T=args.T)
    augment = args.augment or dflt["augment"]
    opts = TrainOptions(epochs=args.epochs, batch_size=args.batch, lr=args.lr, optimizer="adam",
                        schedule="cosine", warmup_epochs=min(args.warmup, args.epochs - 1), augment=augment)
    identity = {"dataset": ds.name, "seed": args.seed, "n_train": int(len(ytr)), "arch": cfg.to_dict()}
    wpath, cpath = os.path.join(args.out, "model.weights.h5"), os.path.join(args.out, "model_config.json")
    t = time.time()
    if args.reuse and os.path.exists(wpath) and os.path.exists(cpath):
        with open(cpath) as f:
            saved = json.load(f)
        cfg = HierConfig.from_dict(saved["config"])
        model = build_hier(cfg)
        model.load_weights(wpath)
        history, epochs_done = saved.get("history", []), saved.get("epochs_done")
    else:
        model, history = train_hier(cfg, xtr, ytr, opts, seed=args.seed,
                                    ckpt_dir=os.path.join(args.out, "checkpoint"), identity=identity,
                                    resume=args.resume, stop_after=args.stop_after,
                                    validation_data=(xdv, ydv))
        epochs_done = len(history)
        model.save_weights(wpath)
        write_json(cpath, {"config": cfg.to_dict(), "recipe": opts.to_dict(), "history": history,
                           "epochs_done": epochs_done}, indent=1)
    timings["train_s"] = time.time() - t
    if args.train_only:
        return {"dataset": ds.name, "epochs_done": epochs_done, "history": history, "train_only": True}

    # --- the full model
    t = time.time()
    full = hier_forward(model, xte, record=True)
    acc_full = float((full["logits"].argmax(1) == yte).mean())
    sp_full = hier_sops(full, cfg)
    timings["full_forward_s"] = time.time() - t
    z0 = full["stage_in"][0]
    ntr = min(len(xtr), 4000)
    tr_states = hier_forward(model, xtr[:ntr])["stage_in"]
    stage_heads = fit_stage_heads(model, tr_states, ytr[:ntr], seed=args.seed)

    def evaluate(criterion: str, mode: str, rho: float, seed: int) -> dict:
        red = make_stage_reducer(criterion, mode, rho, args.lam, seed, stage_heads)
        # the stem is untouched by the reduction: start from its cached tokens and SOPs
        o = hier_forward(model, None, red, record=True, tokens0=z0, stem_sops=sp_full["stem"])
        sp = hier_sops(o, cfg)
        return {"acc": float((o["logits"].argmax(1) == yte).mean()), "sops": float(sp["total"].mean()),
                "block_sops": float(sp["block_total"].mean()),
                "stage_sops": [float(b.mean()) for b in sp["blocks"]]}

    full_row = {"acc": acc_full, "acc_sd": 0.0, "sops": float(sp_full["total"].mean()),
                "block_sops": float(sp_full["block_total"].mean()),
                "stage_sops": [float(b.mean()) for b in sp_full["blocks"]]}
    results = sweep(evaluate, {"prune": PRUNE_ROWS, "merge": MERGE_ROWS}, args, full_row, timings,
                    "token reduction sweep (every stage)")
    diag = _diagnostics(model, full, xte, cfg, args.lam, stage_heads)
    timings["total_s"] = time.time() - t0
    rep = {
        "arch": "hier", "dataset": ds.name, "n_train": int(len(ytr)), "n_test": int(len(yte)),
        "config": cfg.to_dict(), "recipe": opts.to_dict(), "epochs_done": epochs_done,
        "params": n_params(model), "lambda": args.lam, "rhos": list(args.rhos),
        "tokens_per_stage": cfg.n_tokens_stages,
        "keep_counts": {str(r): [keep_count(n, r) for n in cfg.n_tokens_stages] for r in args.rhos},
        "accuracy_full": acc_full, "sops_full": full_row["sops"], "block_sops_full": full_row["block_sops"],
        "stage_sops_full": full_row["stage_sops"], "embed_macs": sp_full["embed_macs"],
        "stem_sops_full": float(sp_full["stem"].mean()),
        "down_sops_full": [float(d.mean()) for d in sp_full["down"]],
        "readout_sops_full": float(sp_full["readout"].mean()),
        "stage_head_accuracy": diag.pop("stage_head_accuracy"),
        "results": results, "token_diagnostics": diag, "history": history, "timings_s": timings,
        "random_seeds": args.random_seeds,
    }
    return write_report(rep, args.out, write_markdown_hier(rep))


def _diagnostics(model, full: dict, x: np.ndarray, cfg: HierConfig, lam: float, stage_heads) -> dict:
    out: dict = {"per_stage": [], "stage_head_accuracy": []}
    for s in range(cfg.n_stages):
        z = full["stage_in"][s]
        u = stage_scores("uncert", z, model, s, lam)
        mag = criterion_scores("magnitude", z, model)
        spk = criterion_scores("spikes", z, model)
        lg = hier_token_logits(model, z, s)
        lgh = hier_token_logits(model, z, s, stage_heads[s])
        out["per_stage"].append({
            "stage": s, "tokens": int(z.shape[2]),
            "spearman_uncert_vs_magnitude": _spearman(u, mag), "spearman_uncert_vs_spikes": _spearman(u, spk),
            "importance_mean": float(u.mean()), "importance_sd_over_tokens": float(u.std(axis=1).mean()),
            "token_classifier_agrees_with_image_pred": float(
                (lg.mean(1).argmax(-1) == full["logits"].argmax(1)[:, None]).mean()),
            "silent_token_share": float((criterion_scores("spikes", z, model) == 0).mean()),
        })
        out["stage_head_accuracy"].append(float((lgh.mean(axis=(1, 2)).argmax(-1)
                                                  == full["logits"].argmax(1)).mean()))
    return out


LABELS = FLAT_LABELS | {
    "uncert": "Uncert (mean+λ·std), model head",
    "uncert_stagehead": "Uncert, per-stage linear head (frozen features)",
}


def _saved(v: float, full: float) -> str:
    return f"{100 * (1 - v / full):.1f} %" if full > 0 else "n/a (no spikes)"


def write_markdown_hier(rep: dict) -> str:
    c = rep["config"]
    rhos = [str(r) for r in rep["rhos"]]
    out = [f"# Uncert token reduction, hierarchical spiking transformer — {rep['dataset']}\n\n",
           f"{len(c['dims'])} stages, widths {c['dims']}, blocks {c['depths']}, heads {c['heads']}, "
           f"stem {c['stem']}, {c['patch']}×{c['patch']} patches, tokens per stage "
           f"{rep['tokens_per_stage']}, T={c['T']}; {rep['params']} parameters; {rep['epochs_done']} of "
           f"{rep['recipe']['epochs']} epochs ({rep['recipe']['augment']}, cosine lr {rep['recipe']['lr']}). "
           f"Reduction before the first attention of every stage; λ={rep['lambda']}; {rep['n_test']} test "
           f"samples; random = mean ± sd over {rep['random_seeds']} seeds.\n\n"
           f"Full model: accuracy **{100 * rep['accuracy_full']:.2f} %**, {rep['sops_full']:.0f} SOPs / "
           f"inference ({rep['block_sops_full']:.0f} in the transformer blocks) + {rep['embed_macs']} MACs "
           f"of the analog stem conv.\n"]
    out += accuracy_tables(rep, LABELS, lambda c, r, v: c == "random" and r != "1.0")
    out.append("\n## SOPs of Uncert pruning (vs full model)\n\n| ρ | SOPs / inference | saved (total) | "
               "saved (transformer blocks) | block SOPs per stage |\n|---|---|---|---|---|\n")
    row = rep["results"]["prune"]["uncert"]
    for r in rhos:
        v = row[r]
        out.append(f"| {r} | {v['sops']:.0f} | {_saved(v['sops'], rep['sops_full'])} | "
                   f"{_saved(v['block_sops'], rep['block_sops_full'])} | "
                   f"{' / '.join(f'{s:.0f}' for s in v['stage_sops'])} |\n")
    out.append("\n## Token diagnostics per stage\n\n| stage | tokens | Spearman(U-importance, magnitude) | "
               "Spearman(U-importance, spikes) | silent tokens | token classifier = image prediction | "
               "stage-head accuracy vs model |\n|---|---|---|---|---|---|---|\n")
    for d, a in zip(rep["token_diagnostics"]["per_stage"], rep["stage_head_accuracy"]):
        out.append(f"| {d['stage']} | {d['tokens']} | {d['spearman_uncert_vs_magnitude']:.2f} | "
                   f"{d['spearman_uncert_vs_spikes']:.2f} | {100 * d['silent_token_share']:.1f} % | "
                   f"{100 * d['token_classifier_agrees_with_image_pred']:.1f} % | {100 * a:.1f} % |\n")
    out.append(timings_line(rep))
    return "".join(out)
