"""A training recipe as data, and a backbone fit that checkpoints every epoch and resumes where it stopped.

    opts = TrainOptions.for_dataset("cifar10")          # the project's recipe for a built-in set
    opts = dataclasses.replace(opts, epochs=80)         # what the CLI overrides
    fit_backbone_resumable(backbone, x, y, opts, seed=0, ckpt_dir=stage / "checkpoint", resume=True)

`TrainOptions` is recorded whole in config.json (`recipe`), so a second seed retrains identically. The fit is
deterministic per (seed, epoch): epoch e shuffles and augments with `numpy.random.default_rng([seed, e])`, and
the learning rate is a pure function of the epoch, so a run resumed from its checkpoint after epoch e sees the
same batches and the same schedule as one that never stopped. Augmentation lives in the data path, never in
the model: the exported int8 graph is the plain backbone.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.data.augment_audio import envelope_warp, spec_augment
from snapuq.errors import SnapuqError
from snapuq.io import atomic_open, write_text
from snapuq.nn.distill import distill_loss, distill_targets, label_accuracy
from snapuq.nn.training import _Bar
from snapuq.options import TrainOptions

CHECKPOINT_FORMAT = 1
_EPOCH_FILE = re.compile(r"(backbone\.e\d+\.weights\.h5|optimizer\.e\d+\.npz|swa\.e\d+\.npz)")


def augment_batch(x: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """One augmented copy of a float NHWC batch (or x itself for "none" / non-image inputs); "specaugment":
    time and coefficient masks on MFCC batches (snapuq.data.augment_audio.spec_augment); "warp": a random
    spectral-envelope warp of MFCC batches (augment_audio.envelope_warp)."""
    if kind == "specaugment" and x.ndim == 4:
        return spec_augment(x, rng)
    if kind == "warp" and x.ndim == 4:
        return envelope_warp(x, rng)
    if kind in ("none", "specaugment", "warp") or x.ndim != 4:
        return x
    pad = 4 if kind == "crop-flip" else 2
    n, h, w, _ = x.shape
    mode = "reflect" if kind == "crop-flip" else "constant"
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode=mode)
    dy = rng.integers(0, 2 * pad + 1, n)
    dx = rng.integers(0, 2 * pad + 1, n)
    rows = dy[:, None] + np.arange(h)[None, :]  # (n, h)
    cols = dx[:, None] + np.arange(w)[None, :]  # (n, w)
    out = xp[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    if kind == "crop-flip":
        flip = rng.random(n) < 0.5
        out[flip] = out[flip, :, ::-1]
    return out.astype(np.float32, copy=False)


def _epoch_batches(x: np.ndarray, y: np.ndarray, opts: TrainOptions, seed: int, epoch: int,
                   output_keys: list[str] | None = None):  # fmt: skip
    """A keras PyDataset of epoch `epoch`'s batches: its own permutation and augmentation draws."""
    import keras

    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch)])
    perm = rng.permutation(len(x))
    bs = opts.batch_size
    n_batches = int(math.ceil(len(x) / bs))
    seeds = rng.integers(0, 2**63 - 1, n_batches)

    class Batches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return n_batches

        def __getitem__(self, i: int):
            idx = perm[i * bs : (i + 1) * bs]
            xb = augment_batch(np.asarray(x[idx], np.float32), opts.augment, np.random.default_rng(seeds[i]))
            yb = np.asarray(y[idx])
            return xb, ({k: yb for k in output_keys} if output_keys else yb)

    return Batches()


def make_optimizer(opts: TrainOptions):
    import keras

    if opts.optimizer == "sgd":
        return keras.optimizers.SGD(opts.lr_at(0), momentum=opts.momentum, nesterov=True)
    return keras.optimizers.Adam(opts.lr_at(0))


