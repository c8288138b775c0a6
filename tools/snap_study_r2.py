"""The numpy harness of docs/SNAP_STUDY.md §6 (second revision): frozen model outputs, SNAP recalibrated in
numpy by the same functions as `snapuq calibrate` (fit_perr, fit_alarm_k, dev_check, conformal_quantile), and
variants of the hinge reference, of S (extra per-channel terms of the first conv block) and of the alarm's k.

    python tools/snap_study_r2.py dump runs/digits_s0 runs/digits_s0_seed1 ...   # DIR/study_r2.npz, .pkl
    python tools/snap_study_r2.py hinge DIR...      # §6.1 hinge rules
    python tools/snap_study_r2.py channels DIR...   # §6.2 per-channel terms
    python tools/snap_study_r2.py alarm-k DIR...    # §6.3 fixed k values
    python tools/snap_study_r2.py ceiling DIR...    # §7.1 what any combination of MSP and S can reach
    python tools/snap_study_r2.py odds DIR...       # §7.2 the alarm as an odds multiplier
    python tools/snap_study_r2.py classcond DIR...  # §7.3 per-predicted-class standardization of S
    python tools/snap_study_r2.py inputs DIR...     # DIR/study_inputs.npz: input summary statistics
    python tools/snap_study_r2.py input-tap DIR...  # §7.4 an input tap: their Gaussian as a term of S
    python tools/snap_study_r2.py raw DIR...        # DIR/study_raw.npz: the inputs themselves (keywords)
    python tools/snap_study_r2.py order-stats DIR...  # §8 time-order-free input statistics, per corruption
    python tools/snap_study_r2.py perr-joint DIR...      # §9.1 p_err from m and S jointly
    python tools/snap_study_r2.py odds-input-tap DIR...  # §9.2 the alarm as an odds multiplier, shipped S
    python tools/snap_study_r2.py tail-check DIR...      # §9.3 the hinge reference's tail vs clean test

Each table line: mean over the DIRs of test U - MSP AUROC ✓/✗ (and per DIR), correct clean test inputs with
alarm > 0, mean shift AUROC (clean test vs every corruption at severity 3 on the whole test split), ID/OOD
AUROC (eval's OOD set, 500 inputs), and the clean-segment CID false-alarm rate over 30 resampled streams.
"""

from __future__ import annotations

import sys

import numpy as np

# the first conv block's output (cnn4, dscnn, resnet8)
EARLY = {"digits": "relu0", "keywords": "relu0", "cifar10": "relu0"}


def dump(d: str) -> None:
    import keras

    from snapuq.data import load_dataset, load_ood
    from snapuq.data.shifts import corruption_api
    from snapuq.nn.saved import load_model_dir
    from snapuq.uq import calibration as C
    from snapuq.uq.score import tap_stats

    md = load_model_dir(d)
    cfg = md.config
    ds = load_dataset(cfg["dataset"], None, seed=int(cfg.get("seed", 0)))
    names, corrupt = corruption_api(ds)
    early = keras.Model(md.model.input, md.model.get_layer(EARLY[cfg["dataset"]]).output)

    def run(x):
        x = np.asarray(x, np.float32)
        o = md.predict(x)
        eb, lb = tap_stats(o)
        a = np.concatenate([np.asarray(early(x[i : i + 256], training=False)) for i in range(0, len(x), 256)])
        a = a.reshape(len(a), -1, a.shape[-1])
        return {"probs": o["probs"], "eb": eb, "lb": lb, "c_mean": a.mean(1), "c_var": a.var(1),
                "c_max": a.max(1), "c_nz": (a > 0).mean(1)}  # fmt: skip

    xt = np.asarray(ds.x_test, np.float32)
    xdv = np.asarray(ds.x_dev, np.float32)
    hold = C.holdout_shift(xdv, seed=int(cfg.get("seed", 0)))
    sets = {"train": ds.x_train, "dev": xdv, "test": xt, "hold": hold}
    for nm in names:
        sets[f"c_{nm}"] = corrupt(xt, np.arange(len(xt)), nm, 3, 0)
    sets["ood"] = load_ood(cfg["dataset"], ds, None, n=500, seed=0)
    out = {f"{k}/{kk}": v for k, x in sets.items() for kk, v in run(x).items()}
    for split in ("train", "dev", "test"):
        out[f"y/{split}"] = np.asarray(getattr(ds, f"y_{split}"))
    out["names"] = np.array(names)
    np.savez_compressed(f"{d}/study_r2.npz", **out)
    print(f"{d}/study_r2.npz", flush=True)


