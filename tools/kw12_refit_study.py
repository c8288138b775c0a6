"""Can a trained keywords model learn everyday backgrounds by its classifier alone? The model's last layer
(`feat`, the 64 pooled features -> `logits`) is fitted again, from its own weights, on the train split with
a share of the `_silence_` clips rendered again with augment_audio.ENV_KINDS among the kinds (as the
`envsil<p>` variant of tools/kw12_distill_study.py); every layer before `feat`, so every SNAP tap and head,
stays as it is. Beside it the same refit on the unchanged train split (what the refit alone does). Reported
per row: 12-class accuracy on the test split and on its shift-profile rendering, the test split's
`_silence_` and `_unknown_`, the dev split, and the share of tools/kw12_noise_probe.py's clips (seed 1: not
the probe's own draws) called `_silence_`.

Usage: PYTHONPATH=host:tools python tools/kw12_refit_study.py MODEL_DIR --cache CACHE_DIR \\
           [--share 0.5] [--epochs 3,8] [--out runs/kw12_refit.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from kw12_compare import model_frontend  # tools/ is on sys.path when this script runs
from kw12_distill_study import env_silence, probe_features

from snapuq.data import keywords12 as K
from snapuq.io import write_text
from snapuq.nn.saved import load_model_dir


def main() -> int:
    import keras

    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--cache", required=True, help="a built keywords12 feature cache folder")
    ap.add_argument("--share", type=float, default=0.5, help="share of train _silence_ rendered again")
    ap.add_argument("--epochs", default="3,8", help="refit lengths to try (Adam 1e-3, batch 64)")
    ap.add_argument("--out", default="runs/kw12_refit.json")
    a = ap.parse_args()
    md = load_model_dir(a.model_dir)
    ds = K.load_cache(Path(a.cache), frontend=model_frontend(md))
    arr = K.extra_arrays(ds)
    feat = keras.Model(md.model.inputs, md.model.get_layer("feat").output)
    w0, b0 = (np.asarray(v) for v in md.model.get_layer("logits").get_weights())

    def features(x: np.ndarray) -> np.ndarray:
        return feat.predict(np.asarray(x, np.float32), batch_size=512, verbose=0)

    sil, unk = K.CLASSES.index(K.SILENCE), K.CLASSES.index(K.UNKNOWN)
    f_test, f_shift, f_dev = features(ds.x_test), features(arr["x_test_shift"]), features(ds.x_dev)
    probe = {k: features(v) for k, v in probe_features(ds, {}).items()}

    def row(w: np.ndarray, b: np.ndarray) -> dict:
        p, ps = (f_test @ w + b).argmax(1), (f_shift @ w + b).argmax(1)
        r = {"test_all12": float(np.mean(p == ds.y_test)),
             "test_shift_all12": float(np.mean(ps == ds.y_test)),
             "test_silence": float(np.mean(p[ds.y_test == sil] == sil)),
             "test_unknown": float(np.mean(p[ds.y_test == unk] == unk)),
             "dev_all12": float(np.mean((f_dev @ w + b).argmax(1) == ds.y_dev))}  # fmt: skip
        r["probe_silence_share"] = {k: float(np.mean((v @ w + b).argmax(1) == sil)) for k, v in probe.items()}
        return r

    res = {
        "model_dir": a.model_dir,
        "cache_dir": a.cache,
        "share": a.share,
        "rows": {"as shipped": row(w0, b0)},
    }
    print("as shipped", json.dumps(res["rows"]["as shipped"]), flush=True)
    trains = {
        "refit plain": features(ds.x_train),
        f"refit envsil{a.share:g}": features(env_silence(ds, a.share, 0)),
    }
    for name, f_train in trains.items():
        for ep in (int(e) for e in a.epochs.split(",")):
            keras.utils.set_random_seed(0)
            inp = keras.Input((f_train.shape[1],))
            lm = keras.Model(
                inp, keras.layers.Dense(len(K.CLASSES), kernel_regularizer=keras.regularizers.l2(1e-4))(inp)
            )
            lm.layers[-1].set_weights([w0, b0])
            lm.compile(
                keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            )
            lm.fit(f_train, ds.y_train, batch_size=64, epochs=ep, verbose=0, shuffle=True)
            res["rows"][f"{name} e{ep}"] = r = row(*(np.asarray(v) for v in lm.layers[-1].get_weights()))
            print(f"{name} e{ep}", json.dumps(r), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
