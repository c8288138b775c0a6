"""`snapuq eval`: the metrics.json contract, plots and report on a tiny model directory, and the CLI's
error paths. The tiny directory uses a synthetic 3-class image task registered as a dataset for the test,
so these tests exercise the evaluator and every baseline independently of the shipped backbones."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from snapuq import cli
from snapuq.evaluation.report import CONTRACT_KEYS

METHODS = [
    "snap",
    "msp",
    "entropy",
    "temp_scaling",
    "mc_dropout",
    "deep_ensemble",
    "ee_ensemble",
    "odin",
    "energy",
    "mahalanobis",
    "react",
    "ash",
    "dirichlet",
]


def _tiny_backbone(input_shape=(8, 8, 1), n_classes=3, **_kw):
    import keras

    inp = keras.Input(tuple(input_shape))
    h = keras.layers.Conv2D(8, 3, padding="same", name="c1")(inp)
    h = keras.layers.BatchNormalization(momentum=0.8, name="bn1")(h)
    h = keras.layers.ReLU(name="block1")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", name="c2")(h)
    h = keras.layers.ReLU(name="block2")(h)
    f = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    d = keras.layers.Dropout(0.3, name="drop1")(f)
    return keras.Model(inp, keras.layers.Dense(n_classes, name="logits")(d))


def _bars(n, rng):
    y = rng.integers(0, 3, n)
    x = rng.random((n, 8, 8, 1)).astype(np.float32) * 0.45
    for i, c in enumerate(y):
        r, q = rng.integers(0, 4, 2)
        for k in range(4):
            rr, qq = [(r, q + k), (r + k, q), (r + k, q + k)][c]
            x[i, rr, qq, 0] += 0.6
    return x, y


def _load_bars(data_dir, seed):
    from snapuq.data import Dataset

    rng = np.random.default_rng(seed)
    parts = []
    for n in (300, 150, 150):
        x, y = _bars(n, rng)
        flip = rng.random(n) < 0.08  # label noise: every split holds errors even for a perfect model
        parts.append((x, np.where(flip, (y + 1) % 3, y)))
    return Dataset("bars", *parts[0], *parts[1], *parts[2], ["h", "v", "d"], {"ood": "uniform noise"})


def _ood_bars(data_dir, n, seed, ds):
    return np.random.default_rng(seed + 5).random((n, 8, 8, 1)).astype(np.float32)


def _corrupt(x, name, severity=3, seed=0):
    rng = np.random.default_rng(seed)
    if name == "noise":
        return np.clip(x + rng.normal(0, 0.15 * severity, x.shape), 0, 1).astype(np.float32)
    if name == "invert":
        return (1.0 - x).astype(np.float32)
    from scipy.ndimage import uniform_filter

    return uniform_filter(x, size=(1, 3, 3, 1)).astype(np.float32)


class _ModelDir:
    def __init__(self, d):
        import keras

        from snapuq.nn.saved import predict_batched

        d = Path(d)
        self.config = json.loads((d / "config.json").read_text())
        base = keras.saving.load_model(d / "model.keras")
        self.model = keras.Model(base.input, {"logits": base.output, "feat": base.get_layer("gap").output})
        self.calib = None
        self.predict = lambda x: predict_batched(self.model, x)


def _install_fakes(mp: pytest.MonkeyPatch) -> None:
    import snapuq.baselines.train
    import snapuq.commands.evaluate  # noqa: F401 - imported with the real corruptions before the fake
    import snapuq.data as D
    import snapuq.data.shifts
    import snapuq.nn.backbones as models

    data = types.ModuleType("snapuq_test_bars")
    data.load, data.ood = _load_bars, _ood_bars
    mp.setitem(sys.modules, "snapuq_test_bars", data)
    mp.setitem(D.LOADERS, "bars", "snapuq_test_bars:load")
    mp.setitem(D.OOD_LOADERS, "bars", "snapuq_test_bars:ood")
    corr = types.ModuleType("snapuq.data.corruptions")
    corr.CORRUPTIONS = {"noise": None, "invert": None, "blur": None}
    corr.corrupt = _corrupt
    corr.corruption_names = lambda name=None: list(corr.CORRUPTIONS)
    mp.setitem(sys.modules, "snapuq.data.corruptions", corr)
    # `from snapuq.data import corruptions` reads the package attribute once the real module was imported
    mp.setattr(D, "corruptions", corr, raising=False)
    mp.setattr(snapuq.data.shifts, "C", corr)  # the module eval's corruptions come through
    mp.setattr("snapuq.evaluation.loading.load_model_dir", _ModelDir)  # what eval loads a directory with
    tiny = lambda name, shape, n, **kw: _tiny_backbone(shape, n)  # noqa: E731
    mp.setattr(models, "build_backbone", tiny)
    mp.setattr(snapuq.baselines.train, "build_backbone", tiny)  # what the baselines are built with


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    import keras

    from snapuq.baselines import train_baselines

    with pytest.MonkeyPatch.context() as mp:
        _install_fakes(mp)
        keras.utils.set_random_seed(0)
        ds = _load_bars(None, 0)
        base = _tiny_backbone()
        base.compile(
            optimizer=keras.optimizers.Adam(0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        base.fit(ds.x_train, ds.y_train, epochs=6, batch_size=32, verbose=0)
        d = tmp_path_factory.mktemp("tiny") / "D"
        d.mkdir()
        base.save(d / "model.keras")
        cfg = {
            "dataset": "bars",
            "backbone": "tiny",
            "input_shape": [8, 8, 1],
            "n_classes": 3,
            "seed": 0,
            "taps": [],
        }
        (d / "config.json").write_text(json.dumps(cfg))
        train_baselines(ds, cfg, d, seed=0, epochs=4, members=2, lr=0.005, progress=False)
        yield d, mp


def test_eval_end_to_end_contract(tiny_dir, tmp_path, capsys):
    r = tmp_path / "R"
    rc = cli.main(
        ["eval", str(tiny_dir[0]), "--report", str(r), "--segment", "120", "--n-ood", "80", "--no-progress"]
    )
    assert rc == 0
    assert "report in" in capsys.readouterr().out
    m = json.loads((r / "metrics.json").read_text())
    assert m["dataset"] == "bars" and m["n_test"] == 150
    assert set(m["accuracy"]) == {"float", "int8"} and 0.5 < m["accuracy"]["float"] <= 1.0
    assert m["accuracy"]["int8"] is None  # no model_int8.tflite in this directory
    assert list(m["methods"]) == METHODS
    for name, vals in m["methods"].items():
        assert set(vals) == set(CONTRACT_KEYS), name
        if name == "snap":  # no calib.json here: reported as null with a note
            assert all(v is None for v in vals.values()) and "snap" in m["notes"]
            continue
        for k in ("auroc_ok_vs_err", "auroc_id_vs_ood", "aupr_ok_vs_err", "aurc", "ece"):
            assert isinstance(vals[k], float) and 0.0 <= vals[k] <= 1.0, (name, k)
        assert vals["cid_auprc"] is None or 0.0 <= vals["cid_auprc"] <= 1.0
        assert vals["cid_delay"] is None or vals["cid_delay"] >= 0
    # uniform noise is easy to tell from bars for a feature-space detector
    assert m["methods"]["mahalanobis"]["auroc_id_vs_ood"] > 0.9
    st = m["stream"]
    assert st["frames"] == 120 * 7 and st["corruptions"] == ["noise", "invert", "blur"]
    assert st["event_threshold"] < st["mu_id"]
    assert set(m["details"]["msp"]["risk_at_coverage"]) == {"0.5", "0.8", "0.9", "0.95"}
    for step in (
        "load_model",
        "load_data",
        "build_stream",
        "forward_main",
        "fit:odin",
        "score:mc_dropout",
        "plots",
        "total",
    ):
        assert step in m["timings_s"], step
    for png in ("roc.png", "risk_coverage.png", "stream.png"):
        assert (r / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep = (r / "report.md").read_text()
    assert "| mahalanobis |" in rep and "AUROC ✓/✗" in rep and "![roc.png](roc.png)" in rep


def test_eval_method_subset_and_limit(tiny_dir, tmp_path):
    r = tmp_path / "R2"
    rc = cli.main(
        [
            "eval",
            str(tiny_dir[0]),
            "--report",
            str(r),
            "--methods",
            "msp,energy",
            "--limit",
            "60",
            "--segment",
            "100",
            "--no-progress",
        ]
    )
    assert rc == 0
    m = json.loads((r / "metrics.json").read_text())
    assert list(m["methods"]) == ["msp", "energy"] and m["n_test"] == 60 and m["n_ood"] == 60


@pytest.mark.parametrize(
    "setup, args, msg",
    [
        (None, [], "does not exist"),
        ("file", [], "is not a directory"),
        ("empty", [], "missing config.json"),
        ("badjson", [], "not valid JSON"),
        ("nomodel", [], "missing model.keras"),
        ("ok", ["--methods", "msp,nope"], "unknown method 'nope'"),
        ("ok", ["--limit", "3"], "--limit must be at least 10"),
        ("ok", ["--severity", "9"], "--severity must be in 0..5"),
        ("ok", ["--segment", "20"], "--segment must be at least"),
    ],
)
def test_eval_error_paths(tmp_path, capsys, setup, args, msg):
    d = tmp_path / "D"
    if setup == "file":
        d.write_text("x")
    elif setup is not None:
        d.mkdir()
        if setup in ("badjson", "nomodel", "ok"):
            (d / "config.json").write_text("{oops" if setup == "badjson" else '{"dataset": "digits"}')
        if setup in ("badjson", "ok"):
            (d / "model.keras").write_bytes(b"PK")
    rc = cli.main(["eval", str(d), "--report", str(tmp_path / "R"), *args])
    err = capsys.readouterr().err
    assert rc == 1
    assert msg in err and err.count("\n") == 1  # one line


def test_eval_requires_report(capsys):
    """--report is optional only with --split (a test-clip folder); otherwise a one-line error."""
    assert cli.main(["eval", "somewhere"]) != 0
    err = capsys.readouterr().err
    assert "--report RDIR is required" in err and err.count("\n") == 1


def test_eval_int8_block(tiny_dir, tmp_path):
    """With D/model_int8.tflite and snapuq.export.int8_predict present, accuracy.int8 and the int8 block
    are filled from what int8_predict returns (here: the float logits rounded to a coarse int8 grid)."""
    import shutil

    d = tmp_path / "D8"
    shutil.copytree(tiny_dir[0], d)
    (d / "model_int8.tflite").write_bytes(b"\0" * 1000)
    (d / "model_float.tflite").write_bytes(b"\0" * 3000)
    calls = []

    def int8_predict(model_dir, x):
        calls.append((Path(model_dir), len(x)))
        z = _ModelDir(model_dir).predict(x)["logits"]
        return {"logits": np.round(z / 0.25) * 0.25}

    tiny_dir[1].setattr("snapuq.commands.evaluate.int8_predict", int8_predict)  # the C core's stand-in
    r = tmp_path / "R8"
    assert cli.main(["eval", str(d), "--report", str(r), "--methods", "msp", "--segment", "100",
                     "--n-ood", "40", "--no-progress"]) == 0
    m = json.loads((r / "metrics.json").read_text())
    assert calls == [(d, 150 + 40)]
    assert abs(m["accuracy"]["int8"] - m["accuracy"]["float"]) < 0.05
    assert m["int8"]["bytes"]["model_int8.tflite"] == 1000
    assert m["int8"]["flash_ratio_float_over_int8"] == pytest.approx(3.0)
    assert "## INT8" in (r / "report.md").read_text()
