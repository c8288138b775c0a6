"""Training the SNAP heads on a backbone (the frozen recipe's phases) and the SNAP-head part of
config.json. The command (`snapuq train`) and `snapuq.Snap` both call these."""

from __future__ import annotations

import math

import numpy as np

from snapuq.data.user import MAX_ABS_INPUT
from snapuq.errors import SnapuqError
from snapuq.options import HeadOptions


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

    from snapuq.nn import heads as snap

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


def head_config(opts: HeadOptions, variant: str, taps: list[dict], epochs: int, n_qat: int) -> dict:
    """The SNAP-head part of config.json (the keys `export`, `eval` and the scorer read)."""
    return {"taps": taps, **opts.config(), "qat_epochs": int(n_qat), "variant": variant,
            "epochs": int(epochs)}


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
