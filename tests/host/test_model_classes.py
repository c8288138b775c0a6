"""The number of classes is the model's logits width, never the largest label in the data: a model directory
whose data lack the top class exports n_classes = logits width (manifest, generated C, blob), the generated C
scores on the C core (no "buffer size mismatch"), and a label outside the model's classes is a one-line
error at `snapuq train --model`, `snapuq export` and `snapuq eval`."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.cli import main
from snapuq.data import Dataset, check_labels, with_model_classes
from snapuq.errors import DatasetError, ModelFormatError

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import byom_models as BM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits"


def _ds(y_train, y_test, names) -> Dataset:
    x = np.zeros((len(y_train), 4), np.float32)
    return Dataset("t", x, np.asarray(y_train), x[:2], np.asarray(y_train[:2]), x[: len(y_test)],
                   np.asarray(y_test), list(names))  # fmt: skip


def test_with_model_classes_pads_and_refuses():
    ds = with_model_classes(_ds([0, 1, 2, -1], [0, 1], ["a", "b", "c"]), 5, "d.npz")
    assert ds.class_names == ["a", "b", "c", "3", "4"] and ds.n_classes == 5
    with pytest.raises(DatasetError, match=r"^d.npz: y_test has label 5, outside the model's 5 classes"):
        with_model_classes(_ds([0, 1], [0, 5], ["0"]), 5, "d.npz")
    with pytest.raises(DatasetError, match="3 class names, the model's logits are 2 wide"):
        with_model_classes(_ds([0, 1], [0, 1], ["a", "b", "c"]), 2, "d.npz")
    check_labels(_ds([0, 9], [0, 12], ["0"]), 10, "d", ("train",))  # only the splits named are checked


@pytest.mark.skipif(not (DIGITS / "snapuq.json").exists(), reason="shipped model not exported yet")
def test_cgen_and_manifest_checks_take_the_logits_width(tmp_path):
    from snapuq.commands.verify import _check_c_classes
    from snapuq.export.cgen import write_c_model
    from snapuq.export.manifest import check_manifest

    man = json.loads((DIGITS / "snapuq.json").read_text())
    tfl = (DIGITS / "model_int8.tflite").read_bytes()
    short = {**man, "class_names": man["class_names"][:9], "n_classes": 9}  # what labels 0..8 used to give
    write_c_model(tmp_path, short, tfl)
    c, h = (tmp_path / "snapuq_model.c").read_text(), (tmp_path / "snapuq_model.h").read_text()
    assert ".n_classes = 10," in c and "snapuq_model_class_names[10]" in c and '"9"}' in c
    assert "#define SNAPUQ_MODEL_N_CLASSES 10" in h
    _check_c_classes(tmp_path / "snapuq_model.c", 10)
    with pytest.raises(ModelFormatError, match="class_names, the logits have 10"):
        write_c_model(tmp_path, {**man, "class_names": [str(i) for i in range(11)]}, tfl)
    # a manifest whose n_classes or class_names disagree with the logits fails verify / int8_predict
    with pytest.raises(ModelFormatError, match="n_classes 9, the model's logits have 10"):
        check_manifest(short, tfl)
    with pytest.raises(ModelFormatError, match="9 class_names, the model's logits have 10"):
        check_manifest({**short, "n_classes": 10}, tfl)
    (tmp_path / "old.c").write_text(c.replace(".n_classes = 10,", ".n_classes = 9,"))
    with pytest.raises(ModelFormatError, match=r"old.c: .n_classes 9, the model's logits have 10"):
        _check_c_classes(tmp_path / "old.c", 10)


def _one_line_error(argv, capsys) -> str:
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    return err[0]


def _rewrite_npz(p: Path, **arrays) -> None:
    with np.load(p, allow_pickle=False) as z:
        a = {k: z[k] for k in z.files}
    a.update(arrays)
    np.savez(p.with_suffix(".tmp.npz"), **a)
    p.with_suffix(".tmp.npz").replace(p)


@pytest.mark.slow
def test_data_without_the_top_class_exports_the_logits_width(tmp_path, capsys):
    """`snapuq train --model` on digits with class 9 absent from every split (a 10-logit MLP): config,
    manifest, generated C and blob all say 10 classes, verify passes, the generated C scores on the C core;
    labels outside the 10 classes are refused at train, export and eval, each in one line."""
    import test_c_e2e as E  # the generated-C driver: runtime + SNAP core + snapuq_model.c

    from snapuq.data import load_dataset

    ds = load_dataset("digits", seed=0)
    flat = lambda a: a.reshape(len(a), -1)  # noqa: E731
    tr, te = ds.y_train != 9, ds.y_test != 9
    npz = tmp_path / "no9.npz"
    np.savez(npz, x_train=flat(ds.x_train)[tr], y_train=ds.y_train[tr], x_test=flat(ds.x_test)[te],
             y_test=ds.y_test[te])  # fmt: skip
    model = BM.mlp()
    BM.fit_user_model(model, flat(ds.x_train)[tr], ds.y_train[tr], epochs=3)
    model.save(tmp_path / "mlp.keras")
    out = tmp_path / "m"
    train = ["train", "--model", str(tmp_path / "mlp.keras"), "--epochs", "1", "--rank", "4",
             "--no-baselines", "--no-progress"]  # fmt: skip
    # a label beyond the model's 10 outputs: refused before any training, one line
    bad = tmp_path / "eleven.npz"
    np.savez(bad, x_train=flat(ds.x_train), y_train=ds.y_train, x_test=flat(ds.x_test),
             y_test=np.where(ds.y_test == 9, 10, ds.y_test))  # fmt: skip
    msg = _one_line_error([*train, "--data", str(bad), "--out", str(tmp_path / "bad")], capsys)
    assert "y_test has label 10, outside the model's 10 classes" in msg and not (tmp_path / "bad").exists()

    assert main([*train, "--data", str(npz), "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["n_classes"] == 10 and cfg["class_names"] == [str(i) for i in range(10)]
    assert main(["export", str(out), "--n-rep", "32", "--n-check", "8"]) == 0
    man = json.loads((out / "snapuq.json").read_text())
    assert man["n_classes"] == 10 and len(man["class_names"]) == 10
    assert man["outputs"]["logits"]["shape"] == [1, 10]
    assert re.search(r"\.n_classes = 10,", (out / "snapuq_model.c").read_text())
    assert "SNAPUQ_MODEL_N_CLASSES 10" in (out / "snapuq_model.h").read_text()
    assert main(["verify", str(out), "--n", "8"]) == 0
    from oracles.blob_reader import read_blob

    from snapuq.native.blob import write_blob

    dev = read_blob(write_blob((out / "model_int8.tflite").read_bytes(), man))[1]
    assert dev["snap"]["n_classes"] == 10 and len(dev["class_names"]) == 10
    # the generated C on the C core, as a device runs it: the SNAP scorer accepts the logits buffer
    gen = tmp_path / "gen"
    gen.mkdir()
    shutil.copy(out / "snapuq_model.c", gen)
    shutil.copy(out / "snapuq_model.h", gen)
    from snapuq.export import int8_predict
    from snapuq.export.convert import quantize_input

    x = flat(ds.x_test)[:12]
    xq = quantize_input(x, man["input"]["scale"], man["input"]["zero_point"])
    rows = E._run_e2e(E._build_e2e(gen, "run_e2e_model_classes"), [q.reshape(1, -1) for q in xq],
                      len(man["snap"]["taps"]), tmp_path)  # fmt: skip
    assert [r["pred"] for r in rows] == [int(p) for p in int8_predict(out, x)["pred"]]

    # a test label outside the classes (the data changed after training): export and eval refuse it
    _rewrite_npz(out / "data.npz", y_test=np.r_[10, ds.y_test[te][1:]].astype(np.int64))
    msg = _one_line_error(["export", str(out), "--n-rep", "32", "--n-check", "8"], capsys)
    assert "y_test has label 10, outside the model's 10 classes" in msg
    msg = _one_line_error(["eval", str(out), "--methods", "snap", "--n-ood", "0", "--no-progress", "--report",
                           str(tmp_path / "R")], capsys)  # fmt: skip
    assert "y_test has label 10, outside the model's 10 classes" in msg
