"""`snapuq eval DIR --data-dir TREE --split test`: an audio model on a Speech Commands-style folder of clips
alone (no train or dev split needed).

The clips go through the model's own front end (snapuq.data.audio.features: MFCC, and CMN where the model's
config.json records it); folder words are mapped to the model's classes by name
(snapuq.data.speech_commands.read_test_tree): words the model has no class for count as `_unknown_` when the
model has that class, else they are reported apart ("unknown to the model": no accuracy, but the ID-vs-unknown
AUROC of every method). Background noise (`_background_noise_`, cut into 1 s pieces, or `_silence_`) is
`_silence_`.

Writes RDIR/metrics.json (accuracy float and int8 when exported, per-class accuracy, per-word rows,
per-speaker rows when the file names carry the speaker as Speech Commands' do (`<speaker>_nohash_<n>.wav`),
the confusion matrix, the UQ metrics of SNAP, MSP, entropy and energy: AUROC / AUPR right-vs-wrong, AURC, ECE,
and for SNAP mean p_err vs the error rate, ECE of p_err, alarm rate), confusion.png and report.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.baselines.methods import EvalContext, MethodUnavailable, make_method
from snapuq.data import audio
from snapuq.data.speech_commands import SILENCE, UNKNOWN, UNKNOWN_TO_MODEL, read_test_tree
from snapuq.errors import SnapuqError
from snapuq.evaluation.loading import _jsonable, load
from snapuq.evaluation.report import _plt
from snapuq.export import int8_predict
from snapuq.io import save_figure, staged_dir, write_text
from snapuq.modeldir import ModelPaths
from snapuq.uq import metrics as M

TREE_METHODS = ("snap", "msp", "entropy", "energy")  # the methods that need no train / dev split
UNKNOWN_ROW = "(unknown to the model)"


def _check_frontend(cfg: dict) -> dict:
    """The model's front end (config.json data_meta.frontend) as a snapuq.data.audio record."""
    shape = tuple(cfg.get("input_shape", ()))
    if shape != audio.FEATURE_SHAPE:
        raise SnapuqError(f"--split reads audio clips; the model takes {list(shape)}, not MFCC "
                          f"{list(audio.FEATURE_SHAPE)} (an audio model from `snapuq train`)")  # fmt: skip
    fe = audio.known_frontend((cfg.get("data_meta") or {}).get("frontend"))
    if fe is None:
        raise SnapuqError("the model's front end (config.json data_meta.frontend) is none of "
                          "snapuq.data.audio's; it cannot be evaluated on raw clips here")  # fmt: skip
    return fe


def _ece_both(conf: np.ndarray, ok: np.ndarray) -> float:
    return M.ece(conf, ok) if len(ok) else float("nan")


def _auroc(u: np.ndarray, pos: np.ndarray) -> float:
    return M.auroc(u, pos) if pos.any() and (~pos).any() else float("nan")


def uq_rows(results: dict, y: np.ndarray, known: np.ndarray) -> dict:
    """Per method: right-vs-wrong metrics on the clips of known words, and known-vs-unknown-to-the-model."""
    rows = {}
    for name, r in results.items():
        u, ok = r.u[known], r.pred[known] == y[known]
        row = {
            "auroc_ok_vs_err": _auroc(u, ~ok),
            "aupr_ok_vs_err": M.aupr(u, ~ok) if (~ok).any() and ok.any() else float("nan"),
            "aurc": M.aurc(u, ok) if len(ok) else float("nan"),
            "ece": _ece_both(r.conf[known], ok),
            "mean_conf": float(np.mean(r.conf[known])) if known.any() else float("nan"),
        }
        if (~known).any():
            row["auroc_known_vs_unknown_word"] = _auroc(r.u, ~known)
        if name == "snap":
            pe = r.extra.get("p_err", r.u)
            al = r.extra.get("alarm", np.zeros_like(r.u))
            row.update({
                "mean_p_err": float(np.mean(pe[known])) if known.any() else float("nan"),
                "error_rate": float(1.0 - ok.mean()) if len(ok) else float("nan"),
                "ece_p_err": _ece_both(np.clip(1.0 - pe[known], 0, 1), ok),
                "auroc_ok_vs_err_p_err": _auroc(pe[known], ~ok),
                "alarm_rate": float(np.mean(al > 0)),
                "alarm_rate_known": float(np.mean(al[known] > 0)) if known.any() else float("nan"),
            })  # fmt: skip
        rows[name] = row
    return rows