class Checkpoint:
    """DIR/state.json (epoch done, the recipe and identity, per-epoch history) and the two files of that
    epoch it names (`files`: backbone.e{N}.weights.h5, optimizer.e{N}.npz). An epoch's files are written
    first under their own names, state.json is replaced atomically last (the commit point), and only then
    are older epochs' files removed: a kill at any moment leaves a state.json whose files are there and of
    its epoch, so a resumed run ends with the weights of an unbroken one."""

    LEGACY = ("backbone.weights.h5", "optimizer.npz")  # the names before they carried their epoch

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.state = self.root / "state.json"
        self.weights, self.optimizer = (self.root / n for n in self.LEGACY)

    def exists(self) -> bool:
        return self.state.is_file()

    def read(self) -> dict[str, Any]:
        try:
            st = json.loads(self.state.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SnapuqError(f"{self.state}: unreadable checkpoint ({e}); remove it to start over") from None
        if not isinstance(st, dict) or st.get("format") != CHECKPOINT_FORMAT:
            raise SnapuqError(f"{self.state}: not a snapuq checkpoint (format {CHECKPOINT_FORMAT})")
        ep = st.get("epoch")
        if not isinstance(ep, int) or isinstance(ep, bool) or ep < 0:
            raise SnapuqError(f"{self.state}: epoch {ep!r} is not a count of finished epochs")
        names = st.get("files", list(self.LEGACY))
        if not (isinstance(names, list) and len(names) == 2
                and all(isinstance(n, str) and n and Path(n).name == n for n in names)):  # fmt: skip
            raise SnapuqError(f"{self.state}: files {names!r} is not [weights, optimizer] of this folder")
        self.weights, self.optimizer = (self.root / n for n in names)
        swa = st.get("swa_file")
        if swa is not None and not (isinstance(swa, str) and swa and Path(swa).name == swa):
            raise SnapuqError(f"{self.state}: swa_file {swa!r} is not a file of this folder")
        for p in (self.weights, self.optimizer) + ((self.root / swa,) if swa else ()):
            if not p.is_file():
                raise SnapuqError(f"{p}: missing beside {self.state.name}; remove {self.root} to start over")
        return st

    def read_swa(self, st: dict[str, Any]) -> tuple[list[np.ndarray], int] | None:
        """The running sum of the averaged weights and its count, as of the state `st` (None: none yet)."""
        if not st.get("swa_file"):
            return None
        with np.load(self.root / st["swa_file"]) as z:
            n = len(z.files) - 1
            return [np.asarray(z[f"arr_{i}"], np.float64) for i in range(n)], int(z["count"])

    def write(self, model, optimizer, state: dict[str, Any],
              swa: tuple[list[np.ndarray], int] | None = None) -> None:  # fmt: skip
        """`swa`: the running sum of the averaged weights and its count, kept with the epoch's files."""
        self.root.mkdir(parents=True, exist_ok=True)
        e = int(state["epoch"])
        w, o = self.root / f"backbone.e{e}.weights.h5", self.root / f"optimizer.e{e}.npz"
        tmp_w = self.root / ".tmp.weights.h5"
        model.save_weights(tmp_w)
        os.replace(tmp_w, w)
        with atomic_open(o, "wb") as f:
            np.savez(f, *[np.asarray(v) for v in optimizer.variables])
        keep = [w, o]
        extra: dict[str, Any] = {}
        if swa is not None:
            a = self.root / f"swa.e{e}.npz"
            with atomic_open(a, "wb") as f:
                np.savez(f, *swa[0], count=np.int64(swa[1]))
            keep.append(a)
            extra["swa_file"] = a.name
        write_text(self.state, json.dumps({"format": CHECKPOINT_FORMAT, **state, "files": [w.name, o.name],
                                           **extra}, indent=1))  # fmt: skip
        self.weights, self.optimizer = w, o
        for p in self.root.glob("*"):  # the previous epochs' files, now that state.json names these; a
            if p not in keep and self._own(p.name):  # caller's files beside them (soft targets) stay
                p.unlink(missing_ok=True)

    @classmethod
    def _own(cls, name: str) -> bool:
        """A file this class writes: an epoch's weights, optimizer or averaging sum, a legacy name or the
        temporary weights file."""
        return bool(_EPOCH_FILE.fullmatch(name)) or name in cls.LEGACY or name == ".tmp.weights.h5"

    def restore(self, model, optimizer) -> None:
        model.load_weights(self.weights)
        with np.load(self.optimizer) as z:
            arrays = [z[f"arr_{i}"] for i in range(len(z.files))]
        if len(arrays) != len(optimizer.variables):
            raise SnapuqError(
                f"{self.optimizer}: {len(arrays)} optimizer variables, "
                f"the model needs {len(optimizer.variables)}"
            )
        for v, a in zip(optimizer.variables, arrays):
            if tuple(v.shape) != a.shape:
                raise SnapuqError(
                    f"{self.optimizer}: variable {v.path} has shape {a.shape}, expected {v.shape}"
                )
            v.assign(a)


def fit_backbone_resumable(backbone, x: np.ndarray, y: np.ndarray, opts: TrainOptions, *, seed: int,
                           ckpt_dir: str | Path, identity: dict[str, Any], resume: bool = False,
                           validation_data=None, progress: bool = True, log=print,
                           output_keys: list[str] | None = None, soft: np.ndarray | None = None,
                           desc: str = "backbone", stop_after: int | None = None) -> list[dict]:  # fmt: skip
    """Cross-entropy on the logits model by `opts`, checkpointed after every epoch into `ckpt_dir`. With
    `resume` a checkpoint whose `identity` (dataset, backbone, seed, shapes) and recipe equal this run's is
    continued from its last finished epoch; a different one is refused in one line. A model with a dict of
    logits outputs (`output_keys`: several networks trained side by side) gets the sum of their
    cross-entropies. `stop_after` ends this call once that many epochs of the schedule are done (the schedule
    stays the one of `opts.epochs`; a later `resume` goes on from there). `soft`: the teachers' probabilities
    of every train clip at `opts.distill_temperature` (snapuq.nn.distill.soft_targets): the loss is then
    distill_loss(opts.distill_alpha, ...) and a resumed run must give the same teachers (put their digest in
    `identity`). Returns the history."""
    import keras

    if soft is not None:
        if output_keys or len(soft) != len(x):
            raise SnapuqError(f"distillation: {len(soft)} soft targets for {len(x)} clips of one network")
        n_classes = int(soft.shape[1])
        y = distill_targets(y, soft, n_classes)
        if validation_data is not None:
            validation_data = (validation_data[0], distill_targets(validation_data[1], None, n_classes))

    ck = Checkpoint(ckpt_dir)
    optimizer = make_optimizer(opts)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if soft is not None:
        acc = keras.metrics.MeanMetricWrapper(label_accuracy, name="accuracy")  # the history's usual key
        backbone.compile(optimizer=optimizer, loss=distill_loss(opts.distill_alpha, opts.distill_temperature),
                         metrics=[acc])  # fmt: skip
    else:
        backbone.compile(
            optimizer=optimizer,
            loss={k: ce for k in output_keys} if output_keys else ce,
            metrics=None if output_keys else ["accuracy"],
        )
    optimizer.build(backbone.trainable_variables)
    start, history, swa = 0, [], None
    total = opts.total_epochs
    if resume and ck.exists():
        st = ck.read()
        want = {"identity": identity, "recipe": opts.to_dict()}
        have = {"identity": st.get("identity"), "recipe": st.get("recipe")}
        if have != want:
            diff = [
                f"{part}.{k}: checkpoint {have[part].get(k) if isinstance(have[part], dict) else None!r}, "
                f"now {v!r}"
                for part in ("identity", "recipe")
                for k, v in want[part].items()
                if not isinstance(have[part], dict) or have[part].get(k) != v
            ]
            raise SnapuqError(f"--resume: {ck.state} is from another run ({'; '.join(diff[:3])})")
        ck.restore(backbone, optimizer)
        start, history = min(int(st["epoch"]), total), list(st.get("history", []))
        swa = ck.read_swa(st)
        log(f"snapuq train: resuming the {desc} from {ck.root} after epoch {start} of {total}")
    bar = _Bar(total, desc, not progress)
    bar.bar.update(start)
    end = total if stop_after is None else max(start, min(total, int(stop_after)))
    for epoch in range(start, end):
        optimizer.learning_rate.assign(opts.lr_at(epoch))
        h = backbone.fit(
            _epoch_batches(x, y, opts, seed, epoch, output_keys), epochs=1, verbose=0, shuffle=False,
            validation_data=validation_data,
        )  # fmt: skip
        rec = {"epoch": epoch + 1, "lr": round(opts.lr_at(epoch), 8)}
        rec.update({k: round(float(v[-1]), 5) for k, v in h.history.items()})
        history.append(rec)
        if opts.swa_epochs and epoch + 1 >= opts.epochs:  # the schedule's last epoch and every one after it
            w = [np.asarray(a, np.float64) for a in backbone.get_weights()]
            swa = (w, 1) if swa is None else ([a + b for a, b in zip(swa[0], w)], swa[1] + 1)
        ck.write(backbone, optimizer, {"epoch": epoch + 1, "identity": identity, "recipe": opts.to_dict(),
                                       "history": history}, swa=swa)  # fmt: skip
        bar.bar.set_postfix({k: f"{rec[k]:.3f}" for k in ("loss", "accuracy", "val_accuracy") if k in rec})
        bar.bar.update(1)
    bar.close()
    if opts.swa_epochs and end == total and swa is not None:
        backbone.set_weights([a / swa[1] for a in swa[0]])
        recompute_batchnorm(backbone, x, seed)
    return history


def recompute_batchnorm(model, x: np.ndarray, seed: int, batches: int = 200, batch_size: int = 256) -> None:
    """The batch-norm moving statistics of `model` recomputed for its present (averaged) weights: the running
    mean over `batches` random batches of the train inputs `x` (the first batch's statistics, then each
    batch weighted 1/(i+1)); nothing else changes. Deterministic per seed."""
    import keras

    bns = [la for la in _layers(model) if isinstance(la, keras.layers.BatchNormalization)]
    if not bns:
        return
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5A])
    keep = [la.momentum for la in bns]
    try:
        for i in range(batches):
            for la in bns:
                la.momentum = i / (i + 1)
            idx = rng.choice(len(x), min(batch_size, len(x)), replace=False)
            model(np.asarray(x[idx], np.float32), training=True)
    finally:
        for la, m in zip(bns, keep):
            la.momentum = m


def _layers(model) -> list:
    """Every layer of a model, nested models' included."""
    out = []
    for la in model.layers:
        out.extend(_layers(la) if hasattr(la, "layers") and la.layers else [la])
    return out
