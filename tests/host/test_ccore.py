"""snapuq.native.ccore: the C core as a host shared library (ctypes). Built from core.mk's list, cached by
a hash of the sources, bit-exact with TFLM on the shipped model, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.errors import ModelFormatError
from snapuq.native import ccore

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "digits"


def test_package_ships_the_core() -> None:
    assert ccore.CORE_DIR.resolve() == (ROOT / "firmware" / "core").resolve()
    srcs = ccore.core_sources()
    assert srcs and all(p.suffix == ".c" and p.is_file() for p in srcs)
    names = {p.name for p in srcs}
    assert {"snapuq_snap.c", "conv.c", "mean.c"} <= names


def test_library_is_cached_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = ccore.library_path()
    assert lib.is_file() and ccore.library_path() == lib   # second call: no rebuild, same file
    mtime = lib.stat().st_mtime_ns
    assert ccore.library_path().stat().st_mtime_ns == mtime
    assert ccore.kernels_name() == "ref"


def test_missing_compiler_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc-snapuq")
    with pytest.raises(ccore.CCoreError, match="no-such-cc-snapuq' not found") as e:
        ccore._compiler()
    assert "\n" not in str(e.value)


def test_cli_reports_missing_compiler(tmp_path: Path) -> None:
    """A fresh process without a compiler and without a cached library: one line, exit 1."""
    env = {**os.environ, "CC": "no-such-cc-snapuq", "SNAPUQ_CCORE_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT / "host")}
    p = subprocess.run([sys.executable, "-m", "snapuq.cli", "verify", str(SHIPPED), "--random", "--n", "1"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "not found" in p.stderr, p.stderr


def test_bad_model_bytes_raise_one_line() -> None:
    with pytest.raises(ModelFormatError, match="C core rejects the model"):
        ccore.CoreModel(b"\0" * 64)
    b = (SHIPPED / "model_int8.tflite").read_bytes()
    with pytest.raises(ModelFormatError):
        ccore.CoreModel(b[: len(b) // 2])


@pytest.mark.skipif(not (SHIPPED / "snapuq.json").exists(), reason="shipped model not exported")
def test_shipped_model_matches_tflm_and_scores() -> None:
    from snapuq.export.tflm import TFLMInterpreter

    b = (SHIPPED / "model_int8.tflite").read_bytes()
    man = json.loads((SHIPPED / "snapuq.json").read_text())
    m = ccore.CoreModel(b)
    assert m.output_map() == {k: {kk: v[kk] for kk in ("index", "scale", "zero_point", "shape", "dtype")}
                              for k, v in man["outputs"].items()}
    assert sorted(set(m.op_names())) == man["model"]["ops"]
    rng = np.random.default_rng(3)
    xs = rng.integers(-128, 128, size=(40, *man["input"]["shape"][1:]), dtype=np.int8)
    ours = m.predict(xs)
    ip = TFLMInterpreter(b)
    for i, x in enumerate(xs):
        t = ip.invoke(x[None])
        for k, o in man["outputs"].items():
            assert np.array_equal(ours[k][i].ravel(), t[o["index"]].ravel()), k
    snap = ccore.CoreSnap(b, man)
    codes, r = snap.run(m, xs)
    with pytest.raises(ModelFormatError, match="input tap"):   # step 4b needs the inputs
        snap.score(dict(ours))
    r2 = snap.score({**ours, "input": xs})
    for k in r:
        assert np.array_equal(r[k], r2[k]), k
    assert (r["s_in16"] > 0).all()   # the input tap is part of the shipped digits S
    assert len(set(r["S16"].tolist())) > 20   # random inputs: U saturates, S varies
    with pytest.raises(ModelFormatError, match="input"):
        m.predict(xs.astype(np.int16))


@pytest.mark.skipif(not (SHIPPED / "snapuq.json").exists(), reason="shipped model not exported")
def test_snap_constants_go_through_the_core_blob_reader() -> None:
    """CoreSnap packs the constants into a model blob and the core's reader checks them against
    the model: a manifest that does not fit the model is refused with the reader's one line."""
    b = (SHIPPED / "model_int8.tflite").read_bytes()
    man = json.loads((SHIPPED / "snapuq.json").read_text())
    ccore.CoreSnap(b, man).close()
    bad_zp = json.loads(json.dumps(man))
    bad_zp["outputs"]["logits"]["zero_point"] += 1
    with pytest.raises(ModelFormatError, match="zero point differs from the model") as e:
        ccore.CoreSnap(b, bad_zp)
    assert "\n" not in str(e.value)
    bad_d = json.loads(json.dumps(man))
    bad_d["snap"]["taps"][0]["d"] += 1
    with pytest.raises(ModelFormatError, match="output size or type differs"):
        ccore.CoreSnap(b, bad_d)
    bad_variant = json.loads(json.dumps(man))
    bad_variant["snap"]["variant"] = "bogus"
    with pytest.raises(ModelFormatError, match="snap.variant 'bogus'"):
        ccore.CoreSnap(b, bad_variant)
    bad_lut = json.loads(json.dumps(man))
    bad_lut["snap"]["perr"]["lut"][3] = 70000   # p_err table entries are 0..65536
    with pytest.raises(ModelFormatError, match="snapuq_snap_check"):
        ccore.CoreSnap(b, bad_lut)
