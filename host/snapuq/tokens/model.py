"""A tiny spiking transformer (Spikformer-style, simplified to train on two CPU cores).

Layout of every token tensor: (B, T, N, D) — batch, time step, token, channel.

- Patch tokens: the image is cut into p×p patches (N = (H/p)·(W/p)), each patch is embedded by a
  Dense layer + BatchNorm + a learned position embedding, and the same analog token is fed at
  every one of the T time steps (direct encoding).
- Leaky integrate-and-fire neurons: v ← v + (x_t − v)/τ, spike s_t = H(v − v_th), hard reset to 0.
  The Heaviside step has a sigmoid surrogate gradient (straight-through: forward is exactly binary).
- Spiking self-attention (SSA): Q, K, V are spike tensors (LIF after Dense + BN); the attention
  is Q·(Kᵀ·V)·scale without softmax (all terms non-negative), followed by a LIF with threshold 0.5,
  a Dense projection and BN. A spiking MLP follows. The residual stream between blocks is analog
  (membrane shortcut), so a token's state is a float tensor and its spikes are a function of it.
- Readout: LIF on the last residual stream, mean over the kept tokens and the T steps, then a
  linear head. Because the head is linear, the image logits are exactly the mean over tokens and
  steps of the head applied to each token's spikes at each step — the per-token classifier Uncert
  needs (`token_logits`).

A token reduction happens *before the attention* of block `reduce_at`: `forward` computes the
token states entering that block, hands them to a reducer that returns (possibly merged) states
and a keep mask (B, N); from then on dropped tokens emit no spikes, are excluded from the keys and
values of every later attention and from the readout mean, and cost no synaptic operations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from snapuq.errors import SnapuqError


def _keras():
    import keras

    return keras


class ConfigDict:
    """to_dict / from_dict for a config dataclass (JSON: the tuple fields named in TUPLES as lists)."""

    TUPLES: ClassVar[tuple[str, ...]] = ("input_shape",)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in self.TUPLES:
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        for k in cls.TUPLES:
            d[k] = tuple(int(v) for v in d[k])
        return cls(**d)


@dataclass
class TokenSNNConfig(ConfigDict):
    input_shape: tuple[int, int, int]
    n_classes: int
    patch: int = 2
    dim: int = 32
    depth: int = 2
    heads: int = 2
    mlp_ratio: int = 2
    T: int = 4
    tau: float = 2.0
    v_th: float = 1.0
    attn_v_th: float = 0.5
    surrogate_alpha: float = 4.0
    augment: bool = False

    @property
    def n_tokens(self) -> int:
        h, w, _ = self.input_shape
        return (h // self.patch) * (w // self.patch)

    def validate(self) -> None:
        h, w, c = self.input_shape
        if h % self.patch or w % self.patch:
            raise SnapuqError(f"input {h}x{w} is not divisible by the patch size {self.patch}")
        if self.dim % self.heads:
            raise SnapuqError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.T < 1 or self.depth < 1:
            raise SnapuqError("T and depth must be >= 1")


_LIF_FNS: dict = {}


def _lif_fn(tau: float, v_th: float, alpha: float):
    """A fused LIF with a hand-written BPTT backward (detached reset), one graph op per step."""
    key = (tau, v_th, alpha)
    if key not in _LIF_FNS:
        keras = _keras()
        ops = keras.ops
        decay = 1.0 - 1.0 / tau

        @keras.ops.custom_gradient
        def fn(x):
            xs = x * (1.0 / tau)
            v = None
            vs, ss = [], []
            for t in range(x.shape[1]):
                v = xs[:, t] if v is None else v * decay + xs[:, t]
                s = ops.cast(v >= v_th, x.dtype)
                vs.append(v)
                ss.append(s)
                v = v - v * s
            out = ops.stack(ss, axis=1)
            vstack = ops.stack(vs, axis=1)

            def grad(*args, upstream=None):
                if upstream is None:
                    (upstream,) = args
                sg = ops.sigmoid(alpha * (vstack - v_th))
                local = upstream * (alpha * sg * (1.0 - sg))
                carry = decay * (1.0 - out)
                d = None
                dx = []
                for t in reversed(range(x.shape[1])):
                    d = local[:, t] if d is None else local[:, t] + d * carry[:, t]
                    dx.append(d)
                return ops.stack(dx[::-1], axis=1) * (1.0 / tau)

            return out, grad

        _LIF_FNS[key] = fn
    return _LIF_FNS[key]


def lif(x, tau: float, v_th: float, alpha: float):
    """LIF over axis 1 (time) of a (B, T, ...) tensor; returns binary spikes of the same shape.

    v_t = (1 − 1/τ)·v_{t−1} + x_t/τ; s_t = H(v_t − v_th); v_t ← v_t·(1 − s_t) (hard reset to 0).
    Backward: surrogate dH/dv = α·σ(αv)(1 − σ(αv)), BPTT through the leak, reset detached."""
    return _lif_fn(float(tau), float(v_th), float(alpha))(x)


def lif_numpy(x: np.ndarray, tau: float, v_th: float) -> np.ndarray:
    """The same neuron in numpy (used for criteria computed outside the graph)."""
    xs = (x * np.float32(1.0 / tau)).astype(np.float32)
    decay = np.float32(1.0 - 1.0 / tau)
    out = np.zeros_like(x)
    v = None
    for t in range(x.shape[1]):
        v = xs[:, t] if v is None else v * decay + xs[:, t]
        s = (v - np.float32(v_th) >= 0.0).astype(x.dtype)
        out[:, t] = s
        v = v - v * s
    return out


def _mask4(mask):
    """(B, N) keep mask -> (B, 1, N, 1) for broadcasting against (B, T, N, D)."""
    ops = _keras().ops
    return ops.expand_dims(ops.expand_dims(mask, 1), -1)


def pooled_readout(model, z, mask=None):
    """The readout of both models: LIF on the residual stream z (B,T,N,D), the spike rate over the kept tokens
    (keep mask (B, N)) and the T steps, the linear `model.head`. Returns (logits, readout spikes)."""
    ops = _keras().ops
    c = model.cfg
    s = lif(z, c.tau, c.v_th, c.surrogate_alpha)
    if mask is None:
        feat = ops.mean(s, axis=(1, 2))
    else:
        feat = ops.sum(s * _mask4(mask), axis=(1, 2)) / (s.shape[1] * ops.sum(mask, axis=1, keepdims=True))
    return model.head(feat), s


_CLASSES: dict = {}


def build_layers(cfg: TokenSNNConfig):
    """Create the Keras model (`TokenSNN`) for a config."""
    return _layer_classes()["model"](cfg)


def spiking_block(cfg: TokenSNNConfig, name: str):
    """One spiking transformer block (LIF → Q,K,V → spiking attention → proj; spiking MLP), width cfg.dim.
    Called as block(z (B,T,N,D), keep=None|(B,N), training=, record=) -> z; the hierarchical model's stages
    are made of these."""
    return _layer_classes()["block"](cfg, name=name)


def _layer_classes() -> dict:
    if _CLASSES:
        return _CLASSES
    keras = _keras()
    layers = keras.layers
    ops = keras.ops

    class SpikingBlock(layers.Layer):
        def __init__(self, cfg: TokenSNNConfig, **kw):
            super().__init__(**kw)
            self.cfg = cfg
            d = cfg.dim
            self.q = layers.Dense(d, use_bias=False, name="q")
            self.k = layers.Dense(d, use_bias=False, name="k")
            self.v = layers.Dense(d, use_bias=False, name="v")
            self.q_bn = layers.BatchNormalization(momentum=0.9, name="q_bn")
            self.k_bn = layers.BatchNormalization(momentum=0.9, name="k_bn")
            self.v_bn = layers.BatchNormalization(momentum=0.9, name="v_bn")
            self.proj = layers.Dense(d, name="proj")
            self.proj_bn = layers.BatchNormalization(momentum=0.9, name="proj_bn")
            self.fc1 = layers.Dense(d * cfg.mlp_ratio, name="fc1")
            self.fc1_bn = layers.BatchNormalization(momentum=0.9, name="fc1_bn")
            self.fc2 = layers.Dense(d, name="fc2")
            self.fc2_bn = layers.BatchNormalization(momentum=0.9, name="fc2_bn")
            dh = d // cfg.heads
            hm = np.kron(np.eye(cfg.heads), np.ones((dh, dh))).astype(np.float32)
            self.head_mask = hm
            self.attn_scale = 0.25 / math.sqrt(dh)

        def _lif(self, x, v_th=None):
            c = self.cfg
            return lif(x, c.tau, c.v_th if v_th is None else v_th, c.surrogate_alpha)

        def call(self, x, keep=None, training=False, record=False):
            c = self.cfg
            m = None if keep is None else _mask4(keep)

            def gate(s):
                return s if m is None else s * m

            s = gate(self._lif(x))
            q = gate(self._lif(self.q_bn(self.q(s), training=training)))
            k = gate(self._lif(self.k_bn(self.k(s), training=training)))
            v = gate(self._lif(self.v_bn(self.v(s), training=training)))
            # multi-head Q·(Kᵀ·V): Kᵀ·V over all channels, restricted to each head's diagonal block
            kv = ops.matmul(ops.swapaxes(k, -1, -2), v) * self.head_mask
            a = ops.matmul(q, kv) * self.attn_scale
            a_s = gate(self._lif(a, c.attn_v_th))
            x = x + gate(self.proj_bn(self.proj(a_s), training=training))
            s2 = gate(self._lif(x))
            h = gate(self._lif(self.fc1_bn(self.fc1(s2), training=training)))
            x = x + gate(self.fc2_bn(self.fc2(h), training=training))
            if record:
                self.last_record = {"s": s, "q": q, "k": k, "v": v, "a": a_s, "s2": s2, "h": h}
            return x

    class TokenSNN(keras.Model):
        def __init__(self, cfg: TokenSNNConfig, **kw):
            super().__init__(**kw)
            cfg.validate()
            self.cfg = cfg
            self.embed = layers.Dense(cfg.dim, name="embed")
            self.embed_bn = layers.BatchNormalization(momentum=0.9, name="embed_bn")
            self.blocks = [SpikingBlock(cfg, name=f"block{i}") for i in range(cfg.depth)]
            self.head = layers.Dense(cfg.n_classes, name="head")
            # training-only augmentation: shifts of up to one pixel
            h, w, _ = cfg.input_shape
            self.augment = layers.RandomTranslation(1.0 / h, 1.0 / w, fill_mode="constant",
                                                        interpolation="nearest", name="augment")

        def build(self, input_shape):
            self.pos = self.add_weight(
                shape=(self.cfg.n_tokens, self.cfg.dim),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                name="pos",
            )
            super().build(input_shape)

        def tokens(self, x, training=False):
            c = self.cfg
            h, w, ch = c.input_shape
            p = c.patch
            B = ops.shape(x)[0]
            x = ops.reshape(x, (B, h // p, p, w // p, p, ch))
            x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
            x = ops.reshape(x, (B, c.n_tokens, p * p * ch))
            z = self.embed_bn(self.embed(x), training=training) + self.pos
            return ops.repeat(ops.expand_dims(z, 1), c.T, axis=1)

        def readout(self, x, mask=None):
            return pooled_readout(self, x, mask)

        def call(self, x, training=False):
            if training and self.cfg.augment:
                x = self.augment(x, training=True)
            z = self.tokens(x, training=training)
            for blk in self.blocks:
                z = blk(z, training=training)
            logits, _ = self.readout(z)
            return logits

    _CLASSES.update(block=SpikingBlock, model=TokenSNN)
    return _CLASSES


# reducer(z (B,T,N,D) float32 numpy, model) -> (z_new (B,T,N,D), keep mask (B,N) float32 {0,1})
Reducer = Callable[[np.ndarray, object], tuple[np.ndarray, np.ndarray]]


def forward(model, x: np.ndarray, reduce_at: int | None = None, reducer: Reducer | None = None,
            record: bool = False, batch: int = 512) -> dict:
    """Inference forward pass with an optional token reduction before block `reduce_at`'s attention.

    Returns {"logits" (B,C), "mask" (B,N), "block_in": list of (B,T,N,D) states entering each
    block (+ the final state), "spikes": list per block of the recorded spike tensors (numpy),
    "readout_spikes" (B,T,N,D)} — spikes only when `record`."""
    if reduce_at is not None and not 0 <= reduce_at < model.cfg.depth:
        raise SnapuqError(f"reduce block {reduce_at} outside 0..{model.cfg.depth - 1}")
    return _run_blocks(model, x, True, 0, None, reduce_at, reducer, record, batch)


def forward_from(model, z: np.ndarray, start: int, mask: np.ndarray | None = None, record: bool = False,
                 batch: int = 512) -> dict:
    """Run blocks `start`.. and the readout on token states z (B,T,N,D) entering block `start`,
    with an optional keep mask (B, N). Returns {"logits", "mask", "block_in", "spikes" (blocks
    start.. only), "readout_spikes"} like `forward` (spikes only when `record`)."""
    if not 0 <= start <= model.cfg.depth:
        raise SnapuqError(f"start block {start} outside 0..{model.cfg.depth}")
    return _run_blocks(model, z, False, start, mask, None, None, record, batch)


def _run_blocks(model, x: np.ndarray, images: bool, start: int, mask: np.ndarray | None,
                reduce_at: int | None, reducer: Reducer | None, record: bool, batch: int) -> dict:
    """`forward` (images: x are inputs, start 0) and `forward_from` (x: token states entering block start)."""
    ops = _keras().ops
    depth = model.cfg.depth
    outs: dict[str, list] = {"logits": [], "mask": [], "block_in": [], "spikes": [], "readout_spikes": []}
    for i0 in range(0, len(x), batch):
        z = ops.convert_to_tensor(np.asarray(x[i0:i0 + batch], np.float32))
        z = model.tokens(z) if images else z
        m = None if mask is None else ops.convert_to_tensor(np.asarray(mask[i0:i0 + batch], np.float32))
        states, rec = [], []
        for bi in range(start, depth):
            if reducer is not None and bi == reduce_at:
                zn, mn = reducer(np.asarray(z), model)
                z = ops.convert_to_tensor(zn.astype(np.float32))
                m = ops.convert_to_tensor(mn.astype(np.float32))
            states.append(np.asarray(z))
            z = model.blocks[bi](z, keep=m, record=record)
            if record:
                rec.append({k: np.asarray(v) for k, v in model.blocks[bi].last_record.items()})
        states.append(np.asarray(z))
        logits, s = model.readout(z, m)
        m_np = np.ones((z.shape[0], z.shape[2]), np.float32) if m is None else np.asarray(m)
        outs["logits"].append(np.asarray(logits))
        outs["mask"].append(m_np)
        outs["block_in"].append(states)
        if record:
            outs["spikes"].append(rec)
            outs["readout_spikes"].append(np.asarray(s) * m_np[:, None, :, None])
    res = {
        "logits": np.concatenate(outs["logits"]),
        "mask": np.concatenate(outs["mask"]),
        "block_in": [np.concatenate([st[i] for st in outs["block_in"]]) for i in range(depth - start + 1)],
    }
    if record:
        res["spikes"] = [
            {k: np.concatenate([r[j][k] for r in outs["spikes"]]) for k in outs["spikes"][0][j]}
            for j in range(depth - start)
        ]
        res["readout_spikes"] = np.concatenate(outs["readout_spikes"])
    return res


def token_logits(model, z: np.ndarray) -> np.ndarray:
    """The model's head applied to every token's readout spikes at every step: (B,T,N,D) -> (B,T,N,C).

    Spikes come from the readout neuron (same τ, v_th) driven by the token states z."""
    cfg = model.cfg
    s = lif_numpy(np.asarray(z, np.float32), cfg.tau, cfg.v_th)
    w, b = (np.asarray(v) for v in model.head.weights)
    return s @ w + b


def train_model(cfg: TokenSNNConfig, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None = None,
                y_val: np.ndarray | None = None, epochs: int = 40, batch: int = 64, lr: float = 3e-3,
                seed: int = 0, verbose: int = 0, jit: bool = False,
                weight_decay: float = 0.02, label_smoothing: float = 0.0):
    """Build and train a TokenSNN with AdamW + cosine decay and (optionally label-smoothed) cross-entropy."""
    keras = _keras()
    keras.utils.set_random_seed(seed)
    model = build_layers(cfg)
    steps = max(1, math.ceil(len(x) / batch)) * epochs
    sched = keras.optimizers.schedules.CosineDecay(lr, steps, alpha=0.02)
    model.compile(
        optimizer=keras.optimizers.AdamW(sched, weight_decay=weight_decay),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=label_smoothing),
        metrics=["accuracy"],
        jit_compile=jit,
    )
    cbs = []
    if verbose:
        try:
            from tqdm.keras import TqdmCallback

            cbs.append(TqdmCallback(verbose=0, desc="train spiking transformer"))
        except ImportError:  # pragma: no cover
            pass
    yh = keras.utils.to_categorical(y, cfg.n_classes)
    val = (x_val, keras.utils.to_categorical(y_val, cfg.n_classes)) if x_val is not None else None
    hist = model.fit(x, yh, batch_size=batch, epochs=epochs, validation_data=val, verbose=0,
                     callbacks=cbs, shuffle=True)
    recalibrate_bn(model, x, seed=seed)
    return model, {k: [float(v) for v in vs] for k, vs in hist.history.items()}


def recalibrate_bn(model, x: np.ndarray, passes: int = 3, batch: int = 256, seed: int = 0) -> None:
    """Re-estimate the BatchNorm moving statistics for the final weights.

    Spiking thresholds make the network sensitive to a mismatch between batch and moving
    statistics; the moving averages accumulated during training lag behind the last weights.
    Forward passes in training mode (no gradient step) update them with momentum 0.9."""
    rng = np.random.default_rng(seed)
    for _ in range(passes):
        order = rng.permutation(len(x))
        for i0 in range(0, len(x), batch):
            model(np.asarray(x[order[i0:i0 + batch]], np.float32), training=True)


def load_model(cfg: TokenSNNConfig, weights_path: str):
    model = build_layers(cfg)
    model(np.zeros((1, *cfg.input_shape), np.float32))
    model.load_weights(weights_path)
    return model
