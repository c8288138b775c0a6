"""Training-free token uncertainty (Uncert).

For token i at time step t the model's head gives logits l_{t,i} ∈ R^C. Evidence e = softplus(l),
Dirichlet α = e + 1, total evidence S = Σ_c α_c, uncertainty U = C / S ∈ (0, 1]. The trajectory
{U_t}_{t=1..T} is summarized by its mean and (population) standard deviation, and the importance is
S_i = w_mean · mean_t U + λ · std_t U  (paper: w_mean = 1, λ = 0.9; mean-only: λ = 0; std-only: w_mean = 0).
High importance = keep.
"""

from __future__ import annotations

import numpy as np

from snapuq.errors import SnapuqError

LAMBDA_DEFAULT = 0.9


def softplus(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def dirichlet_uncertainty(logits: np.ndarray) -> np.ndarray:
    """U = C / Σ(softplus(logits) + 1) over the last axis (classes)."""
    logits = np.asarray(logits, np.float64)
    if logits.ndim < 1 or logits.shape[-1] < 2:
        raise SnapuqError(f"logits need a class axis with >= 2 classes, got shape {logits.shape}")
    c = logits.shape[-1]
    alpha = softplus(logits) + 1.0
    return c / alpha.sum(axis=-1)


def trajectory(token_logits: np.ndarray) -> np.ndarray:
    """(B, T, N, C) per-token per-step logits -> (B, T, N) uncertainty trajectory."""
    if np.asarray(token_logits).ndim != 4:
        raise SnapuqError(f"token logits must be (B, T, N, C), got shape {np.shape(token_logits)}")
    return dirichlet_uncertainty(token_logits)


def importance(token_logits: np.ndarray, lam: float = LAMBDA_DEFAULT, w_mean: float = 1.0) -> np.ndarray:
    """(B, T, N, C) logits -> (B, N) importance S_i = w_mean·mean_t U + λ·std_t U."""
    u = trajectory(token_logits)
    return w_mean * u.mean(axis=1) + lam * u.std(axis=1)
