"""Synaptic operations (SOPs) counted from the spikes of a forward pass.

A spike arriving at a layer with fan-out F costs F accumulate operations (one add per synapse);
silent neurons cost nothing. Per block of the spiking transformer:

- Q/K/V projections: nnz(s) · 3D
- spiking attention Q·(Kᵀ·V), per head h of width d_h: Kᵀ·V costs Σ_i nnz(k_{i,h})·nnz(v_{i,h})
  (an add for every pair of co-active key/value spikes of a token), and Q·(KᵀV) costs
  nnz(q_h)·d_h (each query spike adds one row of the d_h×d_h matrix)
- output projection: nnz(a) · D;  MLP: nnz(s2) · D·r + nnz(h) · D
- readout: nnz(readout spikes) · C

The analog patch embedding is counted separately as multiply-accumulates (MACs), as is usual for
spiking transformers with direct encoding. Dropped tokens emit no spikes, so they cost nothing.
All counts are per sample (arrays of shape (B,)).
"""

from __future__ import annotations

import numpy as np

from snapuq.errors import SnapuqError


def _nnz(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s)
    if s.ndim < 2:
        raise SnapuqError(f"spike tensor must have a batch axis, got shape {s.shape}")
    if s.size and not np.all((s == 0) | (s == 1)):
        raise SnapuqError("spike tensors must be binary (0/1)")
    return s.reshape(s.shape[0], -1).sum(axis=1).astype(np.int64)


def dense_sops(spikes: np.ndarray, fan_out: int) -> np.ndarray:
    """SOPs of a fully connected layer driven by `spikes` (B, ...): nnz · fan_out."""
    return _nnz(spikes) * int(fan_out)


def attention_sops(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int) -> np.ndarray:
    """SOPs of spiking attention Q·(Kᵀ·V) for spike tensors (B, T, N, D) split into `heads`."""
    q, k, v = (np.asarray(a) for a in (q, k, v))
    if q.shape != k.shape or k.shape != v.shape or q.ndim != 4:
        raise SnapuqError(f"q, k, v must be equal (B, T, N, D) shapes, got {q.shape}, {k.shape}, {v.shape}")
    B, T, N, D = q.shape
    if D % heads:
        raise SnapuqError(f"D={D} not divisible by heads={heads}")
    dh = D // heads
    for a in (q, k, v):
        _nnz(a)  # binary check
    kh = k.reshape(B, T, N, heads, dh).sum(axis=-1).astype(np.int64)
    vh = v.reshape(B, T, N, heads, dh).sum(axis=-1).astype(np.int64)
    kv = (kh * vh).reshape(B, -1).sum(axis=1)
    return kv + _nnz(q) * dh


def block_sops(rec: dict, dim: int, heads: int, mlp_ratio: int) -> np.ndarray:
    """SOPs of one spiking transformer block from its recorded spikes (see `model.forward`)."""
    return (
        dense_sops(rec["s"], 3 * dim)
        + attention_sops(rec["q"], rec["k"], rec["v"], heads)
        + dense_sops(rec["a"], dim)
        + dense_sops(rec["s2"], dim * mlp_ratio)
        + dense_sops(rec["h"], dim)
    )


def model_sops(out: dict, cfg) -> dict:
    """Per-sample SOPs of a recorded forward pass: {"blocks": [(B,)...], "readout": (B,),
    "total": (B,), "embed_macs": int}."""
    if "spikes" not in out:
        raise SnapuqError("forward pass was not recorded (use record=True)")
    blocks = [block_sops(r, cfg.dim, cfg.heads, cfg.mlp_ratio) for r in out["spikes"]]
    readout = dense_sops(out["readout_spikes"], cfg.n_classes)
    h, w, c = cfg.input_shape
    embed_macs = cfg.n_tokens * cfg.patch * cfg.patch * c * cfg.dim
    return {"blocks": blocks, "readout": readout, "total": sum(blocks) + readout, "embed_macs": embed_macs}
