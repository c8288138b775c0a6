"""SNAP-UQ heads, losses and the fake-quant layer (Keras 3).

A tap l is a pair of backbone layers (prev, layer). With GAP tap vectors (DESIGN §4):
    a_prev = GAP(prev output) in R^{d_prev},  a = GAP(layer output) in R^d,
    z = P a_prev  (rank r),  h = ReLU(W_h z + b_h),  mu = W_mu h + b_mu,
    log sigma^2 = log eps^2 + ReLU(W_v h + b_v)        ("hard" floor, the default) or
    sigma^2 = softplus(W_v h + b_v) + eps^2             ("softplus" floor, float only).
The hard floor keeps log sigma^2 an affine function of an int8 code (the ReLU output, fused into
FULLY_CONNECTED), so the device reads log sigma^2 = s (q - z) + log eps^2 and sigma^-1 from a 256-entry LUT;
both floors guarantee sigma^2 >= eps^2. The Keras model outputs the true log sigma^2 as "tap{k}_logvar"
and the pre-offset ReLU output as "tap{k}_lvr" (what the int8 export ships; logvar = lvr + log eps^2).

Losses: Gaussian NLL 0.5 * sum_i [(a_i - mu_i)^2 / sigma_i^2 + log sigma_i^2] (per sample, summed over
dims, no 0.5 log 2pi), Student-t and Huber variants, R_var = sum |log sigma^2|; `detach` stops the
gradient into the target a (and into the backbone through it).
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops


def gaussian_nll(a, mu, logvar):
    """Per-sample diagonal Gaussian NLL without the constant: 0.5 * sum((a-mu)^2 e^{-logvar} + logvar)."""
    return 0.5 * ops.sum(ops.square(a - mu) * ops.exp(-logvar) + logvar, axis=-1)


def student_t_nll(a, mu, logvar, nu: float = 5.0):
    """Per-sample Student-t NLL (scale^2 = exp(logvar), nu dof), constants dropped."""
    r2 = ops.square(a - mu) * ops.exp(-logvar)
    return ops.sum(0.5 * logvar + 0.5 * (nu + 1.0) * ops.log1p(r2 / nu), axis=-1)


def huber_nll(a, mu, logvar, delta: float = 1.0):
    """Huberised Gaussian NLL: quadratic in the standardized residual up to delta, linear beyond."""
    r = ops.abs(a - mu) * ops.exp(-0.5 * logvar)
    q = ops.where(r <= delta, 0.5 * ops.square(r), delta * (r - 0.5 * delta))
    return ops.sum(q + 0.5 * logvar, axis=-1)


NLLS = {"gauss": gaussian_nll, "student_t": student_t_nll, "huber": huber_nll}


def lowrank_terms(a, mu, logvar, B):
    """Mahalanobis term r^T Sigma^-1 r and log det Sigma for Sigma = diag(sigma^2) + B B^T (B: (N, d, k)),
    by the Woodbury identity and the matrix determinant lemma (only k x k systems are solved):
        Sigma^-1 = D^-1 - D^-1 B (I + B^T D^-1 B)^-1 B^T D^-1,  det Sigma = det D det(I + B^T D^-1 B)."""
    r = a - mu
    dinv = ops.exp(-logvar)  # (N, d)
    k = B.shape[-1]
    dB = B * dinv[..., None]  # D^-1 B (N, d, k)
    cap = ops.eye(k) + ops.einsum("ndk,ndl->nkl", B, dB)  # I + B^T D^-1 B (N, k, k)
    u = ops.einsum("ndk,nd->nk", dB, r)  # B^T D^-1 r
    sol = ops.solve(cap, u[..., None])[..., 0]
    maha = ops.sum(r * r * dinv, axis=-1) - ops.sum(u * sol, axis=-1)
    logdet = ops.sum(logvar, axis=-1) + ops.logdet(cap)
    return maha, logdet


def lowrank_gaussian_nll(a, mu, logvar, B):
    """Per-sample Gaussian NLL with covariance diag(sigma^2) + B B^T (constant dropped)."""
    maha, logdet = lowrank_terms(a, mu, logvar, B)
    return 0.5 * (maha + logdet)


def floor_logvar(raw, eps: float, floor: str = "hard"):
    """log sigma^2 from the head's raw output with the variance floor sigma^2 >= eps^2."""
    if floor == "hard":
        return ops.relu(raw) + 2.0 * math.log(eps)
    if floor == "softplus":
        return ops.log(ops.softplus(raw) + eps * eps)
    raise ValueError(f"unknown variance floor '{floor}' (hard, softplus)")