def load(d: str):
    z = np.load(f"{d}/study_r2.npz")
    D: dict = {}
    for k in z.files:
        if "/" in k:
            s, f = k.split("/", 1)
            D.setdefault(s, {})[f] = z[k]
    return D, [str(n) for n in z["names"]]


def two_sided(y: dict, ok: np.ndarray) -> dict:
    r = y["dev"][ok]
    return {k: np.abs(v - r.mean(0)) / (r.std(0) + 1e-6) for k, v in y.items()}


def terms(D: dict, ok_dev: np.ndarray, extra: list[str]) -> dict:
    """Per-tap z (two-sided, clean dev) plus, per name in extra, the mean squared z of a diagonal Gaussian
    (train) on that per-channel statistic, standardized two-sided on clean dev: set -> (N, n_terms)."""
    z = two_sided({k: 0.5 * v["eb"] + 0.5 * v["lb"] for k, v in D.items() if "eb" in v}, ok_dev)
    cols = {k: [v[:, i] for i in range(v.shape[1])] for k, v in z.items()}
    for e in extra:
        a = D["train"][e]
        mu, sd = a.mean(0), a.std(0) + 1e-3
        y = two_sided({k: np.mean(((v[e] - mu) / sd) ** 2, 1) for k, v in D.items() if e in v}, ok_dev)
        for k in cols:
            cols[k].append(y[k])
    return {k: np.stack(v, 1) for k, v in cols.items()}


def fa_resampled(u_test, u_dev, draws: int = 30, n_seg: int = 16, seg: int = 300, w: int = 100) -> float:
    from snapuq.uq import metrics as M
    from snapuq.uq import stream as SS

    out = []
    for s in range(draws):
        ca = M.sliding_mean(u_dev[SS.clean_stream_indices(len(u_dev), max(20 * w, 2 * len(u_dev)), s)], w)
        tau = ca.mean() + 3 * ca.std()
        rng = np.random.default_rng(1000 + s)
        segs = [M.sliding_mean(u_test[rng.integers(0, len(u_test), seg)], w) for _ in range(n_seg)]
        out.append(np.mean(np.concatenate(segs) > tau))
    return float(np.mean(out))


def evaluate(D, names, S, ok_dev, *, rule: str = "dev", k: float | None = None) -> dict:
    """U from S with the hinge rule ('dev': quantile steps on clean dev S as in the first revision;
    'conf0.999' / 'max': of clean dev + train S) and k fitted (None) or fixed; the study's figures."""
    from snapuq.uq import calibration as C
    from snapuq.uq import metrics as M
    from snapuq.uq.score import alarm_map, perr_map

    err_dev = ~ok_dev
    err_test = D["test"]["probs"].argmax(1) != D["y"]["test"]
    ok_tr = D["train"]["probs"].argmax(1) == D["y"]["train"]
    m = {s: 1 - v["probs"].max(1) for s, v in D.items() if "probs" in v}
    perr = C.fit_perr(m["dev"], err_dev)
    pe = {s: perr_map(perr["knots"], v) for s, v in m.items()}
    sd = float(np.std(S["dev"][ok_dev]) + 1e-6)
    ref = S["dev"][ok_dev] if rule == "dev" else np.r_[S["dev"][ok_dev], S["train"][ok_tr]]
    steps = C.HINGE_STEPS if rule == "dev" else ((1.0,) if rule == "max" else (0.999, 1.0))
    for qq in steps:
        q = C.conformal_quantile(ref, qq) if rule != "dev" else float(np.quantile(ref, qq))
        F = {s: np.maximum(0, (v - q) / sd) for s, v in S.items()}
        kk = k if k is not None else C.fit_alarm_k(
            np.r_[pe["dev"], pe["hold"]], np.r_[F["dev"], F["hold"]],
            np.r_[err_dev.astype(float), np.ones(len(pe["hold"]))])  # fmt: skip
        U = {s: pe[s] + alarm_map(F[s], kk) * (1 - pe[s]) for s in S}
        if C.dev_check(U["dev"], m["dev"], err_dev)["ok"]:
            break
    n = len(err_test)
    lab = np.r_[np.zeros(n), np.ones(n)]
    return {
        "gap": M.auroc(U["test"], err_test) - M.auroc(m["test"], err_test),
        "alarmed_ok": int(((F["test"] > 0) & ~err_test).sum()),
        "shift": float(np.mean([M.auroc(np.r_[U["test"], U[f"c_{c}"]], lab) for c in names])),
        "ood": M.auroc(np.r_[U["test"], U["ood"]], np.r_[np.zeros(n), np.ones(len(U["ood"]))]),
        "fa": fa_resampled(U["test"], U["dev"]),
        "q": q,
        "k": kk,
    }


