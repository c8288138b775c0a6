"""Write a keywords12 split as a Speech Commands-style test folder (DIR/<word>/<voice>_nohash_<i>.wav,
DIR/_unknown_/..., DIR/_silence_/..., DIR/testing_list.txt), to run `snapuq eval MODEL --data-dir DIR
--split test` on clips the model never trained on, e.g. the old 10-word model and the 12-class one alike.

Usage: PYTHONPATH=host python tools/kw12_write_tree.py DIR
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
from scipy.io import wavfile

from snapuq.data import keywords12 as K
from snapuq.data import load_dataset
from snapuq.data.dataset import split_waves


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    a = ap.parse_args()
    ds = load_dataset("keywords12", None, seed=0)
    ex = K.extra_arrays(ds)
    waves, y = np.asarray(split_waves(ds, "test")), ds.y_test
    root = Path(a.out)
    listed = []
    for i, (w, lab) in enumerate(zip(waves, y)):
        word = K.CLASSES[lab]
        spk = re.sub(r"[^A-Za-z0-9]", "", ex["voice_test"][i]) or "noise"
        rel = f"{word}/{spk}_nohash_{i}.wav"
        (root / word).mkdir(parents=True, exist_ok=True)
        wavfile.write(root / rel, 16000, w)
        listed.append(rel)
    (root / "testing_list.txt").write_text("\n".join(listed) + "\n")
    print(f"{len(listed)} clips in {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