@keras.saving.register_keras_serializable(package="snapuq")
class LogVar(layers.Layer):
    """log sigma^2 from the head's raw output (see `floor_logvar`)."""

    def __init__(self, eps: float = 1e-2, floor: str = "hard", **kw):
        super().__init__(**kw)
        self.eps = float(eps)
        self.floor = floor

    def call(self, raw):
        return floor_logvar(raw, self.eps, self.floor)

    def get_config(self):
        return {**super().get_config(), "eps": self.eps, "floor": self.floor}


@keras.saving.register_keras_serializable(package="snapuq")
class FakeQuant(layers.Layer):
    """Per-tensor int8 fake quantization with EMA min/max ranges (QAT). Disabled (identity, ranges still
    tracked) until `enabled` is set; tf.quantization.fake_quant_with_min_max_vars when enabled."""

    def __init__(self, momentum: float = 0.99, **kw):
        super().__init__(**kw)
        self.momentum = momentum
        self.enabled = False

    def build(self, shape):
        self.rmin = self.add_weight(name="rmin", shape=(), initializer="zeros", trainable=False)
        self.rmax = self.add_weight(name="rmax", shape=(), initializer="ones", trainable=False)
        self.seen = self.add_weight(name="seen", shape=(), initializer="zeros", trainable=False)

    def call(self, x, training=None):
        import tensorflow as tf

        if training:
            lo, hi = tf.reduce_min(x), tf.reduce_max(x)
            m = tf.where(self.seen > 0, self.momentum, 0.0)
            self.rmin.assign(m * self.rmin + (1 - m) * tf.minimum(lo, 0.0))
            self.rmax.assign(m * self.rmax + (1 - m) * tf.maximum(hi, 0.0))
            self.seen.assign(1.0)
        if not self.enabled:
            return x
        return tf.quantization.fake_quant_with_min_max_vars(x, self.rmin, self.rmax, num_bits=8)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum}


@keras.saving.register_keras_serializable(package="snapuq")
class QDense(layers.Dense):
    """Dense whose kernel is fake-quantized per tensor (symmetric int8) while `qat` is on."""

    qat = False

    def call(self, x):
        if not self.qat:
            return super().call(x)
        import tensorflow as tf

        m = tf.reduce_max(tf.abs(self.kernel)) + 1e-8
        k = tf.quantization.fake_quant_with_min_max_vars(self.kernel, -m, m, num_bits=8, narrow_range=True)
        y = tf.matmul(x, k)
        if self.use_bias:
            y = y + self.bias
        return self.activation(y) if self.activation is not None else y


def _tap_vector(t, name: str):
    """The tap vector of a feature map: global average over the spatial axes of (N, H, W, C) or the time
    axis of (N, T, C) (TFLite MEAN); a (N, C) activation (an MLP's hidden layer) is used as it is."""
    rank = len(t.shape)
    if rank == 4:
        return layers.GlobalAveragePooling2D(name=name)(t)
    if rank == 3:
        return layers.GlobalAveragePooling1D(name=name)(t)
    if rank == 2:
        return layers.Identity(name=name)(t)
    raise ValueError(f"tap tensor {name} has rank {rank}; expected (N, C), (N, T, C) or (N, H, W, C)")