def table(dirs: list[str], variants: dict) -> None:
    rows: dict = {}
    for d in dirs:
        D, names = load(d)
        ok_dev = D["dev"]["probs"].argmax(1) == D["y"]["dev"]
        for tag, (extra, rule, k) in variants.items():
            S = {s: v.mean(1) for s, v in terms(D, ok_dev, extra).items()}
            rows.setdefault(tag, []).append(evaluate(D, names, S, ok_dev, rule=rule, k=k))
    for tag, rs in rows.items():
        mean = {key: np.mean([r[key] for r in rs]) for key in ("gap", "shift", "ood", "fa")}
        per = " / ".join(f"{r['gap']:+.4f}" for r in rs)
        print(f"{tag:28s} U-MSP {mean['gap']:+.4f} ({per}) alarmed ok {sum(r['alarmed_ok'] for r in rs)} "
              f"shift {mean['shift']:.3f} ID/OOD {mean['ood']:.3f} FA {mean['fa']:.3f} "
              f"k {[round(r['k'], 3) for r in rs]}")  # fmt: skip


def _cdf(ref: np.ndarray, v: np.ndarray) -> np.ndarray:
    ref = np.sort(ref)
    return (np.searchsorted(ref, v, side="right") + 0.5) / (len(ref) + 1)


def _prep(d: str, classcond: bool = False) -> dict:
    """One model's frozen outputs with the shipped rule (conformal 0.999 hinge over clean dev + train S,
    k = 0.05): m = 1 - MSP, p_err, S, F per set. classcond: the per-tap statistic is standardized by the
    mean / sd of its predicted class (correct train + dev inputs, shrunk to the pooled values with 20
    pseudo-inputs) instead of the pooled clean dev mean / sd."""
    from snapuq.uq import calibration as C
    from snapuq.uq.score import perr_map

    D, names = load(d)
    pred = {s: v["probs"].argmax(1) for s, v in D.items() if "probs" in v}
    ok_dev, ok_tr = pred["dev"] == D["y"]["dev"], pred["train"] == D["y"]["train"]
    if classcond:
        y = {s: 0.5 * v["eb"] + 0.5 * v["lb"] for s, v in D.items() if "eb" in v}
        r = np.r_[y["train"][ok_tr], y["dev"][ok_dev]]
        rc = np.r_[D["y"]["train"][ok_tr], D["y"]["dev"][ok_dev]]
        gmu, gvar = r.mean(0), r.var(0)
        K = D["train"]["probs"].shape[1]
        mu, sd = np.tile(gmu, (K, 1)), np.tile(np.sqrt(gvar), (K, 1))
        for c in range(K):
            rr = r[rc == c]
            if len(rr):
                w = len(rr) / (len(rr) + 20.0)
                mu[c] = w * rr.mean(0) + (1 - w) * gmu
                sd[c] = np.sqrt(w * rr.var(0) + (1 - w) * gvar)
        S = {s: (np.abs(v - mu[pred[s]]) / (sd[pred[s]] + 1e-6)).mean(1) for s, v in y.items()}
    else:
        S = {s: v.mean(1) for s, v in terms(D, ok_dev, []).items()}
    m = {s: 1 - v["probs"].max(1) for s, v in D.items() if "probs" in v}
    perr = C.fit_perr(m["dev"], ~ok_dev)
    q = C.conformal_quantile(np.r_[S["dev"][ok_dev], S["train"][ok_tr]], 0.999)
    sd_s = float(np.std(S["dev"][ok_dev]) + 1e-6)
    return {"D": D, "names": names, "S": S, "m": m, "ok_dev": ok_dev, "ok_tr": ok_tr,
            "err_test": pred["test"] != D["y"]["test"], "err_dev": ~ok_dev,
            "pe": {s: perr_map(perr["knots"], v) for s, v in m.items()},
            "F": {s: np.maximum(0.0, (v - q) / sd_s) for s, v in S.items()}, "dir": d}  # fmt: skip


