"""Token reduction before attention: top-K pruning, merging into anchors, and the selection criteria.

Token states are (B, T, N, D) float arrays (the analog residual stream entering a block). A
reduction returns new states of the same shape and a keep mask (B, N) with exactly K ones per
row; the model then treats masked tokens as removed (no spikes, not attended to, not pooled —
see `model.forward`). Selection is deterministic: descending score, ties to the lower index.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.tokens import fixed
from snapuq.tokens.model import lif_numpy, token_logits
from snapuq.tokens.uncertainty import LAMBDA_DEFAULT, importance

CRITERIA = ("uncert", "random", "magnitude", "spikes", "similarity")
ABLATION = ("uncert_mean", "uncert_std", "uncert")
UNCERT = ("uncert", "uncert_mean", "uncert_std", "uncert_int8", "uncert_inverse")  # from the token logits
MODES = ("prune", "merge")


def keep_count(n: int, rho: float) -> int:
    """K = ceil(ρ·N), at least 1."""
    if not 0.0 < rho <= 1.0:
        raise SnapuqError(f"keep ratio must be in (0, 1], got {rho}")
    return max(1, min(n, math.ceil(rho * n - 1e-9)))


def topk_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """(B, N) scores -> (B, K) indices of the K highest, by descending score then ascending index."""
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise SnapuqError(f"scores must be (B, N), got shape {scores.shape}")
    if not 1 <= k <= scores.shape[1]:
        raise SnapuqError(f"K={k} outside 1..{scores.shape[1]}")
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def keep_mask(idx: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros((idx.shape[0], n), np.float32)
    np.put_along_axis(m, idx, 1.0, axis=1)
    return m


def _check(z: np.ndarray) -> None:
    if np.asarray(z).ndim != 4:
        raise SnapuqError(f"token states must be (B, T, N, D), got shape {np.shape(z)}")


def prune(z: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep tokens `idx` (B, K); dropped tokens are zeroed and masked out."""
    _check(z)
    m = keep_mask(idx, z.shape[2])
    return z * m[:, None, :, None], m


def gather(z: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Physically remove the dropped tokens: (B, T, N, D) -> (B, T, K, D), kept tokens in `idx` order."""
    _check(z)
    return np.take_along_axis(z, idx[:, None, :, None], axis=2)


def _cos_matrix(f: np.ndarray) -> np.ndarray:
    """(B, N, D) -> (B, N, N) cosine similarities."""
    nrm = np.linalg.norm(f, axis=-1, keepdims=True)
    g = f / np.maximum(nrm, 1e-12)
    return g @ np.swapaxes(g, 1, 2)


def merge(z: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge every dropped token into its most similar kept anchor (cosine similarity of the
    time-averaged states); an anchor becomes the per-step mean of itself and the tokens merged
    into it. Kept tokens without merged partners are unchanged. Returns (states, keep mask)."""
    _check(z)
    B, T, N, D = z.shape
    m = keep_mask(idx, N)
    sim = _cos_matrix(z.mean(axis=1))  # (B, N, N)
    sim = np.where(m[:, None, :] > 0, sim, -np.inf)  # candidates: kept tokens only
    anchor = sim.argmax(axis=2)  # (B, N) most similar kept token for every token
    anchor = np.where(m > 0, np.arange(N)[None, :], anchor)  # kept tokens are their own anchor
    out = np.zeros_like(z)
    count = np.zeros((B, N), np.float64)
    for b in range(B):
        np.add.at(out[b], (slice(None), anchor[b]), z[b])  # out[b][:, anchor[b][i]] += z[b][:, i]
        np.add.at(count[b], anchor[b], 1.0)
    out = out / np.maximum(count, 1.0)[:, None, :, None].astype(z.dtype)
    return (out * m[:, None, :, None]).astype(z.dtype), m


def uncert_scores(name: str, logits: np.ndarray, lam: float = LAMBDA_DEFAULT) -> np.ndarray:
    """Per-token, per-step logits (B, T, N, C) -> (B, N) Uncert importance: `uncert` mean_t U + λ·std_t U,
    `uncert_mean` the mean only, `uncert_std` the std only, `uncert_int8` the device path (per-sample int8
    quantization of the logits, integer importance: `fixed.importance_int`), `uncert_inverse` minus `uncert`
    (a diagnostic: keep the *least* uncertain tokens)."""
    if name in ("uncert", "uncert_inverse"):
        s = importance(logits, lam=lam)
        return -s if name == "uncert_inverse" else s
    if name == "uncert_mean":
        return importance(logits, lam=0.0)
    if name == "uncert_std":
        return importance(logits, lam=1.0, w_mean=0.0)
    if name != "uncert_int8":
        raise SnapuqError(f"unknown Uncert criterion '{name}' (known: {', '.join(UNCERT)})")
    out = np.zeros((logits.shape[0], logits.shape[2]), np.float64)
    for b in range(logits.shape[0]):
        q, sc, zp = fixed.quantize_logits(logits[b])
        out[b] = fixed.importance_int(q, sc, zp, fixed.ONE, fixed.to_q16(lam))
    return out


def criterion_scores(name: str, z: np.ndarray, model=None, rng: np.random.Generator | None = None,
                     lam: float = LAMBDA_DEFAULT) -> np.ndarray:
    """(B, T, N, D) token states -> (B, N) scores, higher = keep.

    uncert: S_i = mean_t U + λ·std_t U from the model head per token and step (its variants: see
    `uncert_scores`); random: uniform; magnitude: mean_t ‖z_{t,i}‖₂;
    spikes: spike count of the block's input neurons; similarity: −mean cosine similarity to the
    other tokens (keep the least redundant)."""
    _check(z)

    if name in UNCERT:
        if model is None:
            raise SnapuqError("the uncert criterion needs the model (its head)")
        return uncert_scores(name, token_logits(model, z), lam)
    if name == "random":
        rng = rng or np.random.default_rng(0)
        return rng.random(z.shape[0:1] + z.shape[2:3])
    if name == "magnitude":
        return np.linalg.norm(z, axis=-1).mean(axis=1)
    if name == "spikes":
        if model is None:
            raise SnapuqError("the spikes criterion needs the model (its neuron parameters)")
        cfg = model.cfg
        return lif_numpy(np.asarray(z, np.float32), cfg.tau, cfg.v_th).sum(axis=(1, 3))
    if name == "similarity":
        sim = _cos_matrix(z.mean(axis=1))
        n = z.shape[2]
        return -(sim.sum(axis=2) - np.diagonal(sim, axis1=1, axis2=2)) / max(1, n - 1)
    raise SnapuqError(f"unknown criterion '{name}' (known: {', '.join(CRITERIA + UNCERT[1:])})")


def make_reducer(criterion: str, mode: str, rho: float, seed: int = 0,
                 lam: float = LAMBDA_DEFAULT) -> Callable:
    """A reducer for `model.forward`: scores tokens by `criterion`, keeps the top K = ceil(ρN)."""
    if mode not in MODES:
        raise SnapuqError(f"unknown reduction mode '{mode}' (known: {', '.join(MODES)})")
    rng = np.random.default_rng(seed)

    def reducer(z: np.ndarray, model) -> tuple[np.ndarray, np.ndarray]:
        k = keep_count(z.shape[2], rho)
        idx = topk_indices(criterion_scores(criterion, z, model, rng, lam), k)
        return prune(z, idx) if mode == "prune" else merge(z, idx)

    return reducer
