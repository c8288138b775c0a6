"""Real background sounds through the keywords models: what a 12-class model calls one-second pieces of
real recordings with no keyword in them (the Speech Commands task wants `_silence_` for background noise;
`_unknown_` is a harmless answer too; any of the ten keywords is a false trigger).

Real recordings are not in this repository and nothing here fetches them: DIR is a folder of
`<category>/*.wav` recordings you have, of any length, rate (from 8 kHz) and channel count
(snapuq.data.user_readers.read_audio), e.g. street, ventilation, engine, music or talk recorded on a phone.
Each recording is cut into its whole 1 s pieces (a shorter one: one piece, zero-padded) by the function
`snapuq eval` cuts a test tree's `_background_noise_` recordings with (speech_commands.noise_pieces);
`--gains` plays every piece again at other levels (dB, clipped to int16) for a quieter or louder room.

Per model directory (each through its own front end) and category: the share of pieces called `_silence_`,
`_unknown_` and a keyword (with the keywords most called), the mean p_err, mean U and the alarm rate; and the
same over all categories, with U's and MSP's AUROC for the false triggers against the rest. With `--keep K`
(default 0.95) each model also gates its keywords as a device would: a keyword counts only when U (or MSP's
1 - max softmax) is at most the threshold that keeps the share K of the keywords it gets right on the
synthetic test split; the false triggers left after each gate are reported beside the ungated ones.

Usage: PYTHONPATH=host:tools python tools/kw12_real_noise.py MODEL_DIR [MODEL_DIR ...] --dir DIR
           [--gains 0,-20] [--out runs/kw12_real_noise.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from kw12_compare import load_raw, model_frontend  # tools/ is on sys.path when this script runs
from kw12_real_unknown import scores

from snapuq.data import audio
from snapuq.data import keywords12 as K
from snapuq.data.speech_commands import noise_pieces
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir
from snapuq.uq import metrics as M


def read_dir(d: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """int16 (N, 16000) pieces of every `<category>/*.wav`, their categories, recordings per category."""
    waves, cats, files = [], [], {}
    for c in sorted(p for p in d.iterdir() if p.is_dir()):
        fs = sorted(c.glob("*.wav"))
        for f in fs:
            p = noise_pieces(f)
            waves.append(p)
            cats += [c.name] * len(p)
        if fs:
            files[c.name] = len(fs)
    if not waves:
        raise SystemExit(f"{d} holds no <category>/*.wav recordings")
    return np.concatenate(waves), np.asarray(cats), files


def at_gain(w: np.ndarray, db: float) -> np.ndarray:
    return np.clip(np.rint(w.astype(np.float64) * 10 ** (db / 20)), -32768, 32767).astype(np.int16)


def gate_thresholds(md, fe: dict, syn: tuple[np.ndarray, np.ndarray], keep: float) -> dict:
    """The U and MSP thresholds that keep the share `keep` of the synthetic test keywords the model gets
    right, and the keyword recall left on that split after each gate."""
    x, y = syn
    pred, msp_u, s = scores(md, audio.finish(x, fe))
    u = np.asarray(s["U"], np.float64)
    kw = y < len(K.WORDS)
    ok = kw & (pred == y)
    t = {"U": float(np.quantile(u[ok], keep)), "MSP": float(np.quantile(msp_u[ok], keep))}
    return {"keep": keep, "thresholds": t,
            "recall_ungated": float(ok.sum() / kw.sum()),
            "recall_U": float((ok & (u <= t["U"])).sum() / kw.sum()),
            "recall_MSP": float((ok & (msp_u <= t["MSP"])).sum() / kw.sum())}  # fmt: skip


def summary(names: list[str], pred: np.ndarray, msp_u: np.ndarray, s: dict, sel: np.ndarray,
            gate: dict | None = None) -> dict:  # fmt: skip
    p = pred[sel]
    kw = np.isin(p, [names.index(w) for w in K.WORDS])
    counts = np.bincount(p[kw], minlength=len(names))
    both = 0 < kw.sum() < len(kw)  # U's and MSP's AUROC: false triggers (a keyword called) vs the rest
    return {
        "n": int(sel.sum()),
        "silence": float(np.mean(p == names.index(K.SILENCE))),
        "unknown": float(np.mean(p == names.index(K.UNKNOWN))),
        "keyword": float(kw.mean()),
        "keywords_called": {names[i]: int(counts[i]) for i in np.argsort(counts)[::-1][:3] if counts[i]},
        "mean_p_err": float(np.mean(np.asarray(s["p_err"])[sel])),
        "mean_U": float(np.mean(np.asarray(s["U"])[sel])),
        "alarm_rate": float(np.mean(np.asarray(s.get("alarm", np.zeros(len(pred))))[sel] > 0)),
        "auroc_trigger_U": float(M.auroc(np.asarray(s["U"], np.float64)[sel], kw)) if both else None,
        "auroc_trigger_MSP": float(M.auroc(msp_u[sel], kw)) if both else None,
    } | ({} if gate is None else {
        "keyword_gated_U": float(np.mean(kw & (np.asarray(s["U"])[sel] <= gate["thresholds"]["U"]))),
        "keyword_gated_MSP": float(np.mean(kw & (msp_u[sel] <= gate["thresholds"]["MSP"]))),
    })  # fmt: skip


def model_rows(md, waves: np.ndarray, cats: np.ndarray, gains: list[float], syn=None,
               keep: float = 0.0) -> dict:  # fmt: skip
    names = list(md.config["class_names"])
    if K.SILENCE not in names or K.UNKNOWN not in names:
        raise SystemExit(f"{md.config.get('dataset')}: not a 12-class model (no {K.SILENCE} / {K.UNKNOWN})")
    fe = model_frontend(md)
    gate = gate_thresholds(md, fe, syn, keep) if keep > 0 and syn is not None else None
    out: dict = {"gate": gate} if gate else {}
    for g in gains:
        pred, msp_u, s = scores(md, audio.finish(audio.mfcc(at_gain(waves, g)), fe))
        rows = {c: summary(names, pred, msp_u, s, cats == c, gate) for c in sorted(set(cats.tolist()))}
        rows["all"] = summary(names, pred, msp_u, s, np.ones(len(cats), bool), gate)
        out[f"{g:+g} dB"] = rows
    return out


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dirs", nargs="+")
    ap.add_argument("--dir", required=True, help="<category>/*.wav recordings with no keyword in them")
    ap.add_argument("--gains", default="0", help="levels to play every piece at, dB (comma-separated)")
    ap.add_argument("--keep", type=float, default=0.95,
                    help="gate keywords at the U / MSP threshold keeping this share of the right synthetic "
                    "test keywords (0: no gate)")  # fmt: skip
    ap.add_argument("--out", default="runs/kw12_real_noise.json")
    a = ap.parse_args()
    gains = [float(g) for g in a.gains.split(",")]
    waves, cats, files = read_dir(Path(a.dir))
    res: dict = {"dir": str(a.dir), "recordings": files, "pieces": int(len(cats)), "gains_db": gains,
                 "models": {}}  # fmt: skip
    syn = None
    if a.keep > 0:
        ds, _ = load_raw(0)
        syn = (ds.x_test, ds.y_test)
    for d in a.model_dirs:
        rows = model_rows(load_model_dir(d), waves, cats, gains, syn, a.keep)
        res["models"][d] = rows
        gate = rows.get("gate")
        if gate:
            print(f"{d}: gates keeping {gate['keep']} of the right synthetic test keywords: U <= "
                  f"{gate['thresholds']['U']:.3f}, MSP u <= {gate['thresholds']['MSP']:.3f} (keyword "
                  f"recall {gate['recall_ungated']:.3f} -> {gate['recall_U']:.3f} / "
                  f"{gate['recall_MSP']:.3f})")  # fmt: skip
        for g, r in ((g, r) for g, r in rows.items() if g != "gate"):
            v = r["all"]
            print(f"{d} ({g}): {v['n']} pieces: `_silence_` {v['silence']:.3f}, `_unknown_` "
                  f"{v['unknown']:.3f}, a keyword {v['keyword']:.3f} {v['keywords_called']}; false trigger "
                  f"vs rest AUROC U {_f(v['auroc_trigger_U'])} MSP {_f(v['auroc_trigger_MSP'])}; alarms "
                  f"{v['alarm_rate']:.3f}", flush=True)  # fmt: skip
            if gate:
                print(f"   false triggers gated by U {v['keyword_gated_U']:.3f}, by MSP "
                      f"{v['keyword_gated_MSP']:.3f}")
            print("   keyword per category " + ", ".join(f"{c} {v['keyword']:.2f}" for c, v in r.items()
                                                          if c != "all"))  # fmt: skip
    write_text(Path(a.out), json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