def _figures(P: dict, U: dict) -> dict:
    from snapuq.uq import metrics as M

    et, n = P["err_test"], len(P["err_test"])
    lab = np.r_[np.zeros(n), np.ones(n)]
    return {
        "gap": M.auroc(U["test"], et) - M.auroc(P["m"]["test"], et),
        "dev_gap": M.auroc(U["dev"], P["err_dev"]) - M.auroc(P["m"]["dev"], P["err_dev"]),
        "shift": float(np.mean([M.auroc(np.r_[U["test"], U[f"c_{c}"]], lab) for c in P["names"]])),
        "ood": M.auroc(np.r_[U["test"], U["ood"]], np.r_[np.zeros(n), np.ones(len(U["ood"]))]),
        "fa": fa_resampled(U["test"], U["dev"]),
    }


def _rows(dirs: list[str], variants: dict, classcond: bool = False) -> None:
    Ps = [_prep(d, classcond) for d in dirs]
    for tag, fn in variants.items():
        rs = [_figures(P, fn(P)) for P in Ps]
        mean = {k: float(np.mean([r[k] for r in rs])) for k in rs[0]}
        per = " / ".join(f"{r['gap']:+.4f}" for r in rs)
        dmin = min(r["dev_gap"] for r in rs)
        print(
            f"{tag:34s} U-MSP {mean['gap']:+.4f} ({per}) dev min {dmin:+.4f} shift {mean['shift']:.3f} "
            f"ID/OOD {mean['ood']:.3f} FA {mean['fa']:.3f}",
            flush=True,
        )


def _shipped(P: dict) -> dict:
    from snapuq.uq.score import alarm_map

    return {s: P["pe"][s] + alarm_map(P["F"][s], 0.05) * (1 - P["pe"][s]) for s in P["F"]}


def _odds(mult: float):
    from snapuq.uq.score import alarm_map

    def f(P: dict) -> dict:
        out = {}
        for s in P["F"]:
            o = P["pe"][s] / (1 - P["pe"][s]) * (1 + (mult - 1) * alarm_map(P["F"][s], 0.05))
            out[s] = o / (1 + o)
        return out

    return f


def _tails(kind: str):
    """Monotone combinations of the two signals U is built from, each as its tail probability under clean
    data (m: dev, S: correct dev + train): 'S' alone, 'max' of the two CDFs, 'fisher'
    -log(1 - F_m) - log(1 - F_S)."""

    def f(P: dict) -> dict:
        ref_s = np.r_[P["S"]["dev"][P["ok_dev"]], P["S"]["train"][P["ok_tr"]]]
        cm = {s: _cdf(P["m"]["dev"], v) for s, v in P["m"].items()}
        cs = {s: _cdf(ref_s, v) for s, v in P["S"].items()}
        if kind == "S":
            return P["S"]
        if kind == "max":
            return {s: np.maximum(cm[s], cs[s]) for s in cs}
        return {s: -np.log(1 - cm[s]) - np.log(1 - cs[s]) for s in cs}

    return f


def input_summary(x: np.ndarray) -> np.ndarray:
    """The input tap's statistics of each input (N, J): snapuq.uq.score.input_summary on the view the product
    uses (snapuq.uq.score.input_view)."""
    from snapuq.uq.score import input_summary as summary
    from snapuq.uq.score import input_view

    x = np.asarray(x, np.float32)
    return summary(x, *input_view(x.shape[1:]))


