"""`snapuq eval` on a data set with several OOD sets (CIFAR-10: far = Fashion-MNIST / MNIST at 32x32x3,
near = photo patches): one pooled ID-vs-OOD figure and a row per set for every method."""

import json

import numpy as np

from snapuq.cli import main


def _idx(path, a):
    dims = b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    path.write_bytes(bytes([0, 0, 8, a.ndim]) + dims + a.tobytes())


def test_eval_reports_each_ood_set(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "data" / "cifar-10-batches-bin"
    d.mkdir(parents=True)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        lab = (np.arange(40) % 10).astype(np.uint8)
        img = rng.integers(0, 256, (40, 3072), dtype=np.uint8)
        d.joinpath(name).write_bytes(np.concatenate([lab[:, None], img], axis=1).tobytes())
    (tmp_path / "data" / "fashion_mnist").mkdir()
    fash = rng.integers(0, 256, (50, 28, 28), dtype=np.uint8)
    _idx(tmp_path / "data" / "fashion_mnist" / "t10k-images-idx3-ubyte", fash)
    m, r = tmp_path / "m", tmp_path / "r"
    assert main(["train", "--dataset", "cifar10", "--data-dir", str(tmp_path / "data"), "--out", str(m),
                 "--epochs", "1", "--head-epochs", "1", "--no-baselines", "--no-progress"]) == 0  # fmt: skip
    assert main(["eval", str(m), "--report", str(r), "--methods", "snap,msp", "--limit", "30",
                 "--n-ood", "20", "--no-progress"]) == 0  # fmt: skip
    met = json.loads((r / "metrics.json").read_text())
    assert met["ood_sets"] == {"far:fashion_mnist": 20, "near:photo_patches": 20} and met["n_ood"] == 40
    for name in ("snap", "msp"):
        det = met["details"][name]
        for label in met["ood_sets"]:
            assert 0.0 <= det[f"auroc_idok_vs_ood[{label}]"] <= 1.0
            assert 0.0 <= det[f"auroc_id_vs_ood[{label}]"] <= 1.0
