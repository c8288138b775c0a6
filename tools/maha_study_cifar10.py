"""Why Mahalanobis is near chance on real CIFAR-10 (docs/SNAP_STUDY.md §11): the features of the
misclassified test images, the tied-covariance distance on raw, L2-normalised and square-root features, and
the relative Mahalanobis distance (Ren et al. 2021: minus the distance to one Gaussian of all train features).
Usage: python tools/maha_study_cifar10.py DATA_DIR (models/cifar10 from the checkout)."""

import sys

import numpy as np

from snapuq.baselines.methods import EvalContext, Mahalanobis
from snapuq.data import load_dataset
from snapuq.nn.saved import load_model_dir
from snapuq.uq import metrics as M

md = load_model_dir("models/cifar10")
ds = load_dataset("cifar10", sys.argv[1])
rng = np.random.default_rng(0)
it = rng.choice(len(ds.x_train), 10000, replace=False)
ctx = EvalContext(
    model=md.model,
    n_classes=10,
    x_train=np.asarray(ds.x_train[it], np.float32),
    y_train=np.asarray(ds.y_train[it]).astype(np.int64),
    x_dev=np.asarray(ds.x_dev[:100], np.float32),
    y_dev=np.asarray(ds.y_dev[:100]).astype(np.int64),
)
xt = np.asarray(ds.x_test[:3000], np.float32)
yt = np.asarray(ds.y_test[:3000])
ot = ctx.run(xt)
otr = ctx.outs("train")
print(
    "feat shape",
    otr["feat"].shape,
    "train acc",
    (otr["logits"].argmax(1) == ctx.y_train).mean(),
    "test acc",
    (ot["logits"].argmax(1) == yt).mean(),
)
f = otr["feat"].reshape(len(otr["feat"]), -1)
print("feat stats", f.mean(), f.std(), (f > 0).mean())
m = Mahalanobis()
m.fit(ctx)
d = m.distances(ot["feat"].reshape(3000, -1).astype(np.float64))
ok = ot["logits"].argmax(1) == yt
print(
    "maha argmin == pred",
    (d.argmin(1) == ot["logits"].argmax(1)).mean(),
    "maha-class acc",
    (d.argmin(1) == yt).mean(),
)
s = d.min(1)
print("AUROC err-positive", M.auroc(s, ~ok))
ftr, ytr = f.astype(np.float64), ctx.y_train
fte, yte, lte = ot["feat"].astype(np.float64).reshape(len(xt), -1), yt, ot["logits"]
ok = lte.argmax(1) == yte


def maha(ftr, fte, ridge=1e-6):
    mu = np.stack([ftr[ytr == c].mean(0) for c in range(10)])
    r = ftr - mu[ytr]
    cov = r.T @ r / len(ftr)
    cov += ridge * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0])
    P = np.linalg.pinv(cov, hermitian=True)
    d = fte[:, None, :] - mu[None]
    return np.einsum("ncf,fg,ncg->nc", d, P, d)


print(
    "norm test ok/err",
    np.linalg.norm(fte[ok], axis=1).mean(),
    np.linalg.norm(fte[~ok], axis=1).mean(),
    "train",
    np.linalg.norm(ftr, axis=1).mean(),
)
for name, a, b in [
    ("raw", ftr, fte),
    (
        "l2norm",
        ftr / np.linalg.norm(ftr, axis=1, keepdims=True),
        fte / np.linalg.norm(fte, axis=1, keepdims=True),
    ),
    ("sqrt", np.sqrt(ftr), np.sqrt(fte)),
]:
    for ridge in (1e-6, 1e-2, 1e-1):
        d = maha(a, b, ridge)
        s = d.min(1)
        print(
            name,
            ridge,
            "AUROC err+",
            round(M.auroc(s, ~ok), 3),
            "pred-class dist",
            round(M.auroc(d[np.arange(len(d)), lte.argmax(1)], ~ok), 3),
        )
# relative Mahalanobis: the class distance minus the distance under one Gaussian fitted to all train features
for ridge in (1e-6, 1e-2):
    d = maha(ftr, fte, ridge)
    c0 = np.cov(ftr.T, bias=True)
    c0 += ridge * np.trace(c0) / c0.shape[0] * np.eye(c0.shape[0])
    g = fte - ftr.mean(0)
    d0 = np.einsum("nf,fg,ng->n", g, np.linalg.pinv(c0, hermitian=True), g)
    print("relative", ridge, "AUROC err+", round(M.auroc((d - d0[:, None]).min(1), ~ok), 3))
# eigen spectrum
mu = np.stack([ftr[ytr == c].mean(0) for c in range(10)])
r = ftr - mu[ytr]
cov = r.T @ r / len(ftr)
w = np.linalg.eigvalsh(cov)
print("eig min/max", w[:5], w[-3:])
