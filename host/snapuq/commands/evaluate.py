"""`snapuq eval DIR --report RDIR`: SNAP-UQ and every baseline on the same split, same inputs, one run.

Writes RDIR/metrics.json (the contract of DESIGN §3 plus extra top-level keys: "details", "snap_variants",
"int8", "dev_check", "flags", "stream", "timings_s"), PNG plots and RDIR/report.md.

Inputs scored by every method, once: the test split (ID correct vs wrong, risk-coverage, ECE), the dataset's
OOD set (ID vs OOD), the dev split (alarm thresholds and the dev-set sanity check) and the corrupted frames
of one CID stream (clean and corrupted segments, see snapuq.uq.stream).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from snapuq.baselines.methods import METHODS, SNAP, EvalContext, MethodUnavailable, make_method
from snapuq.baselines.snapadapter import available_variants
from snapuq.commands.multiseed import parse_seeds, run_seeds
from snapuq.data import OOD_LOADERS, check_labels, dataset_of, load_ood_sets
from snapuq.data.corruptions import MNIST_C_SEVERITY
from snapuq.data.shifts import corruption_api
from snapuq.data.user import load_ood_path
from snapuq.errors import DatasetError, SnapuqError
from snapuq.evaluation import report as R
from snapuq.evaluation.loading import Timer, _jsonable, baselines_record, load
from snapuq.evaluation.report import CONTRACT_KEYS
from snapuq.evaluation.testdir import run_test_tree
from snapuq.export import int8_predict
from snapuq.formats import MAX_SEED
from snapuq.io import check_out_dir, staged_dir, write_text
from snapuq.modeldir import ModelPaths, default_data_dir
from snapuq.uq import metrics as M
from snapuq.uq import stream as S
from snapuq.uq.calibration import best_variant, dev_check

COVERAGES = (0.5, 0.8, 0.9, 0.95)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", metavar="DIR", help="model directory written by `snapuq train`")
    p.add_argument("--report", default=None, metavar="RDIR", help="output folder (created; required "
                   "without --split)")
    p.add_argument("--data-dir", default=None, help="folder with the dataset files (non-embedded datasets)")
    p.add_argument("--limit", type=int, default=None, help="score at most N test inputs (and N OOD inputs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the OOD sample and the CID stream")
    p.add_argument("--methods", default="all", help="comma-separated subset of the methods (default: all)")
    p.add_argument("--n-ood", type=int, default=500, help="OOD inputs (default 500)")
    p.add_argument(
        "--severity", type=int, default=None,
        help="corruption severity of the CID stream (1-5; 0: MNIST-C's published setting per corruption; "
        "default 0 for mnist / fashion_mnist, else 3)",
    )  # fmt: skip
    p.add_argument("--segment", type=int, default=300, help="frames per stream segment (default 300)")
    p.add_argument(
        "--ood", default=None, metavar="PATH",
        help="OOD inputs for your own data: an .npz (x_ood or x) or a folder of images / WAV clips "
        "(default: the data set's own OOD source; none: ID-vs-OOD metrics skipped with a note)",
    )  # fmt: skip
    p.add_argument(
        "--split", default=None, choices=("test", "dev", "all"),
        help="audio models: evaluate on a Speech Commands-style folder of clips alone (--data-dir DIR with "
        "<word>/*.wav; test: the files of testing_list.txt when present, else every clip); words mapped to "
        "the model's classes by name, other words as _unknown_ (snapuq.evaluation.testdir)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--seeds",
        default=None,
        metavar="S0,S1,...",
        help="train (when missing) and evaluate one model per seed with DIR's training options; model dirs "
        "DIR (its own seed) and DIR_seed{S}; RDIR/seed{S}/ per seed, RDIR/metrics.json with mean and sd",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--seeds: reuse RDIR/seed{S}/metrics.json when newer than that seed's model and calib.json",
    )
    p.add_argument(
        "--baselines", default=None, metavar="BDIR",
        help="the deep ensemble / early-exit models to score (a baselines/ folder; default DIR/baselines)",
    )  # fmt: skip
    p.add_argument(
        "--shared-baselines", action="store_true",
        help="--seeds: DIR's baselines serve every seed (the other seeds train without their own)",
    )  # fmt: skip


def _method_metrics(u, pred, conf, y, u_ood, stream_res) -> tuple[dict, dict]:
    ok = pred == y
    err = ~ok
    main = {
        "auroc_ok_vs_err": M.auroc(u, err),
        "auroc_id_vs_ood": M.auroc(np.r_[u, u_ood], np.r_[np.zeros(len(u)), np.ones(len(u_ood))])
        if len(u_ood)
        else float("nan"),
        "aupr_ok_vs_err": M.aupr(u, err),
        "aurc": M.aurc(u, ok),
        "ece": M.ece(conf, ok),
        "cid_auprc": stream_res["cid_auprc"],
        "cid_delay": stream_res["cid_delay"],
    }
    uo = u[ok]
    extra = {
        "accuracy": float(ok.mean()),
        "n_errors": int(err.sum()),
        "auroc_idok_vs_ood": M.auroc(np.r_[uo, u_ood], np.r_[np.zeros(len(uo)), np.ones(len(u_ood))])
        if len(u_ood) and len(uo)
        else float("nan"),
        "aupr_id_vs_ood": M.aupr(np.r_[u, u_ood], np.r_[np.zeros(len(u)), np.ones(len(u_ood))])
        if len(u_ood)
        else float("nan"),
        "risk_at_coverage": {str(c): M.risk_at_coverage(u, ok, c) for c in COVERAGES},
        "cid_tau": stream_res["tau"],
        "cid_event_segments": stream_res["n_event_segments"],
        "cid_delays": stream_res["delays"],
        "cid_false_alarm_rate": stream_res["clean_false_alarm_rate"],
        "cid_false_alarm_rate_nonevent": stream_res["false_alarm_rate"],
    }
    return main, extra


def run(args: argparse.Namespace) -> int:
    if getattr(args, "seeds", None) is not None:  # '' is refused by parse_seeds, not taken as "not given"
        if not args.report or getattr(args, "split", None):
            raise SnapuqError("--seeds needs --report RDIR and no --split")

        parse_seeds(args.seeds)

        return run_seeds(args, run)
    from tqdm import tqdm


    if getattr(args, "split", None):
        if args.report:
            check_out_dir(args.report, "--report")
        return run_test_tree(args)
    if not args.report:
        raise SnapuqError("--report RDIR is required (the output folder)")
    timer = Timer()
    t_start = time.perf_counter()
    d = Path(args.model_dir)
    rdir = check_out_dir(args.report, "--report")
    if args.n_ood < 0:
        raise SnapuqError(f"--n-ood must be >= 0, got {args.n_ood}")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise SnapuqError(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    args.data_dir = default_data_dir(d, args.data_dir)
    if args.limit is not None and args.limit < 10:
        raise SnapuqError(f"--limit must be at least 10, got {args.limit}")
    bdir = Path(args.baselines) if getattr(args, "baselines", None) else ModelPaths(d).baselines
    if getattr(args, "baselines", None) and not bdir.is_dir():
        raise SnapuqError(f"--baselines {bdir}: no such folder")
    if args.severity is not None and not 0 <= args.severity <= 5:
        raise SnapuqError(f"--severity must be in 0..5 (0: MNIST-C's published ones), got {args.severity}")
    if args.segment < S.WINDOW:
        raise SnapuqError(f"--segment must be at least the window ({S.WINDOW}), got {args.segment}")
    names = METHODS if args.methods == "all" else [m.strip() for m in args.methods.split(",") if m.strip()]
    if not names:
        raise SnapuqError(f"--methods: empty list (choose from {', '.join(METHODS)}, or all)")
    for n in names:
        if n not in METHODS:
            raise SnapuqError(f"unknown method '{n}' (known: {', '.join(METHODS)})")
    progress = not args.no_progress

    with timer("load_model"):
        md = load(d)
    cfg = md.config
    with timer("load_data"):
        ds = dataset_of(cfg, args.data_dir)
    # the model's classes are its logits' width, never the labels present; a label outside them: one line
    n_classes = int(md.model.output["logits"].shape[-1])
    check_labels(ds, n_classes, str(cfg["dataset"]), ("dev", "test"))
    x_test, y_test = np.asarray(ds.x_test, np.float32), np.asarray(ds.y_test).astype(np.int64)
    if args.limit:
        x_test, y_test = x_test[: args.limit], y_test[: args.limit]
    n_ood = min(args.n_ood, args.limit) if args.limit else args.n_ood
    ood_note = None
    ood_groups: dict[str, slice] = {}
    with timer("load_ood"):
        if getattr(args, "ood", None):
            x_ood = load_ood_path(args.ood, ds, n=n_ood, seed=args.seed)
            ds.meta["ood"] = f"--ood {args.ood}"
        elif n_ood == 0:
            x_ood = np.zeros((0, *np.asarray(x_test).shape[1:]), np.float32)
        else:
            try:
                sets = load_ood_sets(cfg["dataset"], ds, args.data_dir, n=n_ood, seed=args.seed)
                if len(sets) > 1:  # several OOD sets (far / near): one pool, and a row per set
                    o = 0
                    for label, xs in sets.items():
                        ood_groups[label] = slice(o, o + len(xs))
                        o += len(xs)
                x_ood = np.concatenate([np.asarray(v, np.float32) for v in sets.values()])
            except DatasetError as e:  # the OOD source is optional: say so and go on without it
                print(f"snapuq eval: warning: OOD set unavailable ({e}); ID-vs-OOD metrics skipped")
                x_ood = np.zeros((0, *np.asarray(x_test).shape[1:]), np.float32)
            x_ood = np.asarray(x_ood, np.float32)
    if len(x_ood) == 0:
        ood_note = "no OOD inputs (the data has no x_ood, no --ood PATH given): ID-vs-OOD metrics skipped"
        print(f"snapuq eval: note: {ood_note}")
    if args.severity is None:
        args.severity = 0 if cfg["dataset"] in ("mnist", "fashion_mnist") else 3
    with timer("build_stream"):
        cnames, corrupt = corruption_api(ds)
        if args.severity == 0:
            if not set(cnames) <= set(MNIST_C_SEVERITY):
                raise SnapuqError("--severity 0 (MNIST-C's published settings): MNIST-C corruptions only")
            base_corrupt = corrupt

            def corrupt(x, idx, name, severity, seed):  # noqa: F811 (the published severity per corruption)
                return base_corrupt(x, idx, name, MNIST_C_SEVERITY[name], seed)
        st = S.build_stream(
            x_test,
            y_test,
            cnames,
            corrupt,
            severity=args.severity,
            seg_len=args.segment,
            clean_len=args.segment,
            seed=args.seed,
        )
    x_dev, y_dev = np.asarray(ds.x_dev, np.float32), np.asarray(ds.y_dev).astype(np.int64)
    parts = {"test": x_test, "ood": x_ood, "dev": x_dev, "corrupt": st.x_corrupt}
    bounds, o = {}, 0
    for k, v in parts.items():
        bounds[k] = slice(o, o + len(v))
        o += len(v)
    x_all = np.concatenate([v for v in parts.values() if len(v)])

    ctx = EvalContext(
        model=md.model,
        n_classes=n_classes,
        x_train=np.asarray(ds.x_train, np.float32),
        y_train=np.asarray(ds.y_train).astype(np.int64),
        x_dev=x_dev,
        y_dev=y_dev,
        predict=md.predict,
        baselines_dir=bdir,
        calib=getattr(md, "calib", None),
        model_dir=d,
        backbone=cfg.get("backbone"),
        seed=args.seed,
    )
    with timer("forward_main"):
        outs = ctx.run(x_all)
        ctx._cache["dev"] = {k: v[bounds["dev"]] for k, v in outs.items()}
    base_pred = outs["logits"].argmax(1)
    # corrupted frames are stored in frame order (st.src of the shifted frames is 0, 1, 2, ...)
    base_ok = base_pred == np.r_[y_test, np.full(len(x_ood), -1, np.int64), y_dev, st.y[st.shifted]]
    ok_test = base_ok[bounds["test"]]
    ok_dev = base_ok[bounds["dev"]]
    ok_corrupt = base_ok[bounds["corrupt"]]
    # the clean calibration stream (dev split) and the events of the test stream
    clean_idx = S.clean_stream_indices(len(x_dev), max(20 * S.WINDOW, 2 * len(x_dev)), args.seed)
    spec = S.stream_events(st.gather(ok_test, ok_corrupt), ok_dev[clean_idx], S.WINDOW)

    methods_out: dict[str, dict] = {}
    details: dict[str, dict] = {}
    notes: dict[str, str] = {}
    results: dict = {}
    bar = tqdm(names, desc="eval", unit="method", disable=not progress)
    for name in bar:
        bar.set_postfix(method=name)
        m = make_method(name)
        try:
            with timer(f"fit:{name}"):
                m.fit(ctx)
            with timer(f"score:{name}"):
                r = m.score(ctx, x_all, outs)
        except MethodUnavailable as e:
            notes[name] = str(e)
            methods_out[name] = dict.fromkeys(CONTRACT_KEYS, float("nan"))
            continue
        results[name] = (m, r)
        with timer("metrics"):
            main, extra = _score_one(r, bounds, y_test, st, spec, clean_idx, ood_groups)
        extra["params"] = m.params()
        methods_out[name] = main
        details[name] = extra
    bar.close()

    out: dict = {
        "dataset": cfg["dataset"],
        "n_test": int(len(x_test)),
        "accuracy": {"float": float(ok_test.mean()), "int8": None},
        "methods": {n: methods_out[n] for n in names},
    }
    out["baselines"] = baselines_record(bdir, own=bdir == ModelPaths(d).baselines)
    out["n_ood"] = int(len(x_ood))
    out["ood_source"] = ood_note or _ood_source(ds, cfg["dataset"])
    if ood_groups:
        out["ood_sets"] = {k: int(v.stop - v.start) for k, v in ood_groups.items()}
    out["stream"] = {
        "frames": len(st),
        "window": S.WINDOW,
        "severity": args.severity or "MNIST-C published (snapuq.data.corruptions.MNIST_C_SEVERITY)",
        "segment": args.segment,
        "corruptions": cnames,
        "mu_id": spec.mu,
        "sigma_id": spec.sigma,
        "event_threshold": spec.threshold,
        "event_frames": int(spec.events.sum()),
        "shift_auroc": {n: details[n].get("shift_auroc", {}) for n in details},
    }
    out["details"] = details
    if notes:
        out["notes"] = notes

    # SNAP: the dev-set check of DESIGN §4 (the same function train and `snapuq calibrate` run), the same
    # comparison on test, p_err/U calibration, and the other calibrated variants (ablation)
    flags = []
    if "snap" in results and "msp" in results:
        rs, rm = results["snap"][1], results["msp"][1]
        out["dev_check"] = dev_check(rs.u[bounds["dev"]], rm.u[bounds["dev"]], ~ok_dev)
        if not out["dev_check"]["ok"]:
            flags.append(out["dev_check"]["hint"])
        tchk = dev_check(rs.u[bounds["test"]], rm.u[bounds["test"]], ~ok_test)
        tchk.pop("hint", None)
        out["test_check"] = tchk
    if "snap" in results:
        rs = results["snap"][1]
        ut = rs.u[bounds["test"]]
        pe = rs.extra.get("p_err", rs.u)[bounds["test"]]
        al = rs.extra.get("alarm", np.zeros_like(rs.u))[bounds["test"]]
        details["snap"]["ece_p_err"] = M.ece(1.0 - pe, ok_test)
        details["snap"]["ece_U"] = M.ece(np.clip(1.0 - ut, 0.0, 1.0), ok_test)
        details["snap"]["auroc_ok_vs_err_p_err"] = M.auroc(pe, ~ok_test)
        details["snap"]["test_alarm_rate"] = float(np.mean(al > 0))

        hinge = best_variant(ctx.calib).get("hinge")
        if hinge:  # the hinge the alarm fires beyond: its quantile / alarm rate and reference
            keys = ("quantile", "alarm_rate", "n_ref", "reference", "q_over_largest_sd")
            details["snap"]["hinge"] = {k: hinge.get(k) for k in keys}
    if "snap" in results:
        with timer("snap_variants"):
            out["snap_variants"] = _snap_variants(
                ctx, results["snap"][0], x_all, outs, bounds, y_test, st, spec, clean_idx
            )
    with timer("int8"):
        int8 = _int8_block(d, x_test, y_test, x_ood, ctx, results.get("snap"), bounds)
    if int8 is not None:
        out["accuracy"]["int8"] = int8.pop("accuracy")
        out["int8"] = int8
    out["flags"] = flags

    # plots, metrics.json and report.md of this run replace the previous run's all at once
    with staged_dir(rdir) as stage:
        with timer("plots"):
            plots = R.make_plots(
                stage, results, bounds, y_test, st, spec, x_ood_n=len(x_ood), taps=_tap_names(cfg),
                taus={n: details[n]["cid_tau"] for n in results if n in details},
            )
        out["plots"] = plots
        out["timings_s"] = dict(timer.t)
        out["timings_s"]["total"] = round(time.perf_counter() - t_start, 3)
        out["timings_s"]["train"] = cfg.get("timings_s")
        write_text(stage / "metrics.json", json.dumps(_jsonable(out), indent=2))
        with timer("report"):
            R.write_report(stage, _jsonable(out))
    print(
        f"snapuq eval: {len(names)} methods on {len(x_test)} test inputs, accuracy "
        f"{out['accuracy']['float']:.4f}; report in {rdir / 'report.md'}"
    )
    for f in flags:
        print(f"snapuq eval: warning: {f}")
    return 0


def _ood_source(ds, name: str) -> str:
    """Where the OOD inputs come from: the loader's own description, else its registry entry."""

    meta = getattr(ds, "meta", None) or {}
    if meta.get("ood"):
        return str(meta["ood"])
    spec = OOD_LOADERS.get(name, "")
    try:
        import importlib

        mod, fn = spec.split(":")
        doc = (getattr(importlib.import_module(mod), fn).__doc__ or "").strip().splitlines()
    except (ValueError, ImportError, AttributeError):
        doc = []
    return doc[0] if doc else spec


