"""`snapuq train`: backbone + SNAP heads (+ the trained baselines) into a model directory.

Two entry points: a built-in backbone on a built-in dataset (`--dataset NAME [--backbone cnn4]`), or your
own Keras model on your own data (`--model my.keras --data DATA`, see snapuq.api and docs/YOUR_MODEL.md).

Default recipe (the measured best of DESIGN §4): train the backbone with cross-entropy, freeze it, train
the heads on the detached tap activations with lambda_ss * NLL + lambda_reg * R_var, fake-quant (QAT) the
heads during the last --qat-frac of the head epochs, then fit the scoring constants and U on the dev split.
--joint trains backbone and heads together (CE + lambda_ss NLL + lambda_reg R_var; --detach optional).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.formats import MAX_SEED
from snapuq.io import write_text
from snapuq.modeldir import ModelPaths


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
    p.add_argument(
        "--epochs", type=int, default=None,
        help="backbone epochs (heads get the same); per-dataset default (--model: head epochs, default 10)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="0..2^32-1 (default 0)")
    p.add_argument("--backbone", default=None, help="cnn4, resnet8, dscnn (default: by dataset)")
    p.add_argument(
        "--taps", default=None, help="comma-separated tap layers (default: the backbone's mid + penultimate)"
    )
    p.add_argument("--rank", type=int, default=64,
                   help="rank r of the projection P (default 64; 1..1024: MAX_RANK)")  # fmt: skip
    p.add_argument(
        "--detach",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop gradients into the tap targets (default on)",
    )
    p.add_argument(
        "--joint", action="store_true", help="train backbone and heads jointly (default: frozen backbone)"
    )
    p.add_argument(
        "--qat-frac", type=float, default=0.2, help="fraction of head epochs with fake-quant (default 0.2)"
    )
    p.add_argument(
        "--lambda-ss", type=float, default=1e-2, help="weight of the self-supervised NLL (1e-3..1e-2)"
    )
    p.add_argument("--lambda-reg", type=float, default=1e-4, help="weight of R_var = sum |log sigma^2|")
    p.add_argument("--eps", type=float, default=1e-2, help="variance floor: sigma^2 >= eps^2")
    p.add_argument(
        "--floor",
        choices=["hard", "softplus"],
        default="hard",
        help="variance floor form (softplus is float-only: no int8 export)",
    )
    p.add_argument("--nll", choices=["gauss", "student_t", "huber"], default="gauss")
    p.add_argument(
        "--cov-rank",
        type=int,
        default=0,
        help="low-rank + diagonal covariance diag(sigma^2) + B B^T with this rank (Woodbury; float only)",
    )
    p.add_argument(
        "--variant", choices=["best", "literal"], default="best", help="default SNAP scoring variant"
    )
    p.add_argument(
        "--hinge-q",
        type=float,
        default=None,
        help="first hinge quantile of the clean reference S (correct dev + train inputs; default 0.999, "
        "raised until the dev check passes; 1.0 = the largest)",
    )
    p.add_argument(
        "--alpha", type=float, default=1.0, help="confidence term weight of 1 - MSP vs 1 - margin (default 1)"
    )
    p.add_argument(
        "--input-tap", action=argparse.BooleanOptionalAction, default=True,
        help="add the input tap to S (row / column statistics of the input; default on)",
    )  # fmt: skip
    from snapuq.calibrate import add_alarm_rate_argument

    add_alarm_rate_argument(p)
    p.add_argument(
        "--batch-size", type=int, default=None, help="default: the dataset's recipe (64 for --model)"
    )
    p.add_argument(
        "--lr", type=float, default=None, help="peak learning rate (default: the dataset's recipe)"
    )
    p.add_argument(
        "--head-epochs",
        type=int,
        default=None,
        help="SNAP-head epochs (default: the recipe's, else --epochs)",
    )
    p.add_argument("--optimizer", choices=["adam", "sgd"], default=None, help="default: the dataset's recipe")
    p.add_argument("--schedule", choices=["constant", "cosine"], default=None,
                   help="learning-rate schedule (cosine: decay to 0 after --warmup-epochs)")  # fmt: skip
    p.add_argument("--warmup-epochs", type=int, default=None)
    p.add_argument("--momentum", type=float, default=None, help="SGD (Nesterov) momentum (default 0.9)")
    p.add_argument("--augment", choices=["none", "shift", "crop-flip"], default=None,
                   help="augmentation in the data path (default: the dataset's recipe)")  # fmt: skip
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
    p.add_argument("--baseline-epochs", type=int, default=None, help="epochs for the baseline models")
    p.add_argument("--no-progress", action="store_true")


def _backbone_module(name: str):
    import importlib

    from snapuq.models import BACKBONES

    return importlib.import_module(BACKBONES[name].split(":")[0])


class _Bar:
    """A tqdm bar over epochs as a Keras callback."""

    def __init__(self, total: int, desc: str, disable: bool):
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="ep", disable=disable)

    def callback(self, keys):
        import keras

        bar = self.bar

        class CB(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                logs = logs or {}
                bar.set_postfix({k: f"{logs[k]:.3f}" for k in keys if k in logs})
                bar.update(1)

        return CB()

    def close(self):
        self.bar.close()


# the largest head rank r (--rank, --cov-rank): a head's z -> h layer alone is r x r weights per tap (1 M at
# 1024, ~1 MB int8: past any board's flash), and r = 100000 asked TensorFlow for 40 GB before the first epoch
MAX_RANK = 1024
# --seed: what numpy's and Keras's generators take


def validate_head_options(
    rank: int, qat_frac: float, epochs: int | None, eps: float, cov_rank: int = 0
) -> None:
    """One-line errors for out-of-range head options (shared by the CLI and `snapuq.attach`)."""
    if rank < 1:
        raise SnapuqError(f"--rank must be >= 1, got {rank}")
    if not 0.0 <= qat_frac <= 1.0:
        raise SnapuqError(f"--qat-frac must be in [0, 1], got {qat_frac}")
    if epochs is not None and epochs < 1:
        raise SnapuqError(f"--epochs must be >= 1, got {epochs}")
    if cov_rank < 0:
        raise SnapuqError(f"--cov-rank must be >= 0, got {cov_rank}")
    if rank > MAX_RANK:
        raise SnapuqError(
            f"--rank must be <= {MAX_RANK} (MAX_RANK: each head's r x r is r^2 weights per tap), got {rank}"
        )
    if cov_rank > MAX_RANK:
        raise SnapuqError(f"--cov-rank must be <= {MAX_RANK} (MAX_RANK), got {cov_rank}")
    if not (math.isfinite(eps) and eps > 0):
        raise SnapuqError(f"--eps must be a finite number > 0, got {eps}")


def fit_backbone(backbone, x, y, epochs: int, batch_size: int, lr: float, validation_data=None,
                 progress: bool = True) -> None:  # fmt: skip
    """Phase 1 of the frozen recipe: cross-entropy on the logits model."""
    import keras

    backbone.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    bar = _Bar(epochs, "backbone", not progress)
    backbone.fit(
        x,
        y,
        epochs=epochs,
        batch_size=None if _is_tf_dataset(x) else batch_size,
        verbose=0,
        shuffle=not _is_tf_dataset(x),
        validation_data=validation_data,
        callbacks=[bar.callback(["loss", "accuracy", "val_accuracy"])],
    )
    bar.close()


def _is_tf_dataset(x) -> bool:
    return type(x).__module__.startswith("tensorflow") and hasattr(x, "element_spec")


def fit_heads(snap_model, n_taps: int, x, y, epochs: int, *, joint: bool = False, lambda_ss: float = 1e-2,
              lambda_reg: float = 1e-4, nll: str = "gauss", detach: bool = True, qat_frac: float = 0.2,
              batch_size: int = 64, lr: float = 2e-3, progress: bool = True,
              labelled: bool = True) -> int:  # fmt: skip
    """Phase 2: the SNAP heads (frozen backbone: self-supervised NLL + R_var only) or everything (joint),
    fake-quant (QAT) in the last round(qat_frac * epochs) epochs. `x` is an array (with labels `y`, which
    only the joint recipe needs) or a batched tf.data.Dataset of (x, y); `labelled=False` (placeholder labels)
    keeps ce/acc off the progress bar. Returns the number of QAT epochs."""
    import keras

    from snapuq import snap

    trainer = snap.SnapTrainer(
        snap_model,
        n_taps,
        lambda_ss if joint else 1.0,
        lambda_reg,
        nll=nll,
        detach=detach or not joint,
        ce_weight=1.0 if joint else 0.0,
    )
    n_qat = int(round(qat_frac * epochs))
    n_plain = epochs - n_qat
    bar = _Bar(epochs, "heads" if not joint else "joint", not progress)
    ds = _is_tf_dataset(x)
    for phase, n_ep in (("float", n_plain), ("qat", n_qat)):
        if n_ep <= 0:
            continue
        snap.set_qat(snap_model, phase == "qat")
        trainer.compile(optimizer=keras.optimizers.Adam(lr if phase == "float" else lr / 4))
        trainer.fit(
            x,
            None if ds else y,
            epochs=n_ep,
            batch_size=None if ds else batch_size,
            verbose=0,
            shuffle=not ds,
            callbacks=[bar.callback(["nll", "ce", "acc"] if labelled else ["nll"])],
        )
    bar.close()
    return n_qat


def tap_entries(backbone, taps: list[str], tap_prev: dict[str, str]) -> list[dict]:
    """config["taps"]: name, layer, prev and the channel counts d_prev, d."""
    return [
        {
            "name": f"tap{k}",
            "layer": name,
            "prev": tap_prev[name],
            "d_prev": int(backbone.get_layer(tap_prev[name]).output.shape[-1]),
            "d": int(backbone.get_layer(name).output.shape[-1]),
        }
        for k, name in enumerate(taps)
    ]


def calibrate_snap(predict, cfg: dict, x_dev: np.ndarray, y_dev: np.ndarray, variant: str = "best",
                   seed: int = 0, alpha: float = 1.0, quantile: float | None = None,
                   x_ref: np.ndarray | None = None, y_ref: np.ndarray | None = None,
                   input_tap: bool = True, alarm_rate: float | None = None) -> dict:  # fmt: skip
    """The SNAP constants (calib.json) fitted on the dev split and the held-out synthetic shift of it, with
    the clean inputs x_ref (the train split; labels y_ref) in the hinge reference;
    `predict(x) -> dict of float outputs` (ModelDir.predict)."""
    from snapuq import calibrate

    od = predict(x_dev)
    xsh = calibrate.holdout_shift(x_dev, seed=seed)
    osh = predict(xsh)
    xr, yr = calibrate.reference_split(x_ref, y_ref, seed)
    return calibrate.fit_calibration(
        od,
        y_dev,
        osh,
        eps=cfg["eps"],
        logvar_offset=cfg["logvar_offset"],
        taps_meta=cfg["taps"],
        alpha=alpha,
        quantile=quantile,
        default_variant=variant,
        outs_ref=None if xr is None else predict(xr),
        y_ref=yr,
        x_dev=np.asarray(x_dev, np.float32),
        x_shift=xsh,
        x_ref=xr,
        input_tap=input_tap,
        alarm_rate=alarm_rate,
    )


def head_config(args_like: dict, taps: list[dict], epochs: int, n_qat: int) -> dict:
    """The SNAP-head part of config.json (the keys `export`, `eval` and the scorer read)."""
    eps = float(args_like["eps"])
    return {
        "taps": taps,
        "rank": int(args_like["rank"]),
        "detach": bool(args_like.get("detach", True)),
        "frozen_backbone": not args_like.get("joint", False),
        "lambda_ss": float(args_like.get("lambda_ss", 1e-2)),
        "lambda_reg": float(args_like.get("lambda_reg", 1e-4)),
        "eps": eps,
        "floor": args_like.get("floor", "hard"),
        "logvar_offset": 2.0 * math.log(eps),
        "qat_frac": float(args_like.get("qat_frac", 0.2)),
        "qat_epochs": int(n_qat),
        "nll": args_like.get("nll", "gauss"),
        "cov_rank": int(args_like.get("cov_rank", 0)),
        "variant": args_like.get("variant", "best"),
        "epochs": int(epochs),
    }


def announce_baselines(ds, cfg: dict, epochs: int, progress: bool, log=print, capped: bool = True) -> None:
    """Say what the baseline training does and roughly how long it takes, before it starts: the measured
    backbone training time per epoch x (ensemble members + the early-exit model), capped epochs."""
    from snapuq.baselines.train import ENSEMBLE_MEMBERS, MAX_EPOCHS

    ep = min(int(epochs), MAX_EPOCHS) if capped else int(epochs)
    per_epoch = cfg.get("_backbone_s_per_epoch")
    est = f"~{per_epoch * ep * (ENSEMBLE_MEMBERS + 1.5):.0f} s" if per_epoch else "unknown"
    log(
        f"snapuq train: training the baselines ({ENSEMBLE_MEMBERS}-member deep ensemble + early-exit model, "
        f"{ep} epochs on {len(ds.x_train)} inputs): estimated {est}; --no-baselines skips them"
    )


def check_args(args: argparse.Namespace) -> None:
    """Options and the output directory, before TensorFlow loads and any data is read."""
    from snapuq.io import check_out_dir
    from snapuq.models import BACKBONES

    if getattr(args, "backbone", None) is not None and args.backbone not in BACKBONES:
        raise SnapuqError(f"unknown --backbone '{args.backbone}' (known: {', '.join(sorted(BACKBONES))})")
    for name in ("batch_size", "baseline_epochs"):
        v = getattr(args, name, None)
        if v is not None and v < 1:
            raise SnapuqError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    lr = getattr(args, "lr", None)
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        raise SnapuqError(f"--lr must be a finite number > 0, got {lr}")
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise SnapuqError(f"--seed must be in 0..{MAX_SEED}, got {seed}")
    for name in ("lambda_ss", "lambda_reg", "momentum"):
        v = getattr(args, name, None)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise SnapuqError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {v}")
    alpha = getattr(args, "alpha", None)
    if alpha is not None and not math.isfinite(alpha):
        raise SnapuqError(f"--alpha must be a finite number, got {alpha}")
    validate_head_options(getattr(args, "rank", 64), getattr(args, "qat_frac", 0.2), None,
                          getattr(args, "eps", 1e-2), getattr(args, "cov_rank", 0))  # fmt: skip
    from snapuq.calibrate import check_alarm_rate

    check_alarm_rate(getattr(args, "alarm_rate", None))
    if getattr(args, "out", None) is not None:
        check_out_dir(args.out)


def check_data(ds) -> None:
    """Refuse data no model can be trained or calibrated on, before the first epoch."""
    for split in ("train", "dev", "test"):
        if len(getattr(ds, f"x_{split}")) == 0:
            raise SnapuqError(f"dataset {ds.name}: the {split} split is empty")
    n_cls = len(np.unique(np.asarray(ds.y_train)))
    if n_cls < 2:
        raise SnapuqError(f"dataset {ds.name}: the train split has {n_cls} class; at least 2 are needed")
    check_input_range(ds)


def check_input_range(ds, where: str | None = None) -> None:
    """Refuse model inputs (the splits after normalisation, and x_ood) that are not finite or beyond
    +-MAX_ABS_INPUT (1e6, snapuq.data.user): their activations, squared in the heads' NLL, overflow float32
    and training ends in NaN. One pass over each split, no copy."""
    from snapuq.data.user import MAX_ABS_INPUT

    for split in ("train", "dev", "test", "ood"):
        x = getattr(ds, f"x_{split}", None)
        if x is None or not np.size(x):
            continue
        x = np.asarray(x)
        top = max(abs(float(x.max())), abs(float(x.min())))
        if not math.isfinite(top) or top > MAX_ABS_INPUT:
            raise SnapuqError(
                f"{where or 'dataset ' + str(ds.name)}: x_{split} reaches {top:.3g} as a model input (after "
                f"normalisation; the limit is +-{MAX_ABS_INPUT:g}, beyond which training overflows float32): "
                "scale the data or use --normalize standard"
            )


def recipe_from_args(args: argparse.Namespace, dataset: str | None):
    """The dataset's recipe with the options the user gave on top (None = not given)."""
    import dataclasses

    from snapuq.nn.recipe import TrainOptions

    base = TrainOptions.for_dataset(dataset)
    given = {
        k: getattr(args, k)
        for k in ("epochs", "head_epochs", "batch_size", "lr", "optimizer", "schedule", "warmup_epochs",
                  "augment", "baseline_epochs", "momentum")
        if getattr(args, k, None) is not None
    }  # fmt: skip
    if "epochs" in given and "warmup_epochs" not in given:
        given["warmup_epochs"] = min(base.warmup_epochs, max(0, given["epochs"] - 1))
    return dataclasses.replace(base, **given)


