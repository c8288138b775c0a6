"""`snapuq verify FILE.tflite`: any TFLite file, no model directory; every output of the C core vs TFLM."""

import json
from pathlib import Path

import numpy as np
import pytest

from snapuq.cli import main

ROOT = Path(__file__).resolve().parents[2]
TFLITE = ROOT / "models" / "keywords" / "model_int8.tflite"


def test_a_bare_tflite_verifies_every_output_with_arenas(tmp_path, capsys):
    out = tmp_path / "v.json"
    assert main(["verify", str(TFLITE), "--n", "5", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["differing_total"] == 0 and res["n"] == 5 and len(res["differing"]) >= 3  # logits, probs, taps
    assert res["arena_bytes"]["snapuq"] > 0 and res["arena_bytes"]["tflm"] > 0
    assert "CONV_2D" in res["ops"] and "total differing elements: 0" in capsys.readouterr().out


def test_inputs_from_an_npz_as_codes_or_floats(tmp_path):
    from snapuq.native.ccore import CoreModel

    spec = CoreModel(TFLITE.read_bytes()).inputs[0]
    rng = np.random.default_rng(1)
    codes = rng.integers(-128, 128, (3, *spec.shape)).astype(np.int8)
    np.savez(tmp_path / "c.npz", x=codes)
    np.savez(tmp_path / "f.npz", x=(codes.astype(np.float32) - spec.zero_point) * spec.scale)
    for f in ("c.npz", "f.npz"):
        o = tmp_path / f"{f}.json"
        assert main(["verify", str(TFLITE), "--inputs", str(tmp_path / f), "--json", str(o)]) == 0
        assert json.loads(o.read_text())["n"] == 3


@pytest.mark.parametrize("case,msg", [
    ("garbage", "not a TFLite flatbuffer"),
    ("truncated", "C core rejects the model"),
    ("npz_shape", "inputs of shape"),
    ("npz_corrupt", "not a readable .npz"),
    ("npz_nan", "NaN"),
])  # fmt: skip
def test_bad_files_are_one_line(case, msg, tmp_path, capsys):
    f, extra = tmp_path / "m.tflite", []
    f.write_bytes(TFLITE.read_bytes())
    if case == "garbage":
        f.write_bytes(b"\x00" * 64)
    elif case == "truncated":
        f.write_bytes(TFLITE.read_bytes()[:2000])
    elif case == "npz_shape":
        np.savez(tmp_path / "x.npz", x=np.zeros((2, 3, 3), np.int8))
        extra = ["--inputs", str(tmp_path / "x.npz")]
    elif case == "npz_corrupt":
        (tmp_path / "x.npz").write_bytes(b"PK\x03\x04broken")
        extra = ["--inputs", str(tmp_path / "x.npz")]
    elif case == "npz_nan":
        from snapuq.native.ccore import CoreModel

        shape = CoreModel(TFLITE.read_bytes()).inputs[0].shape
        np.savez(tmp_path / "x.npz", x=np.full((1, *shape), np.nan, np.float32))
        extra = ["--inputs", str(tmp_path / "x.npz")]
    assert main(["verify", str(f), "--n", "2", *extra]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
