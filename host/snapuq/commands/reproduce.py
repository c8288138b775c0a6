"""`snapuq reproduce --data-dir DIR [--datasets mnist,cifar10] [--seeds 0,1,2] [--resume]`: the seed paper's
benchmarks on the real data sets, one command.

Per dataset: the shipped model directory (models/<dataset>, the project's recipe for that set, trained when
missing and continued from its checkpoint with --resume), exported to int8, then `snapuq eval --seeds`
(every method on the same split and inputs, the other seeds' models trained beside it with the same recorded
recipe). The mean ± sd over the seeds goes to docs/results/reproduce_<dataset>.json and docs/RESULTS.md,
with the paper's figures in a column beside ours and each "done" criterion marked; the seed-0 report also
refreshes the shipped model's eval/. Everything is written atomically; a run that stops keeps what it had
measured (--resume reuses a seed's metrics.json when it is newer than that seed's model, and continues an
interrupted seed's training). Every seed's model is exported before eval, so int8 is measured at every seed.
--deploy: the paper's Small-MCU deployment row as firmware (`snapuq bench --table` on the shipped model: BASE,
SNAP, EE-ens, DEEP images linked with the STM32L432KC's 256 KB / 64 KB, run on QEMU, DEPLOY_INPUTS real test
inputs checked against TFLM) into docs/results/deploy_<dataset>.json; a later run without --deploy shows that
file while it was measured on the same int8 model (its sha256), and says it is stale otherwise.
--shared-baselines: the shipped model's trained deep ensemble and early-exit model serve every seed (the other
seeds train without their own), and RESULTS.md says so beside the table. --ensemble-from-seeds: the same, with
the deep ensemble made of the run's seeds' own backbones (one member per seed) and only the early-exit model
trained for it (`snapuq train --baselines-only --ensemble-from`), which saves M backbone trainings.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from snapuq.bench.table_markdown import METHOD_LABEL, paper_markdown, paper_row
from snapuq.bench.variants import export_variants, load_variants
from snapuq.commands import bench as B
from snapuq.commands import evaluate as E
from snapuq.commands import multiseed
from snapuq.commands import train as T
from snapuq.commands.export import export_model
from snapuq.commands.multiseed import parse_seeds
from snapuq.errors import SnapuqError
from snapuq.evaluation.loading import _jsonable
from snapuq.io import check_out_dir, write_json, write_text
from snapuq.modeldir import ModelPaths, part_problem, read_parts, sha256_file

DATASETS = ("mnist", "cifar10")

# The seed paper's figures (SNAP-UQ, tables "fault detection", "CID stream monitoring", "ablation", "MCU
# deployment"), by our method names: BASE = msp, EE-ens = ee_ensemble, DEEP = deep_ensemble.
PAPER: dict[str, dict[str, Any]] = {
    "mnist": {
        "auroc_ok_vs_err": {"msp": 0.75, "ee_ensemble": 0.85, "deep_ensemble": 0.85, "snap": 0.90},
        "cid_auprc": {"msp": 0.54, "ee_ensemble": 0.63, "snap": 0.66},
        "cid_delay": {"msp": 42, "ee_ensemble": 31, "snap": 24},
    },
    "cifar10": {
        "auroc_idok_vs_ood": {"msp": 0.90, "ee_ensemble": 0.90, "deep_ensemble": 0.92, "snap": 0.92},
        "cid_auprc": {"snap": 0.72},  # ablation M+P, r = 128 (r = 64: 0.70)
    },
}
TARGET_ACCURACY = {"mnist": 0.990, "cifar10": 0.85}
# the deployment row: the paper's Small-MCU (STM32L432KC) board, real test inputs checked on the device
DEPLOY_BOARDS = "small"
DEPLOY_INPUTS = 200
SNAP_OVERHEAD_MAX = 0.02  # SNAP's instructions over the backbone's (BASE image), at most
METRICS = (
    ("auroc_ok_vs_err", "ID✓ vs ID✗ AUROC"),
    ("auroc_idok_vs_ood", "ID✓ vs OOD AUROC"),
    ("shift_auroc_mean", "corruption shift AUROC (mean)"),
    ("cid_auprc", "CID AUPRC"),
    ("cid_delay", "CID delay (frames)"),
    ("cid_false_alarm_rate", "CID false alarms (clean)"),
    ("ece", "ECE"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", required=True, help="folder with the real data sets (official formats)")
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma list of mnist, cifar10")
    p.add_argument("--seeds", default="0,1,2", help="comma list of seeds (default 0,1,2)")
    p.add_argument("--models", default="models", help="folder of the shipped model directories")
    p.add_argument("--runs", default="runs/reproduce", help="folder of the per-seed eval reports")
    p.add_argument("--docs", default="docs", help="where RESULTS.md and results/reproduce_*.json go")
    p.add_argument("--resume", action="store_true", help="continue interrupted training; reuse fresh reports")
    p.add_argument(
        "--no-baselines", action="store_true", help="train without the deep ensemble / early exits"
    )
    p.add_argument(
        "--shared-baselines", action="store_true",
        help="the shipped model's deep ensemble / early-exit model serve every seed (the other seeds train "
        "without their own; said so in RESULTS.md)",
    )  # fmt: skip
    p.add_argument(
        "--ensemble-from-seeds", action="store_true",
        help="the deep ensemble is the seeds' own backbones (one member per seed) and serves every seed, "
        "with one early-exit model trained for the shipped model (implies --shared-baselines)",
    )  # fmt: skip
    p.add_argument("--limit", type=int, default=None, help="score at most N test inputs per seed")
    p.add_argument(
        "--deploy", action="store_true",
        help=f"also measure the Small-MCU deployment row as firmware on QEMU (snapuq bench --table, "
        f"{DEPLOY_INPUTS} test inputs checked against TFLM) into docs/results/deploy_<dataset>.json",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true")


def _parse_datasets(text: str) -> list[str]:
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [n for n in names if n not in DATASETS]
    if not names or bad:
        raise SnapuqError(f"--datasets: choose from {', '.join(DATASETS)}, got '{text}'")
    return names


def _train(ds: str, out: Path, args: argparse.Namespace, seed: int) -> None:
    argv = ["--dataset", ds, "--data-dir", args.data_dir, "--out", str(out), "--seed", str(seed)]
    argv += ["--resume"] if args.resume else []
    argv += ["--no-baselines"] if args.no_baselines or getattr(args, "ensemble_from_seeds", False) else []
    argv += ["--no-progress"] if args.no_progress else []
    print(f"snapuq reproduce: {ds}: training {out} (snapuq train {' '.join(argv)})")
    T.run_argv(argv)


def _same_dirs(recorded, wanted: list[str]) -> bool:
    """`recorded` (baselines.json's from_model_dirs) names the `wanted` directories in the same order, however
    each is spelled (./models/x or models/x, relative or absolute): compared as resolved paths."""
    if not isinstance(recorded, list) or not all(isinstance(p, str) for p in recorded):
        return False
    if len(recorded) != len(wanted):
        return False
    return [Path(p).resolve() for p in recorded] == [Path(p).resolve() for p in wanted]


def _seed_ensemble(d: Path, cfg: dict, seeds: list[int], args: argparse.Namespace) -> None:
    """D/baselines with the seeds' backbones as the deep ensemble and D's own early-exit model, made
    (`snapuq train --baselines-only --ensemble-from`) unless D/baselines already holds exactly that."""

    if len(seeds) < 2:
        raise SnapuqError("--ensemble-from-seeds needs at least two seeds")
    dirs = [str(multiseed.seed_dir(d, cfg, s)) for s in seeds]
    b = ModelPaths(d).baselines / "baselines.json"
    made = (json.loads(b.read_text()).get("ensemble") or {}).get("from_model_dirs") if b.is_file() else None
    if _same_dirs(made, dirs):
        return
    argv = ["--out", str(d), "--baselines-only", "--ensemble-from", ",".join(dirs)]
    argv += ["--data-dir", args.data_dir]
    argv += ["--resume"] if args.resume else []
    argv += ["--no-progress"] if args.no_progress else []
    print(f"snapuq reproduce: {d}: deep ensemble = the backbones of seeds {', '.join(map(str, seeds))}; "
          f"training its early-exit model (snapuq train {' '.join(argv)})")
    T.run_argv(argv)


def _fresh_export(d: Path) -> bool:
    """D's export is there and made from D's model and calibration as they are now, by the sha256 that
    MANIFEST.sha256 records (file times say nothing in a fresh clone, where git writes files in any order);
    model_float.tflite (not committed) is checked only when present."""
    p = ModelPaths(d)
    rec = read_parts(d)
    if rec is None:
        return False
    sha: dict = {}
    need = [p.INT8, p.MANIFEST, p.C_SOURCE, p.C_HEADER] + ([p.FLOAT] if p.float_tflite.is_file() else [])
    return all(part_problem(d, rec, n, sha) is None for n in need)


def reproduce_dataset(ds: str, args: argparse.Namespace, seeds: list[int]) -> dict:
    d = Path(args.models) / ds
    if not ModelPaths(d).config.is_file():
        _train(ds, d, args, seeds[0])
    cfg = json.loads(ModelPaths(d).config.read_text())
    if cfg.get("dataset") != ds:
        raise SnapuqError(f"{d}: a model of dataset '{cfg.get('dataset')}', not {ds}")
    calib = json.loads(ModelPaths(d).calib.read_text()) if ModelPaths(d).calib.is_file() else None
    ensemble = getattr(args, "ensemble_from_seeds", False)
    shared = ensemble or multiseed.shared_baselines_dir(d, args.shared_baselines) is not None
    for s in seeds:  # every seed's model trained and exported first, so int8 is measured at every seed
        sd = multiseed.ensure_seed_model(d, cfg, calib, s, args.data_dir, shared or args.no_baselines,
                                         resume=args.resume, progress=not args.no_progress)  # fmt: skip
        if not _fresh_export(sd):
            export_model(sd, data_dir=args.data_dir)
    if ensemble:
        _seed_ensemble(d, cfg, seeds, args)
    ep = argparse.ArgumentParser()
    E.add_arguments(ep)
    rdir = Path(args.runs) / ds
    argv = [str(d), "--report", str(rdir), "--data-dir", args.data_dir, "--seeds", ",".join(map(str, seeds))]
    argv += ["--resume"] if args.resume else []
    argv += ["--no-progress"] if args.no_progress else []
    argv += ["--limit", str(args.limit)] if args.limit else []
    argv += ["--shared-baselines"] if shared else []
    rc = multiseed.run_seeds(ep.parse_args(argv), E.run)
    if rc:
        raise SnapuqError(f"{ds}: eval --seeds failed (exit {rc})")
    agg = json.loads((rdir / "metrics.json").read_text())
    own = rdir / f"seed{int(cfg.get('seed', 0))}"
    if own.is_dir():  # the shipped model's eval/ is its own seed's report
        shutil.copytree(own, d / "eval", dirs_exist_ok=True)
    return agg


def deployment(ds: str, d: Path, args: argparse.Namespace, docs: Path) -> dict | None:
    """The deployment row of `ds`: measured now with --deploy (variants exported first when missing), else
    read from docs/results/deploy_<ds>.json. None when there is none; {"stale": ...} when it was measured on
    another int8 model than D's."""
    out = docs / "results" / f"deploy_{ds}.json"
    if getattr(args, "deploy", False):
        if load_variants(d) is None:
            print(f"snapuq reproduce: {d}: exporting the BASE / EE-ens / DEEP variants (deployment row)")
            export_variants(d, args.data_dir)
        bp = argparse.ArgumentParser()
        B.add_arguments(bp)
        argv = ["--table", "--workloads", str(d), "--table-boards", DEPLOY_BOARDS, "--check-inputs",
                str(DEPLOY_INPUTS), "--data-dir", args.data_dir, "--out", str(out)]  # fmt: skip
        print(f"snapuq reproduce: {ds}: the deployment row (snapuq bench {' '.join(argv)})")
        if B.run(bp.parse_args(argv)):
            raise SnapuqError(f"{ds}: bench --table failed")
    if not out.is_file():
        return None
    try:
        rep = json.loads(out.read_text())
        meta = next(iter(rep["workloads"].values()))
        rows = rep["rows"]
    except (OSError, ValueError, KeyError, StopIteration, AttributeError) as e:
        raise SnapuqError(f"{out}: not a bench --table report ({e}); rerun with --deploy") from e
    sha = sha256_file(ModelPaths(d).int8) if ModelPaths(d).int8.is_file() else None
    if meta.get("int8_sha256") != sha:
        return {"stale": f"{out.name} was measured on another int8 model than {d}'s: rerun with --deploy"}
    # the cells as measured, less the cycle model's derivation and the eval columns (in the report file)
    rows = [{k: v for k, v in c.items() if k not in ("cycle_model", "uq")} for c in rows]
    return {"file": str(out), "check_inputs": meta.get("check_inputs"), "report": {"rows": rows}}


def _cell(dep: dict, method: str) -> dict | None:
    return next((c for c in dep["report"]["rows"] if c.get("method") == method), None)


def deployment_criteria(ds: str, dep: dict | None) -> list[tuple[str, str, bool | None]]:
    """The deployment row's criteria: SNAP fits the Small-MCU and equals TFLM on every checked input, SNAP
    costs ≤ SNAP_OVERHEAD_MAX over the backbone, and where the paper's row has EE-ens / DEEP out of memory
    (CIFAR-10), they do not fit here either (a real link or arena failure)."""
    if not dep or "report" not in dep:
        return []
    paper = paper_row("small", ds) or {}
    out: list[tuple[str, str, bool | None]] = []
    snap, base = _cell(dep, "snap"), _cell(dep, "base")
    if snap is not None:
        if snap["status"] == "ok":
            line = (f"flash {snap['flash']:,} B, peak RAM {snap['ram']['peak']:,} B; "
                    f"{snap['mismatches_vs_tflm']} differing of {snap['checked_inputs']} inputs")  # fmt: skip
            ok = snap["mismatches_vs_tflm"] == 0 and snap["checked_inputs"] >= DEPLOY_INPUTS
        else:
            line, ok = f"SNAP: {snap['status']}", False
        what = f"Small-MCU: SNAP fits 256 KB / 64 KB, device = TFLM on {DEPLOY_INPUTS} test inputs"
        out.append((what, line, ok))
    for m in ("ee", "deep"):
        c = _cell(dep, m)
        if c is not None and m in paper and paper[m] is None:
            src = c.get("oom_source", c["status"])
            what, ok = f"Small-MCU: {METHOD_LABEL[m]} out of memory", c["status"] == "OOM"
            out.append((what, f"{c['status']} ({src})", ok))
    if snap and base and snap["status"] == base["status"] == "ok":
        sn, bn = snap["instructions"]["total"], base["instructions"]["total"]
        over = sn / bn - 1
        out.append((f"Small-MCU: SNAP overhead ≤ {SNAP_OVERHEAD_MAX:.0%} of the backbone",
                    f"{over:+.2%} instructions ({sn:,.0f} vs {bn:,.0f})",
                    over <= SNAP_OVERHEAD_MAX))  # fmt: skip
    return out


def _deployment_lines(dep: dict | None) -> list[str]:
    if not dep:
        return []
    if "stale" in dep:
        return ["", "### Deployment (Small-MCU)", "", f"Not shown: {dep['stale']}."]
    L = ["", "### Deployment (Small-MCU)", "",
         f"`snapuq reproduce --deploy` (`snapuq bench --table`, {Path(dep['file']).name}): each method its "
         "own firmware image linked with the STM32L432KC's budgets (256 KB flash / 64 KB RAM), run on QEMU "
         f"M4; check inputs: {dep['check_inputs']}. Latency is a model (QEMU instructions at one per cycle "
         "at 80 MHz).", "",
         "| method | flash KB | peak RAM KB | instructions / inference | ms (model) | device vs TFLM |",
         "|---|---|---|---|---|---|"]  # fmt: skip
    for c in dep["report"]["rows"]:
        name = METHOD_LABEL.get(c.get("method"), str(c.get("method")))
        if c.get("status") == "ok":
            L.append(f"| {name} | {c['flash'] / 1024:.1f} | {c['ram']['peak'] / 1024:.1f} | "
                     f"{c['instructions']['total']:,.0f} | {c['model']['latency_ms']:.1f} | "
                     f"{c['mismatches_vs_tflm']} differing of {c['checked_inputs']} |")  # fmt: skip
        else:
            why = c.get("oom_source", c.get("reason", ""))
            L.append(f"| {name} | **{c.get('status')}** ({why}) | | | | |")
    side = paper_markdown(dep["report"]).rstrip()
    return L + (["", side] if side else [])


def _pm(mu, sd, nd: int = 3) -> str:
    if mu is None:
        return "n/a"
    return f"{mu:.{nd}f}" + (f" ± {sd:.{nd}f}" if sd else "")


def criteria(ds: str, agg: dict) -> list[tuple[str, str, bool | None]]:
    """(criterion, measured vs reference, met) for the done criteria of the real-data benchmarks."""
    m, acc = agg["methods"], agg["accuracy"]
    out: list[tuple[str, str, bool | None]] = []

    def get(method: str, key: str):
        return (m.get(method) or {}).get(key)

    def best_baseline(key: str, lower: bool = False):
        vals = [(v.get(key), n) for n, v in m.items() if n != "snap" and v.get(key) is not None]
        return (min if lower else max)(vals) if vals else (None, None)

    fa, ia = acc.get("float"), acc.get("int8")
    tgt = TARGET_ACCURACY[ds]
    out.append((f"float accuracy ≥ {tgt:.3f}", _pm(fa, None, 4), None if fa is None else fa >= tgt))
    if fa is not None and ia is not None:
        out.append(("int8 within 0.5 points of float", f"{ia:.4f} vs {fa:.4f}", abs(fa - ia) <= 0.005))
    snap, msp = get("snap", "auroc_ok_vs_err"), get("msp", "auroc_ok_vs_err")
    if ds == "mnist" and snap is not None and msp is not None:
        out.append(("U ✓/✗ AUROC ≥ MSP − 0.005 and ≥ 0.90", f"{snap:.4f} vs MSP {msp:.4f}",
                    snap >= msp - 0.005 and snap >= 0.90))  # fmt: skip
    if ds == "cifar10":
        for key in ["auroc_idok_vs_ood", *_per_set_keys(agg)]:
            v, (b, bn) = get("snap", key), best_baseline(key)
            if v is not None and b is not None:
                what = key.removeprefix("auroc_idok_vs_ood").strip("[]") or "all OOD sets"
                out.append((f"ID✓ vs OOD ({what}) ≥ 0.92 and ≥ the best baseline", f"{v:.4f} vs {bn} {b:.4f}",
                            v >= 0.92 and v >= b))  # fmt: skip
    a_ref = 0.66 if ds == "mnist" else 0.72
    v = get("snap", "cid_auprc")
    refs = [(n, get(n, "cid_auprc")) for n in ("ee_ensemble", "msp") if get(n, "cid_auprc") is not None]
    if v is not None:
        ok = v >= a_ref and all(v >= r for _, r in refs)
        line = f"{v:.4f} vs " + ", ".join([f"paper {a_ref}"] + [f"{n} {r:.4f}" for n, r in refs])
        out.append((f"CID AUPRC ≥ {a_ref} and ≥ EE-ens, MSP", line, ok))
    if ds == "mnist" and get("snap", "cid_delay") is not None:
        dl = get("snap", "cid_delay")
        out.append(("CID delay ≤ 24 frames", f"{dl:.1f}", dl <= 24))
    v, (b, bn) = get("snap", "shift_auroc_mean"), best_baseline("shift_auroc_mean")
    if v is not None and b is not None:
        out.append(("shift AUROC ≥ best baseline + 0.03", f"{v:.4f} vs {bn} {b:.4f}", v >= b + 0.03))
    v, r = get("snap", "cid_false_alarm_rate"), get("msp", "cid_false_alarm_rate")
    if v is not None and r is not None:
        out.append(("CID false alarms ≤ MSP + 0.005", f"{v:.4f} vs {r:.4f}", v <= r + 0.005))
    return out + deployment_criteria(ds, agg.get("deployment"))


def _per_set_keys(agg: dict) -> list[str]:
    """The per-OOD-set rows (far / near) eval wrote for this data set."""
    return sorted(k for k in (agg["methods"].get("snap") or {}) if k.startswith("auroc_idok_vs_ood["))


def _int8_seeds(agg: dict) -> str:
    n, k = agg["accuracy"].get("int8_n"), len(agg["seeds"])
    return f" ({n} of {k} seeds exported)" if n is not None and agg["accuracy"].get("int8") and n < k else ""


def _baselines_note(agg: dict) -> list[str]:
    """The sentence that says one trained deep ensemble / early-exit model served every seed."""
    b = agg.get("baselines")
    if not b:
        return []
    if b.get("ensemble_seeds"):
        k = len(b["ensemble_seeds"])
        return ["", f"Baselines: the deep ensemble is the {k} seeds' own backbones (seeds "
                f"{', '.join(map(str, b['ensemble_seeds']))}, one member each, `--ensemble-from-seeds`) and "
                f"the early-exit model was trained once with seed {b.get('seed')} by the backbone's own "
                f"recipe ({b.get('dir')}); every seed's SNAP is compared with that one set: their ± "
                "comes from the eval seed (OOD sample, CID stream), not from retraining them."]  # fmt: skip
    return ["", f"Baselines: the 5-member deep ensemble and the early-exit model were trained once, with "
            f"seed {b.get('seed')} by the backbone's own recipe ({b.get('dir')}), and every seed's SNAP is "
            "compared with that one set (`--shared-baselines`): their ± comes from the eval seed (OOD "
            "sample, CID stream), not from retraining them."]  # fmt: skip


def render(results: dict[str, dict]) -> str:
    L = [
        "# Results on the real data sets",
        "",
        "Written by `snapuq reproduce` (do not edit by hand). Mean ± sd over the seeds listed per data set;",
        "every method on the same split and the same inputs in one `snapuq eval` run per seed. The paper's",
        "figures (SNAP-UQ's tables; BASE = MSP) stand beside ours where the paper reports them. Data: MNIST",
        "(LeCun, Cortes, Burges), Fashion-MNIST (Zalando Research, MIT), CIFAR-10 (Krizhevsky, Nair, Hinton",
        "2009), read from their official files with `--data-dir`; corruptions regenerated by our own code at",
        "the published parameters (docs/EVAL.md: the official MNIST-C / CIFAR-10-C archives are not",
        "reachable here).",
    ]
    for ds, agg in results.items():
        paper = PAPER.get(ds, {})
        L += ["", f"## {ds}", "",
              f"Seeds {', '.join(map(str, agg['seeds']))}; {agg['n_test']} test inputs; float accuracy "
              f"{_pm(agg['accuracy'].get('float'), agg['accuracy'].get('float_sd'), 4)}, "
              f"int8 {_pm(agg['accuracy'].get('int8'), agg['accuracy'].get('int8_sd'), 4)}"
              f"{_int8_seeds(agg)}.",
              *_baselines_note(agg),
              "", "| criterion | measured | met |", "|---|---|---|"]  # fmt: skip
        for name, line, ok in criteria(ds, agg):
            L.append(
                f"| {name} | {line} | {'n/a' if ok is None else '✓' if ok else '✗ (short: see the study)'} |"
            )
        metrics = list(METRICS) + [(k, "ID✓ vs " + k.split("[")[1].rstrip("]")) for k in _per_set_keys(agg)]
        cols = [k for k, _ in metrics]
        L += [
            "",
            "| method | " + " | ".join(lbl for _, lbl in metrics) + " |",
            "|---" * (len(cols) + 1) + "|",
        ]
        for n in agg["methods"]:
            cells = []
            for k in cols:
                mu, sd = agg["methods"][n].get(k), (agg.get("sd", {}).get(n) or {}).get(k)
                cell = _pm(mu, sd, 1 if k == "cid_delay" else 3)
                got = (agg.get("n_seeds", {}).get(n) or {}).get(k)
                if mu is not None and got is not None and got < len(agg["seeds"]):
                    cell += f" ({got} of {len(agg['seeds'])} seeds)"
                if n in paper.get(k, {}):
                    cell += f" (paper {paper[k][n]})"
                cells.append(cell)
            L.append(f"| {n} | " + " | ".join(cells) + " |")
        L += _deployment_lines(agg.get("deployment"))
    return "\n".join(L) + "\n"


def run(args: argparse.Namespace) -> int:
    datasets = _parse_datasets(args.datasets)
    seeds = parse_seeds(args.seeds)
    if args.limit is not None and args.limit < 1:
        raise SnapuqError(f"--limit must be >= 1, got {args.limit}")
    if not Path(args.data_dir).is_dir():
        raise SnapuqError(f"--data-dir {args.data_dir}: no such folder")
    docs = check_out_dir(args.docs, "--docs")
    check_out_dir(args.runs, "--runs")
    (docs / "results").mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}

    def finish(ds: str, agg: dict, deploy: argparse.Namespace) -> dict:
        """agg with its deployment row (measured now with --deploy, else as its report file has it:
        measured, stale or none) and its criteria, written to docs/results/reproduce_<ds>.json."""
        agg.pop("deployment", None)
        dep = deployment(ds, Path(args.models) / ds, deploy, docs)
        if dep:
            agg["deployment"] = dep
        agg["criteria_real_data"] = [
            {"criterion": c, "measured": m, "met": ok} for c, m, ok in criteria(ds, agg)
        ]
        write_json(docs / "results" / f"reproduce_{ds}.json", _jsonable(agg), indent=1)
        return agg

    for f in sorted((docs / "results").glob("reproduce_*.json")):  # what earlier runs measured stays
        name = f.stem.removeprefix("reproduce_")
        if name in DATASETS and name not in datasets:  # its deployment row refreshed, no eval rerun
            results[name] = finish(name, json.loads(f.read_text()), argparse.Namespace(deploy=False))
    for ds in datasets:
        agg = reproduce_dataset(ds, args, seeds)
        agg = finish(ds, {k: v for k, v in agg.items() if k != "per_seed"}, args)
        results[ds] = agg
        write_text(docs / "RESULTS.md", render(dict(sorted(results.items()))))
        met = sum(1 for c in agg["criteria_real_data"] if c["met"])
        print(f"snapuq reproduce: {ds}: {met} of {len(agg['criteria_real_data'])} criteria met; "
              f"{docs / 'RESULTS.md'}")  # fmt: skip
    return 0
