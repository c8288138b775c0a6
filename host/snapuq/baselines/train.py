"""Training of the baselines that need their own weights: a deep ensemble (M members of the same backbone,
different seeds) and an early-exit ensemble (classifier exits after the first blocks of a backbone, trained
jointly with it, predictions averaged over all exits as in the EE-ensemble baseline QUTE compares against).

Written into D/baselines/:
    ensemble_{k}.keras   k = 0..M-1, one output: logits
    early_exit.keras     outputs {"exit0", ..., "final"}: logits of every exit
    baselines.json       {"ensemble": {...}, "early_exit": {...}, "epochs", "timings_s"}
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from snapuq.baselines.kerasutil import block_outputs, logits_model
from snapuq.errors import SnapuqError
from snapuq.io import write_text
from snapuq.nn.backbones import build_backbone
from snapuq.nn.recipe import fit_backbone_resumable
from snapuq.nn.saved import load_model_dir, model_dir_config, predict_batched, release
from snapuq.nn.training import _Bar
from snapuq.options import TrainOptions

ENSEMBLE_MEMBERS = 5
N_EXITS = 2
MAX_EPOCHS = 12


def baselines_dir(out_dir: str | Path) -> Path:
    """D/baselines (also accepts the baselines folder itself)."""
    p = Path(out_dir)
    return p if p.name == "baselines" else p / "baselines"


def _exit_head(h, n_classes: int, i: int):
    """Conv 3x3 + ReLU -> global average -> Dense on a 2-D map, the 1-D analogue on (T, C), a Dense + ReLU on
    a feature vector."""
    import keras

    L = keras.layers
    if len(h.shape) == 4:
        h = L.Conv2D(32, 3, padding="same", activation="relu", name=f"exit{i}_conv")(h)
        h = L.GlobalAveragePooling2D(name=f"exit{i}_gap")(h)
    elif len(h.shape) == 3:
        h = L.Conv1D(32, 3, padding="same", activation="relu", name=f"exit{i}_conv")(h)
        h = L.GlobalAveragePooling1D(name=f"exit{i}_gap")(h)
    else:
        h = L.Dense(32, activation="relu", name=f"exit{i}_fc")(h)
    return L.Dense(n_classes, name=f"exit{i}")(h)


def user_backbone_factory(out_dir: str | Path, config: dict):
    """build(name, shape, n_classes) for a model directory of your own model (config["backbone"] == "user"): a
    fresh copy (same architecture, new random weights) of DIR/backbone.keras."""
    import keras

    p = Path(out_dir) / config.get("backbone_file", "backbone.keras")
    if not p.is_file():
        raise SnapuqError(f"{p}: missing (the logits model the baselines copy)")
    ref = keras.saving.load_model(p, compile=False)

    def build(name, shape, n_classes):
        m = keras.models.clone_model(ref)
        for lay in m.layers:  # the saved logits model is the frozen one the SNAP heads trained on
            lay.trainable = True
        return m

    return build


def build_early_exit(backbone_model, backbone: str | None, n_classes: int, n_exits: int = N_EXITS):
    """Attach exits (Conv2D 3x3 + ReLU -> GAP -> Dense(n_classes); Conv1D on (T, C) maps, Dense on vectors)
    after intermediate blocks of a backbone:
    the blocks after the first one (a single conv is too weak a classifier) and before the last one (which
    already feeds the final classifier). Returns (model with outputs {"exit0", ..., "final"}, block names)."""
    import keras


    base = logits_model(backbone_model)
    blocks = block_outputs(base, backbone)
    mid = blocks[1:-1] if len(blocks) >= 3 else blocks[:-1]
    mid = mid[:n_exits]
    if not mid:
        raise SnapuqError(f"backbone '{base.name}' has no intermediate block to attach an early exit to")
    outs = {}
    for i, name in enumerate(mid):
        outs[f"exit{i}"] = _exit_head(base.get_layer(name).output, n_classes, i)
    outs["final"] = base.output
    return keras.Model(base.input, outs, name="early_exit"), mid


def train_baselines(
    ds,
    config: dict,
    out_dir: str | Path,
    seed: int = 0,
    epochs: int = 10,
    members: int = ENSEMBLE_MEMBERS,
    n_exits: int = N_EXITS,
    batch_size: int = 64,
    lr: float = 2e-3,
    progress: bool = True,
    max_epochs: int | None = MAX_EPOCHS,
    recipe=None,
    resume: bool = False,
    ensemble_from: list[Path] | None = None,
) -> dict:
    """Train the deep ensemble and the early-exit model for `ds` (a snapuq.data.Dataset) with the backbone
    named in config["backbone"]; write them into D/baselines/ and return the baselines.json dict.

    All models train side by side in one Keras graph (one fit, the sum of their cross-entropies; they share
    no weights), which amortizes the per-step overhead; ensemble diversity comes from each member's own
    random initialization (seed*1000 + 101 + k). `epochs` is capped at `max_epochs` (default 12: the
    baselines converge on the small sets well before the SNAP backbone's schedule ends; None: no cap).
    With `recipe` (the backbone's TrainOptions) they train by the backbone's own recipe instead, uncapped
    (optimizer, schedule, augmentation, batch size; `recipe.baseline_epochs` or its epochs), checkpointed
    every epoch in D/checkpoint/baselines and continued there with `resume`. `ensemble_from`: model
    directories of the same backbone and recipe trained with other seeds (`snapuq reproduce
    --ensemble-from-seeds`), whose backbones are the deep ensemble instead of M members trained here; only the
    early-exit model trains then."""
    import keras

    build = user_backbone_factory(out_dir, config) if config.get("backbone") == "user" else build_backbone
    sources = _ensemble_sources(ensemble_from, config) if ensemble_from else []
    members = 0 if sources else members
    if members < 1 and not sources:
        raise SnapuqError(f"deep ensemble needs at least one member, got {members}")
    if epochs < 1:
        raise SnapuqError(f"epochs must be >= 1, got {epochs}")
    if recipe is not None:
        recipe = baseline_recipe(recipe)
        epochs, batch_size = recipe.epochs, recipe.batch_size
    elif max_epochs:
        epochs = min(int(epochs), int(max_epochs))
    name = config.get("backbone")
    if not name:
        raise SnapuqError("config has no 'backbone'")
    shape = tuple(config.get("input_shape") or ds.input_shape)
    n_classes = int(config.get("n_classes") or ds.n_classes)
    bdir = baselines_dir(out_dir)
    bdir.mkdir(parents=True, exist_ok=True)
    x, y = np.asarray(ds.x_train, np.float32), np.asarray(ds.y_train).astype(np.int64)
    xd, yd = np.asarray(ds.x_dev, np.float32), np.asarray(ds.y_dev).astype(np.int64)
    info: dict = {"backbone": name, "epochs": int(epochs), "seed": int(seed), "timings_s": {}}

    t0 = time.perf_counter()
    seeds, nets = [], []
    for k in range(members):
        s = int(seed) * 1000 + 101 + k
        keras.utils.set_random_seed(s)
        m = logits_model(build(name, shape, n_classes))
        m.name = f"ensemble_{k}"
        seeds.append(s)
        nets.append(m)
    s_ee = int(seed) * 1000 + 999
    keras.utils.set_random_seed(s_ee)
    ee, blocks = build_early_exit(build(name, shape, n_classes), name, n_classes, n_exits)
    inp = keras.Input(shape, name="x")
    outs = {f"m{k}": m(inp) for k, m in enumerate(nets)}
    ee_out = ee(inp)
    outs.update({f"ee_{k}": v for k, v in ee_out.items()})
    joint = keras.Model(inp, outs, name="baselines")
    steps = int(np.ceil(len(x) / batch_size))
    if recipe is not None:
        ident = {"dataset": config.get("dataset"), "backbone": name, "seed": int(seed), "members": members,
                 "n_exits": n_exits, "n_train": int(len(x))}  # fmt: skip
        ident.update({"ensemble_from": [str(p) for p, _ in sources]} if sources else {})
        keras.utils.set_random_seed(int(seed) * 1000 + 7)
        info["recipe"] = recipe.to_dict()
        fit_backbone_resumable(joint, x, y, recipe, seed=int(seed) * 1000 + 7, identity=ident, resume=resume,
                               ckpt_dir=Path(out_dir) / "checkpoint" / "baselines", progress=progress,
                               output_keys=list(outs), desc="baselines")  # fmt: skip
    else:
        _fit_plain(joint, outs, x, y, epochs, batch_size, lr, seed, progress)
    info["timings_s"]["fit"] = round(time.perf_counter() - t0, 2)
    info["steps_per_epoch"] = steps

    t0 = time.perf_counter()
    dev_acc = []
    for k, m in enumerate(nets):
        dev_acc.append(float((predict_batched(m, xd).argmax(1) == yd).mean()))
        m.save(bdir / f"ensemble_{k}.keras")
    for k, (src, _) in enumerate(sources):  # one seed model in memory at a time, after the early-exit fit
        m = logits_model(load_model_dir(src, calib=False).model)
        dev_acc.append(float((predict_batched(m, xd).argmax(1) == yd).mean()))
        m.save(bdir / f"ensemble_{k}.keras")
        release(m)
        del m
    out = predict_batched(ee, xd)
    keys = list(out)
    ee_acc = {k: float((out[k].argmax(1) == yd).mean()) for k in keys}
    ee.save(bdir / "early_exit.keras")
    info["ensemble"] = {"members": len(dev_acc), "seeds": seeds, "dev_accuracy": dev_acc}
    if sources:  # the other seeds trained on part of this seed's dev split: their dev accuracy is optimistic
        info["ensemble"].update(seeds=[int(c.get("seed", 0)) for _, c in sources],
                                from_model_dirs=[str(p) for p, _ in sources])  # fmt: skip
    info["early_exit"] = {"seed": s_ee, "exits_after": blocks, "outputs": keys, "dev_accuracy": ee_acc}
    info["timings_s"]["save"] = round(time.perf_counter() - t0, 2)
    write_text(bdir / "baselines.json", json.dumps(info, indent=2))
    return info


def baseline_recipe(recipe: TrainOptions) -> TrainOptions:
    """The recipe the baselines train by, from the backbone's: its `baseline_epochs` (else its epochs)."""
    import dataclasses

    n = int(recipe.baseline_epochs or recipe.epochs)
    return dataclasses.replace(recipe, epochs=n, warmup_epochs=min(recipe.warmup_epochs, n))


# what a set's recorded build holds beside its identity: how long it took, where its files are on this machine
_BUILD_VOLATILE = ("build_s", "cache_dir", "waves")
# the recipe's fields the baselines do not train by (the SNAP heads', the backbone's distillation)
_NOT_BASELINE = ("head_epochs", "baseline_epochs", "distill_alpha", "distill_temperature")


def check_baselines_source(src: str | Path, config: dict, recipe: TrainOptions) -> dict:
    """`snapuq train --baselines-from SRC`: SRC's baselines are the ones this run would train, so they
    serve as its own: the same set and build (config.json dataset and data_meta, beside where its files
    are), backbone, input shape, classes and seed, and baselines.json's recipe equal to the one `recipe`
    gives the baselines. `config`: this run's (dataset, backbone, input_shape, n_classes, seed, data_meta).
    One-line SnapuqError naming the first difference; returns SRC's baselines.json."""
    src = Path(src)
    bdir = baselines_dir(src)
    try:
        info = json.loads((bdir / "baselines.json").read_text())
    except (OSError, ValueError) as e:
        raise SnapuqError(f"--baselines-from: {src} has no readable baselines/baselines.json ({e})") from e
    c = model_dir_config(src)
    n = int((info.get("ensemble") or {}).get("members") or 0)
    missing = [f for f in [f"ensemble_{k}.keras" for k in range(n)] + ["early_exit.keras"]
               if not (bdir / f).is_file()]  # fmt: skip
    if n < 1 or missing or info.get("ensemble", {}).get("from_model_dirs"):
        raise SnapuqError(f"--baselines-from: {bdir} is not a deep ensemble and early-exit model trained "
                          f"there ({', '.join(missing) or 'no members'} missing, or members of other seeds)")
    for key in ("dataset", "backbone", "input_shape", "n_classes", "seed"):
        if c.get(key) != config.get(key):
            raise SnapuqError(f"--baselines-from: {src} has {key} {c.get(key)!r}, this run "
                              f"{config.get(key)!r}")  # fmt: skip

    def build(meta) -> dict:
        return {k: v for k, v in (meta or {}).items() if k not in _BUILD_VOLATILE}

    have, want = build(c.get("data_meta")), build(config.get("data_meta"))
    diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
    if diff:
        raise SnapuqError(f"--baselines-from: {src} was trained on another build of {config.get('dataset')} "
                          f"(data_meta differs in: {', '.join(diff)})")
    mine = {k: v for k, v in baseline_recipe(recipe).to_dict().items() if k not in _NOT_BASELINE}
    try:
        theirs = TrainOptions.from_dict(info.get("recipe") or {}).to_dict()
    except SnapuqError as e:
        raise SnapuqError(f"--baselines-from: {bdir / 'baselines.json'} recipe: {e}") from e
    diff = sorted(k for k in mine if theirs.get(k) != mine[k])
    if diff:
        raise SnapuqError(f"--baselines-from: {src}'s baselines trained by another recipe ("
                          + ", ".join(f"{k} {theirs.get(k)!r} vs {mine[k]!r}" for k in diff) + ")")
    return info


def adopt_baselines(src: str | Path, out_dir: str | Path) -> dict:
    """Copy SRC's baselines (checked by check_baselines_source) into D/baselines/; returns the record for
    config.json: where they came from and the sha256 of each file."""
    import hashlib
    import shutil

    sdir, bdir = baselines_dir(src), baselines_dir(out_dir)
    bdir.mkdir(parents=True, exist_ok=True)
    files = sorted(p.name for p in sdir.iterdir()
                   if p.is_file() and (p.suffix == ".keras" or p.name == "baselines.json"))  # fmt: skip
    sha = {}
    for f in files:
        shutil.copy2(sdir / f, bdir / f)
        sha[f] = hashlib.sha256((bdir / f).read_bytes()).hexdigest()
    return {"from": str(Path(src)), "sha256": sha}


def _ensemble_sources(dirs: list[Path], config: dict) -> list:
    """(dir, config) of each model directory whose backbone serves as a deep-ensemble member: the same
    dataset, backbone, input shape, classes and recipe as `config` (one-line SnapuqError otherwise). Checked
    from config.json and the model file's presence only: the models themselves load one at a time when
    they are copied in, after the early-exit model has trained."""

    def same(c: dict) -> dict:  # the baselines' own epochs may differ: not the backbone's recipe
        r = c.get("recipe") or {}
        try:  # a recipe recorded before a field existed has that field's default
            r = TrainOptions.from_dict(r).to_dict()
        except SnapuqError:
            pass  # compared as recorded: the message below names the difference
        return {**c, "recipe": {**r, "baseline_epochs": None}}

    out = []
    for p in dirs:
        c = model_dir_config(p)
        for key in ("dataset", "backbone", "input_shape", "n_classes", "recipe"):
            if same(c).get(key) != same(config).get(key):
                raise SnapuqError(f"--ensemble-from: {p} has {key} {c.get(key)!r}, the model has "
                                  f"{config.get(key)!r}")  # fmt: skip
        out.append((Path(p), c))
    if len({int(c.get("seed", 0)) for _, c in out}) != len(out):
        raise SnapuqError("--ensemble-from: two of the model directories were trained with the same seed")
    return out


def _fit_plain(joint, outs, x, y, epochs: int, batch_size: int, lr: float, seed: int, progress: bool) -> None:
    """The short recipe of the small sets: Adam at a constant rate, no augmentation, one fit."""
    import keras


    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    joint.compile(optimizer=keras.optimizers.Adam(lr), loss={k: loss for k in outs})
    bar = _Bar(epochs, "baselines", not progress)
    keras.utils.set_random_seed(int(seed) * 1000 + 7)
    joint.fit(x, {k: y for k in outs}, epochs=epochs, batch_size=batch_size, verbose=0, shuffle=True,
              callbacks=[bar.callback(["loss"])])
    bar.close()


def announce_baselines(ds, per_epoch: float | None, epochs: int, log=print, capped: bool = True) -> None:
    """Say what the baseline training does and roughly how long it takes, before it starts: the measured
    backbone training time per epoch (`per_epoch` s, None: unknown) x (ensemble members + the early-exit
    model), capped epochs."""
    ep = min(int(epochs), MAX_EPOCHS) if capped else int(epochs)
    est = f"~{per_epoch * ep * (ENSEMBLE_MEMBERS + 1.5):.0f} s" if per_epoch else "unknown"
    log(
        f"snapuq train: training the baselines ({ENSEMBLE_MEMBERS}-member deep ensemble + early-exit model, "
        f"{ep} epochs on {len(ds.x_train)} inputs): estimated {est}; --no-baselines skips them"
    )
