"""SNAP surprisal heads on the spiking transformer's token stream (beyond the Uncert paper).

Tap ℓ ∈ {0, 1}: a_{ℓ−1} = GAP over tokens and time steps of the residual stream entering block ℓ,
a_ℓ = GAP of the stream leaving block ℓ. A head predicts a diagonal Gaussian for a_ℓ from a
low-rank projection of a_{ℓ−1}: z = P·a_{ℓ−1} (rank r), μ = W_μ z + b_μ, σ² = softplus(W_σ z + b_σ) + ε².
Trained on the frozen backbone's training-set features with the Gaussian NLL; the surprisal is
ē_ℓ = (1/d)‖(a_ℓ − μ)/σ‖². Scores, each standardized per tap on the dev split:
`snap` = Σ_ℓ z(ē_ℓ), `snap_nll2` = Σ_ℓ |z(NLL_ℓ)| (two-sided standardized NLL, see DESIGN §4).
"""

from __future__ import annotations

import numpy as np

from snapuq.errors import SnapuqError

EPS = 1e-3


def gap_features(states: list[np.ndarray]) -> list[np.ndarray]:
    """States entering each block (+ the final one), each (B, T, N, D) -> GAP (B, D) per state."""
    return [np.asarray(s, np.float32).mean(axis=(1, 2)) for s in states]


def _build_head(d_prev: int, d: int, rank: int):
    import keras

    inp = keras.Input((d_prev,))
    z = keras.layers.Dense(rank, use_bias=False, name="P")(inp)
    mu = keras.layers.Dense(d, name="mu")(z)
    raw = keras.layers.Dense(d, name="sigma")(z)
    return keras.Model(inp, keras.layers.Concatenate()([mu, raw]))


def _nll_loss(d: int):
    import keras

    ops = keras.ops

    def loss(a, out):
        mu, raw = out[:, :d], out[:, d:]
        var = ops.softplus(raw) + EPS**2
        return ops.mean(0.5 * (ops.log(var) + ops.square(a - mu) / var), axis=-1)

    return loss


class TokenSnap:
    """Two (or more) SNAP heads over consecutive GAP'd token-stream states."""

    def __init__(self, rank: int = 16):
        self.rank = rank
        self.heads: list = []
        self.mean: dict[str, np.ndarray] = {}
        self.sd: dict[str, np.ndarray] = {}

    def fit(self, feats: list[np.ndarray], taps: list[int], epochs: int = 300, seed: int = 0) -> TokenSnap:
        import keras

        if not taps or max(taps) >= len(feats) or min(taps) < 1:
            raise SnapuqError(f"taps {taps} must index states 1..{len(feats) - 1}")
        keras.utils.set_random_seed(seed)
        self.taps = list(taps)
        self.heads = []
        for t in self.taps:
            a_prev, a = feats[t - 1], feats[t]
            # standardize inputs/targets with training statistics (kept with the head)
            m_p, s_p = a_prev.mean(0), a_prev.std(0) + 1e-6
            m_a, s_a = a.mean(0), a.std(0) + 1e-6
            head = _build_head(a_prev.shape[1], a.shape[1], self.rank)
            head.compile(optimizer=keras.optimizers.Adam(3e-3), loss=_nll_loss(a.shape[1]))
            head.fit((a_prev - m_p) / s_p, (a - m_a) / s_a, batch_size=128, epochs=epochs, verbose=0)
            self.heads.append((head, m_p, s_p, m_a, s_a))
        return self

    def per_tap(self, feats: list[np.ndarray]) -> dict[str, np.ndarray]:
        """{"ebar": (B, L), "nll": (B, L)}."""
        eb, nl = [], []
        for t, (head, m_p, s_p, m_a, s_a) in zip(self.taps, self.heads):
            d = feats[t].shape[1]
            out = np.asarray(head.predict((feats[t - 1] - m_p) / s_p, verbose=0, batch_size=1024), np.float64)
            mu, raw = out[:, :d], out[:, d:]
            var = np.logaddexp(0.0, raw) + EPS**2
            r2 = ((feats[t] - m_a) / s_a - mu) ** 2 / var
            eb.append(r2.mean(axis=1))
            nl.append(0.5 * (np.log(var) + r2).mean(axis=1))
        return {"ebar": np.stack(eb, 1), "nll": np.stack(nl, 1)}

    def calibrate(self, feats_dev: list[np.ndarray]) -> TokenSnap:
        p = self.per_tap(feats_dev)
        for k, v in p.items():
            self.mean[k], self.sd[k] = v.mean(0), v.std(0) + 1e-12
        return self

    def score(self, feats: list[np.ndarray]) -> dict[str, np.ndarray]:
        if not self.mean:
            raise SnapuqError("TokenSnap.score before calibrate()")
        p = self.per_tap(feats)
        ze = (p["ebar"] - self.mean["ebar"]) / self.sd["ebar"]
        zn = (p["nll"] - self.mean["nll"]) / self.sd["nll"]
        return {"snap": ze.sum(1), "snap_nll2": np.abs(zn).sum(1), "ebar": p["ebar"]}
