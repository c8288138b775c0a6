"""The uncertainty methods `snapuq eval` compares. Each method is fitted once on the training / dev split
(`fit(ctx)`) and then scores any input array (`score(ctx, x, outs)`), returning a `MethodResult` whose
`u` is higher for inputs that are more likely wrong or shifted.

Every method also states the prediction it makes (`pred`) and a confidence in [0, 1] (`conf`, used for the
ECE): classifiers of their own (temperature scaling, MC dropout, ensembles, ReAct, ASH, Dirichlet) use their
own predictive distribution; pure detectors (ODIN, energy, Mahalanobis) leave the base classifier's softmax
untouched, so their prediction and ECE are those of MSP; SNAP's confidence is 1 - U (U is a fitted
probability of error).

    msp           U = 1 - max softmax
    entropy       U = H(softmax)
    temp_scaling  U = 1 - max softmax(z / T), T fitted on dev by NLL
    mc_dropout    U = H(mean_t softmax), T stochastic passes with the drop* layers on, BN in inference mode
    deep_ensemble U = H(mean_k softmax) over the M trained members (D/baselines/ensemble_k.keras)
    ee_ensemble   U = H(mean over exits of softmax) of the early-exit model (D/baselines/early_exit.keras)
    odin          U = -max softmax(f(x~) / T), x~ = x - eps sign(-grad log S_yhat), T = 1000,
                  eps picked on dev
    energy        U = -logsumexp(z)
    mahalanobis   U = min_c (f - mu_c)^T Sigma^-1 (f - mu_c), class means and tied covariance of feat on train
    react         U = -logsumexp(W min(f, c) + b), c = 90th percentile of train feat
    ash           U = -logsumexp(W ash_s(f) + b): feat below its per-sample p-th percentile zeroed, the rest
                  scaled by exp(sum f / sum kept) (ASH-S; ASH-P, unscaled, is reported beside it)
    dirichlet     U = C / sum(alpha), alpha = softplus(z) + 1 (evidential)
    snap          SNAP-UQ U(x) from calib.json (snapuq.uq.score), default = the variant calib.json selects
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.baselines.kerasutil import (
    dense_apply,
    entropy,
    final_dense,
    logits_model,
    logsumexp,
    mc_dropout_clone,
)
from snapuq.baselines.snapadapter import make_scorer
from snapuq.errors import SnapuqError
from snapuq.nn.saved import predict_batched
from snapuq.uq import metrics as M
from snapuq.uq.score import one_minus_max, softmax


class MethodUnavailable(SnapuqError):
    """The method cannot run on this model directory (e.g. baselines not trained); eval reports null."""


@dataclass
class MethodResult:
    u: np.ndarray
    pred: np.ndarray
    conf: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class EvalContext:
    """What methods need: the main model (dict outputs: "logits", "feat", taps), the splits they fit on,
    D/baselines and the SNAP calibration."""

    model: Any
    n_classes: int
    x_train: np.ndarray
    y_train: np.ndarray
    x_dev: np.ndarray
    y_dev: np.ndarray
    predict: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None
    baselines_dir: Path | None = None
    calib: dict | None = None
    model_dir: Path | None = None
    backbone: str | None = None
    seed: int = 0
    batch_size: int = 512
    _cache: dict = field(default_factory=dict)

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Outputs of the main model: a traced batched call of `model` (same values as ModelDir.predict,
        several times faster than eager calls), or `predict` when there is no Keras model."""
        if self.model is None:
            return self.predict(x)
        out = predict_batched(self.model, x, self.batch_size)
        if not isinstance(out, dict):
            out = {"logits": out}
        return out

    def outs(self, split: str) -> dict[str, np.ndarray]:
        if split not in self._cache:
            self._cache[split] = self.run(getattr(self, f"x_{split}"))
        return self._cache[split]


def _from_probs(p: np.ndarray, u: np.ndarray) -> MethodResult:
    """U = u with the prediction and confidence of the class probabilities p."""
    return MethodResult(u=np.asarray(u, np.float64), pred=p.argmax(1), conf=p.max(1))


def _mean_softmax(models: list, x: np.ndarray, batch_size: int, n_classes: int) -> np.ndarray:
    """The mean softmax of the models' logits on x (MC dropout: one stochastic model, sampled repeatedly)."""
    p = np.zeros((len(x), n_classes))
    for m in models:
        p += softmax(predict_batched(m, x, batch_size))
    return p / len(models)