GATE_KEEPS = (0.95, 0.90)  # shares of the right keyword clips a gate keeps


def keyword_ids(names: list[str]) -> list[int]:
    """The model's keyword classes: every class but `_silence_` and `_unknown_`."""
    return [i for i, n in enumerate(names) if n not in (SILENCE, UNKNOWN)]


def keyword_gate(results: dict, y: np.ndarray, pred: np.ndarray, names: list[str]) -> dict | None:
    """Keywords gated on each method's U, as a device would: a keyword answer counts only when U is at most
    the threshold that keeps the share `keep` (GATE_KEEPS) of this folder's right keyword clips. Per gate:
    the keyword recall (right keyword answers let through, over the keyword clips) and the false keywords
    (keyword answers let through on the other clips: `_silence_`, `_unknown_` words and words unknown to the
    model), beside the ungated figures. None when the folder lacks right keyword clips or other clips."""
    kw_ids = keyword_ids(names)
    kw_clip = np.isin(y, kw_ids)
    called = np.isin(pred, kw_ids)
    right = kw_clip & (pred == y)
    if not right.any() or kw_clip.all():
        return None
    row = lambda let: {"keyword_recall": float((right & let).sum() / kw_clip.sum()),  # noqa: E731
                       "false_keyword_rate": float(np.mean((called & let)[~kw_clip]))}  # fmt: skip
    out: dict = {"n_keyword_clips": int(kw_clip.sum()), "n_other_clips": int((~kw_clip).sum()),
                 "ungated": row(np.ones(len(y), bool))}  # fmt: skip
    for name, r in results.items():
        u = np.asarray(r.u, np.float64)
        for keep in GATE_KEEPS:
            t = float(np.quantile(u[right], keep))
            out[f"{name}@{keep:g}"] = {"threshold": t} | row(u <= t)
    return out