def add_heads(
    backbone: keras.Model,
    taps: list[str],
    tap_prev: dict[str, str],
    rank: int = 64,
    eps: float = 1e-2,
    floor: str = "hard",
    detach: bool = True,
    cov_rank: int = 0,
    feat: str = "feat",
) -> keras.Model:
    """The SNAP model: backbone + one head per tap. Outputs (dict): "logits", "probs", "feat" (the output of
    layer `feat`, the penultimate features),
    "tap{k}_a", "tap{k}_mu", "tap{k}_logvar", "tap{k}_lvr", and with cov_rank > 0 the low-rank covariance
    factor "tap{k}_B" (N, d, cov_rank) (float-only option: Sigma = diag(sigma^2) + B B^T).
    `detach` puts a stop-gradient on every a (applied in the loss, see SnapTrainer)."""
    out: dict = {"logits": backbone.output}
    out["probs"] = layers.Softmax(name="probs")(backbone.output)
    out["feat"] = backbone.get_layer(feat).output
    for k, name in enumerate(taps):
        if name not in tap_prev:
            raise ValueError(f"tap '{name}' has no predecessor layer (valid taps: {', '.join(tap_prev)})")
        prev = backbone.get_layer(tap_prev[name]).output
        cur = backbone.get_layer(name).output
        d = int(cur.shape[-1])
        a_prev = _tap_vector(prev, f"tap{k}_gprev")
        a = _tap_vector(cur, f"tap{k}_a")
        a_prev = FakeQuant(name=f"tap{k}_fqp")(a_prev)
        z = QDense(rank, name=f"tap{k}_P")(a_prev)
        h = QDense(rank, activation="relu", name=f"tap{k}_h")(z)
        mu = QDense(d, name=f"tap{k}_mu")(h)
        mu = FakeQuant(name=f"tap{k}_fqmu")(mu)
        if floor == "hard":
            lvr = QDense(
                d,
                activation="relu",
                name=f"tap{k}_lvr",
                bias_initializer=keras.initializers.Constant(-2.0 * math.log(eps)),
            )(h)
            lvr = FakeQuant(name=f"tap{k}_fqlv")(lvr)
            lv = LogVar(eps, "hard", name=f"tap{k}_logvar")(lvr)
        else:
            lvr = QDense(d, name=f"tap{k}_lvr")(h)
            lv = LogVar(eps, "softplus", name=f"tap{k}_logvar")(lvr)
        out[f"tap{k}_a"] = a
        out[f"tap{k}_mu"] = mu
        out[f"tap{k}_logvar"] = lv
        out[f"tap{k}_lvr"] = lvr
        if cov_rank > 0:
            init = keras.initializers.RandomNormal(stddev=1e-3)
            bf = layers.Dense(d * cov_rank, kernel_initializer=init, name=f"tap{k}_Bf")(h)
            out[f"tap{k}_B"] = layers.Reshape((d, cov_rank), name=f"tap{k}_B")(bf)
    return keras.Model(backbone.input, out, name=f"{backbone.name}_snap")


def set_qat(model: keras.Model, on: bool) -> None:
    for lay in model.layers:
        if isinstance(lay, FakeQuant):
            lay.enabled = on
        if isinstance(lay, QDense):
            lay.qat = on


def head_layers(model: keras.Model) -> list:
    return [lay for lay in model.layers if lay.name.startswith("tap") and lay.weights]


class SnapTrainer(keras.Model):
    """Wraps the SNAP model for `fit`: loss = CE(logits) + lambda_ss * NLL + lambda_reg * R_var.
    With detach the target a is a stop-gradient (the heads never pull on the backbone through a)."""

    def __init__(
        self,
        snap: keras.Model,
        n_taps: int,
        lambda_ss: float,
        lambda_reg: float,
        nll: str = "gauss",
        detach: bool = True,
        ce_weight: float = 1.0,
        **kw,
    ):
        super().__init__(**kw)
        self.snap = snap
        self.n_taps = n_taps
        self.lambda_ss = lambda_ss
        self.lambda_reg = lambda_reg
        self.nll = NLLS[nll]
        self.detach = detach
        self.ce_weight = ce_weight
        self.ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def call(self, x, training=None):
        return self.snap(x, training=training)

    def losses_for(self, x, y, training):
        out = self.snap(x, training=training)
        ce = self.ce(y, out["logits"])
        nll = 0.0
        reg = 0.0
        for k in range(self.n_taps):
            a = out[f"tap{k}_a"]
            if self.detach:
                a = ops.stop_gradient(a)
            if f"tap{k}_B" in out:
                t_nll = lowrank_gaussian_nll(a, out[f"tap{k}_mu"], out[f"tap{k}_logvar"], out[f"tap{k}_B"])
            else:
                t_nll = self.nll(a, out[f"tap{k}_mu"], out[f"tap{k}_logvar"])
            nll = nll + ops.mean(t_nll)
            reg = reg + ops.mean(ops.sum(ops.abs(out[f"tap{k}_logvar"]), axis=-1))
        total = self.ce_weight * ce + self.lambda_ss * nll + self.lambda_reg * reg
        return total, ce, nll, out

    def train_step(self, data):
        import tensorflow as tf

        x, y = data
        with tf.GradientTape() as tape:
            total, ce, nll, out = self.losses_for(x, y, True)
        tv = self.trainable_variables
        grads = tape.gradient(total, tv)
        self.optimizer.apply([g if g is not None else tf.zeros_like(v) for g, v in zip(grads, tv)], tv)
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(out["logits"], 1), tf.cast(y, tf.int64)), tf.float32))
        return {"loss": total, "ce": ce, "nll": nll, "acc": acc}
