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

AUGMENTS = ("none", "shift", "crop-flip", "specaugment", "warp")
SCHEDULES = ("constant", "cosine")
OPTIMIZERS = ("adam", "sgd")
NLLS = ("gauss", "student_t", "huber")  # snapuq.nn.heads.NLLS implements them
FLOORS = ("hard", "softplus")
VARIANTS = ("best", "literal")
# the largest head rank r (--rank, --cov-rank): a head's z -> h layer alone is r x r weights per tap (1 M at
# 1024, ~1 MB int8: past any board's flash), and r = 100000 asked TensorFlow for 40 GB before the first epoch
MAX_RANK = 1024


def _opt(default: Any, help: str, *, flag: str | None = None, choices: tuple[str, ...] | None = None) -> Any:
    """A field that is also a command-line option: snapuq.commands.flags reads its metadata."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "choices": choices})


def _from_dict(cls: type, d: Any, where: str) -> Any:
    """cls from a recorded object; unknown keys and bad values are one-line errors naming `where`."""
    if not isinstance(d, dict):
        raise SnapuqError(f"{where}: expected an object, got {type(d).__name__}")
    unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise SnapuqError(f"{where}: unknown keys {', '.join(unknown)}")
    try:
        return cls(**d)
    except TypeError as e:
        raise SnapuqError(f"{where}: {e}") from None


def _check(name: str, v: Any, lo: float, hi: float = math.inf, *, lo_open: bool = False,
           hi_open: bool = False, integer: bool = False) -> None:
    """A one-line error naming the flag when v is not a finite number (an integer) in the range."""
    ok = isinstance(v, int if integer else (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        if hi == math.inf:
            span = "" if lo == -math.inf else f" {'>' if lo_open else '>='} {lo:g}"
        else:
            span = f" in [{lo:g}, {hi:g}{')' if hi_open else ']'}"
        what = "an integer" if integer else "a finite number"
        raise SnapuqError(f"--{name.replace('_', '-')} must be {what}{span}, got {v!r}")


def _check_choices(opts: Any, names: tuple[str, ...]) -> None:
    for f in dataclasses.fields(opts):
        if f.name in names and getattr(opts, f.name) not in f.metadata["choices"]:
            raise SnapuqError(f"--{f.name} must be one of {', '.join(f.metadata['choices'])}, got "
                              f"{getattr(opts, f.name)!r}")  # fmt: skip


SWA_LR_FRAC = 0.1  # the averaging epochs' rate, a fraction of the peak (keywords12: docs/AUDIO.md)


@dataclass(frozen=True)
class TrainOptions:
    """The backbone recipe. epochs / head_epochs: backbone and SNAP-head epochs; lr: the peak learning rate;
    schedule "cosine" decays it to 0 over the epochs after a linear warm-up of `warmup_epochs`; augment:
    "shift" (pad 2, random crop: digits-like data), "crop-flip" (pad 4 by reflection, random 32x32 crop,
    horizontal flip: natural images), "specaugment" (time / coefficient masks on MFCC inputs), "warp" (a
    random spectral-envelope warp of MFCC inputs: vocal-tract length perturbation), "none". distill_alpha /
    distill_temperature: the loss (1 - a) * cross-entropy + a * T^2 * KL(teachers at T || model at T) when
    `snapuq train --distill-from` gives teachers (a deep ensemble: their probabilities averaged). swa_epochs:
    stochastic weight averaging after the schedule (nn.recipe.fit_backbone_resumable).
    On the command line every one defaults to the dataset's recipe (RECIPES)."""

    epochs: int = _opt(10, "backbone epochs (--model: the head epochs, 10)")
    head_epochs: int | None = _opt(None, "SNAP-head epochs (the recipe's, else --epochs)")
    batch_size: int = _opt(64, "batch size (--model: 64)")
    lr: float = _opt(2e-3, "peak learning rate")
    optimizer: str = _opt("adam", "optimizer", choices=OPTIMIZERS)
    momentum: float = _opt(0.9, "SGD (Nesterov) momentum")
    schedule: str = _opt("constant", "learning-rate schedule (cosine: decay to 0 after --warmup-epochs)",
                         choices=SCHEDULES)  # fmt: skip
    warmup_epochs: int = _opt(0, "epochs of linear learning-rate warm-up (cosine)")
    augment: str = _opt("none", "augmentation in the data path", choices=AUGMENTS)
    # None: the backbone's own epochs (a weakened baseline is no comparison)
    baseline_epochs: int | None = _opt(None, "epochs for the baseline models (default: the backbone's)")
    distill_alpha: float = _opt(0.0, "weight of the distillation loss from the teachers of --distill-from "
                                     "(0: plain cross-entropy; with --distill-from it defaults to 0.7)")
    distill_temperature: float = _opt(3.0, "temperature of the distillation loss (--distill-from)")
    swa_epochs: int = _opt(0, "stochastic weight averaging: after the schedule, this many epochs at a tenth "
                              "of the peak rate; the weights averaged over the schedule's last epoch and "
                              "these, then the batch-norm statistics recomputed (0: off)")

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "head_epochs", "baseline_epochs"):
            if name in ("epochs", "batch_size") or getattr(self, name) is not None:  # None: the backbone's
                _check(name, getattr(self, name), 1, integer=True)
        _check("warmup_epochs", self.warmup_epochs, 0, max(self.epochs, 1), integer=True)
        _check("lr", self.lr, 0, lo_open=True)
        _check("momentum", self.momentum, 0, 1, hi_open=True)
        _check("distill_alpha", self.distill_alpha, 0, 1, hi_open=True)
        _check("distill_temperature", self.distill_temperature, 0, lo_open=True)
        _check("swa_epochs", self.swa_epochs, 0, 1000, integer=True)
        _check_choices(self, ("optimizer", "schedule", "augment"))

    @property
    def heads(self) -> int:
        return self.head_epochs or self.epochs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "config.json recipe") -> TrainOptions:
        return _from_dict(cls, d, where)

    @classmethod
    def for_dataset(cls, dataset: str | None) -> TrainOptions:
        return cls(**RECIPES.get(dataset or "", {}))

    @property
    def total_epochs(self) -> int:
        """The schedule's epochs and the weight-averaging epochs after it."""
        return self.epochs + self.swa_epochs

    def lr_at(self, epoch: int) -> float:
        """The learning rate of 0-based `epoch` (a pure function: resuming reproduces it); the averaging
        epochs after the schedule (`swa_epochs`) run at SWA_LR_FRAC of the peak rate."""
        if epoch >= self.epochs:
            return float(self.lr) * SWA_LR_FRAC
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
    "keywords12": {"epochs": 16, "head_epochs": 8, "batch_size": 64, "lr": 3e-3, "schedule": "cosine",
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
class HeadOptions:
    """The SNAP heads, recorded at config.json's top level beside the taps (`frozen_backbone` = not joint):
    the projection rank, the variance floor, the likelihood and its weights, and the fake-quant share."""

    rank: int = _opt(64, f"rank r of the projection P (1..{MAX_RANK}: MAX_RANK)")
    detach: bool = _opt(True, "stop gradients into the tap targets (default on)")
    joint: bool = _opt(False, "train backbone and heads jointly (default: frozen backbone)")
    qat_frac: float = _opt(0.2, "fraction of head epochs with fake-quant")
    lambda_ss: float = _opt(1e-2, "weight of the self-supervised NLL (1e-3..1e-2)")
    lambda_reg: float = _opt(1e-4, "weight of R_var = sum |log sigma^2|")
    eps: float = _opt(1e-2, "variance floor: sigma^2 >= eps^2")
    floor: str = _opt("hard", "variance floor form (softplus is float-only: no int8 export)", choices=FLOORS)
    nll: str = _opt("gauss", "the heads' likelihood", choices=NLLS)
    cov_rank: int = _opt(0, "low-rank + diagonal covariance diag(sigma^2) + B B^T with this rank (Woodbury; "
                         "float only)")  # fmt: skip

    def __post_init__(self) -> None:
        _check("rank", self.rank, 1, MAX_RANK, integer=True)
        _check("cov_rank", self.cov_rank, 0, MAX_RANK, integer=True)
        _check("qat_frac", self.qat_frac, 0, 1)
        _check("eps", self.eps, 0, lo_open=True)
        _check("lambda_ss", self.lambda_ss, 0)
        _check("lambda_reg", self.lambda_reg, 0)
        _check_choices(self, ("floor", "nll"))

    def config(self) -> dict[str, Any]:
        """config.json's head keys (what export, eval and the scorer read)."""
        d = dataclasses.asdict(self)
        d["frozen_backbone"] = not d.pop("joint")
        return {**d, "logvar_offset": 2.0 * math.log(self.eps)}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> HeadOptions:
        """The head options a config.json records (keys it lacks: the defaults)."""
        d = {f.name: cfg[f.name] for f in dataclasses.fields(cls) if cfg.get(f.name) is not None}
        return _from_dict(cls, {**d, "joint": cfg.get("frozen_backbone") is False}, "config.json")


@dataclass(frozen=True)
class CalibOptions:
    """The calibration fit (snapuq.uq.calibration.calibrate): alpha of the confidence term m(x), the hinge
    quantile (None: the stepped search), the default variant of calib.json, the input tap, and the target
    alarm rate on clean inputs (None / 0: the hinge alone)."""

    alpha: float = _opt(1.0, "confidence term m = alpha (1 - p1) + (1 - alpha)(1 - margin); 1 = MSP")
    quantile: float | None = _opt(
        None, "first hinge quantile of the clean reference S (correct dev + train inputs) tried (default "
        "0.999, raised until the dev check passes; 1.0 = the largest)", flag="hinge-q")  # fmt: skip
    variant: str = _opt("best", "default variant", choices=VARIANTS)
    input_tap: bool = _opt(True, "add the input tap to S (row / column statistics of the input; default on)")
    alarm_rate: float | None = _opt(
        0.0, "clean false-alarm rate per input the hinge is set for, e.g. 1e-6 (below 1/n of the clean "
        "reference the tail of its S is extrapolated); default 0: the hinge quantile alone")  # fmt: skip

    def __post_init__(self) -> None:
        _check("alpha", self.alpha, 0, 1)
        if self.quantile is not None:
            _check("hinge_q", self.quantile, 0.5, 1)
        if self.alarm_rate is not None:  # 0: the hinge quantile alone
            _check("alarm_rate", self.alarm_rate, 0, 0.5, hi_open=True)
        _check_choices(self, ("variant",))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "config.json calibration") -> CalibOptions:
        known = {f.name for f in dataclasses.fields(cls)}  # keys of a later version are passed over
        return _from_dict(cls, {k: v for k, v in (d or {}).items() if k in known}, where)