def confusion(y: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_classes + 1, n_classes) counts: rows = true class (last row: words unknown to the model)."""
    cm = np.zeros((n_classes + 1, n_classes), np.int64)
    np.add.at(cm, (np.where(y < 0, n_classes, y), pred), 1)
    return cm


def _plot_confusion(path: Path, cm: np.ndarray, names: list[str], title: str) -> None:
    plt = _plt()
    rows = cm if cm[-1].sum() else cm[:-1]
    rnames = names + ([UNKNOWN_ROW] if cm[-1].sum() else [])
    frac = rows / np.maximum(rows.sum(1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(names), 1.0 + 0.5 * len(rnames)))
    ax.imshow(frac, cmap="Blues", vmin=0, vmax=1)
    for i in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            if rows[i, j]:
                ax.text(j, i, str(rows[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if frac[i, j] > 0.5 else "black")  # fmt: skip
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(rnames)), rnames, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true (folder word)")
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)


def speaker_of(files: np.ndarray) -> np.ndarray | None:
    """The speaker of every clip by the Speech Commands naming `<word>/<speaker>_nohash_<n>.wav` (the file
    name before its first '_'; background-noise pieces have none: ""); None when no clip name has one."""
    out = np.array(["" if "#" in f or "_" not in Path(f).stem else Path(f).stem.split("_")[0] for f in files])
    return out if (out != "").any() else None


def per_speaker(speakers: np.ndarray, y: np.ndarray, pred: np.ndarray, snap) -> dict:
    """Per speaker (clips of words the model knows): clips, accuracy, mean U."""
    out = {}
    for v in sorted(set(speakers.tolist()) - {""}):
        sel = (speakers == v) & (y != UNKNOWN_TO_MODEL)
        if sel.any():
            row = {"n": int(sel.sum()), "accuracy": float(np.mean(pred[sel] == y[sel]))}
            if snap is not None:
                row["mean_U"] = float(np.mean(snap.u[sel]))
            out[v] = row
    return out


def _int8(d: Path, x: np.ndarray) -> np.ndarray | None:
    if not ModelPaths(d).int8.exists():
        return None

    o8 = int8_predict(d, x)
    return np.asarray(o8["logits"], np.float64).reshape(len(x), -1).argmax(1)


def per_word(words: np.ndarray, y: np.ndarray, pred: np.ndarray, names: list[str], snap) -> dict:
    out = {}
    for w in sorted(set(words.tolist())):
        sel = words == w
        counts = np.bincount(pred[sel], minlength=len(names))
        row = {"n": int(sel.sum()), "label": names[y[sel][0]] if y[sel][0] >= 0 else UNKNOWN_ROW,
               "predicted": {names[i]: int(c) for i, c in enumerate(counts) if c}}  # fmt: skip
        if y[sel][0] >= 0:
            row["accuracy"] = float(np.mean(pred[sel] == y[sel]))
        if snap is not None:
            row["mean_U"] = float(np.mean(snap.u[sel]))
            row["alarm_rate"] = float(np.mean(snap.extra.get("alarm", np.zeros_like(snap.u))[sel] > 0))
        out[w] = row
    return out


def run_test_tree(args: Any) -> int:  # the eval command's parsed arguments
    t0 = time.perf_counter()
    d = Path(args.model_dir)
    md = load(d)
    cfg = md.config
    fe = _check_frontend(cfg)
    names = [str(n) for n in cfg.get("class_names") or range(int(md.model.output["logits"].shape[-1]))]
    tree = read_test_tree(args.data_dir, names, args.split)
    rdir = Path(args.report) if args.report else Path(f"eval_{Path(tree['root']).name}_{args.split}")
    y, words, files = tree["labels"], tree["words"], tree["files"]
    if args.limit:
        pick = np.sort(np.random.default_rng([args.seed, 17]).permutation(len(y))[: args.limit])
        tree["waves"], y, words, files = tree["waves"][pick], y[pick], words[pick], files[pick]
    x = audio.features(tree["waves"], fe)
    n_classes = len(names)
    ctx = EvalContext(
        model=md.model, n_classes=n_classes, x_train=x[:0], y_train=y[:0], x_dev=x[:0], y_dev=y[:0],
        predict=md.predict, calib=getattr(md, "calib", None), model_dir=d, backbone=cfg.get("backbone"),
        seed=args.seed,
    )  # fmt: skip
    outs = ctx.run(x)
    wanted = TREE_METHODS if args.methods == "all" else [m.strip() for m in args.methods.split(",") if m]
    results, notes = {}, {}
    for name in wanted:
        if name not in TREE_METHODS:
            raise SnapuqError(
                f"--split: method '{name}' needs a train / dev split (here: {', '.join(TREE_METHODS)})"
            )
        m = make_method(name)
        try:
            m.fit(ctx)
            results[name] = m.score(ctx, x, outs)
        except MethodUnavailable as e:
            notes[name] = str(e)
    pred = np.asarray(outs["logits"]).argmax(1)
    known = y != UNKNOWN_TO_MODEL
    ok = pred[known] == y[known]
    cm = confusion(y, pred, n_classes)
    per_class = {n: (float(cm[i, i] / cm[i].sum()) if cm[i].sum() else None) for i, n in enumerate(names)}
    pred8 = _int8(d, x)
    out: dict = {
        "model_dir": str(d),
        "data_dir": tree["root"],
        "split": args.split,
        "list": tree["listed"] or "none (every clip in the word folders)",
        "n_clips": int(len(y)),
        "n_known": int(known.sum()),
        "n_unknown_to_model": int((~known).sum()),
        "class_names": names,
        "accuracy": {"float": float(ok.mean()) if len(ok) else None,
                     "int8": float(np.mean(pred8[known] == y[known]))
                     if pred8 is not None and len(ok) else None},
        "per_class_accuracy": per_class,
        "confusion": {"rows": names + [UNKNOWN_ROW], "cols": names, "counts": cm},
        "methods": uq_rows(results, y, known),
        "per_word": per_word(words, y, pred, names, results.get("snap")),
    }  # fmt: skip
    gate = keyword_gate(results, y, pred, names)
    if gate is not None:
        out["keyword_gate"] = gate
    speakers = speaker_of(files)
    if speakers is not None:
        out["per_speaker"] = per_speaker(speakers, y, pred, results.get("snap"))
    if SILENCE in names or UNKNOWN in names:
        kw = np.isin(y, keyword_ids(names))
        out["accuracy"]["keywords_only"] = float(np.mean(pred[kw] == y[kw])) if kw.any() else None
    if notes:
        out["notes"] = notes
    out["timings_s"] = {"total": round(time.perf_counter() - t0, 3)}
    with staged_dir(rdir) as stage:
        acc = out["accuracy"]["float"]
        _plot_confusion(stage / "confusion.png", cm, names,
                        f"{d.name} on {Path(tree['root']).name} ({args.split}, {len(y)} clips), "
                        f"accuracy {acc if acc is None else round(acc, 4)}")  # fmt: skip
        write_text(stage / "metrics.json", json.dumps(_jsonable(out), indent=2))
        write_text(stage / "report.md", report_md(_jsonable(out)))
    acc = out["accuracy"]["float"]
    print(f"snapuq eval: {len(y)} clips ({int((~known).sum())} of words unknown to the model), accuracy "
          f"{'–' if acc is None else f'{acc:.4f}'}; report in {rdir / 'report.md'}")  # fmt: skip
    return 0


def _top_calls(predicted: dict, exclude: str, k: int = 3) -> str:
    """The classes most called instead of `exclude`, as "on 89, off 61"."""
    wrong = sorted(((c, n) for n, c in predicted.items() if n != exclude), reverse=True)[:k]
    return ", ".join(f"{n} {c}" for c, n in wrong)


def report_md(o: dict) -> str:
    a = o["accuracy"]
    f = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    kw = ""
    if "keywords_only" in a:
        k = a["keywords_only"]
        kw = ", keywords only " + (f(k) if k is not None else "– (no keyword clips)")
    counts = o["confusion"]["counts"]
    lines = [
        f"# {o['model_dir']} on {o['data_dir']} (split {o['split']}, list: {o['list']})", "",
        f"{o['n_clips']} clips, {o['n_known']} of words the model knows, "
        f"{o['n_unknown_to_model']} unknown to it.",
        f"Accuracy float {f(a['float'])}, int8 {f(a['int8'])}{kw}.", "",
        "| class | clips | accuracy |", "|---|---|---|",
    ]  # fmt: skip
    lines += [f"| {n} | {int(sum(counts[i]))} | {f(v) if v is not None else '– (no clips)'} |"
              for i, (n, v) in enumerate(o["per_class_accuracy"].items())]  # fmt: skip
    pw = o.get("per_word") or {}
    if pw:
        lines += ["", "Per folder word (its class, accuracy, mean U, what it is called instead):", "",
                  "| word | clips | class | accuracy | mean U | called instead |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {w} | {r['n']} | {r['label']} | {f(r.get('accuracy'))} | {f(r.get('mean_U'))} | "
                  f"{_top_calls(r['predicted'], r['label'])} |" for w, r in pw.items()]  # fmt: skip
    lines += [
        "",
        "| method | AUROC ok/err | AUPR ok/err | AURC | ECE | known vs unknown word |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in o["methods"].items():
        lines.append(f"| {n} | {f(r['auroc_ok_vs_err'])} | {f(r['aupr_ok_vs_err'])} | {f(r['aurc'])} | "
                     f"{f(r['ece'])} | {f(r.get('auroc_known_vs_unknown_word'))} |")  # fmt: skip
    g = o.get("keyword_gate")
    if g:
        lines += ["", f"Keywords gated on U ({g['n_keyword_clips']} keyword clips, {g['n_other_clips']} "
                  "other clips): a keyword answer counts when the method's U is at most the threshold "
                  "keeping the given share of the right keyword clips.", "",
                  "| gate | keyword recall | false keywords on the other clips |",
                  "|---|---|---|"]  # fmt: skip
        lines += [f"| {k} | {f(v['keyword_recall'])} | {f(v['false_keyword_rate'])} |" for k, v in g.items()
                  if isinstance(v, dict)]  # fmt: skip
    s = o["methods"].get("snap")
    if s:
        lines += ["", f"SNAP: mean p_err {f(s['mean_p_err'])} vs error rate {f(s['error_rate'])}; "
                  f"ECE of p_err {f(s['ece_p_err'])}; AUROC ok/err of p_err "
                  f"{f(s['auroc_ok_vs_err_p_err'])}; alarms on {f(s['alarm_rate'])} of all clips "
                  f"({f(s['alarm_rate_known'])} of known-word clips)."]  # fmt: skip
    sp = o.get("per_speaker") or {}
    if len(sp) > 1:
        acc = sorted((r["accuracy"], r["n"], v) for v, r in sp.items())
        q = np.percentile([a for a, _, _ in acc], [0, 25, 50, 75, 100])
        lines += ["", f"Per speaker ({len(sp)} speakers, the file name before its first '_'): accuracy "
                  f"min {q[0]:.3f}, quartiles {q[1]:.3f} / {q[2]:.3f} / {q[3]:.3f}, max {q[4]:.3f}; the "
                  "lowest:", "", "| speaker | clips | accuracy |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {v} | {n} | {a:.3f} |" for a, n, v in acc[:10]]
    lines += ["", "![confusion](confusion.png)", ""]
    return "\n".join(lines)
