"""The op table an image links (firmware/core/snapuq_ops.h, TFLM's op resolver at link time).

- One operator set everywhere: SNAPUQ_OPS_ALL == the registrations in ops/*.c == the SNAPUQ_OP_<NAME>
  codes == the public header's list (snapuq_runtime.h) == docs/C_CORE.md's list.
- the product's one .tflite graph reader (snapuq.tflite_graph; firmware/tools/caps.py's CAPS=fit flags
  and OPS=fit op table read through it) == the C core's loader on every shipped .tflite (tensors,
  operators, inputs/outputs, operator names);
  the exported snapuq.json lists the same operators, and the SNAPUQ_MODEL_OPS list `snapuq export`
  writes into snapuq_model.h defines the same table.
- An image restricted to some operators (host firmware, OPS=fit) refuses a model needing another one
  at load in one line naming it; the stock image (OPS=all) loads it.
- The ResNet-8 Small-MCU image (qemu_m4, the `snapuq bench --table` SNAP cell): OPS=fit drops the unused
  operators' code (arm-none-eabi-size), gives the same outputs as the host C core on QEMU and refuses
  an uploaded model with another operator in one line; the OPS=all image takes it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
TOOLS = ROOT / "firmware" / "tools"
MODELS = ROOT / "models"
RESNET8 = MODELS / "resnet8"
BUILD = ROOT / "build" / "test-optable"
ARM = shutil.which("arm-none-eabi-gcc") is not None
QEMU = shutil.which("qemu-system-arm") is not None


def _caps():
    spec = importlib.util.spec_from_file_location("snapuq_caps_tool", TOOLS / "caps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ops_all() -> list[tuple[str, str]]:
    text = (CORE / "snapuq_ops.h").read_text()
    body = text.split("#define SNAPUQ_OPS_ALL(X)", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"X\((\w+), (\w+)\)", body)


def _shipped_tflites() -> list[Path]:
    return sorted(MODELS.glob("*/model_int8.tflite")) + sorted(MODELS.glob("*/variants/*.tflite"))


def _quantize_model() -> bytes:
    """A few hundred bytes: one int8 QUANTIZE (no shipped model uses it)."""
    from fixtures.outputs_model import outputs_model

    return outputs_model({"y": {"index": 0, "shape": [1, 4]}})


def test_every_list_of_operators_is_the_op_table() -> None:
    ops = _ops_all()
    names = {n for n, _ in ops}
    assert len(ops) == len(names) == 17
    assert all(r == n.lower() for n, r in ops)  # cgen's SNAPUQ_MODEL_OPS relies on it
    regs = {}
    for p in sorted((CORE / "ops").glob("op_*.c")):
        pat = r"const snapuq_op_reg_t snapuq_reg_(\w+) = \{\s*SNAPUQ_OP_(\w+),"
        regs.update(re.findall(pat, p.read_text()))
    assert {(c, r) for r, c in regs.items()} == set(ops)
    # the DSP build's registrations (ops/dsp/) replace some of them: same names, same codes
    dsp = {}
    for p in sorted((CORE / "ops" / "dsp").glob("op_*.c")):
        dsp.update(re.findall(pat, p.read_text()))
    assert dsp and all(regs.get(r) == c for r, c in dsp.items()), dsp
    codes = dict(re.findall(r"\bSNAPUQ_OP_(\w+) = (\d+)", (CORE / "snapuq_op.h").read_text()))
    assert names <= set(codes) and set(codes) - names == {"CUSTOM"}
    # the names the core prints are TFLite's for the same codes
    opnames = dict(re.findall(r"\[(\d+)\] = \"(\w+)\"", (CORE / "snapuq_opnames.c").read_text()))
    assert all(opnames[codes[n]] == n for n in names)
    # the public header's list (between "Supported operators" and "Fused activations")
    hdr = (CORE / "snapuq_runtime.h").read_text()
    para = hdr.split("Supported operators", 1)[1].split("Fused activations", 1)[0]
    listed = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b", para)) - {"SNAPUQ_OPS_ALL"}
    assert listed == names, (sorted(listed - names), sorted(names - listed))
    # docs/C_CORE.md (from "Operators:" to "; fused")
    doc = (ROOT / "docs" / "C_CORE.md").read_text().split("\nOperators: ", 1)[1].split("; fused", 1)[0]
    listed = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b", doc))
    assert listed == names, (sorted(listed - names), sorted(names - listed))
    # the stock table is all of them
    assert (CORE / "ops" / "op_table.c").read_text().count("SNAPUQ_OP_TABLE(SNAPUQ_OPS_ALL);") == 1


@pytest.mark.skipif(not (RESNET8 / "model_int8.tflite").exists(), reason="models not shipped")
def test_graph_reader_and_caps_agree_with_the_c_core_on_every_shipped_model() -> None:
    from snapuq.native.ccore import CoreModel
    from snapuq.tflite_graph import read_graph

    known = _caps().core_ops()
    files = _shipped_tflites()
    assert len(files) >= 3
    for f in files:
        b = f.read_bytes()
        m = CoreModel(b)
        g = read_graph(b)
        c = g.counts()
        want = {"SNAPUQ_MAX_TENSORS": c["tensors"], "SNAPUQ_MAX_OPS": c["operators"],
                "SNAPUQ_MAX_IO": max(c["inputs"], c["outputs"])}
        assert m.capacities() == want, f
        assert [known[op.code][0] for op in g.operators] == [op.name for op in g.operators] == m.op_names(), f
        flags = subprocess.run([sys.executable, str(TOOLS / "caps.py"), str(f)], capture_output=True,
                               text=True, check=True).stdout.split()
        assert flags == [f"-D{k}={v}" for k, v in want.items()], f
    for d in sorted(p.parent for p in MODELS.glob("*/snapuq.json")):
        man = json.loads((d / "snapuq.json").read_text())
        core = CoreModel((d / "model_int8.tflite").read_bytes())
        assert man["model"]["ops"] == sorted(set(core.op_names())), d


def _nm_undefined_regs(obj: Path) -> set[str]:
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines() if ln.split()[-1].startswith("snapuq_reg_")}


@pytest.mark.skipif(not (RESNET8 / "snapuq.json").exists(), reason="models not shipped")
def test_exported_model_ops_macro_defines_the_same_table_as_caps(tmp_path: Path) -> None:
    """cgen's SNAPUQ_MODEL_OPS (from the manifest's C-core op list) and caps.py --op-table give one table."""
    from snapuq.export.cgen import write_c_model

    man = json.loads((RESNET8 / "snapuq.json").read_text())
    tfl = (RESNET8 / "model_int8.tflite").read_bytes()
    _, h = write_c_model(tmp_path, man, tfl)
    assert "#define SNAPUQ_MODEL_OPS(X)" in h.read_text()
    src = tmp_path / "model_ops.c"
    src.write_text('#include "snapuq_ops.h"\n#include "snapuq_model.h"\n\n'
                   "SNAPUQ_OP_TABLE(SNAPUQ_MODEL_OPS);\n")
    gen = tmp_path / "caps_ops.c"
    assert subprocess.run([sys.executable, str(TOOLS / "caps.py"), "--op-table", str(gen),
                           str(RESNET8 / "model_int8.tflite")]).returncode == 0
    regs = []
    for c in (src, gen):
        o = c.with_suffix(".o")
        subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{CORE}",
                        f"-I{tmp_path}", "-c", str(c), "-o", str(o)], check=True)
        regs.append(_nm_undefined_regs(o))
    assert regs[0] == regs[1] == {f"snapuq_reg_{n.lower()}" for n in man["model"]["ops"]}


def _make(target: str, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run(["make", "-C", str(ROOT / "firmware"), target, f"BUILD={BUILD}", *args],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return p


def _upload(dev, tflite: bytes) -> list[str]:
    rep = dev.command(f"model {len(tflite)} 0x{zlib.crc32(tflite):08x}", payload=tflite, check=False)
    return rep.errors


@pytest.mark.skipif(not (RESNET8 / "snapuq_model.c").exists(), reason="models/resnet8 not exported")
def test_restricted_host_image_refuses_another_operator_in_one_line() -> None:
    from snapuq.harness.protocol import Device
    from snapuq.harness.qemu import PipeSerial

    q = _quantize_model()
    digits = (MODELS / "digits" / "model_int8.tflite").read_bytes()
    for ops in ("fit", "all"):
        _make("host", f"MODEL={RESNET8}", f"OPS={ops}", f"VARIANT=_{ops}")
        exe = BUILD / f"host_{ops}" / "snapuq_fw"
        table = BUILD / f"host_{ops}" / "snapuq_op_table.c"
        assert table.exists() == (ops == "fit")
        dev = Device(PipeSerial(exe), timeout=60)
        try:
            dev.wait_boot(timeout=10)
            assert int(dev.profile()["loaded"]) == 1
            if ops == "fit":
                errs = _upload(dev, q)
                assert len(errs) == 1 and errs[0].startswith("e-model ") and \
                    "QUANTIZE: operator not in this image's op table" in errs[0], errs
                errs = _upload(dev, digits)
                assert len(errs) == 1 and \
                    "MAX_POOL_2D: operator not in this image's op table" in errs[0], errs
                # the compiled-in model still loads and runs
                assert "e-" not in " ".join(dev.command("model builtin", check=False).errors)
            else:
                assert int(dev.load_model(q)["bytes"]) == len(q)
        finally:
            dev.close()
            if isinstance(dev.ser, PipeSerial):
                dev.ser.close()


def _text(elf: Path) -> int:
    out = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    return int(re.search(r"^\.text\s+(\d+)", out, re.M).group(1))


def _symbols(elf: Path) -> set[str]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines()}


@pytest.mark.qemu
@pytest.mark.skipif(not (ARM and QEMU), reason="arm-none-eabi-gcc or qemu-system-arm missing")
@pytest.mark.skipif(not (RESNET8 / "snapuq_model.c").exists(), reason="models/resnet8 not exported")
def test_resnet8_small_mcu_image_links_only_its_operators() -> None:
    from snapuq.harness.protocol import Device
    from snapuq.harness.qemu import QemuProcess, board_spec, open_serial
    from snapuq.native.ccore import CoreModel

    _make("qemu_m4", f"MODEL={RESNET8}")  # the Small-MCU default: CAPS=fit, OPS=fit
    _make("qemu_m4", f"MODEL={RESNET8}", "OPS=all", "VARIANT=_all")
    fit, full = BUILD / "qemu_m4" / "firmware.elf", BUILD / "qemu_m4_all" / "firmware.elf"
    saved = _text(full) - _text(fit)
    print(f"ResNet-8 qemu_m4 .text: OPS=all {_text(full)} B, OPS=fit {_text(fit)} B, saved {saved} B")
    assert saved >= 7000, saved
    sf, sa = _symbols(fit), _symbols(full)
    gone = {"snapuq_dwconv_dsp", "parse_concat", "snapuq_maxpool_ref", "snapuq_reg_max_pool_2d",
            "snapuq_reg_depthwise_conv_2d", "snapuq_reg_quantize", "snapuq_reg_reshape"}
    kept = {"snapuq_reg_add", "snapuq_reg_conv_2d", "snapuq_reg_fully_connected", "snapuq_reg_mean",
            "snapuq_reg_softmax", "snapuq_conv_dsp"}
    assert gone <= sa and not gone & sf and kept <= sf

    tfl = (RESNET8 / "model_int8.tflite").read_bytes()
    core = CoreModel(tfl)
    rng = np.random.default_rng(0)
    xs = [rng.integers(-128, 128, size=core.inputs[0].shape).astype(np.int8) for _ in range(2)]
    want = [core.run(x[None]) for x in xs]
    q = _quantize_model()
    spec = board_spec("qemu:m4")
    for elf in (fit, full):
        with QemuProcess(spec, elf, icount=False) as qp:
            dev = Device(open_serial(qp.url), timeout=120)
            try:
                dev.wait_boot(timeout=20)
                mism = 0
                for x, w in zip(xs, want):
                    dev.load_input(x.tobytes())
                    dev.infer(1, 0)
                    got = dev.outputs()
                    ref = core.split(w)
                    mism += sum(int(np.count_nonzero(np.asarray(got[i], np.int64)
                                                     != ref[t.name].reshape(-1).astype(np.int64)))
                                for i, t in enumerate(core.outputs))
                assert mism == 0, (elf, mism)
                errs = _upload(dev, q)
                if elf == fit:
                    assert len(errs) == 1 and errs[0].startswith("e-model ") and \
                        "QUANTIZE: operator not in this image's op table" in errs[0], errs
                else:
                    assert errs == [], errs
            finally:
                dev.close()
