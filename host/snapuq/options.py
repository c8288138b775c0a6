"""Options as data: what a command or the API was asked to do, recorded whole in config.json.

`TrainOptions` is the backbone recipe (`recipe` in config.json), `HeadOptions` the SNAP heads (`heads`), and
`CalibOptions` the calibration fit (`calibration`). The CLI and `snapuq.Snap` both build them; a second seed
(`snapuq eval --seeds`) rebuilds them from the record, so it retrains with exactly the same recipe."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from snapuq.errors import SnapuqError

AUGMENTS = ("none", "shift", "crop-flip", "specaugment")
SCHEDULES = ("constant", "cosine")
OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class TrainOptions:
    """The backbone recipe. epochs / head_epochs: backbone and SNAP-head epochs; lr: the peak learning rate;
    schedule "cosine" decays it to 0 over the epochs after a linear warm-up of `warmup_epochs`; augment:
    "shift" (pad 2, random crop: digits-like data), "crop-flip" (pad 4 by reflection, random 32x32 crop,
    horizontal flip: natural images), "specaugment" (time / coefficient masks on MFCC inputs), "none"."""

    epochs: int = 10
    head_epochs: int | None = None  # None: the same as epochs
    batch_size: int = 64
    lr: float = 2e-3
    optimizer: str = "adam"
    momentum: float = 0.9  # sgd only (Nesterov)
    schedule: str = "constant"
    warmup_epochs: int = 0
    augment: str = "none"
    baseline_epochs: int | None = (
        None  # None: the backbone's own epochs (a weakened baseline is no comparison)
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "head_epochs", "baseline_epochs"):
            v = getattr(self, name)  # head_epochs, baseline_epochs: None = the backbone's epochs
            if (v is not None or name in ("epochs", "batch_size")) and (
                    not isinstance(v, int) or isinstance(v, bool) or v < 1):  # fmt: skip
                raise SnapuqError(f"--{name.replace('_', '-')} must be an integer >= 1, got {v!r}")
        if not isinstance(self.warmup_epochs, int) or not 0 <= self.warmup_epochs < max(self.epochs, 1) + 1:
            raise SnapuqError(f"--warmup-epochs must be in [0, epochs], got {self.warmup_epochs!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise SnapuqError(f"--lr must be a finite number > 0, got {self.lr!r}")
        if not (isinstance(self.momentum, (int, float)) and 0.0 <= self.momentum < 1.0):
            raise SnapuqError(f"--momentum must be in [0, 1), got {self.momentum!r}")
        for name, allowed in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES), ("augment", AUGMENTS)):
            if getattr(self, name) not in allowed:
                raise SnapuqError(
                    f"--{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )

    @property
    def heads(self) -> int:
        return self.head_epochs or self.epochs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "config.json recipe") -> TrainOptions:
        if not isinstance(d, dict):
            raise SnapuqError(f"{where}: expected an object, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SnapuqError(f"{where}: unknown recipe keys {', '.join(unknown)}")
        try:
            return cls(**d)
        except TypeError as e:
            raise SnapuqError(f"{where}: {e}") from None

    @classmethod
    def for_dataset(cls, dataset: str | None) -> TrainOptions:
        return cls(**RECIPES.get(dataset or "", {}))

    def lr_at(self, epoch: int) -> float:
        """The learning rate of 0-based `epoch` (a pure function: resuming reproduces it)."""
        if self.schedule == "constant":
            return float(self.lr)
        if epoch < self.warmup_epochs:
            return float(self.lr) * (epoch + 1) / (self.warmup_epochs + 1)
        span = max(1, self.epochs - self.warmup_epochs)
        t = (epoch - self.warmup_epochs) / span
        return float(self.lr) * 0.5 * (1.0 + math.cos(math.pi * t))


# The project's recipes for its built-in sets (measured: docs/RESULTS.md). Sets not listed train with the
# plain defaults (Adam 2e-3, constant, no augmentation), which reproduce the shipped digits / keywords models.
RECIPES: dict[str, dict[str, Any]] = {
    "digits": {"epochs": 25, "baseline_epochs": 12},
    "keywords": {"epochs": 8},
    "speech_commands": {"epochs": 15},
    "keywords12": {"epochs": 10, "head_epochs": 8, "batch_size": 64, "lr": 3e-3, "schedule": "cosine",
                   "warmup_epochs": 1},
    "mnist": {"epochs": 15, "head_epochs": 8, "batch_size": 128, "lr": 2e-3, "schedule": "cosine",
              "warmup_epochs": 1, "augment": "shift"},
    "fashion_mnist": {"epochs": 15, "head_epochs": 8, "batch_size": 128, "lr": 2e-3, "schedule": "cosine",
                      "warmup_epochs": 1, "augment": "shift"},
    # MLPerf Tiny ResNet-8: SGD + Nesterov, cosine with warm-up, pad-crop-flip
    "cifar10": {"epochs": 64, "head_epochs": 12, "batch_size": 128, "lr": 0.1, "optimizer": "sgd",
                "schedule": "cosine", "warmup_epochs": 2, "augment": "crop-flip"},
}  # fmt: skip


@dataclass(frozen=True)
class CalibOptions:
    """The calibration fit (snapuq.uq.calibration.calibrate): alpha of the confidence term m(x), the hinge
    quantile (None: the stepped search), the default variant of calib.json, the input tap, and the target
    alarm rate on clean inputs (None / 0: the hinge alone)."""

    alpha: float = 1.0
    quantile: float | None = None
    variant: str = "best"
    input_tap: bool = True
    alarm_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> CalibOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (d or {}).items() if k in known})
