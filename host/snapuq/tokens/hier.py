"""A hierarchical spiking transformer (QKFormer / Spikformer-style stages) with token reduction per stage.

Layout of every token tensor: (B, T, N, D). Stages s = 0..S−1 work on a g_s×g_s token grid, g_0 = H/p,
g_{s+1} = ⌈g_s/2⌉ (CIFAR-10 32×32, p = 4: 64 → 16 tokens; MNIST 28×28: 49 → 16).

- Stem: Conv 3×3 (analog, direct encoding, computed once) + BN, repeated over the T steps; LIF; the
  patch embedding Conv p×p stride p (spike-driven: every input spike reaches exactly D_0 outputs) + BN +
  a learned position embedding → the stage-0 tokens.
- Stage s: `depths[s]` spiking transformer blocks of width `dims[s]` (`model.spiking_block`: LIF →
  Q, K, V spikes → Q·(KᵀV) → LIF → proj; spiking MLP; analog residual stream).
- Between stages: LIF on the residual stream → Conv 2×2 stride 2 (non-overlapping, so one input spike
  reaches exactly D_{s+1} outputs) + BN: 2×2 neighbouring tokens become one.
- Readout: LIF on the last stage's stream, mean over kept tokens and steps, linear head.

Token reduction happens before the attention of every stage's first block: a reducer sees the states
entering stage s, returns (possibly merged) states and a keep mask (B, N_s); dropped tokens emit no
spikes from then on in that stage (not attended to, not passed to the downsampling, not pooled).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from snapuq.errors import SnapuqError
from snapuq.tokens.model import (
    ConfigDict,
    TokenSNNConfig,
    _keras,
    _mask4,
    lif,
    lif_numpy,
    pooled_readout,
    spiking_block,
    token_logits,
)
from snapuq.tokens.sops import block_sops, dense_sops


@dataclass
class HierConfig(ConfigDict):
    input_shape: tuple[int, int, int]
    n_classes: int
    patch: int = 4
    stem: int = 32
    dims: tuple[int, ...] = (64, 128)
    depths: tuple[int, ...] = (1, 1)
    heads: tuple[int, ...] = (2, 4)
    mlp_ratio: int = 4
    T: int = 4
    tau: float = 2.0
    v_th: float = 1.0
    attn_v_th: float = 0.5
    surrogate_alpha: float = 4.0
    arch: str = field(default="hier")
    TUPLES = ("input_shape", "dims", "depths", "heads")

    @property
    def grids(self) -> list[int]:
        g = [math.ceil(self.input_shape[0] / self.patch)]
        for _ in self.dims[1:]:
            g.append(math.ceil(g[-1] / 2))
        return g

    @property
    def n_tokens_stages(self) -> list[int]:
        return [g * g for g in self.grids]

    @property
    def n_stages(self) -> int:
        return len(self.dims)

    def stage_cfg(self, s: int) -> TokenSNNConfig:
        """The block config of stage s (a TokenSNNConfig whose dim / heads are the stage's)."""
        return TokenSNNConfig(input_shape=self.input_shape, n_classes=self.n_classes, patch=self.patch,
                              dim=self.dims[s], depth=self.depths[s], heads=self.heads[s],
                              mlp_ratio=self.mlp_ratio, T=self.T, tau=self.tau, v_th=self.v_th,
                              attn_v_th=self.attn_v_th, surrogate_alpha=self.surrogate_alpha)

    def validate(self) -> None:
        h, w, _ = self.input_shape
        if h != w:
            raise SnapuqError(f"the hierarchical model needs square inputs, got {h}x{w}")
        if h % self.patch:
            raise SnapuqError(f"input {h}x{w} is not divisible by the patch size {self.patch}")
        if not (len(self.dims) == len(self.depths) == len(self.heads)) or not 1 <= len(self.dims) <= 4:
            raise SnapuqError("dims, depths and heads need one entry per stage (1..4 stages)")
        for d, hd, dp in zip(self.dims, self.heads, self.depths):
            if d < 1 or hd < 1 or dp < 1 or d % hd:
                raise SnapuqError(f"stage width {d} must be >= 1 and divisible by its heads {hd}; depth >= 1")
        if self.T < 1 or self.stem < 1:
            raise SnapuqError("T and the stem width must be >= 1")


def build_hier(cfg: HierConfig):
    """The Keras model (`HierSNN`) for a config, built (weights created)."""
    cfg.validate()
    keras = _keras()
    layers = keras.layers
    ops = keras.ops

    class Downsample(layers.Layer):
        """LIF → Conv 2×2 stride 2 (no bias) → BN: (B,T,g²,D) → (B,T,⌈g/2⌉²,D2)."""

        def __init__(self, g: int, d_out: int, **kw):
            super().__init__(**kw)
            self.g = g
            self.conv = layers.Conv2D(d_out, 2, strides=2, padding="same", use_bias=False, name="conv")
            self.bn = layers.BatchNormalization(momentum=0.9, name="bn")

        def call(self, z, keep=None, training=False, record=False):
            s = lif(z, cfg.tau, cfg.v_th, cfg.surrogate_alpha)
            if keep is not None:
                s = s * _mask4(keep)
            B, T, D = ops.shape(s)[0], s.shape[1], s.shape[3]
            y = self.conv(ops.reshape(s, (-1, self.g, self.g, D)))
            g2 = y.shape[1]
            y = self.bn(ops.reshape(y, (B, T, g2 * g2, y.shape[-1])), training=training)
            if record:
                self.last_spikes = s
            return y

    class HierSNN(keras.Model):
        def __init__(self, cfg: HierConfig, **kw):
            super().__init__(**kw)
            self.cfg = cfg
            self.stem_conv = layers.Conv2D(cfg.stem, 3, padding="same", use_bias=False, name="stem_conv")
            self.stem_bn = layers.BatchNormalization(momentum=0.9, name="stem_bn")
            self.patch_conv = layers.Conv2D(cfg.dims[0], cfg.patch, strides=cfg.patch, use_bias=False,
                                            name="patch_conv")
            self.patch_bn = layers.BatchNormalization(momentum=0.9, name="patch_bn")
            self.stages = [[spiking_block(cfg.stage_cfg(s), name=f"stage{s}_block{j}")
                            for j in range(cfg.depths[s])] for s in range(cfg.n_stages)]
            self.downs = [Downsample(cfg.grids[s], cfg.dims[s + 1], name=f"down{s}")
                          for s in range(cfg.n_stages - 1)]
            self.head = layers.Dense(cfg.n_classes, name="head")

        def build(self, input_shape):
            self.pos = self.add_weight(shape=(self.cfg.n_tokens_stages[0], self.cfg.dims[0]),
                                       initializer=keras.initializers.RandomNormal(stddev=0.02), name="pos")
            super().build(input_shape)

        def tokens(self, x, training=False, record=False):
            c = self.cfg
            a = self.stem_bn(self.stem_conv(x), training=training)  # (B, H, W, C0), analog
            h, w, c0 = a.shape[1], a.shape[2], a.shape[3]
            a = ops.repeat(ops.expand_dims(a, 1), c.T, axis=1)  # (B, T, H, W, C0)
            s = lif(a, c.tau, c.v_th, c.surrogate_alpha)
            if record:
                self.stem_spikes = s
            y = self.patch_conv(ops.reshape(s, (-1, h, w, c0)))
            n0 = c.n_tokens_stages[0]
            y = ops.reshape(y, (-1, c.T, n0, c.dims[0]))
            return self.patch_bn(y, training=training) + self.pos

        def readout(self, z, mask=None):
            return pooled_readout(self, z, mask)

        def call(self, x, training=False):
            z = self.tokens(x, training=training)
            for s, blocks in enumerate(self.stages):
                for blk in blocks:
                    z = blk(z, training=training)
                if s < len(self.downs):
                    z = self.downs[s](z, training=training)
            return self.readout(z)[0]

    model = HierSNN(cfg)
    model(np.zeros((1, *cfg.input_shape), np.float32))
    return model


# stage reducer(z (B,T,N_s,D_s) numpy, model, stage) -> (z_new, keep mask (B, N_s) float32 {0,1})
StageReducer = Callable[[np.ndarray, object, int], tuple[np.ndarray, np.ndarray]]


def _batch_sops(model, rec: list, downs: list, stem_s, ro) -> dict:
    """Per-sample SOPs of one recorded batch (see `hier_sops` for the accounting)."""

    cfg = model.cfg
    blocks = [sum((block_sops(r, cfg.dims[s], cfg.heads[s], cfg.mlp_ratio) for r in rec[s]),
                  np.zeros(len(ro), np.int64)) for s in range(cfg.n_stages)]
    return {"stem": dense_sops(stem_s, cfg.dims[0]), "blocks": blocks,
            "down": [dense_sops(d, cfg.dims[s + 1]) for s, d in enumerate(downs)],
            "readout": dense_sops(ro, cfg.n_classes)}


def hier_forward(model, x: np.ndarray | None, reducer: StageReducer | None = None, record: bool = False,
                 batch: int = 256, stages: tuple[int, ...] | None = None,
                 tokens0: np.ndarray | None = None, stem_sops: np.ndarray | None = None) -> dict:
    """Inference with an optional token reduction before the first attention of each stage in `stages`
    (default: every stage). Returns {"logits" (B,C), "masks": [(B,N_s)], "stage_in": [(B,T,N_s,D_s)]
    (states entering each stage, before its reduction)} and, with `record`, "sops": per-sample SOPs
    {"stem", "blocks": [per stage], "down": [...], "readout"} counted from the spikes batch by batch.
    `tokens0` (with `stem_sops`): start from cached stage-0 tokens (the stem does not see the reduction)."""
    ops = _keras().ops
    cfg = model.cfg
    where = set(range(cfg.n_stages) if stages is None else stages)
    n_all = len(tokens0) if tokens0 is not None else len(x)
    parts: dict[str, list] = {k: [] for k in ("logits", "masks", "stage_in", "sops")}
    for i0 in range(0, n_all, batch):
        if tokens0 is not None:
            z = ops.convert_to_tensor(np.asarray(tokens0[i0:i0 + batch], np.float32))
        else:
            z = model.tokens(ops.convert_to_tensor(np.asarray(x[i0:i0 + batch], np.float32)), record=record)
        n = z.shape[0]
        masks, ins, recs, downs = [], [], [], []
        mask = None
        for s, blocks in enumerate(model.stages):
            ins.append(np.asarray(z))
            mask = None
            if reducer is not None and s in where:
                zn, mn = reducer(ins[-1], model, s)
                z = ops.convert_to_tensor(np.asarray(zn, np.float32))
                mask = ops.convert_to_tensor(np.asarray(mn, np.float32))
            masks.append(np.ones((n, cfg.n_tokens_stages[s]), np.float32) if mask is None
                         else np.asarray(mask))
            rec = []
            for blk in blocks:
                z = blk(z, keep=mask, record=record)
                if record:
                    rec.append({k: np.asarray(v) for k, v in blk.last_record.items()})
            recs.append(rec)
            if s < len(model.downs):
                z = model.downs[s](z, keep=mask, record=record)
                if record:
                    downs.append(np.asarray(model.downs[s].last_spikes))
        logits, ro = model.readout(z, mask)
        parts["logits"].append(np.asarray(logits))
        parts["masks"].append(masks)
        parts["stage_in"].append(ins)
        if record:
            stem_s = (np.zeros((n, 1), np.float32) if tokens0 is not None else np.asarray(model.stem_spikes))
            bs = _batch_sops(model, recs, downs, stem_s, np.asarray(ro) * masks[-1][:, None, :, None])
            if tokens0 is not None:
                bs["stem"] = np.asarray(stem_sops[i0:i0 + n], np.int64)
            parts["sops"].append(bs)
    S = cfg.n_stages
    res = {"logits": np.concatenate(parts["logits"]),
           "masks": [np.concatenate([m[s] for m in parts["masks"]]) for s in range(S)],
           "stage_in": [np.concatenate([m[s] for m in parts["stage_in"]]) for s in range(S)]}
    if record:
        ps = parts["sops"]
        res["sops"] = {"stem": np.concatenate([p["stem"] for p in ps]),
                       "blocks": [np.concatenate([p["blocks"][s] for p in ps]) for s in range(S)],
                       "down": [np.concatenate([p["down"][s] for p in ps]) for s in range(S - 1)],
                       "readout": np.concatenate([p["readout"] for p in ps])}
    return res


def _bn_affine(bn) -> tuple[np.ndarray, np.ndarray]:
    """Inference-mode BatchNorm as y = a·x + b."""
    gamma, beta, mean, var = (np.asarray(v) for v in (bn.gamma, bn.beta, bn.moving_mean, bn.moving_variance))
    a = gamma / np.sqrt(var + bn.epsilon)
    return a, beta - a * mean


def project_tokens(model, z: np.ndarray, stage: int) -> np.ndarray:
    """Carry stage-`stage` token states into the last stage's space token by token, training-free: each
    token's spikes go through its own 2×2-window slice of every downsampling conv and its BN, as if the
    three neighbours in its window were silent. (B,T,N_s,D_s) -> (B,T,N_s,D_last)."""
    cfg = model.cfg
    x = np.asarray(z, np.float32)
    for s in range(stage, cfg.n_stages - 1):
        g = cfg.grids[s]
        sp = lif_numpy(x, cfg.tau, cfg.v_th)
        w = np.asarray(model.downs[s].conv.kernel)  # (2, 2, D_s, D_{s+1})
        r, c = np.divmod(np.arange(g * g), g)
        wk = w[r % 2, c % 2]  # (N_s, D_s, D_{s+1}): the kernel tap that each token's position meets
        a, b = _bn_affine(model.downs[s].bn)
        x = (np.einsum("btnd,nde->btne", sp, wk) * a + b).astype(np.float32)
    return x


def hier_token_logits(model, z: np.ndarray, stage: int, head: tuple[np.ndarray, np.ndarray] | None = None,
                      ) -> np.ndarray:
    """Per-token, per-step logits (B,T,N_s,C) of stage-`stage` tokens.

    Default (training-free, the paper's recipe): the model's own head on the readout spikes of the token
    carried into the last stage's space (`project_tokens`; for the last stage the exact per-token
    decomposition of the image logits). With `head` = (W (D_s, C), b): that linear classifier on the
    token's own spikes (a per-stage classifier)."""
    cfg = model.cfg
    if head is not None:
        sp = lif_numpy(np.asarray(z, np.float32), cfg.tau, cfg.v_th)
        return sp @ head[0] + head[1]
    return token_logits(model, project_tokens(model, z, stage))


def fit_stage_heads(model, states: list[np.ndarray], y: np.ndarray, seed: int = 0
                    ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-stage linear classifiers on the frozen backbone (a cheap stand-in for deep supervision):
    multinomial logistic regression on each stage's token spike rates (mean over tokens and steps).
    Applied per token and step, they are the stage's own token-level classifier."""
    from sklearn.linear_model import LogisticRegression

    cfg = model.cfg
    heads = []
    for z in states:
        f = lif_numpy(np.asarray(z, np.float32), cfg.tau, cfg.v_th).mean(axis=(1, 2))
        clf = LogisticRegression(max_iter=500, C=1.0, random_state=seed).fit(f, y)
        w = clf.coef_.T.astype(np.float32)
        b = clf.intercept_.astype(np.float32)
        if w.shape[1] == 1:  # binary: sklearn keeps one column
            w, b = np.concatenate([-w, w], 1) / 2, np.concatenate([-b, b]) / 2
        heads.append((w, b))
    return heads


def hier_sops(out: dict, cfg: HierConfig) -> dict:
    """Per-sample SOPs of a recorded `hier_forward`: a spike reaching a layer of fan-out F costs F adds.
    stem: nnz(stem LIF)·D_0 (patch conv, non-overlapping); per stage the blocks (`sops.block_sops`);
    downsampling: nnz·D_{s+1} (2×2 stride-2 conv, non-overlapping); readout nnz·C. Returns the parts and
    "block_total" (transformer blocks), "total", "embed_macs" (the analog 3×3 stem conv, as MACs)."""
    if "sops" not in out:
        raise SnapuqError("forward pass was not recorded (use record=True)")
    sp = out["sops"]
    h, w, c = cfg.input_shape
    block_total = sum(sp["blocks"])
    total = sp["stem"] + block_total + sum(sp["down"], np.zeros_like(sp["stem"])) + sp["readout"]
    return {**sp, "block_total": block_total, "total": total, "embed_macs": int(h * w * 9 * c * cfg.stem)}


def n_params(model) -> int:
    return int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))


def config_for(dataset_shape: tuple[int, int, int], n_classes: int, **over) -> HierConfig:
    """The default hierarchical config of an input shape (patch 4; two stages)."""
    cfg = HierConfig(input_shape=tuple(int(s) for s in dataset_shape), n_classes=int(n_classes))
    cfg = replace(cfg, **{k: v for k, v in over.items() if v is not None})
    cfg.validate()
    return cfg