def train(args: argparse.Namespace) -> dict:
    check_args(args)
    from snapuq.data import load_dataset
    from snapuq.models import DEFAULT_BACKBONE, build_backbone

    if getattr(args, "model", None):
        from snapuq.api import train_user_model

        return train_user_model(args)
    if getattr(args, "baselines_only", False):
        return train_baselines_only(args)
    if not args.dataset:
        raise SnapuqError("give --dataset NAME (built-in backbones) or --model my.keras --data DATA")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    opts = recipe_from_args(args, args.dataset)
    validate_head_options(args.rank, args.qat_frac, opts.heads, args.eps, args.cov_rank)
    from snapuq.modeldir import ModelStage

    stage = ModelStage(args.out)
    stage.open(resume=getattr(args, "resume", False))
    try:
        cfg = _train_into(args, opts, stage.path, timings, t0, load_dataset, DEFAULT_BACKBONE, build_backbone,
                          resume=getattr(args, "resume", False))  # fmt: skip
        stage.commit()
    finally:
        stage.close()
    return cfg


def train_baselines_only(args: argparse.Namespace) -> dict:
    """`snapuq train --out D --baselines-only [--resume]`: the deep ensemble and the early-exit model of an
    existing model directory of a built-in set, by its recorded recipe, written as one unit with the rest of D
    (staged, checkpointed every epoch, swapped in when done)."""
    import shutil

    from snapuq.baselines import train_baselines
    from snapuq.data import load_dataset
    from snapuq.formats import read_config
    from snapuq.modeldir import ModelStage
    from snapuq.nn.recipe import TrainOptions

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
    t0 = time.perf_counter()
    ds = load_dataset(cfg["dataset"], args.data_dir or cfg.get("data_dir"), seed=int(cfg.get("seed", 0)))
    stage = ModelStage(d)
    stage.open(resume=resume)
    try:
        for p in d.iterdir():  # everything but the baselines goes over as it is
            if p.name != paths.BASELINES and not (stage.path / p.name).exists():
                (shutil.copytree if p.is_dir() else shutil.copy2)(p, stage.path / p.name)
        train_baselines(ds, cfg, stage.path, seed=int(cfg.get("seed", 0)), progress=not args.no_progress,
                        recipe=opts, resume=resume)  # fmt: skip
        cfg.setdefault("timings_s", {})["baselines"] = round(time.perf_counter() - t0, 2)
        cfg["recipe"] = opts.to_dict()
        write_text(ModelPaths(stage.path).config, json.dumps(cfg, indent=1))
        stage.commit(made=(paths.CONFIG,))  # model.keras, calib.json and their export stay what they were
    finally:
        stage.close()
    return cfg


