"""Does the keywords12 DS-CNN learn more from softer targets, or from other mixes of its own clips? One
variant at a time, the backbone alone on a built feature cache (through the set's front end), scored on the
test split as tools/kw12_recipe_study.py does (12 classes, the 10 keywords per voice family, the shift
profile):

  a<alpha>:T<temp>:s<seed>[:e<epochs>][:ext<k>][:mix<beta>]

- a, T: knowledge distillation from a deep ensemble (the `ensemble_*.keras` of --teacher, e.g. a model
  directory's baselines/): loss (1 - a) * cross-entropy + a * T^2 * KL(ensemble at T || student at T), the
  ensemble's probabilities averaged over its members on every train clip. a0 is plain cross-entropy in the
  same loop (the comparison row: this loop shuffles unlike snapuq's recipe).
- ext<k>: every train clip of a flite / festival speaker k times per epoch (their share 25 % -> 40 % at k=2).
- mix<beta>: mixup of the MFCC inputs and their targets, weight max(l, 1 - l), l ~ Beta(beta, beta).
- envsil<p>: a share p of the train `_silence_` clips rendered again with the everyday backgrounds of
  augment_audio.ENV_KINDS among the kinds (clatter, water, machine, animal; babble falls back to pink noise
  here). Every row also reports the share of tools/kw12_noise_probe.py's clips of each kind called
  `_silence_`, and the keyword accuracy with each kind behind the test split's keywords at 10 and 0 dB SNR
  (its `--speech-snr`). A `--cache` of `build_keywords12(..., backgrounds="everyday")` trains on that build
  (its dev and test splits are the set's own).
- swa<k>: stochastic weight averaging: after the cosine, k more epochs at a constant 10 % of the peak rate,
  the weights averaged over the end of the cosine and the end of each of those epochs, then the batch-norm
  statistics recomputed on the train clips for the averaged weights.

Cosine from 3e-3 over 16 epochs (1 warm-up), batch 64, Adam, as the keywords12 recipe. Usage:
  PYTHONPATH=host:tools nice python tools/kw12_distill_study.py --out runs/kw12_distill.json \\
      --cache ~/.cache/snapuq/keywords12-k12b-s0-1600-80-100-t3-v1eabaa1cb1 \\
      --teacher models/keywords/baselines --variants a0:T1:s0,a0.7:T3:s0,a0:T1:s0:ext2
Resumable: finished variants in --out are kept.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from kw12_compare import accuracy_row, family, read_rows, record_row  # tools/ is on sys.path here

from snapuq.data import keywords12 as K
from snapuq.errors import SnapuqError
from snapuq.nn.distill import load_teachers, soft_targets
from snapuq.nn.recipe import recompute_batchnorm
from snapuq.options import TrainOptions


def parse(variant: str) -> dict:
    a, t, s, *rest = variant.split(":")
    out = {"alpha": float(a[1:]), "T": float(t[1:]), "seed": int(s[1:]), "epochs": 16, "ext_rep": 1,
           "mix": 0.0, "swa": 0, "envsil": 0.0}
    for r in rest:
        if r.startswith("ext"):
            out["ext_rep"] = int(r[3:])
        elif r.startswith("envsil"):
            out["envsil"] = float(r[6:])
        elif r.startswith("swa"):
            out["swa"] = int(r[3:])
        elif r.startswith("mix"):
            out["mix"] = float(r[3:])
        elif r.startswith("e") and r[1:].isdigit():
            out["epochs"] = int(r[1:])
        else:
            raise SystemExit(f"kw12_distill_study: unknown part '{r}' of variant {variant}")
    return out


def env_silence(ds, share: float, seed: int) -> np.ndarray:
    """ds.x_train with a share of its `_silence_` clips rendered again, everyday backgrounds among the
    kinds."""
    from snapuq.data import audio
    from snapuq.data import augment_audio as A

    rows = np.nonzero(ds.y_train == K.CLASSES.index(K.SILENCE))[0]
    rng = np.random.default_rng([seed, 77])
    pick = np.sort(rng.choice(rows, int(round(share * len(rows))), replace=False))
    kinds = A.NOISE_KINDS + A.ENV_KINDS
    prof = A.PROFILES["train"]
    gens = [np.random.default_rng([seed, 77, int(i)]) for i in pick]
    waves = np.stack([audio.to_int16(A.silence(g, [], prof, kinds=kinds)) for g in gens])
    x = ds.x_train.copy()
    x[pick] = audio.features(waves, ds.meta["frontend"])
    print(f"  {len(pick)} of {len(rows)} train _silence_ clips with {', '.join(A.ENV_KINDS)}", flush=True)
    return x


def probe_features(ds, cache: dict) -> dict:
    """tools/kw12_noise_probe.py's clips (seed 1: not the probe's own draws), through the set's front end."""
    from kw12_noise_probe import KINDS, render

    from snapuq.data import audio

    if "probe" not in cache:
        cache["probe"] = {k: audio.features(render(k, 100, 1), ds.meta["frontend"]) for k in KINDS}
    return cache["probe"]


