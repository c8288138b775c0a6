"""`snapuq train --model my.keras --data DATA --out DIR`: SNAP heads on your own Keras model and data."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from snapuq.api import attach, load_keras_model
from snapuq.baselines import train_baselines
from snapuq.baselines.train import announce_baselines
from snapuq.data import with_model_classes
from snapuq.data.user import load_user_data, precheck_user_data, with_preprocessing
from snapuq.errors import SnapuqError
from snapuq.modeldir import ModelPaths, record_parts
from snapuq.nn.graph import check_model, fold_input_preprocessing, logits_backbone
from snapuq.nn.training import check_input_range
from snapuq.options import CalibOptions, HeadOptions


def train_user_model(args: argparse.Namespace, heads: HeadOptions, calib: CalibOptions) -> dict:
    """`snapuq train --model my.keras --data DATA --out DIR`: attach, fit, calibrate, save (+ baselines)."""

    t0 = time.perf_counter()
    if not args.data:
        raise SnapuqError("--model needs --data DATA (.npz or a folder of class subfolders)")
    if args.dataset:
        raise SnapuqError("give either --dataset (built-in) or --model with --data, not both")
    if not Path(args.model).exists():
        raise SnapuqError(f"{args.model}: no such model file")
    if Path(args.model).is_dir():  # a SavedModel folder: refused with the ways to convert it, before the data
        load_keras_model(args.model)
    precheck_user_data(args.data)  # an .npz read and checked before TensorFlow loads (read once)
    progress = not args.no_progress
    model = load_keras_model(args.model)
    # a leading Rescaling / Normalization moves into the data path; the data then go to it raw ("auto")
    model, pre = fold_input_preprocessing(model)
    check_model(model)  # the layer rules first (fast), then the data, then the conversion check in attach
    shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    mode = "none" if pre is not None and args.normalize == "auto" else args.normalize
    ds = load_user_data(args.data, seed=args.seed, input_shape=shape, normalize=mode)
    if pre is not None:
        ds = with_preprocessing(ds, pre)
        print(f"snapuq train: {pre['formula'].split(': ', 1)[1]} (the data path applies it: "
              f"scale {_short(pre['scale'])}, offset {_short(pre['offset'])})")  # fmt: skip
    # n_classes is the model's logits width, not the largest label in the data (a class the data lack is
    # still an output: the generated C and the manifest must say so); a label outside it is refused here,
    # before attach converts the model
    n_classes = int(logits_backbone(model)[0].outputs[0].shape[-1])
    ds = with_model_classes(ds, n_classes, str(args.data))
    check_input_range(ds, str(args.data))
    taps = [t.strip() for t in args.taps.split(",")] if args.taps else None
    snap = attach(model, taps=taps, rank=heads.rank, eps=heads.eps, lambda_reg=heads.lambda_reg,
                  nll=heads.nll, qat_frac=heads.qat_frac, variant=calib.variant)  # fmt: skip
    if snap.n_classes != n_classes:  # the same logits: attach takes them from logits_backbone too
        ds = with_model_classes(ds, snap.n_classes, str(args.data))
    snap.fit(ds.x_train, ds.y_train, epochs=args.epochs or 10, batch_size=args.batch_size or 64,
             lr=args.lr or 2e-3, backbone_epochs=args.backbone_epochs, validation_data=(ds.x_dev, ds.y_dev),
             seed=args.seed, progress=progress)  # fmt: skip
    snap.calibrate(ds.x_dev, ds.y_dev, seed=args.seed, input_tap=calib.input_tap, alarm_rate=calib.alarm_rate,
                   alpha=calib.alpha, hinge_q=calib.quantile)  # fmt: skip
    snap.history["load_and_prepare_s"] = round(time.perf_counter() - t0, 2)
    out = snap.save(args.out, dataset=ds)
    cfg = json.loads((out / "config.json").read_text())
    if not args.no_baselines:
        t = time.perf_counter()
        per = snap.history.get("backbone_s_per_epoch") or _estimate_epoch_s(
            snap.backbone, ds, args.batch_size or 64
        )
        ep = args.baseline_epochs or args.epochs or 10
        announce_baselines(ds, per, ep)
        train_baselines(ds, cfg, out, seed=args.seed, epochs=ep, progress=progress)
        cfg["timings_s"]["baselines"] = round(time.perf_counter() - t, 2)
    cfg["timings_s"]["total"] = round(time.perf_counter() - t0, 2)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    record_parts(out, (ModelPaths.CONFIG,))
    return cfg


def _short(v: list[float]) -> str:
    """A per-channel list for one line: one value when all agree, else the first three."""
    a = np.asarray(v, np.float64)
    if np.allclose(a, a[0]):
        return f"{a[0]:.6g}"
    return "[" + ", ".join(f"{t:.4g}" for t in a[:3]) + (", ...]" if len(a) > 3 else "]")


def _estimate_epoch_s(backbone, ds, batch_size: int) -> float:
    """Seconds per training epoch of the backbone, from a few timed train steps on a clone."""
    import keras

    m = keras.models.clone_model(backbone)
    for lay in m.layers:  # the backbone is frozen after the heads' training: time real train steps
        lay.trainable = True
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    n = min(len(ds.x_train), 4 * batch_size)
    x, y = ds.x_train[:n], ds.y_train[:n]
    m.train_on_batch(x[:batch_size], y[:batch_size])  # trace
    t = time.perf_counter()
    for i in range(0, n, batch_size):
        m.train_on_batch(x[i : i + batch_size], y[i : i + batch_size])
    per_sample = (time.perf_counter() - t) / n
    return per_sample * len(ds.x_train)