def _train_into(args, opts, out: Path, timings, t0, load_dataset, DEFAULT_BACKBONE, build_backbone,
                resume: bool) -> dict:  # fmt: skip
    """The built-in recipe into the staging folder `out` (swapped in as --out by the caller)."""
    ds = load_dataset(args.dataset, args.data_dir, seed=args.seed)
    check_data(ds)
    timings["load_data"] = time.perf_counter() - t0
    import keras  # after every check: a bad invocation fails in a second, without TensorFlow

    from snapuq import calibrate, snap
    from snapuq.nn.recipe import fit_backbone_resumable

    bname = args.backbone or DEFAULT_BACKBONE.get(args.dataset, "cnn4")
    mod = _backbone_module(bname) if bname in DEFAULT_BACKBONE.values() else None
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
    snap_model = snap.add_heads(
        backbone,
        taps,
        tap_prev,
        rank=args.rank,
        eps=args.eps,
        floor=args.floor,
        detach=args.detach,
        cov_rank=args.cov_rank,
    )
    history: list[dict] = []
    if not args.joint:
        identity = {"dataset": args.dataset, "backbone": bname, "seed": int(args.seed),
                    "input_shape": list(ds.input_shape), "n_train": int(len(xtr))}  # fmt: skip
        history = fit_backbone_resumable(
            backbone, xtr, ytr, opts, seed=args.seed, ckpt_dir=out / "checkpoint", identity=identity,
            resume=resume, validation_data=(xdv, ydv), progress=progress,
        )  # fmt: skip
        timings["backbone"] = time.perf_counter() - t
        for lay in backbone.layers:
            lay.trainable = False
    # ---- phase 2: heads (frozen) or everything (joint), QAT in the last qat_frac of the epochs
    t = time.perf_counter()
    head_epochs = opts.heads
    n_qat = fit_heads(
        snap_model, len(taps), xtr, ytr, head_epochs, joint=args.joint, lambda_ss=args.lambda_ss,
        lambda_reg=args.lambda_reg, nll=args.nll, detach=args.detach, qat_frac=args.qat_frac,
        batch_size=opts.batch_size, lr=opts.lr if opts.optimizer == "adam" else 2e-3, progress=progress,
    )  # fmt: skip
    timings["heads"] = time.perf_counter() - t
    snap_model.save(ModelPaths(out).keras)
    # calibrate (and report accuracy) with the model exactly as model.keras loads it: fake-quant is a runtime
    # switch that is not saved, so leaving it on here made train's dev check disagree with eval's
    snap.set_qat(snap_model, False)

    # ---- calibration on the dev split (+ the held-out synthetic shift family)
    t = time.perf_counter()
    from snapuq.modeldir import ModelDir

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
        **head_config(vars(args), tap_entries(backbone, taps, tap_prev), head_epochs, n_qat),
        "recipe": opts.to_dict(),
        "data_meta": ds.meta,
    }
    if history:
        cfg["backbone_history"] = history
    md = ModelDir(out, cfg, snap_model)
    calib = calibrate_snap(
        md.predict, cfg, xdv, ydv, args.variant, args.seed,
        alpha=getattr(args, "alpha", 1.0), quantile=getattr(args, "hinge_q", None),
        x_ref=xtr, y_ref=ytr, input_tap=getattr(args, "input_tap", True),
        alarm_rate=getattr(args, "alarm_rate", None),
    )  # fmt: skip
    calibrate.write_json_atomic(ModelPaths(out).calib, calib)
    timings["calibrate"] = time.perf_counter() - t

    ot = md.predict(ds.x_test.astype(np.float32))
    acc = float((ot["logits"].argmax(1) == ds.y_test).mean())
    cfg["test_accuracy_float"] = acc
    cfg["dev_accuracy_float"] = float((md.predict(xdv)["logits"].argmax(1) == ydv).mean())

    # ---- trained baselines (deep ensemble, early exits)
    if not args.no_baselines:
        t = time.perf_counter()
        from snapuq.baselines import train_baselines

        if "backbone" in timings:
            cfg["_backbone_s_per_epoch"] = timings["backbone"] / max(1, epochs)
        announce_baselines(ds, cfg, opts.baseline_epochs or epochs, progress, capped=False)
        cfg.pop("_backbone_s_per_epoch", None)
        train_baselines(ds, cfg, out, seed=args.seed, progress=progress, recipe=opts, resume=resume)
        timings["baselines"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    cfg["timings_s"] = {k: round(v, 2) for k, v in timings.items()}
    write_text(ModelPaths(out).config, json.dumps(cfg, indent=1))
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = train(args)
    from snapuq.calibrate import best_variant, check_line

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