def _base(outs: dict[str, np.ndarray]) -> np.ndarray:
    if "logits" not in outs:
        raise SnapuqError("model outputs have no 'logits'")
    return softmax(outs["logits"])


class Method:
    name = ""

    def fit(self, ctx: EvalContext) -> None:  # noqa: B027 - most methods need no fitting
        pass

    def score(self, ctx: EvalContext, x: np.ndarray, outs: dict[str, np.ndarray]) -> MethodResult:
        raise NotImplementedError

    def params(self) -> dict:
        return {}


class MSP(Method):
    name = "msp"

    def score(self, ctx, x, outs):
        p = _base(outs)
        return _from_probs(p, one_minus_max(p))


class Entropy(Method):
    name = "entropy"

    def score(self, ctx, x, outs):
        p = _base(outs)
        return _from_probs(p, entropy(p))


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """T > 0 minimizing the mean NLL of softmax(z / T) (bounded search over log T in [-3, 3])."""
    from scipy.optimize import minimize_scalar

    z = np.asarray(logits, np.float64)
    y = np.asarray(y).astype(np.int64)

    def nll(logt: float) -> float:
        t = float(np.exp(logt))
        return float(np.mean(logsumexp(z, t) - z[np.arange(len(y)), y] / t))

    r = minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded", options={"xatol": 1e-5})
    return float(np.exp(r.x))


class TempScaling(Method):
    name = "temp_scaling"
    t = 1.0

    def fit(self, ctx):
        self.t = fit_temperature(ctx.outs("dev")["logits"], ctx.y_dev)

    def score(self, ctx, x, outs):
        p = softmax(outs["logits"], self.t)
        return _from_probs(p, one_minus_max(p))

    def params(self):
        return {"temperature": self.t}


class MCDropout(Method):
    name = "mc_dropout"

    def __init__(self, samples: int = 10):
        self.samples = samples
        self.clone = None
        self.n_dropout = 0

    def fit(self, ctx):
        self.clone, self.n_dropout = mc_dropout_clone(ctx.model, seed=ctx.seed)
        if self.n_dropout == 0:
            raise MethodUnavailable("the model has no Dropout layer named 'drop*' to sample")

    def score(self, ctx, x, outs):
        p = _mean_softmax([self.clone] * self.samples, x, ctx.batch_size, ctx.n_classes)
        return _from_probs(p, entropy(p))

    def params(self):
        return {"samples": self.samples, "dropout_layers": self.n_dropout}


def _load_keras(path: Path):
    import keras

    import snapuq.nn.heads  # noqa: F401 - registers the custom layers a saved model may use

    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as e:  # a corrupt or foreign file
        raise SnapuqError(f"{path}: not a loadable Keras model ({type(e).__name__}: {str(e)[:120]})") from e


class DeepEnsemble(Method):
    name = "deep_ensemble"

    def __init__(self):
        self.members: list = []

    def fit(self, ctx):
        if ctx.baselines_dir is None:
            raise MethodUnavailable("no baselines directory")
        paths = sorted(Path(ctx.baselines_dir).glob("ensemble_*.keras"))
        if not paths:
            raise MethodUnavailable(f"{ctx.baselines_dir}: no ensemble_*.keras (run snapuq train)")
        self.members = [logits_model(_load_keras(p)) for p in paths]

    def score(self, ctx, x, outs):
        p = _mean_softmax(self.members, x, ctx.batch_size, ctx.n_classes)
        return _from_probs(p, entropy(p))

    def params(self):
        return {"members": len(self.members)}


class EEEnsemble(Method):
    name = "ee_ensemble"

    def __init__(self):
        self.model = None
        self.keys: list[str] = []

    def fit(self, ctx):
        if ctx.baselines_dir is None:
            raise MethodUnavailable("no baselines directory")
        path = Path(ctx.baselines_dir) / "early_exit.keras"
        if not path.exists():
            raise MethodUnavailable(f"{path} is missing (run snapuq train)")
        self.model = _load_keras(path)
        out = self.model.output
        if not isinstance(out, dict) or len(out) < 2:
            raise SnapuqError(f"{path}: expected a model with several exit outputs")
        self.keys = sorted(out)

    def score(self, ctx, x, outs):
        o = predict_batched(self.model, x, ctx.batch_size)
        p = sum(softmax(o[k]) for k in self.keys) / len(self.keys)
        return _from_probs(p, entropy(p))

    def params(self):
        return {"exits": self.keys}


