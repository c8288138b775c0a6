"""Integer Uncert importance and top-K — the specification `firmware/core/snapuq_tokens.c` implements.

Bit-exact contract (all integer arithmetic, floor division / floor shifts of non-negative values):

1. Logits are int8 codes q with real value scale·(q − zp); the scale is passed as
   scale_q16 = round(scale·2¹⁶), 1 ≤ scale_q16 < 2²³; −128 ≤ zp ≤ 127.
2. Evidence LUT (256 entries, index q + 128), Q16: x = (q − zp)·scale_q16;
   softplus(x) = max(x, 0) + g(|x|), g(u) = log(1 + e^(−u)) from the 129-entry table G (step 1/8,
   u ∈ [0, 16], Q16, `G_TABLE`) with linear interpolation:
   i = u >> 13, f = u & 8191, g = G[i] − ((G[i] − G[i+1])·f >> 13); g = 0 for u ≥ 16.
3. Per token i and step t: A = Σ_c lut[q_{t,i,c} + 128] + (C << 16) (Dirichlet Σα in Q16);
   U_t = (C << 32) // A (Q16, ≤ 65536).
4. ΣU = Σ_t U_t, ΣU² = Σ_t U_t², R = isqrt(T·ΣU² − (ΣU)²) (= T·std_t U in Q16, population std);
   score = (w_mean_q16·ΣU + λ_q16·R) // (T << 16)  (Q16: w_mean·mean_t U + λ·std_t U).
5. Top-K: indices of the K largest scores, by descending score, ties to the lower index.

Layout of the logits: int8 [T][N][C], C contiguous.
"""

from __future__ import annotations

import math

import numpy as np

from snapuq.errors import SnapuqError

Q = 16
ONE = 1 << Q
G_STEP_SHIFT = 13  # table step 2^13 / 2^16 = 1/8
G_LEN = 129  # u = 0 .. 16 in steps of 1/8
MAX_T = 255
SCALE_Q16_MAX = 1 << 23


def _g_table() -> list[int]:
    return [int(round(math.log1p(math.exp(-k / 8.0)) * ONE)) for k in range(G_LEN)]


G_TABLE: list[int] = _g_table()


def c_g_table() -> str:
    """The G table as a C initializer (what snapuq_tokens.c holds)."""
    rows = [", ".join(f"{v}u" for v in G_TABLE[i:i + 8]) for i in range(0, G_LEN, 8)]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


def to_q16(v: float) -> int:
    return int(round(float(v) * ONE))


def softplus_q16(x: int) -> int:
    u = -x if x < 0 else x
    if u >= (G_LEN - 1) << G_STEP_SHIFT:
        g = 0
    else:
        i = u >> G_STEP_SHIFT
        f = u & ((1 << G_STEP_SHIFT) - 1)
        g = G_TABLE[i] - (((G_TABLE[i] - G_TABLE[i + 1]) * f) >> G_STEP_SHIFT)
    return (x if x > 0 else 0) + g


def check_quant(scale_q16: int, zero_point: int) -> None:
    if not 1 <= scale_q16 < SCALE_Q16_MAX:
        raise SnapuqError(f"logit scale_q16 {scale_q16} outside 1..{SCALE_Q16_MAX - 1} (scale 2^-16..128)")
    if not -128 <= zero_point <= 127:
        raise SnapuqError(f"logit zero point {zero_point} outside -128..127")


def evidence_lut(scale_q16: int, zero_point: int) -> np.ndarray:
    """(256,) uint32 evidence softplus(scale·(q − zp)) in Q16, index q + 128."""
    check_quant(scale_q16, zero_point)
    return np.array([softplus_q16((q - zero_point) * scale_q16) for q in range(-128, 128)], np.uint32)


def importance_int(logits_q: np.ndarray, scale_q16: int, zero_point: int, mean_w_q16: int = ONE,
                   std_w_q16: int = 58982, return_u: bool = False):
    """int8 logits (T, N, C) -> (N,) uint32 Q16 scores (and the (T, N) Q16 U trajectory).

    Defaults: w_mean = 1.0, λ = 0.9 (58982 = round(0.9·2¹⁶))."""
    q = np.asarray(logits_q)
    if q.dtype != np.int8 or q.ndim != 3:
        raise SnapuqError(f"logits must be int8 (T, N, C), got {q.dtype} {q.shape}")
    T, N, C = q.shape
    if not 1 <= T <= MAX_T or N < 1 or C < 2:
        raise SnapuqError(f"need 1 <= T <= {MAX_T}, N >= 1, C >= 2; got T={T} N={N} C={C}")
    if not 0 <= mean_w_q16 <= 2 * ONE or not 0 <= std_w_q16 <= 2 * ONE:
        raise SnapuqError("weights must be in 0..2 (Q16 0..131072)")
    lut = evidence_lut(scale_q16, zero_point).astype(object)  # python ints: exact
    ev = lut[q.astype(np.int64) + 128]  # (T, N, C)
    a = ev.sum(axis=2) + (C << Q)  # (T, N)
    u = (C << 32) // a
    su = u.sum(axis=0)
    su2 = (u * u).sum(axis=0)
    scores = np.empty(N, np.uint32)
    for i in range(N):
        r = math.isqrt(int(T * su2[i] - su[i] * su[i]))
        scores[i] = (mean_w_q16 * int(su[i]) + std_w_q16 * r) // (T << Q)
    if return_u:
        return scores, u.astype(np.uint32)
    return scores


def topk_int(scores: np.ndarray, k: int) -> np.ndarray:
    """(N,) scores -> (K,) int indices: descending score, ties to the lower index."""
    s = np.asarray(scores).astype(np.int64)
    if s.ndim != 1 or not 1 <= k <= len(s):
        raise SnapuqError(f"need (N,) scores and 1 <= K <= N, got shape {s.shape}, K={k}")
    return np.argsort(-s, kind="stable")[:k].astype(np.int64)


def quantize_logits(logits: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Per-tensor asymmetric int8 quantization of float logits: (q int8, scale_q16, zero point)."""
    x = np.asarray(logits, np.float64)
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = max((hi - lo) / 255.0, 1.0 / ONE)
    scale_q16 = min(max(to_q16(scale), 1), SCALE_Q16_MAX - 1)
    scale = scale_q16 / ONE
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    q = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
    return q, scale_q16, zp
