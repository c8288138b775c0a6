"""`snapuq harness --model FILE.tflite`: a bare int8 .tflite (no model directory, no SNAP fields) on QEMU,
inputs from an .npz or seeded random, every output checked against the host C core; a board that runs
another model gets the file uploaded into its RAM."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snapuq.harness.bare import BareReference
from snapuq.harness.qemu import QemuProcess, board_spec

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits" / "model_int8.tflite"
KWS = ROOT / "models" / "keywords" / "model_int8.tflite"
BUILD = ROOT / "build" / "test-firmware-bare"

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing"),
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc missing"),
]


def _harness(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--build-dir", str(BUILD), "--no-progress",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_random_inputs_on_m4_match_the_host_and_are_labelled(tmp_path: Path) -> None:
    f = tmp_path / "a model.tflite"  # a bare file under a path make could not take: linked as a copy
    f.write_bytes(DIGITS.read_bytes())
    out = tmp_path / "R"
    p = _harness("--port", "qemu:m4", "--model", str(f), "--limit", "4", "--seed", "3", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 4 and s["board"] == "qemu_m4" and s["mismatches_vs_host"] == 0
    assert s["accuracy"] is None and s["inputs"]["source"] == "random" and s["inputs"]["seed"] == 3
    assert s["latency"]["cycles_median"] > 100_000 and s["model_kind"].startswith("bare tflite")
    recs = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    ref = BareReference(f)
    x = np.random.default_rng(3).integers(-128, 128, size=(4, *ref.in_shape[1:])).astype(np.int8)
    for r, xi in zip(recs, x):
        assert r["inputs"] == "random" and r["label"] == -1 and r["match"] and r["u"] is None
        assert r["pred"] == r["pred_host"] == ref.run(xi).snap["pred"]  # the seeded inputs, as documented
    run = json.loads((out / "run.json").read_text())
    assert run["inputs"]["source"] == "random" and list(run["model_files"]) == ["a model.tflite"]
    assert "accuracy=n/a (no labels)" in p.stdout
    # the cycle model: the plugin's stream holds the invokes QEMU's SysTick timed (40-instruction ticks)
    lat, cm = s["latency"], s["cycle_model"]
    assert cm["inferences"] == 4 and cm["silicon"] == "STM32L432KC" and cm["clock_hz"] == 80_000_000
    assert abs(cm["instructions"] - lat["model_cycles_median"]) <= 0.001 * cm["instructions"]
    assert cm["instructions"] < lat["cycles_modelled"] < 3 * cm["instructions"]
    assert cm["cycles_low"] < lat["cycles_modelled"] < cm["cycles_high"]
    assert lat["ms_modelled"] == pytest.approx(lat["cycles_modelled"] / 80e3, rel=1e-3)
    assert "modelled" in p.stdout and "%" in p.stdout


def test_npz_inputs_with_labels_on_m7_and_resume(tmp_path: Path) -> None:
    ref = BareReference(KWS)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, *ref.in_shape[1:])).astype(np.float32)
    y = np.array([0, 5, 9])
    npz = tmp_path / "in.npz"
    np.savez(npz, x=x, y=y)
    out = tmp_path / "R"
    p = _harness("--port", "qemu:m7", "--model", str(KWS), "--inputs", str(npz), "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 3 and s["mismatches_vs_host"] == 0 and s["inputs"]["labelled"] is True
    recs = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    assert [r["label"] for r in recs] == [0, 5, 9] and all(r["inputs"] == "npz" for r in recs)
    assert s["accuracy"] == sum(r["pred"] == r["label"] for r in recs) / 3
    before = (out / "results.jsonl").read_bytes()
    p = _harness("--port", "qemu:m7", "--model", str(KWS), "--inputs", str(npz), "--out", str(out),
                 "--resume")
    assert p.returncode == 0, p.stdout + p.stderr
    assert (out / "results.jsonl").read_bytes() == before  # every line kept, nothing run again


def test_a_board_running_another_model_gets_the_file_uploaded(tmp_path: Path) -> None:
    from snapuq.harness.bare import linked_copy
    from snapuq.harness.qemu import build_firmware

    spec = board_spec("qemu:m7")
    elf = build_firmware(spec, None, BUILD.resolve(), snap=False,
                         tflite=linked_copy(BareReference(KWS), BUILD.resolve()), variant="_tflkws")
    out = tmp_path / "R"
    with QemuProcess(spec, elf, icount=True) as q:  # the keywords image, reached as a serial URL
        p = _harness("--port", q.url, "--model", str(DIGITS), "--limit", "2", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["mismatches_vs_host"] == 0 and s["n"] == 2
    assert s["model_sha256"] == BareReference(DIGITS).sha256  # the uploaded file ran, not the linked one
