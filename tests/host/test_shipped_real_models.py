"""The shipped models trained on the real data sets (models/mnist, models/cifar10): their int8 path on 200
official test images — accuracy within 1 point of the model's target, and the C core (the code the device
runs) vs TFLM with 0 differing elements on every output. Skipped, with the reason shown, where the real
data sets are absent (a user's clone); a shipped model missing its export fails."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SNAPUQ_DATA_DIR", ROOT.parent / "shared" / "data"))
# model directory -> target accuracy (float, full test split): MNIST CNN 99.0 %, MLPerf Tiny IC 85 %
SHIPPED = {"mnist": 0.990, "cifar10": 0.85}
N = 200


@pytest.mark.skipif(not DATA.is_dir(), reason=f"real data sets not present at {DATA} (set SNAPUQ_DATA_DIR)")
@pytest.mark.parametrize("name", [n for n in SHIPPED if (ROOT / "models" / n).is_dir()])
def test_shipped_real_model_on_200_test_images(name):
    from snapuq.commands.verify import verify
    from snapuq.data import load_dataset
    from snapuq.export import int8_predict

    d = ROOT / "models" / name
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["dataset"] == name and cfg["recipe"], "a shipped real model records its whole recipe"
    assert cfg["test_accuracy_float"] >= SHIPPED[name], f"{name}: float test accuracy below its target"
    ds = load_dataset(name, str(DATA), seed=int(cfg.get("seed", 0)))
    r = int8_predict(d, ds.x_test[:N])
    acc = float((r["pred"] == ds.y_test[:N]).mean())
    assert acc >= SHIPPED[name] - 0.01, f"{name}: int8 accuracy {acc:.3f} on the first {N} test images"
    v = verify(d, n=N, data_dir=str(DATA))
    assert v["n"] == N and v["differing_total"] == 0, v["differing"]
    assert np.isfinite(r["U"]).all()