def _input_sets(d: str) -> dict:
    """The inputs of DIR's model: train, dev, test, eval's OOD set and every corruption at severity 3 of
    the test split (c_<name>)."""
    from snapuq.data import load_dataset, load_ood
    from snapuq.data.shifts import corruption_api
    from snapuq.nn.saved import load_model_dir

    cfg = load_model_dir(d).config
    ds = load_dataset(cfg["dataset"], cfg.get("data_dir"), seed=int(cfg.get("seed", 0)))
    names, corrupt = corruption_api(ds)
    xt = np.asarray(ds.x_test, np.float32)
    sets = {"train": ds.x_train, "dev": ds.x_dev, "test": xt,
            "ood": load_ood(cfg["dataset"], ds, cfg.get("data_dir"), n=500, seed=0)}  # fmt: skip
    for nm in names:
        sets[f"c_{nm}"] = corrupt(xt, np.arange(len(xt)), nm, 3, 0)
    return sets


def dump_inputs(d: str) -> None:
    sets = _input_sets(d)
    np.savez_compressed(f"{d}/study_inputs.npz", **{k: input_summary(v) for k, v in sets.items()})
    print(f"{d}/study_inputs.npz", flush=True)


def _input_term(P: dict) -> dict:
    """The input tap's term of S per set: the mean squared z of a diagonal Gaussian (train) on
    input_summary (DIR/study_inputs.npz), standardized two-sided on clean dev like a tap."""
    z = np.load(f"{P['dir']}/study_inputs.npz")
    a = z["train"]
    mu, sd = a.mean(0), a.std(0) + 1e-3
    y = {k: np.mean(((z[k] - mu) / sd) ** 2, 1) for k in z.files}
    r = y["dev"][P["ok_dev"]]
    return {k: np.abs(v - r.mean()) / (r.std() + 1e-6) for k, v in y.items()}


def _with_input_tap(P: dict, weight: float = 2.0, alone: bool = False) -> dict:
    """P with S = the taps' terms and the input term weighted `weight` against each tap (alone: the input
    term only), and F its hinge under the shipped rule; weight 2 is the shipped S (§7.4)."""
    from snapuq.uq import calibration as C

    t = _input_term(P)
    n_taps = P["D"]["dev"]["eb"].shape[1]
    S = {k: t[k] if alone else (P["S"][k] * n_taps + weight * t[k]) / (n_taps + weight) for k in t}
    q = C.conformal_quantile(np.r_[S["dev"][P["ok_dev"]], S["train"][P["ok_tr"]]], 0.999)
    sd_s = float(np.std(S["dev"][P["ok_dev"]]) + 1e-6)
    return {**P, "S": S, "F": {k: np.maximum(0.0, (v - q) / sd_s) for k, v in S.items()}}


def _input_tap(weight: float, alone: bool = False):
    """U under the shipped rule with S of `_with_input_tap`."""
    return lambda P: _shipped(_with_input_tap(P, weight, alone))


def perr_joint(dirs: list[str]) -> None:
    """§9.1: p_err as a logistic on [ln m, ln(m + 1/512), feature] fitted on the train + dev errors (the
    dev errors alone are 5-8 on digits) instead of m alone: test AUROC ✓/✗ minus MSP's per DIR, for the
    feature = the shipped S, the taps' S, the input term. A margin above MSP would absorb one alarmed
    clean input (1 / n_correct: 0.0023 digits, 0.0013 keywords)."""
    from snapuq.uq import calibration as C
    from snapuq.uq import metrics as M

    for d in dirs:
        P = _with_input_tap(_prep(d))
        taps = _prep(d)["S"]
        row = []
        for tag, feat in (("S", P["S"]), ("taps", taps), ("input term", _input_term(P))):
            m = P["m"]

            def X(s: str, feat: dict = feat, m: dict = m) -> np.ndarray:
                return np.c_[np.log(m[s] + 1e-12), np.log(m[s] + 1 / 512), feat[s]]

            y = np.r_[P["err_dev"], ~P["ok_tr"]].astype(float)
            b = C.fit_logistic(np.r_[X("dev"), X("train")], y, nonneg=False, l2=1e-3, balanced=False)
            z = b[0] + X("test") @ b[1:]
            row.append(f"{tag} {M.auroc(z, P['err_test']) - M.auroc(m['test'], P['err_test']):+.4f}")
        print(f"{d}: " + ", ".join(row), flush=True)


