"""`snapuq reproduce` end to end on a small MNIST-format folder (sklearn's digits drawn at 28x28 and written
as IDX files, so the real loader, recipe, export, eval over seeds and the RESULTS.md writer all run)."""

import json
from pathlib import Path

import numpy as np
import pytest

from snapuq.cli import main


def _idx(path: Path, a: np.ndarray) -> None:
    dims = b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    path.write_bytes(bytes([0, 0, 8, a.ndim]) + dims + a.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def mnist_like(tmp_path_factory) -> Path:
    from sklearn.datasets import load_digits

    d = load_digits()
    img = np.kron(d.images / 16.0, np.ones((3, 3)))  # 24x24
    img = np.pad(img, ((0, 0), (2, 2), (2, 2))) * 255
    root = tmp_path_factory.mktemp("data")
    (root / "mnist").mkdir()
    (root / "fashion_mnist").mkdir()
    _idx(root / "mnist" / "train-images-idx3-ubyte", img[:1400])
    _idx(root / "mnist" / "train-labels-idx1-ubyte", d.target[:1400])
    _idx(root / "mnist" / "t10k-images-idx3-ubyte", img[1400:])
    _idx(root / "mnist" / "t10k-labels-idx1-ubyte", d.target[1400:])
    rng = np.random.default_rng(0)
    _idx(root / "fashion_mnist" / "t10k-images-idx3-ubyte", rng.integers(0, 256, (200, 28, 28)))
    _idx(root / "fashion_mnist" / "t10k-labels-idx1-ubyte", rng.integers(0, 10, 200))
    return root


def test_reproduce_trains_evaluates_and_writes_results(mnist_like, tmp_path):
    """Two seeds, the deep ensemble made of their backbones (--ensemble-from-seeds: only the early-exit model
    trains for it), every method scored, a second run reusing all of it."""
    docs, models, runs = tmp_path / "docs", tmp_path / "models", tmp_path / "runs"
    argv = ["reproduce", "--data-dir", str(mnist_like), "--datasets", "mnist", "--seeds", "0,1",
            "--models", str(models), "--runs", str(runs), "--docs", str(docs), "--ensemble-from-seeds",
            "--limit", "120", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    res = json.loads((docs / "results" / "reproduce_mnist.json").read_text())
    assert res["dataset"] == "mnist" and res["seeds"] == [0, 1]
    assert {"snap", "msp", "mahalanobis", "deep_ensemble", "ee_ensemble"} <= set(res["methods"])
    info = json.loads((models / "mnist" / "baselines" / "baselines.json").read_text())
    assert info["ensemble"]["seeds"] == [0, 1] and "early_exit" in info
    assert not (models / "mnist_seed1" / "baselines").exists()
    assert "the deep ensemble is the 2 seeds' own backbones" in (docs / "RESULTS.md").read_text()
    crit = {c["criterion"]: c for c in res["criteria_real_data"]}
    assert "float accuracy ≥ 0.990" in crit and "CID AUPRC ≥ 0.66 and ≥ EE-ens, MSP" in crit
    md = (docs / "RESULTS.md").read_text()
    assert "## mnist" in md and "(paper 0.9)" in md and "| snap |" in md
    cfg = json.loads((models / "mnist" / "config.json").read_text())
    assert cfg["recipe"]["augment"] == "shift" and (models / "mnist" / "eval" / "metrics.json").is_file()
    assert (models / "mnist" / "model_int8.tflite").is_file()
    # a second run reuses the model and the fresh report
    mt = [(models / "mnist" / f).stat().st_mtime for f in ("model.keras", "baselines/baselines.json")]
    assert main(argv + ["--resume"]) == 0
    assert [(models / "mnist" / f).stat().st_mtime for f in ("model.keras", "baselines/baselines.json")] == mt


def test_seed_ensemble_is_kept_for_the_same_folders_spelled_otherwise(tmp_path, monkeypatch):
    """Unit test (no training): baselines.json's from_model_dirs that name the wanted seed folders as
    ./models/x, models/x or an absolute path keep D/baselines; other folders or another order train it."""
    import argparse

    from snapuq.commands import reproduce as R
    from snapuq.commands import train as T

    monkeypatch.chdir(tmp_path)
    d = Path("models") / "mnist"
    (d / "baselines").mkdir(parents=True)
    trained: list[list[str]] = []
    monkeypatch.setattr(T, "run_argv", lambda argv: trained.append(argv) or 0)
    args = argparse.Namespace(data_dir="data", resume=False, no_progress=True)

    def made(dirs) -> list[list[str]]:
        (d / "baselines" / "baselines.json").write_text(json.dumps({"ensemble": {"from_model_dirs": dirs}}))
        trained.clear()
        R._seed_ensemble(d, {"seed": 0}, [0, 1], args)
        return trained

    assert made(["models/mnist", "models/mnist_seed1"]) == []
    assert made(["./models/mnist", "./models/mnist_seed1"]) == []
    assert made([str(tmp_path / "models" / "mnist"), "models/../models/mnist_seed1"]) == []
    assert R._same_dirs(["./a"], [str(tmp_path / "a")]) and not R._same_dirs(["a"], ["b"])
    assert len(made(["models/mnist_seed1", "models/mnist"])) == 1
    assert len(made(["models/mnist", "models/mnist_seed2"])) == 1
    assert len(made(None)) == 1


def test_results_md_says_when_baselines_are_shared_and_when_a_figure_has_fewer_seeds():
    """Unit test of the writer (no training): the shared-baselines sentence and the seed count of a cell."""
    from snapuq.commands.reproduce import render

    def row(v):
        return {"auroc_ok_vs_err": v, "cid_auprc": v}

    agg = {"seeds": [0, 1, 2], "n_test": 10,
           "accuracy": {"float": 0.99, "float_sd": 0.001, "int8": 0.99, "int8_sd": 0.0, "int8_n": 1},
           "methods": {"snap": row(0.95), "msp": row(0.94), "deep_ensemble": row(0.96)},
           "sd": {"snap": row(0.01), "msp": row(0.01), "deep_ensemble": row(0.0)},
           "n_seeds": {"snap": row(3), "msp": row(3), "deep_ensemble": row(1)},
           "baselines": {"dir": "models/mnist/baselines", "seed": 0}}  # fmt: skip
    md = render({"mnist": agg})
    assert "trained once, with seed 0" in md and "models/mnist/baselines" in md
    assert "0.960 (1 of 3 seeds)" in md and "0.950 ± 0.010 (paper 0.9)" in md
    assert "float accuracy 0.9900 ± 0.0010" in md and "(1 of 3 seeds exported)" in md
    agg["baselines"] = {"dir": "models/mnist/baselines", "seed": 0, "ensemble_seeds": [0, 1, 2]}
    md = render({"mnist": agg})
    assert "the deep ensemble is the 3 seeds' own backbones (seeds 0, 1, 2" in md and "5-member" not in md
    old = {k: v for k, v in agg.items() if k not in ("n_seeds", "baselines")}  # a json from before: no note
    old["accuracy"] = {"float": 0.99, "int8": 0.99}
    md = render({"cifar10": old})
    assert "trained once" not in md and "of 3 seeds" not in md and "float accuracy 0.9900," in md


def test_an_export_is_fresh_by_its_recorded_sha256_not_by_file_times(tmp_path):
    """A fresh clone writes files in any order: the shipped export must not look stale (and be redone) for
    that, and a calib.json refitted since the export must make it stale whatever the file times say."""
    import os

    from snapuq.commands.reproduce import _fresh_export
    from snapuq.modeldir import ModelPaths, record_parts

    d = tmp_path / "m"
    d.mkdir()
    P = ModelPaths
    parts = (P.CONFIG, P.KERAS, P.CALIB, P.INT8, P.MANIFEST, P.C_SOURCE, P.C_HEADER)
    for n in parts:
        (d / n).write_text(f"{n} v1")
    assert not _fresh_export(d)  # no MANIFEST.sha256: nothing vouches for the export
    record_parts(d, parts)
    os.utime(d / P.MANIFEST, (1_000_000, 1_000_000))  # snapuq.json older than calib.json, as in a clone
    assert _fresh_export(d)
    (d / P.CALIB).write_text("refitted")
    os.utime(d / P.CALIB, (1_000, 1_000))  # and older than the export
    assert not _fresh_export(d)
    (d / P.CALIB).write_text(f"{P.CALIB} v1")
    (d / P.FLOAT).write_text("a float model from elsewhere")  # present: checked too
    assert not _fresh_export(d)


def test_deployment_row_from_the_bench_table_report_and_stale_when_the_model_changed(tmp_path):
    """Unit test (no firmware): the Small-MCU row of `reproduce --deploy` read back from
    docs/results/deploy_<ds>.json: its criteria (SNAP fits and equals TFLM on 200 inputs, EE-ens / DEEP out of
    memory, overhead ≤ 2 %), the paper's row beside it in RESULTS.md, and a report of another int8 model
    shown as stale, not as this model's figures."""
    import argparse

    from snapuq.commands.reproduce import DEPLOY_INPUTS, deployment, deployment_criteria, render
    from snapuq.modeldir import ModelPaths, sha256_file

    d, docs = tmp_path / "models" / "cifar10", tmp_path / "docs"
    d.mkdir(parents=True)
    (docs / "results").mkdir(parents=True)
    ModelPaths(d).int8.write_bytes(b"int8 model v1")

    def ok(method: str, instr: float, mism: int = 0) -> dict:
        return {"status": "ok", "board": "small", "workload": str(d), "method": method, "flash": 200_000,
                "ram": {"peak": 60_000}, "instructions": {"total": instr},
                "model": {"latency_ms": instr / 80e3}, "mismatches_vs_tflm": mism,
                "checked_inputs": DEPLOY_INPUTS}  # fmt: skip

    oom = {"status": "OOM", "board": "small", "workload": str(d), "oom_source": "link",
           "link_error": ["region FLASH overflowed by 9 bytes"], "available": {}}  # fmt: skip
    rows = [ok("base", 1e7), ok("snap", 1.015e7), {**oom, "method": "ee"}, {**oom, "method": "deep"}]
    meta = {"int8_sha256": sha256_file(ModelPaths(d).int8), "check_inputs": "first 200 test inputs"}
    report = docs / "results" / "deploy_cifar10.json"
    report.write_text(json.dumps({"workloads": {str(d): meta}, "rows": rows}))
    args = argparse.Namespace(deploy=False, data_dir="data")
    dep = deployment("cifar10", d, args, docs)
    crit = deployment_criteria("cifar10", dep)
    assert [ok for _, _, ok in crit] == [True, True, True, True], crit
    assert "+1.50% instructions" in crit[-1][1]
    agg = {"seeds": [0], "n_test": 10, "accuracy": {"float": 0.88, "int8": 0.88}, "methods": {},
           "deployment": dep}  # fmt: skip
    md = render({"cifar10": agg})
    assert "### Deployment (Small-MCU)" in md and "| SNAP-UQ | 158 | 195.3 | 85 | 58.6 | 178 |" in md
    assert "| EE-ens | OOM | **OOM** (link: region FLASH overflowed by 9 bytes" in md
    assert "| SNAP-UQ | 195.3 | 58.6 | 10,150,000 | 126.9 | 0 differing of 200 |" in md
    assert "| DEEP | **OOM** (link) |" in md
    # a device mismatch or a SNAP that costs more than 2 % fails its criterion
    rows[1] = ok("snap", 1.03e7, mism=1)
    report.write_text(json.dumps({"workloads": {str(d): meta}, "rows": rows}))
    met = [ok for _, _, ok in deployment_criteria("cifar10", deployment("cifar10", d, args, docs))]
    assert met == [False, True, True, False]
    # MNIST: no paper row, so no out-of-memory criterion for EE-ens / DEEP
    assert [c for c, _, _ in deployment_criteria("mnist", deployment("cifar10", d, args, docs))] == [
        "Small-MCU: SNAP fits 256 KB / 64 KB, device = TFLM on 200 test inputs",
        "Small-MCU: SNAP overhead ≤ 2% of the backbone",
    ]
    ModelPaths(d).int8.write_bytes(b"int8 model v2")  # retrained since: the row is not this model's
    dep = deployment("cifar10", d, args, docs)
    assert "stale" in dep and deployment_criteria("cifar10", dep) == []
    assert "Not shown: deploy_cifar10.json was measured on another int8 model" in render(
        {"cifar10": {**agg, "deployment": dep}}
    )
    report.write_text("{not json")
    with pytest.raises(Exception, match="not a bench --table report"):
        deployment("cifar10", d, args, docs)


def test_an_earlier_data_sets_deployment_row_is_refreshed_without_rerunning_its_eval(tmp_path, monkeypatch):
    """`reproduce --datasets mnist` keeps cifar10's figures from its earlier run and shows cifar10's
    deployment report as it is now (measured later with bench --table), its criteria recounted."""
    from snapuq.cli import main as cli
    from snapuq.commands import reproduce as R
    from snapuq.modeldir import ModelPaths, sha256_file

    docs, models = tmp_path / "docs", tmp_path / "models"
    (docs / "results").mkdir(parents=True)
    (models / "cifar10").mkdir(parents=True)
    ModelPaths(models / "cifar10").int8.write_bytes(b"int8")
    agg = {"seeds": [0], "n_test": 10, "accuracy": {"float": 0.9, "int8": 0.9}, "methods": {}}
    (docs / "results" / "reproduce_cifar10.json").write_text(json.dumps({**agg, "dataset": "cifar10"}))
    snap = {"status": "ok", "board": "small", "workload": "cifar10", "method": "snap", "flash": 1024,
            "ram": {"peak": 2048}, "instructions": {"total": 1e6}, "model": {"latency_ms": 12.5},
            "mismatches_vs_tflm": 0, "checked_inputs": 200, "cycle_model": {"big": "derivation"}}  # fmt: skip
    meta = {"int8_sha256": sha256_file(ModelPaths(models / "cifar10").int8), "check_inputs": "200 inputs"}
    rep = {"workloads": {"c": meta}, "rows": [snap]}
    (docs / "results" / "deploy_cifar10.json").write_text(json.dumps(rep))
    monkeypatch.setattr(R, "reproduce_dataset", lambda ds, args, seeds: {**agg, "dataset": ds})
    data = tmp_path / "data"
    data.mkdir()
    argv = ["reproduce", "--data-dir", str(data), "--datasets", "mnist", "--seeds", "0", "--models",
            str(models), "--docs", str(docs), "--runs", str(tmp_path / "runs"), "--no-progress"]  # fmt: skip
    assert cli(argv) == 0
    md = (docs / "RESULTS.md").read_text()
    assert "## cifar10" in md and "| SNAP-UQ | 1.0 | 2.0 | 1,000,000 | 12.5 | 0 differing of 200 |" in md
    saved = json.loads((docs / "results" / "reproduce_cifar10.json").read_text())
    assert "cycle_model" not in saved["deployment"]["report"]["rows"][0]
    crit = saved["criteria_real_data"]
    assert any(c["criterion"].startswith("Small-MCU: SNAP fits") and c["met"] for c in crit)
