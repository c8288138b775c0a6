"""`snapuq eval DIR --seeds 0,1,2 --report RDIR`: one model per seed (trained with DIR's options when its
directory is missing), one full eval per seed, and the mean and sd over seeds of every metric, so that no
claim rests on one seed.

Model directories: DIR for its own seed (config.json "seed"), DIR_seed{S} next to it for the others.
Per-seed reports go to RDIR/seed{S}/; RDIR/metrics.json holds "per_seed" (each seed's metrics.json),
"mean" and "sd" (method -> metric -> value, sd with ddof 1), "checks" (per seed: the issue-17 criteria) and
RDIR/report.md the mean ± sd table.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import numpy as np

from snapuq.commands import train as T
from snapuq.commands.flags import to_argv
from snapuq.data import build_of, build_options, frontend_of
from snapuq.data.audio import frontend_name
from snapuq.errors import SnapuqError
from snapuq.evaluation.loading import _check_model_dir, _jsonable
from snapuq.evaluation.report import COLUMNS, CONTRACT_KEYS
from snapuq.io import write_json, write_text
from snapuq.modeldir import ModelPaths
from snapuq.options import CalibOptions, HeadOptions, TrainOptions
from snapuq.uq.calibration import best_variant

# metrics aggregated per method: the contract keys plus the details that claims are made on
DETAIL_KEYS = (
    "shift_auroc_mean",
    "cid_false_alarm_rate",
    "cid_false_alarm_rate_resampled",
    "auroc_idok_vs_ood",
    "accuracy",
)
SNAP_KEYS = ("ece_p_err", "ece_U", "auroc_ok_vs_err_p_err", "test_alarm_rate")


# the per-seed checks both the mean and the per-seed table report (shift, ID-vs-OOD, CID false alarms)
SHIFT_OOD_CID_KEYS = (
    "shift_auroc_mean_snap",
    "shift_auroc_mean_best_baseline",
    "auroc_id_vs_ood_snap",
    "auroc_id_vs_ood_best_baseline",
    "cid_false_alarm_snap",
    "cid_false_alarm_msp",
    "cid_false_alarm_resampled_snap",
    "cid_false_alarm_resampled_msp",
)

def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(t) for t in str(text).split(",") if t.strip()]
    except ValueError as e:
        raise SnapuqError(f"--seeds must be comma-separated integers, got '{text}'") from e
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise SnapuqError(f"--seeds must list distinct non-negative integers, got '{text}'")
    return seeds


def seed_dir(d: Path, cfg: dict, seed: int) -> Path:
    return d if int(cfg.get("seed", 0)) == seed else d.parent / f"{d.name}_seed{seed}"


def teachers_of(d: Path, cfg: dict) -> str:
    """Where a distilled model's teachers are: the directory it recorded (config.json distill.from), or the
    model directory itself when it took its baselines from there too (`--distill-from T --baselines-from
    T`: its own baselines/ hold the teachers' bytes, so the directory carries them wherever it goes)."""
    src = str(cfg["distill"]["from"])
    own = cfg.get("baselines_from") if isinstance(cfg.get("baselines_from"), dict) else {}
    return str(d) if own.get("from") == src else src


def train_argv(
    d: Path,
    cfg: dict,
    calib: dict | None,
    seed: int,
    out: Path,
    data_dir: str | None,
    shared_baselines: bool = False,
) -> list[str]:
    """`snapuq train` arguments that rebuild DIR's model with another seed.

    A built-in dataset is retrained whole (backbone and heads). A directory made from your own model
    (`snapuq train --model` or `snapuq.attach(...).save`) is retrained from DIR/backbone.keras on DIR's
    prepared splits: the SNAP heads, the calibration and the baselines change with the seed, your
    backbone and your data split do not (we cannot rerun your training; put your own DIR_seed{S}
    directories next to DIR to vary it, and they are used as they are). With `shared_baselines` the seed
    trains without baselines of its own (DIR's serve every seed: `eval --seeds --shared-baselines`)."""
    a = ["--out", str(out), "--seed", str(seed), "--no-progress"]
    user = cfg.get("backbone") == "user"
    if user:
        bb = d / str(cfg.get("backbone_file") or "backbone.keras")
        if not bb.is_file():
            raise SnapuqError(f"{d}: no {bb.name} to retrain the heads from for another seed")
        a += ["--model", str(bb), "--data", str(d)]
    else:
        a += ["--dataset", str(cfg["dataset"])]
        if data_dir:
            a += ["--data-dir", str(data_dir)]
        fe = frontend_of(cfg)
        if fe is not None and frontend_name(fe):  # the model's own features, whatever the set's default
            a += ["--frontend", frontend_name(fe)]
        for k, v in build_options(str(cfg["dataset"]), build_of(cfg)).items():  # and its own build
            a += [f"--{k.replace('_', '-')}", str(v)]
    recipe = cfg.get("recipe") if not user else None
    if isinstance(recipe, dict):  # the whole backbone recipe, as recorded
        a += to_argv(TrainOptions.from_dict(recipe, f"{ModelPaths(d).config} recipe"))
        if isinstance(cfg.get("distill"), dict) and cfg["distill"].get("from"):  # the same teachers
            a += ["--distill-from", teachers_of(d, cfg)]
    elif cfg.get("epochs") is not None:  # your own model / a directory from before the recipe: head epochs
        a += ["--epochs", str(cfg["epochs"])]
    a += ([] if user else ["--backbone", str(cfg["backbone"])]) if cfg.get("backbone") else []
    a += to_argv(HeadOptions.from_config(cfg))
    if cfg.get("taps"):
        a += ["--taps", ",".join(t["layer"] for t in cfg["taps"])]
    if shared_baselines or not ModelPaths(d).baselines.exists():
        a.append("--no-baselines")
    return a + to_argv(recorded_calibration(cfg, calib))


def recorded_calibration(cfg: dict, calib: dict | None) -> CalibOptions:
    """The calibration options config.json records, or (a directory written before it did) those its
    calib.json was fitted with."""

    if isinstance(cfg.get("calibration"), dict):
        return CalibOptions.from_dict(cfg["calibration"])
    best = best_variant(calib)
    fit = best.get("fit") or {}
    return CalibOptions(alpha=fit.get("alpha", 1.0), quantile=fit.get("hinge_quantile_requested"),
                        variant=str(cfg.get("variant", "best")), input_tap=bool(best.get("intap", not best)),
                        alarm_rate=fit.get("alarm_rate", 0.0))  # fmt: skip


def _mean_sd(vals: list) -> tuple[float | None, float | None, int]:
    v = np.array([x for x in vals if x is not None and np.isfinite(x)], np.float64)
    if v.size == 0:
        return None, None, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def _method_values(m: dict, name: str) -> dict:
    row = dict(m["methods"].get(name, {}))
    det = m.get("details", {}).get(name, {})
    per_set = sorted(k for k in det if k.startswith(("auroc_id_vs_ood[", "auroc_idok_vs_ood[")))
    for k in DETAIL_KEYS + (SNAP_KEYS if name == "snap" else ()) + tuple(per_set):
        if k in det:
            row[k] = det[k]
    keys = (*CONTRACT_KEYS, *DETAIL_KEYS, *(SNAP_KEYS if name == "snap" else ()), *per_set)
    return {k: row.get(k) for k in keys}


def seed_checks(m: dict) -> dict:
    """The issue-17 criteria for one seed's metrics.json."""
    meth = m["methods"]
    det = m.get("details", {})
    base = [n for n in meth if n != "snap" and meth[n].get("auroc_ok_vs_err") is not None]

    def best_of(key: str, src: str = "methods") -> float | None:
        rows = meth if src == "methods" else det
        vals = [v for n in base if (v := rows.get(n, {}).get(key)) is not None]
        return max(vals) if vals else None

    snap, sd = meth.get("snap", {}), det.get("snap", {})
    c: dict = {}
    tc, dc = m.get("test_check") or {}, m.get("dev_check") or {}
    c["test_U_minus_msp_auroc_ok_vs_err"] = tc.get("delta")
    c["dev_U_minus_msp_auroc_ok_vs_err"] = dc.get("delta")
    ts = meth.get("temp_scaling", {}).get("ece")
    c["ece_p_err"], c["ece_U"], c["ece_temp_scaling"] = sd.get("ece_p_err"), sd.get("ece_U"), ts
    c["shift_auroc_mean_snap"] = sd.get("shift_auroc_mean")
    c["shift_auroc_mean_best_baseline"] = best_of("shift_auroc_mean", "details")
    c["auroc_id_vs_ood_snap"] = snap.get("auroc_id_vs_ood")
    c["auroc_id_vs_ood_best_baseline"] = best_of("auroc_id_vs_ood")
    c["cid_false_alarm_snap"] = sd.get("cid_false_alarm_rate")
    c["cid_false_alarm_msp"] = det.get("msp", {}).get("cid_false_alarm_rate")
    c["cid_false_alarm_resampled_snap"] = sd.get("cid_false_alarm_rate_resampled")
    c["cid_false_alarm_resampled_msp"] = det.get("msp", {}).get("cid_false_alarm_rate_resampled")
    return c


def criteria(per_seed_checks: dict) -> dict:
    """Mean over seeds and pass/fail of each criterion (None when a figure is missing)."""
    cs = list(per_seed_checks.values())

    def mean(k):
        return _mean_sd([c.get(k) for c in cs])[0]

    def ge(a, b, margin=0.0):
        return None if a is None or b is None else bool(a >= b + margin - 1e-12)

    out = {
        "U_ge_msp_test_every_seed": all(
            c.get("test_U_minus_msp_auroc_ok_vs_err") is not None
            and c["test_U_minus_msp_auroc_ok_vs_err"] >= -1e-12
            for c in cs
        ),
        "U_ge_msp_dev_every_seed": all(
            c.get("dev_U_minus_msp_auroc_ok_vs_err") is None or c["dev_U_minus_msp_auroc_ok_vs_err"] >= -1e-12
            for c in cs
        ),
    }
    for k in ("test_U_minus_msp_auroc_ok_vs_err", "ece_p_err", "ece_U", "ece_temp_scaling",
              *SHIFT_OOD_CID_KEYS):  # fmt: skip
        out[f"mean_{k}"] = mean(k)
    ts = out["mean_ece_temp_scaling"]
    out["ece_p_err_le_temp_plus_0.01"] = ge(None if ts is None else ts + 0.01, out["mean_ece_p_err"])
    out["shift_ge_best_baseline_plus_0.05"] = ge(
        out["mean_shift_auroc_mean_snap"], out["mean_shift_auroc_mean_best_baseline"], 0.05
    )
    out["ood_ge_best_baseline"] = ge(
        out["mean_auroc_id_vs_ood_snap"], out["mean_auroc_id_vs_ood_best_baseline"]
    )
    out["cid_false_alarm_le_msp"] = ge(out["mean_cid_false_alarm_msp"], out["mean_cid_false_alarm_snap"])
    out["cid_false_alarm_resampled_le_msp"] = ge(
        out["mean_cid_false_alarm_resampled_msp"], out["mean_cid_false_alarm_resampled_snap"]
    )
    return out


def aggregate(per_seed: dict[int, dict]) -> dict:
    first = next(iter(per_seed.values()))
    names = list(first["methods"])
    mean: dict = {}
    sd: dict = {}
    count: dict = {}
    for n in names:
        rows = [_method_values(m, n) for m in per_seed.values()]
        mean[n], sd[n], count[n] = {}, {}, {}
        for k in rows[0]:
            mu, s, c = _mean_sd([r.get(k) for r in rows])
            mean[n][k], sd[n][k], count[n][k] = mu, s, c
    checks = {str(s): seed_checks(m) for s, m in per_seed.items()}
    return {
        "dataset": first["dataset"],
        "seeds": [int(s) for s in per_seed],
        "n_test": first["n_test"],
        "accuracy": _accuracy(per_seed),
        "methods": mean,
        "sd": sd,
        "n_seeds": count,  # seeds that measured each figure (a method unavailable at a seed is left out)
        "baselines": shared_baselines_record(per_seed),
        "checks": checks,
        "criteria": criteria(checks),
        "per_seed": {str(s): m for s, m in per_seed.items()},
    }


def _accuracy(per_seed: dict) -> dict:
    """Mean float / int8 test accuracy over seeds, their sd and how many seeds measured each."""
    out: dict = {}
    for k in ("float", "int8"):
        out[k], out[f"{k}_sd"], out[f"{k}_n"] = _mean_sd([m["accuracy"].get(k) for m in per_seed.values()])
    return out


def shared_baselines_record(per_seed: dict) -> dict | None:
    """The one baselines folder every seed scored when it is not each seed's own (`--shared-baselines`):
    {"dir", "seed"} (the seed it was trained with); None when each seed had its own or none."""
    recs = [m.get("baselines") or {} for m in per_seed.values()]
    dirs = {r.get("dir") for r in recs}
    if len(per_seed) < 2 or len(dirs) != 1 or None in dirs or all(r.get("own") for r in recs):
        return None
    r = recs[0]
    return {"dir": r["dir"], "seed": r.get("seed"), "ensemble_seeds": r.get("ensemble_seeds")}


def _pm(mu, s, nd=3) -> str:
    if mu is None:
        return "n/a"
    return f"{mu:.{nd}f} ± {s:.{nd}f}" if s is not None else f"{mu:.{nd}f}"


def write_report(rdir: Path, agg: dict) -> None:
    seeds = ",".join(str(s) for s in agg["seeds"])
    name = str(agg["dataset"])
    if name.endswith(".npz"):  # your own model: its directory's data cache
        name = f"{Path(name).parent.name} (your model and data)"
    L = [f"# snapuq eval: {name}, seeds {seeds} (mean ± sd over seeds)", ""]
    acc = agg["accuracy"]
    L.append(
        f"- test inputs per seed: {agg['n_test']}; accuracy float {_pm(acc['float'], acc.get('float_sd'), 4)}"
    )
    if agg.get("baselines"):
        b = agg["baselines"]
        ens = (f" (the deep ensemble: the backbones of seeds {', '.join(map(str, b['ensemble_seeds']))})"
               if b.get("ensemble_seeds") else "")  # fmt: skip
        L.append(f"- deep ensemble and early-exit model: one set ({b['dir']}, trained with seed "
                 f"{b['seed']}){ens} scored at every seed (--shared-baselines): their ± is the eval seed's, "
                 "not their training's")  # fmt: skip
    cols = [
        *COLUMNS,
        ("cid_false_alarm_rate", "CID false alarm ↓", 3),
        ("cid_false_alarm_rate_resampled", "CID false alarm, 20 draws ↓", 3),
        ("shift_auroc_mean", "shift AUROC", 3),
    ]
    L += ["", "| method | " + " | ".join(c[1] for c in cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for n, row in agg["methods"].items():
        L.append(
            f"| {'**' + n + '**' if n == 'snap' else n} | "
            + " | ".join(_pm(row.get(k), agg["sd"][n].get(k), nd) for k, _, nd in cols)
            + " |"
        )
    s = agg["methods"].get("snap", {})
    sd = agg["sd"].get("snap", {})
    if s:
        L += [
            "",
            f"SNAP p_err: ECE {_pm(s.get('ece_p_err'), sd.get('ece_p_err'))}, "
            f"AUROC ✓/✗ {_pm(s.get('auroc_ok_vs_err_p_err'), sd.get('auroc_ok_vs_err_p_err'))}; "
            f"ECE of U {_pm(s.get('ece_U'), sd.get('ece_U'))}; test inputs with alarm > 0: "
            f"{_pm(s.get('test_alarm_rate'), sd.get('test_alarm_rate'))}",
        ]
    L += [
        "",
        "## Per seed",
        "",
        "| seed | U−MSP ✓/✗ test | U−MSP ✓/✗ dev | ECE p_err | ECE temp | shift SNAP | "
        "shift best baseline | ID/OOD SNAP | ID/OOD best baseline | CID FA SNAP | CID FA MSP | "
        "CID FA SNAP (20 draws) | CID FA MSP (20 draws) |",
        "|" + "---|" * 13,
    ]
    for seed, c in agg["checks"].items():
        keys = ("test_U_minus_msp_auroc_ok_vs_err", "dev_U_minus_msp_auroc_ok_vs_err", "ece_p_err",
                "ece_temp_scaling", *SHIFT_OOD_CID_KEYS)  # fmt: skip
        L.append(
            f"| {seed} | "
            + " | ".join(
                "n/a" if c.get(k) is None else f"{c[k]:+.4f}" if "minus" in k else f"{c[k]:.4f}" for k in keys
            )
            + " |"
        )
    L += ["", "## Criteria (issue 17)", ""]
    for k, v in agg["criteria"].items():
        L.append(f"- {k}: {v if not isinstance(v, float) else round(v, 4)}")
    L += ["", "Per-seed reports: " + ", ".join(f"[seed {s}](seed{s}/report.md)" for s in agg["seeds"])]
    write_text(Path(rdir) / "report.md", "\n".join(L) + "\n")


def shared_baselines_dir(d: Path, shared: bool) -> Path | None:
    """DIR/baselines when `shared` (refused when DIR has none to share), else None."""
    if not shared:
        return None
    b = ModelPaths(d).baselines
    if not (b / "baselines.json").is_file():
        raise SnapuqError(f"--shared-baselines: {d} has no trained baselines/ to share (train it with them)")
    return b


def ensure_seed_model(
    d: Path,
    cfg: dict,
    calib: dict | None,
    seed: int,
    data_dir: str | None,
    shared_baselines: bool = False,
    resume: bool = False,
    progress: bool = False,
) -> Path:
    """The model directory of `seed` (DIR or DIR_seed{S}), trained with DIR's recorded options when missing;
    with `resume`, an interrupted training of it continues from its last epoch checkpoint."""

    ds = seed_dir(d, cfg, seed)
    if not ModelPaths(ds).config.is_file():
        argv = train_argv(d, cfg, calib, seed, ds, data_dir, shared_baselines)
        argv = [a for a in argv if a != "--no-progress"] + ([] if progress else ["--no-progress"])
        argv += ["--resume"] if resume else []
        print(f"snapuq eval: seed {seed}: training {ds} (snapuq train {' '.join(argv)})")
        T.run_argv(argv)
    return ds


def _reusable(mj: Path, ds: Path, bdir: Path) -> bool:
    """A seed's metrics.json is reused (--resume) when newer than its model, calibration and config, and
    it scored the same baselines folder as this run would."""
    if not mj.exists():
        return False
    inputs = [ds / f for f in ("model.keras", "calib.json", "config.json") if (ds / f).exists()]
    if not all(mj.stat().st_mtime > f.stat().st_mtime for f in inputs):
        return False
    rec = json.loads(mj.read_text()).get("baselines") or {}
    return rec.get("dir") == (str(bdir) if bdir.is_dir() else None)


def run_seeds(args: argparse.Namespace, evaluate) -> int:
    """`snapuq eval --seeds`: each seed's directory (trained from DIR's record when missing) evaluated by
    `evaluate(args) -> rc` (snapuq.commands.evaluate.run), then aggregated."""
    seeds = parse_seeds(args.seeds)
    d = Path(args.model_dir)
    _check_model_dir(d)
    cfg = json.loads(ModelPaths(d).config.read_text())
    calib = json.loads(ModelPaths(d).calib.read_text()) if ModelPaths(d).calib.exists() else None
    rdir = Path(args.report)
    rdir.mkdir(parents=True, exist_ok=True)
    per_seed: dict[int, dict] = {}
    shared = shared_baselines_dir(d, bool(getattr(args, "shared_baselines", False)))
    for s in seeds:
        ds = ensure_seed_model(d, cfg, calib, s, args.data_dir, shared is not None,
                               resume=bool(getattr(args, "resume", False)))  # fmt: skip
        mj = rdir / f"seed{s}" / "metrics.json"
        given = getattr(args, "baselines", None)
        bdir = shared if shared is not None else Path(given) if given else ModelPaths(ds).baselines
        if getattr(args, "resume", False) and _reusable(mj, ds, bdir):
            print(f"snapuq eval: seed {s}: reusing {mj} (newer than the model and its calibration)")
        else:
            a = copy.copy(args)
            a.model_dir, a.report, a.seed, a.seeds = str(ds), str(rdir / f"seed{s}"), s, None
            a.baselines = str(bdir) if shared is not None or given else None
            rc = evaluate(a)
            if rc:
                return rc
        per_seed[s] = json.loads(mj.read_text())
    agg = aggregate(per_seed)
    write_json(rdir / "metrics.json", _jsonable(agg), indent=1)
    write_report(rdir, agg)
    print(f"snapuq eval: seeds {','.join(map(str, seeds))}: {criteria_line(agg['criteria'])}; "
          f"report in {rdir / 'report.md'}")  # fmt: skip
    return 0


def criteria_line(cr: dict) -> str:
    """The criteria of the aggregate in one line: each mean figure (SNAP vs its reference) and ✓ / ✗ / n/a."""

    def f(v) -> str:
        return "n/a" if v is None else f"{v:.4f}"

    def mark(v) -> str:
        return "n/a" if v is None else ("✓" if v else "✗")

    parts = [
        f"test U >= MSP at every seed {mark(cr.get('U_ge_msp_test_every_seed'))} "
        f"(mean {f(cr.get('mean_test_U_minus_msp_auroc_ok_vs_err'))})",
        f"ECE p_err {f(cr.get('mean_ece_p_err'))} vs temperature scaling "
        f"{f(cr.get('mean_ece_temp_scaling'))} {mark(cr.get('ece_p_err_le_temp_plus_0.01'))}",
        f"shift {f(cr.get('mean_shift_auroc_mean_snap'))} vs best baseline "
        f"{f(cr.get('mean_shift_auroc_mean_best_baseline'))} "
        f"{mark(cr.get('shift_ge_best_baseline_plus_0.05'))}",
        f"ID/OOD {f(cr.get('mean_auroc_id_vs_ood_snap'))} vs "
        f"{f(cr.get('mean_auroc_id_vs_ood_best_baseline'))} {mark(cr.get('ood_ge_best_baseline'))}",
        f"CID false alarm {f(cr.get('mean_cid_false_alarm_snap'))} vs MSP "
        f"{f(cr.get('mean_cid_false_alarm_msp'))} {mark(cr.get('cid_false_alarm_le_msp'))}",
    ]
    return ", ".join(parts)
