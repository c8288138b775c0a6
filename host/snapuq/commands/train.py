"""`snapuq train`: backbone + SNAP heads (+ the trained baselines) into a model directory.

Two entry points: a built-in backbone on a built-in dataset (`--dataset NAME [--backbone cnn4]`), or your
own Keras model on your own data (`--model my.keras --data DATA`, see snapuq.api and docs/YOUR_MODEL.md).

Default recipe (the measured best of DESIGN §4): train the backbone with cross-entropy, freeze it, train
the heads on the detached tap activations with lambda_ss * NLL + lambda_reg * R_var, fake-quant (QAT) the
heads during the last --qat-frac of the head epochs, then fit the scoring constants and U on the dev split.
--joint trains backbone and heads together (CE + lambda_ss NLL + lambda_reg R_var; --detach optional).
--distill-from DIR trains the backbone on its labels and on the soft targets of teachers (a model directory's
deep ensemble: snapuq.nn.distill), recorded in config.json (`distill`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from snapuq.baselines import train_baselines
from snapuq.baselines.train import adopt_baselines, announce_baselines, check_baselines_source
from snapuq.commands.flags import add_options, given
from snapuq.commands.train_user import train_user_model
from snapuq.data import BUILD_OPTIONS, build_options, dataset_of, load_dataset, read_by
from snapuq.data.audio import FRONTENDS, frontend_name, known_frontend
from snapuq.errors import SnapuqError
from snapuq.formats import MAX_SEED, read_config
from snapuq.io import check_out_dir, write_json, write_text
from snapuq.modeldir import ModelPaths, ModelStage
from snapuq.nn.backbones import BACKBONES, DEFAULT_BACKBONE, backbone_module, build_backbone
from snapuq.nn.distill import cached_soft_targets, load_teachers
from snapuq.nn.recipe import fit_backbone_resumable
from snapuq.nn.saved import ModelDir
from snapuq.nn.training import check_data, fit_heads, head_config, tap_entries
from snapuq.options import CalibOptions, HeadOptions, TrainOptions
from snapuq.uq.calibration import best_variant, calibrate, check_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", default=None, help="digits, keywords, mnist, fashion_mnist, cifar10, speech_commands"
    )
    p.add_argument(
        "--model", default=None, metavar="MODEL.keras",
        help="your own trained Keras model (SNAP heads are attached to it; needs --data)",
    )  # fmt: skip
    p.add_argument(
        "--data", default=None, metavar="DATA",
        help="with --model: an .npz (x_train, y_train, x_test, y_test; optional x_dev, y_dev, x_ood, "
        "class_names) "
        "or a folder of class subfolders of PNG/JPEG images or 16 kHz WAV clips",
    )  # fmt: skip
    p.add_argument(
        "--normalize", choices=["auto", "none", "standard"], default="auto",
        help="with --data: input normalisation recorded in the manifest (auto: integer arrays / 255)",
    )  # fmt: skip
    p.add_argument(
        "--backbone-epochs", type=int, default=0,
        help="with --model: train the model itself this many epochs first (default 0: use it as trained)",
    )  # fmt: skip
    p.add_argument(
        "--data-dir", default=None, help="folder with the dataset files (not needed for digits/keywords)"
    )
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--seed", type=int, default=0, help="0..2^32-1 (default 0)")
    p.add_argument("--backbone", default=None, help="cnn4, resnet8, dscnn (default: by dataset)")
    p.add_argument(
        "--taps", default=None, help="comma-separated tap layers (default: the backbone's mid + penultimate)"
    )
    add_options(p, TrainOptions, recipe=True)
    add_options(p, HeadOptions)
    add_options(p, CalibOptions)
    p.add_argument(
        "--resume", action="store_true",
        help="continue an interrupted run from its last finished backbone epoch (the checkpoint in the "
        "staging folder .OUT.train beside --out)",
    )  # fmt: skip
    p.add_argument("--no-baselines", action="store_true", help="skip the deep ensemble and early-exit models")
    p.add_argument(
        "--baselines-only", action="store_true",
        help="train only the baselines of the existing model directory --out, by its recorded recipe",
    )  # fmt: skip
    p.add_argument(
        "--ensemble-from", default=None, metavar="DIRS",
        help="with --baselines-only: comma list of model directories of the same recipe trained with other "
        "seeds; their backbones are the deep ensemble (only the early-exit model trains)",
    )  # fmt: skip
    p.add_argument(
        "--baselines-from", default=None, metavar="DIR",
        help="take DIR's deep ensemble and early-exit model as this model's baselines instead of training "
        "them: DIR trained on the same set and build, backbone, seed and baseline recipe (checked before "
        "training; e.g. the model a --distill-from DIR learns from)",
    )  # fmt: skip
    p.add_argument(
        "--distill-from", default=None, metavar="DIR",
        help="distil the backbone from teachers: a model directory (its deep ensemble, baselines/"
        "ensemble_*.keras), a folder of logits .keras models, or one; --distill-alpha (default 0.7) and "
        "--distill-temperature set the loss",
    )  # fmt: skip
    p.add_argument(
        "--frontend", choices=sorted(FRONTENDS), default=None,
        help="audio sets: the features the model reads: mfcc, cmn (each clip's cepstral mean removed: blind "
        "to a fixed channel and to the level) or cmn-keep-level (the level kept: a gain change stays visible "
        "to U); default: the set's own (keywords12: cmn; keywords, speech_commands: mfcc)",
    )  # fmt: skip
    p.add_argument(
        "--backgrounds", default=None, metavar="NAME",
        help="keywords12: the sounds behind the train split's words and in its `_silence_`: set (noise "
        "colours, hum, babble), everyday-light (15 %% of them everyday sounds: dishes, a tap, a machine, "
        "animal calls; the default) or everyday (35 %%); dev and test are the same in every build",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true")


DISTILL_ALPHA = 0.7  # measured on keywords12: docs/AUDIO.md "Softer targets"


def check_args(args: argparse.Namespace) -> tuple[TrainOptions, HeadOptions, CalibOptions]:
    """Options and the output directory, before TensorFlow loads and any data is read: the recipe (the
    dataset's, with the options given on top), the head and the calibration options."""
    if args.backbone is not None and args.backbone not in BACKBONES:
        raise SnapuqError(f"unknown --backbone '{args.backbone}' (known: {', '.join(sorted(BACKBONES))})")
    if not 0 <= args.seed <= MAX_SEED:
        raise SnapuqError(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    if args.model:  # your own model: the recipe is attach's (head epochs, batch size, lr given or its own)
        recipe = TrainOptions(**given(TrainOptions, args))
    else:
        recipe = recipe_from_args(args, args.dataset)
    heads, calib = HeadOptions(**given(HeadOptions, args)), CalibOptions(**given(CalibOptions, args))
    recipe = check_distill(args, recipe, heads)
    if getattr(args, "frontend", None) and (args.model or getattr(args, "baselines_only", False)):
        raise SnapuqError("--frontend goes with --dataset (a built-in audio set); --baselines-only keeps the "
                          "model's own front end")  # fmt: skip
    if getattr(args, "backgrounds", None) and (args.model or getattr(args, "baselines_only", False)
                                               or args.dataset not in BUILD_OPTIONS):  # fmt: skip
        raise SnapuqError(f"--backgrounds goes with --dataset {' or '.join(sorted(BUILD_OPTIONS))} (a set "
                          "made in more than one way); --baselines-only keeps the model's own build")
    if getattr(args, "baselines_from", None) and (args.model or args.no_baselines
                                                  or getattr(args, "baselines_only", False)):  # fmt: skip
        raise SnapuqError("--baselines-from goes with --dataset (a built-in backbone trained with "
                          "baselines), not with --model, --no-baselines or --baselines-only")  # fmt: skip
    check_out_dir(args.out)
    return recipe, heads, calib


def check_distill(args: argparse.Namespace, recipe: TrainOptions, heads: HeadOptions) -> TrainOptions:
    """--distill-from goes with a built-in backbone trained alone (not --model, --joint or --baselines-only);
    it sets --distill-alpha to DISTILL_ALPHA unless given; a recipe that distils needs it."""
    import dataclasses

    src = getattr(args, "distill_from", None)
    if not src:
        if recipe.distill_alpha > 0 and not getattr(args, "baselines_only", False):
            raise SnapuqError("--distill-alpha needs --distill-from DIR (the teachers)")
        return recipe
    if args.model or getattr(args, "baselines_only", False) or heads.joint:
        raise SnapuqError("--distill-from trains a built-in backbone before its heads (not with --model, "
                          "--baselines-only or --joint)")  # fmt: skip
    if getattr(args, "distill_alpha", None) is None and recipe.distill_alpha == 0:
        recipe = dataclasses.replace(recipe, distill_alpha=DISTILL_ALPHA)
    return recipe


def recipe_from_args(args: argparse.Namespace, dataset: str | None) -> TrainOptions:
    """The dataset's recipe with the options the user gave on top (None = not given)."""
    import dataclasses

    base = TrainOptions.for_dataset(dataset)
    g = given(TrainOptions, args)
    if "epochs" in g and "warmup_epochs" not in g:
        g["warmup_epochs"] = min(base.warmup_epochs, max(0, g["epochs"] - 1))
    return dataclasses.replace(base, **g)


def train(args: argparse.Namespace) -> dict:
    opts, heads, calib = check_args(args)
    if args.model:
        return train_user_model(args, heads, calib)
    if getattr(args, "baselines_only", False):
        return train_baselines_only(args)
    if getattr(args, "ensemble_from", None):
        raise SnapuqError("--ensemble-from goes with --baselines-only (the model directory --out exists)")
    if not args.dataset:
        raise SnapuqError("give --dataset NAME (built-in backbones) or --model my.keras --data DATA")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    stage = ModelStage(args.out)
    stage.open(resume=args.resume)
    try:
        cfg = _train_into(args, opts, heads, calib, stage.path, timings, t0, resume=args.resume)
        stage.commit()
    finally:
        stage.close()
    return cfg


def train_baselines_only(args: argparse.Namespace) -> dict:
    """`snapuq train --out D --baselines-only [--resume]`: the deep ensemble and the early-exit model of an
    existing model directory of a built-in set, by its recorded recipe, written as one unit with the rest of D
    (staged, checkpointed every epoch, swapped in when done)."""
    import shutil


    d = Path(args.out)
    paths = ModelPaths(d)
    if not paths.keras.is_file():
        raise SnapuqError(f"--baselines-only: {d} is not a trained model directory (no {paths.KERAS})")
    cfg = read_config(paths.config, need=("dataset",))
    if cfg.get("backbone") == "user" or not isinstance(cfg.get("recipe"), dict):
        raise SnapuqError(f"--baselines-only: {paths.config} records no built-in recipe")
    opts = TrainOptions.from_dict(cfg["recipe"], f"{paths.config} recipe")
    if args.baseline_epochs:
        import dataclasses

        opts = dataclasses.replace(opts, baseline_epochs=args.baseline_epochs)
    resume = getattr(args, "resume", False)
    ensemble_from = [Path(t) for t in (getattr(args, "ensemble_from", None) or "").split(",") if t.strip()]
    t0 = time.perf_counter()
    ds = dataset_of(cfg, args.data_dir or cfg.get("data_dir"))
    stage = ModelStage(d)
    stage.open(resume=resume)
    try:
        for p in d.iterdir():  # everything but the baselines goes over as it is
            if p.name != paths.BASELINES and not (stage.path / p.name).exists():
                (shutil.copytree if p.is_dir() else shutil.copy2)(p, stage.path / p.name)
        train_baselines(ds, cfg, stage.path, seed=int(cfg.get("seed", 0)), progress=not args.no_progress,
                        recipe=opts, resume=resume, ensemble_from=ensemble_from)  # fmt: skip
        cfg.setdefault("timings_s", {})["baselines"] = round(time.perf_counter() - t0, 2)
        cfg["recipe"] = opts.to_dict()
        write_text(ModelPaths(stage.path).config, json.dumps(cfg, indent=1))
        stage.commit(made=(paths.CONFIG,))  # model.keras, calib.json and their export stay what they were
    finally:
        stage.close()
    return cfg


def check_teacher_frontend(src: Path, ds, log=None) -> None:
    """Teachers from a model directory (or its baselines/) must have read the set through its front end;
    teachers trained on another build of the set (BUILD_OPTIONS: keywords12's backgrounds) are a warning on
    `log` (default stderr): where the builds differ, their targets teach what they learned on theirs."""
    for d in (src, src.parent):
        if (d / "config.json").is_file():
            r = read_by(d)
            have, want = r["frontend"], (ds.meta or {}).get("frontend")
            known = known_frontend(have)
            if have is not None and want is not None and (have != want if known is None
                                                          else known != known_frontend(want)):
                raise SnapuqError(f"--distill-from: {d} was trained on another front end than the set's "
                                  "(config.json data_meta.frontend)")  # fmt: skip
            name = str(getattr(ds, "name", ""))
            theirs, mine = build_options(name, r["build"]), build_options(name, ds.meta or {})
            if r["build"] is not None and theirs != mine:
                (log or _warn)(f"snapuq train: warning: --distill-from: {d} was trained on another build of "
                               f"{name} ({theirs} vs this run's {mine}): its targets on what differs teach "
                               "what it learned on its own (train the teachers on this build)")  # fmt: skip
            return


def _warn(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr)


def _train_into(args, opts: TrainOptions, heads: HeadOptions, calib_opts: CalibOptions, out: Path,
                timings, t0, resume: bool) -> dict:  # fmt: skip
    """The built-in recipe into the staging folder `out` (swapped in as --out by the caller)."""

    fe_name = getattr(args, "frontend", None)
    bg = getattr(args, "backgrounds", None)
    ds = load_dataset(args.dataset, args.data_dir, seed=args.seed,
                      frontend=FRONTENDS[fe_name] if fe_name else None,
                      build={"backgrounds": bg} if bg else None)  # fmt: skip
    if fe_name and (ds.meta or {}).get("frontend") is None:
        raise SnapuqError(f"--frontend: {args.dataset} is not an audio set (its inputs have no front end)")
    check_data(ds)
    timings["load_data"] = time.perf_counter() - t0
    import keras  # after every check: a bad invocation fails in a second, without TensorFlow

    from snapuq.nn import heads as snap

    bname = args.backbone or DEFAULT_BACKBONE.get(args.dataset, "cnn4")
    mod = backbone_module(bname) if bname in DEFAULT_BACKBONE.values() else None
    taps = [t.strip() for t in args.taps.split(",")] if args.taps else list(getattr(mod, "DEFAULT_TAPS", []))
    tap_prev = dict(getattr(mod, "TAP_PREV", {}))
    bad = [t for t in taps if t not in tap_prev]
    if not taps or bad:
        raise SnapuqError(f"invalid --taps {','.join(bad) or '(none)'}: choose from {', '.join(tap_prev)}")
    epochs = opts.epochs
    progress = not args.no_progress

    keras.utils.set_random_seed(args.seed)
    xtr, ytr = ds.x_train.astype(np.float32), ds.y_train.astype(np.int64)
    xdv, ydv = ds.x_dev.astype(np.float32), ds.y_dev.astype(np.int64)
    backbone = build_backbone(bname, ds.input_shape, ds.n_classes)
    # ---- phase 1: backbone (frozen recipe) or joint
    t = time.perf_counter()
    snap_model = snap.add_heads(backbone, taps, tap_prev, rank=heads.rank, eps=heads.eps, floor=heads.floor,
                                detach=heads.detach, cov_rank=heads.cov_rank)  # fmt: skip
    history: list[dict] = []
    distill, soft = None, None
    if getattr(args, "baselines_from", None):  # before any training: a source that does not fit fails now
        mine = {"dataset": args.dataset, "backbone": bname, "input_shape": list(ds.input_shape),
                "n_classes": ds.n_classes, "seed": int(args.seed),
                "data_meta": json.loads(json.dumps(ds.meta, default=str))}  # as config.json will hold them
        check_baselines_source(args.baselines_from, mine, opts)
    if getattr(args, "distill_from", None):
        check_teacher_frontend(Path(args.distill_from), ds)  # from config.json, before any model loads
        teachers, distill = load_teachers(args.distill_from, ds.input_shape, ds.n_classes)
        soft = cached_soft_targets(teachers, xtr, opts.distill_temperature, distill,
                                   out / "checkpoint" / "soft_targets.npz")  # a --resume reads them back
        distill.update(alpha=opts.distill_alpha, temperature=opts.distill_temperature,
                       teacher_train_accuracy=round(float((soft.argmax(1) == ytr).mean()), 5))  # fmt: skip
        del teachers
    if not heads.joint:
        identity = {"dataset": args.dataset, "backbone": bname, "seed": int(args.seed),
                    "input_shape": list(ds.input_shape), "n_train": int(len(xtr))}  # fmt: skip
        if (ds.meta or {}).get("frontend") is not None:  # a resume reads the same features
            identity["frontend"] = frontend_name(ds.meta["frontend"]) or "another"
        if (ds.meta or {}).get("backgrounds") is not None:  # and the same build
            identity["backgrounds"] = ds.meta["backgrounds"]
        if distill:
            identity["teachers_sha256"] = distill["sha256"]
        history = fit_backbone_resumable(
            backbone, xtr, ytr, opts, seed=args.seed, ckpt_dir=out / "checkpoint", identity=identity,
            resume=resume, validation_data=(xdv, ydv), progress=progress, soft=soft,
        )  # fmt: skip
        timings["backbone"] = time.perf_counter() - t
        for lay in backbone.layers:
            lay.trainable = False
    # ---- phase 2: heads (frozen) or everything (joint), QAT in the last qat_frac of the epochs
    t = time.perf_counter()
    head_epochs = opts.heads
    n_qat = fit_heads(
        snap_model, len(taps), xtr, ytr, head_epochs, joint=heads.joint, lambda_ss=heads.lambda_ss,
        lambda_reg=heads.lambda_reg, nll=heads.nll, detach=heads.detach, qat_frac=heads.qat_frac,
        batch_size=opts.batch_size, lr=opts.lr if opts.optimizer == "adam" else 2e-3, progress=progress,
    )  # fmt: skip
    timings["heads"] = time.perf_counter() - t
    snap_model.save(ModelPaths(out).keras)
    # calibrate (and report accuracy) with the model exactly as model.keras loads it: fake-quant is a runtime
    # switch that is not saved, so leaving it on here made train's dev check disagree with eval's
    snap.set_qat(snap_model, False)

    # ---- calibration on the dev split (+ the held-out synthetic shift family)
    t = time.perf_counter()

    cfg = {
        "format": 1,
        "dataset": args.dataset,
        # later commands (export, verify, eval, bench, harness) default --data-dir to this
        "data_dir": str(Path(args.data_dir).resolve()) if getattr(args, "data_dir", None) else None,
        "backbone": bname,
        "input_shape": list(ds.input_shape),
        "n_classes": ds.n_classes,
        "class_names": ds.class_names,
        "seed": args.seed,
        **head_config(heads, calib_opts.variant, tap_entries(backbone, taps, tap_prev), head_epochs, n_qat),
        "recipe": opts.to_dict(),
        "calibration": calib_opts.to_dict(),
        "data_meta": ds.meta,
    }
    if history:
        cfg["backbone_history"] = history
    if distill:
        cfg["distill"] = distill
    md = ModelDir(out, cfg, snap_model)
    calib = calibrate(md.predict, cfg, xdv, ydv, calib_opts, seed=args.seed, x_ref=xtr, y_ref=ytr)
    write_json(ModelPaths(out).calib, calib, indent=1)
    timings["calibrate"] = time.perf_counter() - t

    ot = md.predict(ds.x_test.astype(np.float32))
    acc = float((ot["logits"].argmax(1) == ds.y_test).mean())
    cfg["test_accuracy_float"] = acc
    cfg["dev_accuracy_float"] = float((md.predict(xdv)["logits"].argmax(1) == ydv).mean())

    # ---- trained baselines (deep ensemble, early exits)
    if getattr(args, "baselines_from", None):
        t = time.perf_counter()
        cfg["baselines_from"] = adopt_baselines(args.baselines_from, out)
        timings["baselines"] = time.perf_counter() - t
    elif not args.no_baselines:
        t = time.perf_counter()

        per = timings["backbone"] / max(1, epochs) if "backbone" in timings else None
        announce_baselines(ds, per, opts.baseline_epochs or epochs, capped=False)
        train_baselines(ds, cfg, out, seed=args.seed, progress=progress, recipe=opts, resume=resume)
        timings["baselines"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    cfg["timings_s"] = {k: round(v, 2) for k, v in timings.items()}
    write_text(ModelPaths(out).config, json.dumps(cfg, indent=1))
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = train(args)

    calib = json.loads(ModelPaths(args.out).calib.read_text())
    best = best_variant(calib)
    chk = best.get("fit", {}).get("dev_check", {})
    print(
        f"snapuq train: {args.out}: test accuracy {cfg['test_accuracy_float']:.4f} "
        f"in {cfg['timings_s']['total']:.0f}s; {check_line(chk)}"
    )
    if chk and not chk.get("ok"):
        print(f"snapuq train: warning: {chk.get('hint')}")
    return 0


def run_argv(argv: list[str]) -> int:
    """`snapuq train ARGV` from another command (reproduce, eval --seeds): ARGV parsed by train's own
    parser, then `run`, whose return code it returns (a bad option exits as argparse does; a failure
    raises SnapuqError)."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    return run(p.parse_args(argv))
