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

from snapuq.errors import SnapuqError

ENSEMBLE_MEMBERS = 5
N_EXITS = 2


def baselines_dir(out_dir: str | Path) -> Path:
    """D/baselines (also accepts the baselines folder itself)."""
    p = Path(out_dir)
    return p if p.name == "baselines" else p / "baselines"


def _compile(model, lr: float, outputs: list[str] | None = None) -> None:
    import keras

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if outputs:
        model.compile(
            optimizer=keras.optimizers.Adam(lr),
            loss={k: loss for k in outputs},
            metrics={k: ["accuracy"] for k in outputs},
        )
    else:
        model.compile(optimizer=keras.optimizers.Adam(lr), loss=loss, metrics=["accuracy"])


def build_early_exit(backbone_model, backbone: str | None, n_classes: int, n_exits: int = N_EXITS):
    """Attach GAP -> Dense(n_classes) exits after the first `n_exits` blocks (never after the last one,
    which already feeds the final classifier). Returns (model, exit layer names)."""
    import keras

    from snapuq.baselines.kerasutil import block_outputs, logits_model

    base = logits_model(backbone_model)
    blocks = block_outputs(base, backbone)[:-1][:n_exits]
    if not blocks:
        raise SnapuqError(f"backbone '{base.name}' has no intermediate block to attach an early exit to")
    outs = {}
    for i, name in enumerate(blocks):
        h = base.get_layer(name).output
        h = keras.layers.GlobalAveragePooling2D(name=f"exit{i}_gap")(h)
        outs[f"exit{i}"] = keras.layers.Dense(n_classes, name=f"exit{i}")(h)
    outs["final"] = base.output
    return keras.Model(base.input, outs, name="early_exit"), blocks


def train_baselines(
    ds,
    config: dict,
    out_dir: str | Path,
    seed: int = 0,
    epochs: int = 10,
    members: int = ENSEMBLE_MEMBERS,
    n_exits: int = N_EXITS,
    batch_size: int = 64,
    lr: float = 1e-3,
    progress: bool = True,
) -> dict:
    """Train the deep ensemble and the early-exit model for `ds` (a snapuq.data.Dataset) with the backbone
    named in config["backbone"]; write them into D/baselines/ and return the baselines.json dict."""
    import keras
    from tqdm import tqdm

    from snapuq.baselines.kerasutil import logits_model, predict_batched
    from snapuq.models import build_backbone

    if members < 1:
        raise SnapuqError(f"deep ensemble needs at least one member, got {members}")
    if epochs < 1:
        raise SnapuqError(f"epochs must be >= 1, got {epochs}")
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
    bar = tqdm(total=members + 1, desc="baselines", unit="model", disable=not progress)

    seeds, dev_acc = [], []
    t0 = time.perf_counter()
    for k in range(members):
        s = int(seed) * 1000 + 101 + k
        keras.utils.set_random_seed(s)
        m = logits_model(build_backbone(name, shape, n_classes))
        _compile(m, lr)
        m.fit(x, y, epochs=epochs, batch_size=batch_size, verbose=0, shuffle=True)
        acc = float((predict_batched(m, xd).argmax(1) == yd).mean())
        m.save(bdir / f"ensemble_{k}.keras")
        seeds.append(s)
        dev_acc.append(acc)
        bar.set_postfix(member=k, dev_acc=f"{acc:.3f}")
        bar.update(1)
    info["ensemble"] = {"members": members, "seeds": seeds, "dev_accuracy": dev_acc}
    info["timings_s"]["ensemble"] = round(time.perf_counter() - t0, 2)

    t0 = time.perf_counter()
    s = int(seed) * 1000 + 999
    keras.utils.set_random_seed(s)
    ee, blocks = build_early_exit(build_backbone(name, shape, n_classes), name, n_classes, n_exits)
    keys = list(ee.output.keys())
    _compile(ee, lr, keys)
    ee.fit(x, {k: y for k in keys}, epochs=epochs, batch_size=batch_size, verbose=0, shuffle=True)
    out = predict_batched(ee, xd)
    ee_acc = {k: float((out[k].argmax(1) == yd).mean()) for k in keys}
    ee.save(bdir / "early_exit.keras")
    info["early_exit"] = {"seed": s, "exits_after": blocks, "outputs": keys, "dev_accuracy": ee_acc}
    info["timings_s"]["early_exit"] = round(time.perf_counter() - t0, 2)
    bar.update(1)
    bar.close()
    (bdir / "baselines.json").write_text(json.dumps(info, indent=2))
    return info