def _tap_names(cfg: dict) -> list[str]:
    return [t.get("name", f"tap{i}") for i, t in enumerate(cfg.get("taps", []))]


def _score_one(r, bounds, y_test, st, spec, clean_idx, ood_groups=None) -> tuple[dict, dict]:
    u = r.u
    u_test, u_ood, u_dev, u_cor = (u[bounds[k]] for k in ("test", "ood", "dev", "corrupt"))
    res = S.monitor(st.gather(u_test, u_cor), u_dev[clean_idx], spec, st)
    main, extra = _method_metrics(u_test, r.pred[bounds["test"]], r.conf[bounds["test"]], y_test, u_ood, res)
    ok = r.pred[bounds["test"]] == y_test
    for label, sl in (ood_groups or {}).items():  # one row per OOD set: "auroc_idok_vs_ood[far:mnist]"
        uo = u_ood[sl]
        extra[f"auroc_id_vs_ood[{label}]"] = M.auroc(
            np.r_[u_test, uo], np.r_[np.zeros(len(u_test)), np.ones(len(uo))]
        )
        extra[f"auroc_idok_vs_ood[{label}]"] = M.auroc(
            np.r_[u_test[ok], uo], np.r_[np.zeros(int(ok.sum())), np.ones(len(uo))]
        )
    shift = {}
    for a, b, name in st.segments:
        if name == "clean":
            continue
        seg = st.src[a:b]
        shift[name] = M.auroc(np.r_[u_test, u_cor[seg]], np.r_[np.zeros(len(u_test)), np.ones(len(seg))])
    extra["shift_auroc"] = shift
    vals = [v for v in shift.values() if np.isfinite(v)]
    extra["shift_auroc_mean"] = float(np.mean(vals)) if vals else float("nan")
    clean = [b - a for a, b, name in st.segments if name == "clean"]
    extra["cid_false_alarm_rate_resampled"] = (
        S.resampled_clean_false_alarm(
            u_test, u_dev, n_segments=len(clean), seg_len=min(clean), dev_len=len(clean_idx), window=st.window
        )
        if clean
        else float("nan")
    )
    return main, extra