SPEECH_SNR_DB = (10.0, 0.0)


def speech_features(ds, cache: dict) -> dict:
    """The test split's keyword clips with each of tools/kw12_noise_probe.py's kinds behind them at
    SPEECH_SNR_DB (its `--speech-snr`), through the set's front end; and the keywords' labels."""
    from kw12_noise_probe import KINDS, behind_speech

    from snapuq.data import audio

    if "speech" not in cache:
        kw = np.nonzero(ds.y_test < len(K.WORDS))[0]
        waves = np.load(ds.meta["waves"]["test"])[kw]
        fe = ds.meta["frontend"]
        cache["speech"] = {f"{k} @ {snr:g} dB": audio.features(behind_speech(waves, k, snr, 0), fe)
                           for snr in SPEECH_SNR_DB for k in KINDS}  # fmt: skip
        cache["speech_y"] = ds.y_test[kw]
    return cache["speech"]


def run_one(variant: str, ds, arr: dict, teachers: list, cache: dict) -> dict:
    import keras
    import tensorflow as tf

    from snapuq.nn.backbones import build_backbone

    v = parse(variant)
    alpha, temp, seed, n_cls = v["alpha"], v["T"], v["seed"], len(K.CLASSES)
    if alpha > 0 and temp not in cache:
        cache[temp] = soft_targets(teachers, ds.x_train, temp)
    soft = cache.get(temp, np.zeros((len(ds.y_train), n_cls), np.float32))
    x, yt = ds.x_train, np.concatenate([np.eye(n_cls, dtype=np.float32)[ds.y_train], soft], 1)
    if v["envsil"] > 0:
        x = env_silence(ds, v["envsil"], seed)
    if v["ext_rep"] > 1:
        ext = np.array([family(s) == "ext" for s in arr["voice_train"]])
        idx = np.concatenate([np.arange(len(x))] + [np.nonzero(ext)[0]] * (v["ext_rep"] - 1))
        x, yt = x[idx], yt[idx]

    def loss(y, z):  # snapuq.nn.distill.distill_loss on one-hot rows, which mixup can mix (a label cannot)
        ce = keras.losses.categorical_crossentropy(y[:, :n_cls], z, from_logits=True)
        if alpha == 0:
            return ce
        p = y[:, n_cls:]
        kl = tf.reduce_sum(p * (tf.math.log(p + 1e-8) - tf.nn.log_softmax(z / temp)), axis=1)
        return (1 - alpha) * ce + alpha * temp * temp * kl

    opts = TrainOptions(epochs=v["epochs"], batch_size=64, lr=3e-3, schedule="cosine", warmup_epochs=1)
    keras.utils.set_random_seed(seed)
    m = build_backbone("dscnn", ds.input_shape, n_cls, filters=64)
    opt = keras.optimizers.Adam(opts.lr_at(0))
    m.compile(optimizer=opt, loss=loss)
    t0 = time.perf_counter()
    avg: list | None = None
    pre: dict = {}
    for e in range(opts.epochs + v["swa"]):
        opt.learning_rate.assign(opts.lr_at(e) if e < opts.epochs else 0.1 * opts.lr)
        xe, ye = x, yt
        if v["mix"] > 0:
            rng = np.random.default_rng([seed, e])
            lam = rng.beta(v["mix"], v["mix"], len(x)).astype(np.float32)
            lam = np.maximum(lam, 1 - lam)
            pr = rng.permutation(len(x))
            xe = lam[:, None, None, None] * x + (1 - lam[:, None, None, None]) * x[pr]
            ye = lam[:, None] * yt + (1 - lam[:, None]) * yt[pr]
        h = m.fit(xe, ye, batch_size=opts.batch_size, epochs=1, shuffle=True, verbose=0)
        n_ep = opts.epochs + v["swa"]
        print(f"  {variant} epoch {e + 1}/{n_ep} loss {h.history['loss'][-1]:.4f}", flush=True)
        if v["swa"] and e == opts.epochs - 1:  # the plain model of the same run: the paired comparison
            fam = np.array([family(s) for s in arr["voice_test"]])
            for name, xs in (("test", ds.x_test), ("test_shift", arr["x_test_shift"])):
                ok = np.asarray(m.predict(xs, batch_size=512, verbose=0)).argmax(1) == ds.y_test
                pre.update({f"pre_swa_{k}": val for k, val in accuracy_row(name, ok, ds.y_test, fam).items()})
            print(f"  {variant} before averaging: test {pre['pre_swa_test_all12']:.4f}", flush=True)
        if v["swa"] and e >= opts.epochs - 1:
            w = [np.asarray(a, np.float64) for a in m.get_weights()]
            avg = w if avg is None else [a + b for a, b in zip(avg, w)]
    if avg is not None:
        m.set_weights([a / (v["swa"] + 1) for a in avg])
        recompute_batchnorm(m, x, seed)
    row = {"variant": variant, **v, "members": len(teachers), "n_train": int(len(x)),
           "train_s": round(time.perf_counter() - t0, 1), **pre}  # fmt: skip
    fam = np.array([family(s) for s in arr["voice_test"]])
    for name, xs in (("test", ds.x_test), ("test_shift", arr["x_test_shift"])):
        ok = np.asarray(m.predict(xs, batch_size=512, verbose=0)).argmax(1) == ds.y_test
        row.update(accuracy_row(name, ok, ds.y_test, fam))
        if name not in cache:  # the ensemble's own accuracy: the same for every variant
            cache[name] = float((soft_targets(teachers, xs, 1.0).argmax(1) == ds.y_test).mean())
        row[f"ensemble_{name}_all12"] = cache[name]
    probe = probe_features(ds, cache)
    sil = K.CLASSES.index(K.SILENCE)
    row["probe_silence_share"] = {k: float((np.asarray(m.predict(px, batch_size=512, verbose=0)).argmax(1)
                                            == sil).mean()) for k, px in probe.items()}  # fmt: skip
    print(f"  {variant}: test {row['test_all12']:.4f}, probe silence " + " ".join(
        f"{k} {s:.2f}" for k, s in row["probe_silence_share"].items()), flush=True)
    speech = speech_features(ds, cache)
    row["behind_speech_keywords"] = {
        k: float((np.asarray(m.predict(sx, batch_size=512, verbose=0)).argmax(1) == cache["speech_y"]).mean())
        for k, sx in speech.items()
    }
    print(f"  {variant}: keywords behind " + " ".join(
        f"{k} {s:.3f}" for k, s in row["behind_speech_keywords"].items()), flush=True)
    sub = slice(None, None, 8)
    row["train_acc"] = float((np.asarray(m.predict(ds.x_train[sub], batch_size=1024, verbose=0)).argmax(1)
                              == ds.y_train[sub]).mean())  # fmt: skip
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/kw12_distill.json")
    ap.add_argument("--cache", required=True, help="a built keywords12 feature cache folder")
    ap.add_argument("--teacher", required=True, help="what `snapuq train --distill-from` takes (a model "
                    "directory, a folder of ensemble_*.keras)")
    ap.add_argument("--variants", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    rows = read_rows(out)
    done = {r["variant"] for r in rows}
    ds = K.load_cache(Path(a.cache).expanduser())
    arr = K.extra_arrays(ds)
    try:
        teachers, _ = load_teachers(a.teacher, ds.input_shape, len(K.CLASSES))
    except SnapuqError as e:
        raise SystemExit(f"kw12_distill_study: {e}") from None
    cache: dict = {}  # soft targets by temperature, the ensemble's accuracy by split
    for v in a.variants.split(","):
        if v in done:
            continue
        r = run_one(v, ds, arr, teachers, cache)
        r["cache_dir"], r["teacher"] = str(a.cache), str(a.teacher)
        record_row(out, rows, r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