def tail_check(dirs: list[str]) -> None:
    """§9.3: is the hinge's clean reference (correct train + dev S) lighter-tailed than clean test S? Per DIR:
    the fraction of correct test inputs above the 0.99 quantile of correct train / dev S, and the largest S
    of each."""
    for d in dirs:
        P = _with_input_tap(_prep(d))
        S = P["S"]
        tr, dv, te = S["train"][P["ok_tr"]], S["dev"][P["ok_dev"]], S["test"][~P["err_test"]]
        print(f"{d}: test > q99(train) {np.mean(te > np.quantile(tr, 0.99)):.3f}, test > q99(dev) "
              f"{np.mean(te > np.quantile(dv, 0.99)):.3f}; largest S train {tr.max():.2f} dev {dv.max():.2f} "
              f"test {te.max():.2f}", flush=True)  # fmt: skip


def dump_raw(d: str) -> None:
    """DIR/study_raw.npz: the float inputs of every set of `dump_inputs` (train, dev, test, ood, c_*)."""
    sets = _input_sets(d)
    np.savez_compressed(f"{d}/study_raw.npz", **{k: np.asarray(v, np.float32) for k, v in sets.items()})
    print(f"{d}/study_raw.npz", flush=True)


def _order_feats(x: np.ndarray, kind: str, n_q: int = 8) -> np.ndarray:
    """'shipped': the input tap's statistics; 'order': 8 order statistics of the frame (row) means and of
    the frames' mean |neighbour differences| (sorted over time, so a word's position does not matter)."""
    from snapuq.uq.score import input_summary, input_view

    rows, cols = input_view(x.shape[1:])
    if kind == "shipped":
        return input_summary(x, rows, cols)
    v = np.asarray(x, np.float64).reshape(len(x), rows, cols)
    q = np.linspace(0, rows - 1, n_q).round().astype(int)
    return np.c_[np.sort(v.mean(2), 1)[:, q], np.sort(np.abs(np.diff(v, axis=2)).mean(2), 1)[:, q]]


def _order_term(P: dict, kind: str, full_cov: bool) -> dict:
    """The input term of S (two-sided on clean dev, as the shipped tap) from `_order_feats` of
    DIR/study_raw.npz: a diagonal Gaussian (mean squared z) or a full-covariance one (shrunk 10 % to its
    diagonal; mean squared whitened z), fitted on the train split."""
    z = np.load(f"{P['dir']}/study_raw.npz")
    f = {k: _order_feats(z[k], kind) for k in z.files}
    mu, sd = f["train"].mean(0), f["train"].std(0) + 1e-3
    zz = {k: (v - mu) / sd for k, v in f.items()}
    if full_cov:
        c = np.cov(zz["train"].T)
        w = np.linalg.inv(np.linalg.cholesky(0.9 * c + 0.1 * np.diag(np.diag(c))))
        zz = {k: v @ w.T for k, v in zz.items()}
    y = {k: np.mean(v**2, 1) for k, v in zz.items()}
    r = y["dev"][P["ok_dev"]]
    return {k: np.abs(v - r.mean()) / (r.std() + 1e-6) for k, v in y.items()}


