"""Plots (PNG) and report.md for `snapuq eval`.

roc.png             ROC curves: ID correct vs wrong (errors positive) and ID vs OOD, every method
risk_coverage.png   selective risk vs coverage (keep the lowest-U inputs), every method
stream.png          the CID stream: windowed accuracy, events, shifted segments and the alarm score of SNAP
                    and of the strongest softmax baselines (each scaled to its clean-stream threshold)
tap_surprisal.png   per-tap surprisal ebar_l histograms on clean test, corrupted frames and OOD inputs
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from snapuq.io import save_figure, write_text
from snapuq.uq import metrics as M

HIGHLIGHT = {"snap": ("C3", 2.6), "msp": ("k", 1.6)}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(name: str, i: int):
    c, lw = HIGHLIGHT.get(name, (f"C{(i % 9) + (1 if i % 9 >= 3 else 0)}", 1.0))
    return {"color": c, "lw": lw, "alpha": 1.0 if name in HIGHLIGHT else 0.75}


def make_plots(
    rdir: Path, results: dict, bounds: dict, y_test, st, spec, x_ood_n: int, taps: list[str],
    taus: dict[str, float] | None = None,
) -> list:
    """taus: each method's alarm threshold as snapuq.uq.stream.monitor computed it (the one behind
    cid_delay); stream.png draws the alarm scaled to exactly that threshold."""
    plt = _plt()
    rdir = Path(rdir)
    files = []
    n_ood = x_ood_n

    # ROC
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.8))
    for i, (name, (_m, r)) in enumerate(results.items()):
        u = r.u[bounds["test"]]
        err = r.pred[bounds["test"]] != y_test
        if err.any() and (~err).any():
            fpr, tpr = M.roc_curve(u, err)
            ax[0].plot(fpr, tpr, label=f"{name} {M.auroc(u, err):.3f}", **_style(name, i))
        if n_ood:
            uo = r.u[bounds["ood"]]
            lab = np.r_[np.zeros(len(u)), np.ones(len(uo))]
            fpr, tpr = M.roc_curve(np.r_[u, uo], lab)
            ax[1].plot(fpr, tpr, label=f"{name} {M.auroc(np.r_[u, uo], lab):.3f}", **_style(name, i))
    for a, t in zip(ax, ("ID correct vs wrong (errors positive)", "ID vs OOD (OOD positive)")):
        a.plot([0, 1], [0, 1], ":", color="grey", lw=0.8)
        a.set(xlabel="false positive rate", ylabel="true positive rate", title=t, xlim=(0, 1), ylim=(0, 1.01))
        if a.get_legend_handles_labels()[1]:
            a.legend(fontsize=7, loc="lower right", title="AUROC", title_fontsize=7)
        else:  # no OOD inputs (or one class only): say so instead of an empty legend
            a.text(0.5, 0.5, "no inputs for this comparison", ha="center", va="center", fontsize=8)
    files.append(save_figure(fig, rdir / "roc.png", dpi=110).name)

    # risk-coverage
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for i, (name, (_m, r)) in enumerate(results.items()):
        u = r.u[bounds["test"]]
        ok = r.pred[bounds["test"]] == y_test
        cov, risk = M.risk_coverage(u, ok)
        ax.plot(cov, risk, label=f"{name} {M.aurc(u, ok):.4f}", **_style(name, i))
    ax.set(xlabel="coverage", ylabel="selective risk (error rate)", title="risk-coverage (test)", xlim=(0, 1))
    ax.legend(fontsize=7, title="AURC", title_fontsize=7, loc="upper left")
    files.append(save_figure(fig, rdir / "risk_coverage.png", dpi=110).name)

    # reliability diagram: SNAP's p_err (confidence 1 - p_err) and U, MSP, temperature scaling
    rel = []
    if "snap" in results:
        r = results["snap"][1]
        pe = r.extra.get("p_err", r.u)[bounds["test"]]
        ok = r.pred[bounds["test"]] == y_test
        rel.append(("snap p_err", 1.0 - pe, ok))
        rel.append(("snap U", np.clip(1.0 - r.u[bounds["test"]], 0.0, 1.0), ok))
    for name in ("msp", "temp_scaling"):
        if name in results:
            r = results[name][1]
            rel.append((name, r.conf[bounds["test"]], r.pred[bounds["test"]] == y_test))
    if rel:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.8))
        edges = np.linspace(0.0, 1.0, 16)
        for i, (name, conf, ok) in enumerate(rel):
            b = np.clip(np.ceil(conf * 15).astype(int) - 1, 0, 14)
            xs, ys, ns = [], [], []
            for k in range(15):
                m = b == k
                if m.any():
                    xs.append(conf[m].mean())
                    ys.append(ok[m].mean())
                    ns.append(int(m.sum()))
            ax[0].plot(xs, ys, marker="o", ms=3, label=f"{name} ECE {M.ece(conf, ok):.3f}", **_style(name, i))
            ax[1].hist(conf, bins=edges, histtype="step", lw=1.2, label=name)
        ax[0].plot([0, 1], [0, 1], ":", color="grey", lw=0.8)
        ax[0].set(
            xlabel="confidence (SNAP: 1 - p_err)",
            ylabel="accuracy",
            title="reliability (test, 15 bins)",
            xlim=(0, 1),
            ylim=(0, 1.01),
        )
        ax[0].legend(fontsize=7, loc="upper left")
        ax[1].set(xlabel="confidence", ylabel="inputs", title="confidence histogram", yscale="log")
        ax[1].legend(fontsize=7, loc="upper left")
        files.append(save_figure(fig, rdir / "reliability.png", dpi=110).name)

    # stream timeline
    if len(st):
        fig, ax = plt.subplots(2, 1, figsize=(13, 6), sharex=True)
        t = np.arange(len(st))
        w = st.window
        any_r = next(iter(results.values()))[1] if results else None
        if "msp" in results:
            any_r = results["msp"][1]
        if any_r is not None:
            ok = st.gather(
                any_r.pred[bounds["test"]] == y_test, any_r.pred[bounds["corrupt"]] == st.y[st.shifted]
            )
            acc = M.sliding_mean(ok.astype(float), w)
            ax[0].plot(t[w - 1 :], acc, color="k", lw=1.0, label=f"accuracy (window {w})")
        ax[0].axhline(
            spec.threshold, color="C3", ls="--", lw=1, label=f"event threshold {spec.threshold:.3f}"
        )
        for a in ax:
            for s0, s1, name in st.segments:
                if name != "clean":
                    a.axvspan(s0, s1, color="0.9", zorder=0)
            _shade(a, spec.events, "C3", 0.15)
        for s0, s1, name in st.segments:
            if name != "clean":
                ax[0].text(
                    (s0 + s1) / 2,
                    0.02,
                    name,
                    rotation=90,
                    fontsize=6,
                    ha="center",
                    va="bottom",
                    transform=ax[0].get_xaxis_transform(),
                )
        ax[0].set(ylabel="accuracy", title="CID stream: shifted segments grey, events red")
        ax[0].legend(fontsize=7, loc="lower right")
        taus = taus or {}
        show = [n for n in ("snap", "msp", "ee_ensemble", "deep_ensemble", "energy")
                if n in results and n in taus][:4]
        for i, name in enumerate(show):
            r = results[name][1]
            alarm = M.windowed_alarm(st.gather(r.u[bounds["test"]], r.u[bounds["corrupt"]]), w)
            tau = float(taus[name])
            lo = np.percentile(alarm, 1)
            scale = (tau - lo) if tau > lo else 1.0
            ax[1].plot(t, (alarm - lo) / scale, label=name, **_style(name, i))
        ax[1].axhline(1.0, color="grey", ls="--", lw=1, label="alarm threshold (each method's tau)")
        ax[1].set(xlabel="frame", ylabel="windowed U (scaled to tau)")
        ax[1].legend(fontsize=7, loc="upper right", ncol=3)
        files.append(save_figure(fig, rdir / "stream.png", dpi=110).name)

    # per-tap surprisal histograms
    if "snap" in results and "ebar" in results["snap"][1].extra:
        eb = np.asarray(results["snap"][1].extra["ebar"], np.float64)
        eb = eb.reshape(len(eb), -1)
        n_tap = eb.shape[1]
        fig, ax = plt.subplots(1, n_tap, figsize=(4.8 * n_tap, 3.8), squeeze=False)
        for k in range(n_tap):
            a = ax[0, k]
            groups = [
                ("clean test", eb[bounds["test"], k], "C0"),
                ("corrupted", eb[bounds["corrupt"], k], "C1"),
            ]
            if n_ood:
                groups.append(("OOD", eb[bounds["ood"], k], "C3"))
            allv = np.concatenate([g[1] for g in groups if len(g[1])])
            pos = allv[allv > 0]
            if pos.size:
                bins = np.geomspace(max(pos.min(), 1e-6), pos.max() * 1.01, 50)
                a.set_xscale("log")
            else:
                bins = 50
            for lab, v, c in groups:
                if len(v):
                    a.hist(
                        np.maximum(v, 1e-6),
                        bins=bins,
                        density=True,
                        histtype="step",
                        lw=1.4,
                        color=c,
                        label=f"{lab} (n={len(v)})",
                    )
            a.set(xlabel="surprisal ebar", ylabel="density", title=taps[k] if k < len(taps) else f"tap{k}")
            a.legend(fontsize=7)
        files.append(save_figure(fig, rdir / "tap_surprisal.png", dpi=110).name)
    return files


def _shade(ax, mask, color, alpha):
    for a, b in M.event_runs(mask):
        ax.axvspan(a, b, color=color, alpha=alpha, lw=0)


def _f(v, nd=3) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


COLUMNS = [
    ("auroc_ok_vs_err", "AUROC ✓/✗", 3),
    ("aupr_ok_vs_err", "AUPR ✓/✗", 3),
    ("auroc_id_vs_ood", "AUROC ID/OOD", 3),
    ("aurc", "AURC ↓", 4),
    ("ece", "ECE ↓", 3),
    ("cid_auprc", "CID AUPRC", 3),
    ("cid_delay", "CID delay ↓", 1),
]
# from the per-method details, shown next to the contract columns
DETAIL_COLUMNS = [
    ("cid_false_alarm_rate", "CID false alarm ↓", 3),
    ("cid_false_alarm_rate_resampled", "CID false alarm, 20 draws ↓", 3),
    ("shift_auroc_mean", "shift AUROC (mean)", 3),
]


def write_report(rdir: Path, out: dict) -> None:
    rdir = Path(rdir)
    L = [f"# snapuq eval: {out['dataset']}", ""]
    acc = out["accuracy"]
    src = out.get("ood_source") or "see data"
    L.append(f"- test inputs: {out['n_test']}, OOD inputs: {out.get('n_ood')} ({src})")
    L.append(f"- accuracy: float {_f(acc['float'], 4)}, int8 {_f(acc['int8'], 4)}")
    stm = out.get("stream", {})
    if stm:
        L.append(
            f"- CID stream: {stm['frames']} frames, {len(stm['corruptions'])} corruptions at severity "
            f"{stm['severity']}, segments of {stm['segment']}; events where the window-{stm['window']} "
            f"accuracy <= min(mu_ID - 3 sigma_ID, mu_ID - 1/window) with mu_ID {_f(stm['mu_id'])}, "
            f"sigma_ID {_f(stm['sigma_id'])}: {_f(stm['event_threshold'])} "
            f"({stm['event_frames']} event frames)"
        )
    for f in out.get("flags", []):
        L.append(f"- **FLAG:** {f}")
    for key, what in (("dev_check", "dev"), ("test_check", "test")):
        dc = out.get(key)
        if dc:
            L.append(
                f"- {what}-set check (DESIGN §4, `snapuq.uq.calibration.dev_check`): AUROC ✓/✗ SNAP U "
                f"{_f(dc['auroc_ok_vs_err_snap'], 4)} vs MSP {_f(dc['auroc_ok_vs_err_msp'], 4)}, delta "
                f"{_f(dc['delta'], 4)} ({'ok' if dc['ok'] else 'BELOW ' + str(dc['tolerance'])})"
            )
    det = out.get("details", {})
    sd = det.get("snap", {})
    if "ece_p_err" in sd:
        L.append(
            f"- SNAP outputs: p_err (calibrated P(wrong), a function of m(x)) ECE {_f(sd['ece_p_err'])}, "
            f"AUROC ✓/✗ {_f(sd.get('auroc_ok_vs_err_p_err'), 4)}; U = p_err + alarm (1 - p_err) ECE "
            f"{_f(sd.get('ece_U'))}; test inputs with alarm > 0: {_f(sd.get('test_alarm_rate'))} "
            "(reliability.png)"
        )
    h = sd.get("hinge")
    if h:
        rate = h.get("alarm_rate")
        at = f"alarm rate {rate:g}" if rate else f"quantile {h.get('quantile')}"
        over = h.get("q_over_largest_sd")
        beyond = "" if over is None else f", {over:+.2f} sd beyond the largest"
        L.append(f"- SNAP alarm hinge: {at} of the S of {h.get('n_ref')} clean references "
                 f"({h.get('reference')}){beyond}")  # fmt: skip
    L += ["", "## All methods (same model, same split, same inputs)", ""]
    head = ["method"] + [c[1] for c in COLUMNS] + [c[1] for c in DETAIL_COLUMNS] + ["own accuracy"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for name, m in out["methods"].items():
        row = [f"**{name}**" if name == "snap" else name]
        row += [_f(m.get(k), nd) for k, _, nd in COLUMNS]
        d = det.get(name, {})
        row += [_f(d.get(k), nd) for k, _, nd in DETAIL_COLUMNS] + [_f(d.get("accuracy"), 4)]
        L.append("| " + " | ".join(row) + " |")
    L += [
        "",
        "U is oriented so that higher means more likely wrong or shifted. ✓/✗: ID correct vs ID wrong with "
        "errors positive (each method's own predictions); ID/OOD: all test inputs vs the OOD set; CID: the "
        "per-frame alarm (trailing mean of U) against the stream events, delay in frames from event onset to "
        "the first alarm above the method's clean-stream threshold; CID false alarm: fraction of "
        "clean-segment frames whose alarm is above that threshold. ECE uses each method's own confidence "
        "(SNAP: 1 - p_err).",
    ]
    if det:
        L += ["", "## Risk at fixed coverage (test)", ""]
        covs = list(next(iter(det.values())).get("risk_at_coverage", {}))
        L.append("| method | " + " | ".join(f"risk@{c}" for c in covs) + " |")
        L.append("|" + "---|" * (len(covs) + 1))
        for name, d in det.items():
            L.append(f"| {name} | " + " | ".join(_f(d["risk_at_coverage"][c], 4) for c in covs) + " |")
        shifts = list(det.get("snap", next(iter(det.values()))).get("shift_auroc", {}))
        if shifts:
            L += ["", "## AUROC clean test vs each corrupted segment", ""]
            L.append("| method | " + " | ".join(shifts) + " |")
            L.append("|" + "---|" * (len(shifts) + 1))
            for name, d in det.items():
                L.append(f"| {name} | " + " | ".join(_f(d["shift_auroc"].get(s)) for s in shifts) + " |")
    sv = out.get("snap_variants")
    if sv:
        L += ["", f"## SNAP variants (default: {sv.get('default')})", ""]
        L.append("| variant | " + " | ".join(c[1] for c in COLUMNS) + " | shift AUROC (mean) |")
        L.append("|" + "---|" * (len(COLUMNS) + 2))
        for v, m in sv.items():
            if v == "default" or not isinstance(m, dict):
                continue
            if "error" in m:
                L.append(f"| {v} | {m['error']} |")
                continue
            L.append(
                f"| {v} | "
                + " | ".join(_f(m.get(k), nd) for k, _, nd in COLUMNS)
                + f" | {_f(m.get('shift_auroc_mean'))} |"
            )
    i8 = out.get("int8")
    if i8:
        L += ["", "## INT8", ""]
        for k, v in i8.items():
            L.append(f"- {k}: {v}")
    notes = out.get("notes")
    if notes:
        L += ["", "## Methods not run", ""] + [f"- {k}: {v}" for k, v in notes.items()]
    L += ["", "## Timings (s)", ""]
    for k, v in out.get("timings_s", {}).items():
        if v is not None:
            L.append(f"- {k}: {v}")
    L += ["", "## Plots", ""] + [f"![{p}]({p})" for p in out.get("plots", [])]
    write_text(rdir / "report.md", "\n".join(L) + "\n")


CONTRACT_KEYS = (
    "auroc_ok_vs_err",
    "auroc_id_vs_ood",
    "aupr_ok_vs_err",
    "aurc",
    "ece",
    "cid_auprc",
    "cid_delay",
)
