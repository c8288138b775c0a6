"""`snapuq bench FILE.tflite`: any TFLite file in the stock firmware on QEMU, outputs checked vs TFLM."""

import json
import shutil
from pathlib import Path

import pytest

from snapuq.cli import main

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not shutil.which("qemu-system-arm") or not shutil.which("arm-none-eabi-gcc"),
    reason="needs qemu-system-arm and arm-none-eabi-gcc (tools/setup.sh installs them)",
)


def test_bench_a_bare_tflite_on_m4(tmp_path, capsys):
    f = tmp_path / "kws model.tflite"  # a path with a space reaches make quoted
    f.write_bytes((ROOT / "models" / "keywords" / "model_int8.tflite").read_bytes())
    out = tmp_path / "b.json"
    rc = main(["bench", str(f), "--boards", "m4", "--repeats", "1", "--out", str(out),
               "--build-dir", str(tmp_path / "build")])  # fmt: skip
    rep = json.loads(out.read_text())
    m4 = rep["boards"]["m4"]
    assert rc == 0 and m4["fits"] and m4["mismatches_vs_tflm"] == 0 and m4["checked_inputs"] == 3
    assert m4["instructions"]["total"] > 10_000 and m4["flash"] > 0 and m4["ram"]["arena"] > 0
    assert rep["arena_bytes"]["tflm"] > 0 and "CONV_2D" in rep["ops"]
    cm = m4["cycle_model"]  # cycles modelled from the invokes' instruction stream, with their error bar
    assert cm["silicon"] == "STM32L432KC" and cm["inferences"] == 3 + 1 + 1  # checks, warm-up, timed
    assert abs(cm["instructions"] - m4["instructions"]["model"]) < 0.002 * cm["instructions"]
    assert m4["instructions"]["total"] < m4["cycles_modelled"] == cm["cycles_modelled"] < cm["cycles_high"]
    out = capsys.readouterr().out
    assert "0 mismatches vs TFLM" in out and "modelled" in out and "STM32L432KC at 80 MHz" in out


def test_bench_refuses_a_non_tflite_in_one_line(tmp_path, capsys):
    f = tmp_path / "x.tflite"
    f.write_bytes(b"not a model at all")
    assert main(["bench", str(f), "--out", str(tmp_path / "b.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a TFLite flatbuffer" in err


def test_bench_of_a_model_directory_models_the_timed_invokes(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", str(ROOT / "models" / "digits"), "--boards", "m4", "--repeats", "2",
               "--out", str(out), "--build-dir", str(tmp_path / "build")])  # fmt: skip
    assert rc == 0
    m4 = json.loads(out.read_text())["boards"]["qemu_m4"]
    cm = m4["cycle_model"]  # the 2 timed invokes, not the profiled one after them
    assert cm["inferences"] == 2 and abs(cm["instructions"] - m4["instructions"]["model"]) < 0.002 * cm[
        "instructions"]
    assert m4["instructions"]["model"] < m4["cycles_modelled"] < cm["cycles_high"]
    assert "modelled" in capsys.readouterr().out