class ODIN(Method):
    name = "odin"
    EPS_GRID = (0.0, 0.0005, 0.001, 0.002, 0.004, 0.008)

    def __init__(self, temperature: float = 1000.0, eps: float | None = None):
        self.t = temperature
        self.eps = eps
        self.lm = None
        self.dev_auroc: dict[str, float] = {}

    def _scores(self, x: np.ndarray, eps: float, batch: int) -> np.ndarray:
        import tensorflow as tf

        out = []
        for i in range(0, len(x), batch):
            xb = tf.convert_to_tensor(np.asarray(x[i : i + batch], np.float32))
            if eps > 0:
                with tf.GradientTape() as tape:
                    tape.watch(xb)
                    z = self.lm(xb, training=False) / self.t
                    yhat = tf.stop_gradient(tf.argmax(z, axis=1))
                    loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(yhat, z))
                g = tape.gradient(loss, xb)
                xb = xb - eps * tf.sign(g)  # step that raises the top softmax score
            z = self.lm(xb, training=False).numpy()
            out.append(softmax(z, self.t).max(1))
        return -np.concatenate(out)

    def fit(self, ctx):
        self.lm = logits_model(ctx.model)
        if self.eps is None:
            ok = ctx.outs("dev")["logits"].argmax(1) == ctx.y_dev
            best = None
            for e in self.EPS_GRID:
                a = M.auroc(self._scores(ctx.x_dev, e, ctx.batch_size), ~ok)
                self.dev_auroc[str(e)] = a
                if np.isfinite(a) and (best is None or a > best[0] + 1e-12):
                    best = (a, e)
            self.eps = best[1] if best else 0.001

    def score(self, ctx, x, outs):
        return _from_probs(_base(outs), self._scores(x, self.eps, ctx.batch_size))

    def params(self):
        return {"temperature": self.t, "eps": self.eps, "dev_auroc_by_eps": self.dev_auroc}


class Energy(Method):
    name = "energy"

    def score(self, ctx, x, outs):
        return _from_probs(_base(outs), -logsumexp(outs["logits"]))


def _feat(outs: dict[str, np.ndarray]) -> np.ndarray:
    if "feat" not in outs:
        raise MethodUnavailable("model outputs have no 'feat' (penultimate features)")
    return np.asarray(outs["feat"], np.float64).reshape(len(outs["feat"]), -1)


class Mahalanobis(Method):
    name = "mahalanobis"

    def __init__(self, ridge: float = 1e-6):
        self.ridge = ridge

    def fit(self, ctx):
        f = _feat(ctx.outs("train"))
        y = np.asarray(ctx.y_train).astype(np.int64)
        classes = np.arange(ctx.n_classes)
        self.mu = np.stack([f[y == c].mean(0) if np.any(y == c) else f.mean(0) for c in classes])
        r = f - self.mu[y]
        cov = r.T @ r / len(f)
        cov += self.ridge * max(float(np.trace(cov)) / cov.shape[0], 1e-12) * np.eye(cov.shape[0])
        self.prec = np.linalg.pinv(cov, hermitian=True)

    def distances(self, f: np.ndarray) -> np.ndarray:
        d = f[:, None, :] - self.mu[None]
        return np.einsum("ncf,fg,ncg->nc", d, self.prec, d)

    def score(self, ctx, x, outs):
        return _from_probs(_base(outs), self.distances(_feat(outs)).min(1))


class ReAct(Method):
    name = "react"

    def __init__(self, percentile: float = 90.0):
        self.percentile = percentile
        self.clip = None

    def fit(self, ctx):
        f = _feat(ctx.outs("train"))
        self.dense = final_dense(ctx.model, f.shape[1], ctx.n_classes)
        self.clip = float(np.percentile(f, self.percentile))
        _check_dense(self.dense, ctx.outs("dev"))

    def score(self, ctx, x, outs):
        z = dense_apply(self.dense, np.minimum(_feat(outs), self.clip))
        return _from_probs(softmax(z), -logsumexp(z))

    def params(self):
        return {"percentile": self.percentile, "clip": self.clip}


def _check_dense(dense, outs) -> None:
    z = dense_apply(dense, _feat(outs))
    err = float(np.max(np.abs(z - outs["logits"])))
    scale = float(np.max(np.abs(outs["logits"]))) + 1e-6
    if err > 1e-3 * scale + 1e-4:
        raise MethodUnavailable(f"logits are not Dense(feat) (max deviation {err:.3g})")


