"""The inputs of `snapuq harness --model FILE.tflite` (no device): .npz or seeded random; bad ones refused in
one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from snapuq.commands.harness import main
from snapuq.errors import SnapuqError
from snapuq.harness.bare import BareReference, load_inputs

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits" / "model_int8.tflite"


def test_random_inputs_are_seeded_and_unlabelled() -> None:
    ref = BareReference(DIGITS)
    x, y, d = load_inputs(ref, None, 7, 5, 0)
    x2, _, _ = load_inputs(ref, None, 7, 5, 2)
    assert x.shape == (5, *ref.in_shape[1:]) and x.dtype == np.int8 and (y == -1).all()
    assert d["source"] == "random" and not d["labelled"] and "default_rng(7)" in d["label"]
    assert np.array_equal(x[2:], x2[:3])  # --start skips into the same stream
    assert not np.array_equal(x, load_inputs(ref, None, 8, 5, 0)[0])


def test_npz_float_inputs_quantize_as_the_device_does(tmp_path: Path) -> None:
    from snapuq.export.convert import quantize_input

    ref = BareReference(DIGITS)
    x = np.random.default_rng(0).normal(size=(6, int(np.prod(ref.in_shape)))).astype(np.float32)  # flattened
    np.savez(tmp_path / "a.npz", x=x, y=np.arange(6) % 3)
    xq, y, d = load_inputs(ref, tmp_path / "a.npz", 0, 4, 1)
    assert xq.shape == (4, *ref.in_shape[1:]) and list(y) == [1, 2, 0, 1] and d["labelled"]
    want = quantize_input(x[1:5], ref.in_scale, ref.in_zp).reshape(xq.shape)
    assert np.array_equal(xq, want)


@pytest.mark.parametrize("arrays, msg", [
    ({"z": np.zeros(3)}, "no array 'x'"),
    ({"x": np.zeros((2, 5), np.float32)}, "the model takes"),
    ({"x": np.zeros((2, 8, 8, 1), np.int32)}, "give int8 codes or floats"),
    ({"x": np.zeros((2, 8, 8, 1), np.int8), "y": np.array([0, 10_000])}, "outside the model's"),
    ({"x": np.zeros((2, 8, 8, 1), np.int8), "y": np.array([0.5, 1])}, "one integer label per input"),
])
def test_bad_npz_is_one_line(tmp_path: Path, arrays: dict, msg: str) -> None:
    np.savez(tmp_path / "b.npz", **arrays)
    with pytest.raises(SnapuqError, match=msg):
        load_inputs(BareReference(DIGITS), tmp_path / "b.npz", 0, None, 0)


def test_cli_refuses_a_non_tflite_file_and_dataset_options_in_one_line(tmp_path: Path, capsys) -> None:
    f = tmp_path / "x.tflite"
    f.write_bytes(b"not a model")
    assert main(["--port", "qemu:m4", "--model", str(f), "--out", str(tmp_path / "R")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no TFL3 identifier" in err
    assert main(["--port", "qemu:m4", "--model", str(DIGITS), "--dataset", "digits",
                 "--out", str(tmp_path / "R")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--inputs FILE.npz" in err
    assert not (tmp_path / "R").exists()


def test_a_file_too_large_for_the_board_is_one_line(tmp_path: Path, monkeypatch) -> None:
    from snapuq.harness import runner
    from snapuq.harness.options import Options
    from snapuq.harness.qemu import board_spec

    def overflow(*_a, **_k):  # what build_firmware raises with make's tail when the link overflows
        raise SnapuqError("firmware build failed (make qemu_m4 ...):\nld: region `FLASH' overflowed by 50140 "
                          "bytes\ncollect2: error: ld returned 1 exit status")

    monkeypatch.setattr(runner, "build_firmware", overflow)
    opts = Options(port="qemu:m4", model=DIGITS, dataset="", split="test", out=tmp_path / "R",
                   build_dir=tmp_path / "b")
    with pytest.raises(SnapuqError) as e:
        runner._bare_image(board_spec("qemu:m4"), BareReference(DIGITS), opts)
    msg = str(e.value)
    assert "\n" not in msg and "does not fit qemu_m4" in msg and "FLASH overflowed by 50140 bytes" in msg
    assert "qemu:m7" in msg
