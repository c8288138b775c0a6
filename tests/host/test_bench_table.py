"""snapuq bench --table machinery: the ensemble firmware (members run in turn, softmax summed on the device)
against TFLM, the OOM parsing and the markdown layout. The QEMU runs of the full table are `snapuq bench
--table` itself (minutes); here the firmware runs as a host process (seconds)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from snapuq.bench.firmware import _OVERFLOW, _expected
from snapuq.bench.table import markdown, measure_cell
from snapuq.harness.protocol import Device
from snapuq.harness.qemu import PipeSerial

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

VARIANTS = ROOT / "models" / "digits" / "variants"
BUILD = ROOT / "build" / "test-bench-table"


def _host_fw(files: list[Path], variant: str) -> Path:
    cmd = [
        "make",
        "-C",
        str(ROOT / "firmware"),
        "host",
        f"BUILD={BUILD}",
        "SNAP=0",
        "ENSEMBLE=1",
        "TFLITE=" + " ".join(str(f) for f in files),
        f"VARIANT={variant}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return BUILD / f"host_nosnap{variant}" / "snapuq_fw"


@pytest.mark.skipif(not (VARIANTS / "deep_1.tflite").exists(), reason="models/digits/variants not exported")
@pytest.mark.parametrize("kind", ["deep", "ee"])
def test_ensemble_firmware_sums_softmax_like_tflm(kind: str) -> None:
    files = (
        [VARIANTS / "deep_0.tflite", VARIANTS / "deep_1.tflite"]
        if kind == "deep"
        else [VARIANTS / "ee.tflite"]
    )
    exe = _host_fw(files, f"_t{kind}")
    dev = Device(PipeSerial(exe), timeout=30)
    try:
        dev.wait_boot(timeout=10)
        prof = dev.profile()
        assert int(prof["loaded"]) == 1 and int(prof["members"]) == len(files)
        rng = np.random.default_rng(1)
        for _ in range(3):
            x = rng.integers(-128, 128, size=(8, 8, 1)).astype(np.int8)
            exp = _expected(files, kind, x)
            dev.load_input(x.tobytes())
            inf = dev.infer(2, 0)
            r = dev.results()
            assert r["psum"] == exp["psum"] and int(r["pred"]) == exp["pred"]
            # two members: one switch per member per inference, counted apart
            assert (int(inf["switch_ticks"]) >= 0) and int(r["terms"]) == (2 if kind == "deep" else 3)
    finally:
        dev.close()
        ser = dev.ser
        if isinstance(ser, PipeSerial):
            ser.close()


def test_overflow_message_parsed() -> None:
    text = "ld: region `FLASH' overflowed by 173524 bytes\nld: region `RAM' overflowed by 12 bytes"
    assert _OVERFLOW.findall(text) == [("FLASH", "173524"), ("RAM", "12")]


def test_missing_variant_is_reported_not_measured(tmp_path: Path) -> None:
    from snapuq.bench.table import BOARDS

    c = measure_cell(BOARDS["small"], "deep", tmp_path, None, tmp_path, [], 1, False)
    assert c["status"] == "missing" and "export-variants" in c["reason"]


def test_markdown_rows() -> None:
    ok = {
        "status": "ok",
        "board_label": "Small-MCU",
        "workload": "w",
        "method": "snap",
        "method_label": "SNAP-UQ",
        "members": 1,
        "flash": 2048,
        "ram": {"peak": 4096, "static": 1024, "arena": 2000, "input": 48, "stack_peak": 1024},
        "instructions": {"total": 123456.0},
        "cycles_modelled": 170000,
        "ms_modelled": 2.5,
        "model": {"latency_ms": 1.5, "energy_mj": 0.01},
        "mismatches_vs_tflm": 0,
        "checked_inputs": 3,
        "uq": {"auroc_ok_vs_err": 0.9, "cid_delay": 12.0},
    }
    oom = {
        "status": "OOM",
        "board_label": "Small-MCU",
        "workload": "w",
        "method": "deep",
        "method_label": "DEEP",
        "members": 5,
        "oom_source": "link",
        "link_error": ["region FLASH overflowed by 10 bytes"],
        "needed": {"flash": 262154, "ram_static_plus_stack": 100},
        "available": {"flash": 262144, "ram": 65536},
    }
    arena = {
        "status": "OOM",
        "board_label": "Small-MCU",
        "workload": "w",
        "method": "ee",
        "method_label": "EE-ens",
        "members": 1,
        "oom_source": "arena check",
        "needed": 70000,
        "available": 40000,
        "arena": 69000,
        "ram_budget": 65536,
        "ram_static": 9000,
        "stack_reserved": 8192,
    }
    md = markdown(
        {
            "rows": [ok, oom, arena],
            "instructions_unit": "u",
            "latency_energy": "m",
            "mc_dropout": "x",
            "workloads": {},
        }
    )
    lines = md.splitlines()
    assert lines[2].startswith(
        "| Small-MCU | w | SNAP-UQ | 2.0 | 4.0 (1.0+2.0+1.0) | 123,456 | 170,000 | 2.50 | 1.50 | 0.010 | 0.90"
    )
    assert "**OOM**" in lines[3] and "262154" in lines[3] and "(M=5)" in lines[3]
    assert "needs 70000 B of pool" in lines[4] and "has 40000 B" in lines[4]
    assert all(ln.count("|") == lines[0].count("|") for ln in lines[2:5])


KEYWORDS = ROOT / "models" / "keywords"


@pytest.mark.skipif(not (KEYWORDS / "model_int8.tflite").exists(), reason="models/keywords not exported")
def test_schedule_runs_heads_early_and_halves_the_keywords_arena() -> None:
    """The converter puts the SNAP heads' MEANs after the whole DS-CNN, keeping every tapped feature map
    alive (TFLM's arena ~55 KB); the runtime's memory-aware order runs them right after their map."""
    import json

    from snapuq.native.ccore import CoreModel

    tflite = (KEYWORDS / "model_int8.tflite").read_bytes()
    arena = CoreModel(tflite).arena_bytes
    tflm = json.loads((KEYWORDS / "snapuq.json").read_text())["model"]["arena_bytes_tflm"]
    # 2 feature maps of 25x5x64 + the input + head vectors + per-channel tables: under half of TFLM's
    assert arena < tflm // 2


DIGITS = ROOT / "models" / "digits"


@pytest.mark.skipif(not (VARIANTS / "base.tflite").exists(), reason="models/digits/variants not exported")
def test_table_command_writes_both_files_with_model_figures_labelled(tmp_path: Path, capsys) -> None:
    """`snapuq bench --table` end to end on its smallest configuration (one QEMU cell, a few seconds):
    both files written atomically (old results survive a failed run), modelled figures labelled."""
    from snapuq.cli import main

    out = tmp_path / "t.json"
    md = tmp_path / "t.md"
    common = ["--table-boards", "small", "--no-real-link", "--out", str(out), "--build-dir", str(BUILD)]
    out.write_text("old\n")
    md.write_text("old\n")
    # a failing run (an unknown workload) leaves the previous results as they were
    assert main(["bench", "--table", "--workloads", "digits,nosuch", *common]) == 1
    assert "nosuch" in capsys.readouterr().err
    assert out.read_text() == "old\n" and md.read_text() == "old\n"

    rc = main(
        ["bench", "--table", "--workloads", "digits", "--methods", "base", "--check-inputs", "1",
         "--repeats", "1", *common]
    )  # fmt: skip
    assert rc == 0
    err = capsys.readouterr().err
    assert "[1/1] digits small BASE: flash" in err  # progress, one line per cell
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.md"]  # no temporary files left
    rep = json.loads(out.read_text())
    (c,) = rep["rows"]
    assert c["status"] == "ok" and c["mismatches_vs_tflm"] == 0 and c["checked_inputs"] == 1
    # measured: flash, RAM parts, QEMU instructions; modelled: latency and energy, and said so
    assert c["flash"] > 0 and c["ram"]["peak"] == c["ram"]["static"] + c["ram"]["arena"] + c["ram"][
        "input"
    ] + c["ram"]["stack_peak"]
    assert c["instructions"]["total"] > 1e5
    assert c["model"]["source"].startswith("model:") and rep["latency_energy"].startswith("model:")
    assert "not cycles" in rep["instructions_unit"]
    text = md.read_text()
    head = text.splitlines()[0]
    assert "latency ms (model)" in head and "energy mJ (model)" in head and "instr/inf (QEMU)" in head
    assert "cycles/inf (model)" in head and "Cycles / ms (cycle model)" in text and "L4R5ZI" in text
    assert c["instructions"]["model"] < c["cycles_modelled"] < c["cycle_model"]["cycles_high"]
    assert c["cycle_model"]["silicon"] == "STM32L432KC" and c["ms_modelled"] > 0
    assert text.splitlines()[2].startswith("| Small-MCU (STM32L432KC, M4) | digits | BASE |")
    assert "not linked (--no-real-link)" in text


def test_core_sources_use_no_board_or_app_define() -> None:
    """firmware/Makefile shares one set of core objects between every image with the same CPU, kernels
    and capacities (BUILD/core-<checksum>): that holds only while the core tests no board/app/model define."""
    import re

    core = ROOT / "firmware" / "core"
    bad = re.compile(r"\bSNAPUQ_(BOARD|CPU_\w+|STM32\w*|QEMU_\w+|APP_\w+)\b")
    hits = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in sorted(core.rglob("*"))
        if p.suffix in (".c", ".h")
        for m in bad.finditer(p.read_text())
    ]
    assert hits == []


def test_data_dir_for_every_workload_or_per_workload() -> None:
    from snapuq.bench.table import _data_dirs
    from snapuq.errors import SnapuqError

    assert _data_dirs(None, ["digits", "resnet8"]) == {"digits": None, "resnet8": None}
    assert _data_dirs("/d", ["digits", "resnet8"]) == {"digits": "/d", "resnet8": "/d"}
    assert _data_dirs("resnet8=/c", ["digits", "resnet8"]) == {"digits": None, "resnet8": "/c"}
    with pytest.raises(SnapuqError, match="nosuch=/x"):
        _data_dirs("nosuch=/x", ["digits", "resnet8"])


def test_paper_side_by_side_and_snap_overhead() -> None:
    from snapuq.bench.table_markdown import paper_markdown

    def ok(method: str, flash: int, peak: int, instr: float) -> dict:
        return {
            "status": "ok",
            "board": "big",
            "workload": "keywords",
            "method": method,
            "flash": flash,
            "ram": {"peak": peak},
            "instructions": {"total": instr},
            "model": {"latency_ms": instr / 216e3},
        }

    deep = {"status": "OOM", "board": "big", "workload": "keywords", "method": "deep", "oom_source": "link",
            "link_error": ["region FLASH overflowed by 1 bytes"], "available": {}}  # fmt: skip
    rep = {"rows": [ok("base", 100 * 1024, 30 * 1024, 1e6), ok("snap", 150 * 1024, 36 * 1024, 1.02e6), deep]}
    md = paper_markdown(rep)
    assert "| BASE | 220 | 100.0 | 84 | 30.0 | 60 | 4.6 | 1,000,000 |" in md
    assert "| DEEP | 290 | **OOM** (link: region FLASH overflowed by 1 bytes)" in md
    assert "flash +50.0 KB (+50 %), peak RAM +6.0 KB (+20 %), instructions +20,000 (+2.0 %)" in md
    assert "Paper: SNAP 182 vs BASE 220 KB flash, 70 vs 84 KB RAM, 52 vs 60 ms." in md
    assert paper_markdown({"rows": []}) == ""


CIFAR10 = ROOT / "models" / "cifar10"


@pytest.mark.skipif(not (CIFAR10 / "variants" / "deep_4.tflite").exists(), reason="no cifar10 variants")
def test_small_mcu_row_snap_resnet8_fits_and_runs_ee_and_deep_do_not() -> None:
    """The table's headline on the 256 KB / 64 KB budget, with the shipped MLPerf Tiny ResNet-8 (full
    CIFAR-10): SNAP links, boots (arena check passes) and matches TFLM on QEMU; the early-exit model's arena
    does not fit the pool the linker leaves (the firmware's boot check), DEEP's 5 members overflow the flash
    at the link. Static RAM has little slack here: this fails first if the Small-MCU app grows."""
    from snapuq.bench.table import BOARDS
    from snapuq.bench.variants import load_variants

    small = BOARDS["small"]
    x = np.random.default_rng(0).integers(-128, 128, size=(32, 32, 3)).astype(np.int8)
    c = measure_cell(small, "snap", CIFAR10, None, BUILD, [x], 1, False)
    assert c["status"] == "ok", c
    assert c["mismatches_vs_tflm"] == 0 and c["ram"]["peak"] <= small.ram and c["flash"] <= small.flash
    assert c["ram"]["pool"] >= c["ram"]["arena"]
    v = load_variants(CIFAR10)
    e = measure_cell(small, "ee", CIFAR10, v, BUILD, [x], 1, False)
    assert e["status"] == "OOM" and e["oom_source"].startswith("arena check"), e
    assert e["needed"] > e["available"]
    d = measure_cell(small, "deep", CIFAR10, v, BUILD, [x], 1, False)
    assert d["status"] == "OOM" and d["oom_source"] == "link" and d["needed"]["flash"] > small.flash