def ash_features(f: np.ndarray, p: float, mode: str = "s") -> np.ndarray:
    """ASH: zero every feature below the per-sample p-th percentile (p in [0, 100)); 'p' keeps the rest as
    they are, 's' scales them by exp(sum(f) / sum(kept)), 'b' binarizes them to sum(f) / n_kept."""
    f = np.asarray(f, np.float64)
    n = f.shape[1]
    k = max(1, n - int(np.round(n * p / 100.0)))  # features kept
    thr = -np.sort(-f, axis=1)[:, k - 1 : k]
    keep = f >= thr
    pruned = np.where(keep, f, 0.0)
    s1 = f.sum(1, keepdims=True)
    s2 = pruned.sum(1, keepdims=True)
    if mode == "p":
        return pruned
    if mode == "s":
        ratio = np.where(s2 > 0, s1 / np.where(s2 > 0, s2, 1.0), 1.0)
        return pruned * np.exp(np.clip(ratio, -50.0, 50.0))
    if mode == "b":
        return np.where(keep, s1 / keep.sum(1, keepdims=True), 0.0)
    raise SnapuqError(f"unknown ASH mode '{mode}' (p, s, b)")


class ASH(Method):
    name = "ash"

    def __init__(self, percentile: float = 65.0, mode: str = "s"):
        self.percentile = percentile
        self.mode = mode

    def fit(self, ctx):
        f = _feat(ctx.outs("dev"))
        self.dense = final_dense(ctx.model, f.shape[1], ctx.n_classes)
        _check_dense(self.dense, ctx.outs("dev"))

    def score(self, ctx, x, outs):
        f = _feat(outs)
        z = dense_apply(self.dense, ash_features(f, self.percentile, self.mode))
        r = _from_probs(softmax(z), -logsumexp(z))
        other = "p" if self.mode == "s" else "s"
        z2 = dense_apply(self.dense, ash_features(f, self.percentile, other))
        r.extra[f"u_ash_{other}"] = -logsumexp(z2)
        return r

    def params(self):
        return {"percentile": self.percentile, "mode": self.mode}


class Dirichlet(Method):
    name = "dirichlet"

    def score(self, ctx, x, outs):
        z = np.asarray(outs["logits"], np.float64)
        alpha = np.logaddexp(0.0, z) + 1.0  # softplus evidence + 1
        s = alpha.sum(1)
        return _from_probs(alpha / s[:, None], ctx.n_classes / s)


class SNAP(Method):
    """SNAP-UQ through snapuq.uq.score: U from calib.json's selected variant; `variants` scores every variant
    calib.json carries (e.g. the paper's literal recipe) for the ablation."""

    name = "snap"

    def __init__(self, variant: str | None = None):
        self.variant = variant
        self.scorer = None

    def fit(self, ctx):
        if ctx.calib is None:
            raise MethodUnavailable("no calib.json (SNAP calibration)")

        self.scorer, self.variant = make_scorer(ctx.calib, self.variant)

    def score(self, ctx, x, outs):
        r = self.scorer.score(outs, x)
        u = np.asarray(r["U"], np.float64).reshape(-1)
        p = _base(outs)
        extra = {k: np.asarray(r[k], np.float64) for k in ("S", "ebar", "m", "p_err", "alarm") if k in r}
        # the calibrated probability is p_err (U = p_err on inputs without surprisal); ECE uses 1 - p_err
        pe = np.asarray(r.get("p_err", u), np.float64).reshape(-1)
        return MethodResult(u=u, pred=p.argmax(1), conf=np.clip(1.0 - pe, 0.0, 1.0), extra=extra)

    def params(self):
        return {"variant": self.variant}


METHOD_CLASSES: dict[str, type[Method]] = {
    c.name: c
    for c in (
        SNAP,
        MSP,
        Entropy,
        TempScaling,
        MCDropout,
        DeepEnsemble,
        EEEnsemble,
        ODIN,
        Energy,
        Mahalanobis,
        ReAct,
        ASH,
        Dirichlet,
    )
}
METHODS: list[str] = list(METHOD_CLASSES)


def make_method(name: str) -> Method:
    if name not in METHOD_CLASSES:
        raise SnapuqError(f"unknown method '{name}' (known: {', '.join(METHODS)})")
    return METHOD_CLASSES[name]()
