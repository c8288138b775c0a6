"""Baselines for `snapuq eval`: the 13 uncertainty methods (methods.py) and the training of the baselines
that need their own weights (train.py: deep ensemble, early-exit ensemble)."""

from __future__ import annotations

from snapuq.baselines.methods import (
    METHODS,
    EvalContext,
    Method,
    MethodResult,
    MethodUnavailable,
    make_method,
)
from snapuq.baselines.train import baselines_dir, train_baselines

__all__ = [
    "METHODS",
    "EvalContext",
    "Method",
    "MethodResult",
    "MethodUnavailable",
    "baselines_dir",
    "make_method",
    "train_baselines",
]