def _snap_variants(ctx, snap, x_all, outs, bounds, y_test, st, spec, clean_idx) -> dict:
    res: dict = {"default": snap.variant}
    for v in available_variants(ctx.calib or {}):
        m = SNAP(variant=v)
        try:
            m.fit(ctx)
            r = m.score(ctx, x_all, outs)
        except SnapuqError as e:
            res[v] = {"error": str(e)}
            continue
        main, extra = _score_one(r, bounds, y_test, st, spec, clean_idx)
        res[v] = {**main, "shift_auroc_mean": extra["shift_auroc_mean"], "shift_auroc": extra["shift_auroc"]}
        res[v]["params"] = m.params()
    return res


def _int8_block(d: Path, x_test, y_test, x_ood, ctx, snap, bounds) -> dict | None:
    """INT8 results (the C core through snapuq.export.int8_predict) when D is exported, else None."""

    if not ModelPaths(d).int8.exists():
        return None
    x = np.concatenate([x_test, x_ood])
    o8 = int8_predict(d, x)
    if not isinstance(o8, dict) or "logits" not in o8:
        raise SnapuqError("snapuq.export.int8_predict returned no 'logits'")
    logits = np.asarray(o8["logits"], np.float64).reshape(len(x), -1)
    nt = len(x_test)
    ok = logits[:nt].argmax(1) == y_test
    block: dict = {"accuracy": float(ok.mean()), "n": int(nt)}
    u8 = None
    if "U" in o8:
        u8 = np.asarray(o8["U"], np.float64).reshape(-1)
        block["snap_source"] = "int8_predict (integer SNAP)"
    elif snap is not None:
        u8 = np.asarray(snap[0].scorer.score(o8)["U"], np.float64).reshape(-1)
        block["snap_source"] = "float scorer on dequantized int8 outputs"
    if u8 is not None:
        snap8 = {
            "auroc_ok_vs_err": M.auroc(u8[:nt], ~ok),
            "aupr_ok_vs_err": M.aupr(u8[:nt], ~ok),
            "auroc_id_vs_ood": M.auroc(u8, np.r_[np.zeros(nt), np.ones(len(x_ood))]) if len(x_ood) else None,
        }
        block["snap"] = snap8
        if snap is not None:
            r = snap[1]
            u32 = r.u[bounds["test"]]
            ok32 = r.pred[bounds["test"]] == y_test
            fp32 = M.aupr(u32, ~ok32)
            block["snap_fp32_aupr_ok_vs_err"] = fp32
            block["aupr_int8_minus_fp32"] = snap8["aupr_ok_vs_err"] - fp32
            block["agreement_top1"] = float(np.mean(logits[:nt].argmax(1) == r.pred[bounds["test"]]))
    sizes = {}
    paths = ModelPaths(d)
    for p in (paths.int8, paths.float_tflite, paths.keras, paths.c_source):
        if p.exists():
            sizes[p.name] = p.stat().st_size
    block["bytes"] = sizes
    if paths.INT8 in sizes and paths.FLOAT in sizes:
        block["flash_ratio_float_over_int8"] = sizes[paths.FLOAT] / sizes[paths.INT8]
    return block