def order_stats(dirs: list[str]) -> None:
    """§8: per corruption, over the DIRs: the input term alone (AUROC clean test vs corrupted), the fraction
    of corrupted inputs whose alarm fires, and U's AUROC, for the shipped input statistics and for the
    time-order-free ones; then each U's summary line."""
    from snapuq.uq import calibration as C
    from snapuq.uq import metrics as M

    def u_with(P: dict, t: dict) -> dict:
        n_taps = P["D"]["dev"]["eb"].shape[1]
        S = {k: (P["S"][k] * n_taps + 2.0 * t[k]) / (n_taps + 2.0) for k in t}
        q = C.conformal_quantile(np.r_[S["dev"][P["ok_dev"]], S["train"][P["ok_tr"]]], 0.999)
        sd_s = float(np.std(S["dev"][P["ok_dev"]]) + 1e-6)
        return _shipped({**P, "F": {k: np.maximum(0.0, (v - q) / sd_s) for k, v in S.items()}})

    Ps = [_prep(d) for d in dirs]
    for tag, kind, full in (("shipped statistics, diagonal", "shipped", False),
                            ("order statistics, full covariance", "order", True)):  # fmt: skip
        per: dict = {}
        rs = []
        for P in Ps:
            t = _order_term(P, kind, full)
            U = u_with(P, t)
            n = len(U["test"])
            for c in P["names"]:
                lab = np.r_[np.zeros(n), np.ones(len(U[f"c_{c}"]))]
                per.setdefault(c, []).append((M.auroc(np.r_[t["test"], t[f"c_{c}"]], lab),
                                              float(np.mean(U[f"c_{c}"] > P["pe"][f"c_{c}"] + 1e-12)),
                                              M.auroc(np.r_[U["test"], U[f"c_{c}"]], lab)))  # fmt: skip
            rs.append(_figures(P, U))
        print(tag, flush=True)
        for c, v in per.items():
            a = np.mean(v, 0)
            print(f"  {c:15s} term alone {a[0]:.3f}  alarm fires {a[1]:.3f}  U {a[2]:.3f}", flush=True)
        mean = {k: float(np.mean([r[k] for r in rs])) for k in rs[0]}
        gaps = " / ".join(f"{r['gap']:+.4f}" for r in rs)
        print(
            f"  U-MSP {mean['gap']:+.4f} ({gaps}) shift "
            f"{mean['shift']:.3f} ID/OOD {mean['ood']:.3f} FA {mean['fa']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    cmd, dirs = sys.argv[1], sys.argv[2:]
    if cmd == "dump":
        for d in dirs:
            dump(d)
    elif cmd == "hinge":
        table(dirs, {"dev (first revision)": ([], "dev", None),
                     "conformal 0.999 dev+train": ([], "conf0.999", None),
                     "max dev+train": ([], "max", None)})  # fmt: skip
    elif cmd == "channels":
        extra = ("c_mean", "c_max", "c_var", "c_nz")
        table(dirs, {"none": ([], "dev", None), **{f"+ {c}": ([c], "dev", None) for c in extra}})
    elif cmd == "alarm-k":
        table(dirs, {f"k = {k}": ([], "conf0.999", k) for k in (0.05, 0.5, 2.0, 5.0, 20.0)})
    elif cmd == "ceiling":
        _rows(dirs, {"MSP": lambda P: P["m"], "shipped U": _shipped, "S alone": _tails("S"),
                     "max of the clean CDFs of m and S": _tails("max"),
                     "Fisher: tails of m and S": _tails("fisher")})  # fmt: skip
    elif cmd == "odds":
        _rows(dirs, {**{f"odds x {k}": _odds(k) for k in (4, 11, 31, 101, 1001)}, "shipped U": _shipped})
    elif cmd == "classcond":
        _rows(dirs, {"per-class S, shipped rule": _shipped}, classcond=True)
        _rows(dirs, {"pooled S, shipped rule": _shipped})
    elif cmd == "inputs":
        for d in dirs:
            dump_inputs(d)
    elif cmd == "input-tap":
        _rows(dirs, {"shipped U": _shipped, "+ input tap, weight 1": _input_tap(1.0),
                     "+ input tap, weight 2": _input_tap(2.0),
                     "input tap alone": _input_tap(1.0, True)})  # fmt: skip
    elif cmd == "odds-input-tap":
        odds = {f"odds x {k}": (lambda P, k=k: _odds(k)(_with_input_tap(P))) for k in (4, 11, 31, 101, 1001)}
        _rows(dirs, {**odds, "shipped U": _input_tap(2.0)})
    elif cmd == "perr-joint":
        perr_joint(dirs)
    elif cmd == "tail-check":
        tail_check(dirs)
    elif cmd == "raw":
        for d in dirs:
            dump_raw(d)
    elif cmd == "order-stats":
        order_stats(dirs)
    else:
        raise SystemExit(f"unknown command {cmd} (dump, hinge, channels, alarm-k, ceiling, odds, classcond, "
                         "inputs, input-tap, odds-input-tap, perr-joint, tail-check, raw, "
                         "order-stats)")  # fmt: skip
