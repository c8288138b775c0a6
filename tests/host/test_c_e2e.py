"""End to end on the C side: `cgen.write_c_model` output compiled with the runtime and the SNAP
core; logits and U(x) equal TFLM's outputs scored by the fixed-point spec. Uses the shipped
models/digits artifact when present, else a converted Keras model with SNAP-shaped outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402
from oracles.snap_spec import spec_snap_batch, spec_snap_int  # noqa: E402
from test_c_snap import random_mn, random_snap  # noqa: E402

from snapuq.errors import ModelFormatError  # noqa: E402
from snapuq.export.cgen import write_c_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "digits"


def _snap_model() -> bytes:
    import tensorflow as tf
    keras = tf.keras
    layers = keras.layers
    keras.utils.set_random_seed(7)
    inp = keras.Input((8, 8, 1), batch_size=1)
    x = layers.Conv2D(6, 3, padding="same", activation="relu")(inp)
    a0 = layers.GlobalAveragePooling2D(name="gap0")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(12, 3, padding="same", activation="relu")(x)
    a1 = layers.GlobalAveragePooling2D(name="gap1")(x)
    logits = layers.Dense(10, name="logits_d")(layers.Flatten()(x))
    probs = layers.Softmax()(logits)
    z = layers.Dense(8)(a0)
    mu = layers.Dense(12)(z)
    lv = layers.Dense(12)(z)
    m = keras.Model(inp, {"logits": logits, "probs": probs, "tap0_a": a1, "tap0_mu": mu, "tap0_logvar": lv})
    rep = np.random.default_rng(0).uniform(0, 1, size=(64, 8, 8, 1)).astype(np.float32)
    return ccore.convert_int8(m, rep)


def _synthetic_manifest(info: dict[str, Any]) -> dict[str, Any]:
    snap, _ = random_snap(1)   # best variant (p_err + alarm), 1..3 taps: keep one tap of d = 12
    tap = dict(snap["taps"][0])
    tap.update(d=12, a="tap0_a", mu="tap0_mu", logvar="tap0_logvar")
    snap["taps"] = [tap]
    outputs = {o["name"]: {"index": i, "scale": o["scale"], "zero_point": o["zero_point"],
                           "shape": o["shape"]} for i, o in enumerate(info["outputs"])}
    inp = info["inputs"][0]
    # the input tap (step 4b) on the 8 x 8 input, with its zero point
    rng = np.random.default_rng(5)
    g = [random_mn(rng, 30, 40) for _ in range(32)]
    pm, pn = random_mn(rng, 29, 34)
    snap["intap"] = {"rows": 8, "cols": 8, "n_feat": 32, "z_x": int(inp["zero_point"]),
                     "g_m": [m for m, _ in g], "g_n": [n for _, n in g],
                     "h_q12": rng.integers(-2**16, 2**16, size=32).tolist(), "p_m": pm, "p_n": pn,
                     "r_q16": int(rng.integers(-2**18, 2**18)), "w_q16": int(rng.integers(2**14, 2**17))}
    snap["spec_version"] = 3
    return {"name": "synthetic", "snap": snap, "outputs": outputs, "class_names": [str(i) for i in range(10)],
            "input": {"scale": inp["scale"], "zero_point": inp["zero_point"], "shape": inp["shape"]}}


def _build_e2e(gen_dir: Path, name: str) -> Path:
    out = ccore.BUILD / name
    out.parent.mkdir(parents=True, exist_ok=True)  # run alone (-k), no earlier test has made it
    srcs = [ccore.CORE / s for s in ccore.RUNTIME_SRC + ccore.SNAP_SRC] + [ccore.TESTS_C / "run_e2e.c",
                                                                          gen_dir / "snapuq_model.c"]
    cmd = ["gcc", *ccore.CFLAGS, *ccore.SAN, f"-I{ccore.CORE}", f"-I{gen_dir}", *map(str, srcs),
           "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def _run_e2e(binary: Path, xs: list[np.ndarray], n_taps: int, tmp: Path) -> list[dict[str, Any]]:
    (tmp / "x.bin").write_bytes(b"".join(x.astype(np.int8).tobytes() for x in xs))
    p = subprocess.run([str(binary), str(tmp / "x.bin"), str(len(xs)), str(tmp / "o.bin")],
                       check=True, capture_output=True, text=True)
    json.loads(p.stdout.splitlines()[0])
    rows = np.frombuffer((tmp / "o.bin").read_bytes(), dtype="<i4").reshape(len(xs), 9 + 2 * n_taps)
    keys = ["pred", "U16", "S16", "F16", "m16", "Z16", "flag", "P16", "A16"]
    return [{**dict(zip(keys, map(int, r[:9]))), "ebar16": r[9:9 + n_taps].tolist(),
             "s16": r[9 + n_taps:].tolist()} for r in rows]


def test_cgen_e2e_synthetic(tmp_path: Path) -> None:
    tfl = ccore.cached_model("snapshape_v1", _snap_model)
    runner = ccore.build_binary("run_model_ref", ["run_model.c"])
    info, _ = ccore.run_model_c(runner, tfl, [])
    manifest = _synthetic_manifest(info)
    write_c_model(tmp_path / "gen", manifest, tfl)
    binary = _build_e2e(tmp_path / "gen", "run_e2e_synth")
    rng = np.random.default_rng(9)
    xs = [rng.integers(-128, 128, size=(1, 8, 8, 1), dtype=np.int8) for _ in range(300)]
    ours = _run_e2e(binary, xs, 1, tmp_path)
    ref_out = ccore.run_model_tflm(tfl, xs)
    names = list(manifest["outputs"])
    n_in = 0
    for o, r, x in zip(ours, ref_out, xs, strict=True):
        outs = {n: r[manifest["outputs"][n]["index"]] for n in names}
        exp = spec_snap_int({**outs, "input": x}, manifest["snap"])
        n_in += exp.pop("s_in16") > 0
        assert {k: o[k] for k in exp} == exp
    assert len({o["U16"] for o in ours}) > 20 and n_in > 250   # the input tap contributes to S16


def test_cgen_rejects_bad_manifest(tmp_path: Path) -> None:
    tfl = ccore.cached_model("snapshape_v1", _snap_model)
    with pytest.raises(ModelFormatError, match="snap"):
        write_c_model(tmp_path, {"outputs": {}}, tfl)
    with pytest.raises(ModelFormatError, match="TFL3"):
        write_c_model(tmp_path, {"snap": {}}, b"not a model")
    runner = ccore.build_binary("run_model_ref", ["run_model.c"])
    info, _ = ccore.run_model_c(runner, tfl, [])
    manifest = _synthetic_manifest(info)
    manifest["snap"]["taps"][0]["lut_shift"] = 99
    with pytest.raises(ModelFormatError, match="lut_shift"):
        write_c_model(tmp_path, manifest, tfl)


@pytest.mark.skipif(not (SHIPPED / "snapuq.json").exists(), reason="shipped model not exported yet")
def test_shipped_model_e2e(tmp_path: Path) -> None:
    manifest = json.loads((SHIPPED / "snapuq.json").read_text())
    tfl = (SHIPPED / "model_int8.tflite").read_bytes()
    write_c_model(tmp_path / "gen", manifest, tfl)
    binary = _build_e2e(tmp_path / "gen", "run_e2e_shipped")
    info, _ = ccore.run_model_c(ccore.build_binary("run_model_ref", ["run_model.c"]), tfl, [])
    shape = info["inputs"][0]["shape"]
    # the planned arena (tables + activations) is no larger than TFLM's smallest working arena
    assert info["arena"] <= ccore.tflm_min_arena(tfl, np.zeros(shape, np.int8))
    assert info["activations"] < info["activations_no_reuse"]
    # 200 real test digits (quantized as the manifest says) + 100 random codes
    from snapuq.data import load_dataset
    from snapuq.export.convert import quantize_input
    ds = load_dataset(manifest.get("dataset", "digits"))
    xq = quantize_input(ds.x_test[:200], manifest["input"]["scale"], manifest["input"]["zero_point"])
    rng = np.random.default_rng(0)
    xs = [xq[i:i + 1].reshape(shape) for i in range(len(xq))]
    xs += [rng.integers(-128, 128, size=shape, dtype=np.int8) for _ in range(100)]
    # every output element: C runtime == TFLM == numpy reference
    dsp_runner = ccore.build_binary("run_model_dsp", ["run_model.c"], ("SNAPUQ_KERNELS_DSP=1",))
    _, c_out = ccore.run_model_c(dsp_runner, tfl, xs)
    tflm_out = ccore.run_model_tflm(tfl, xs)
    assert ccore.compare_outputs(c_out, tflm_out) == [0] * len(tflm_out[0])
    from oracles.int8_reference import Int8Model
    ref_model = Int8Model(tfl)
    for x, c in zip(xs[:60], c_out):
        ref = ref_model.invoke(x)
        for n, v in manifest["outputs"].items():
            assert np.array_equal(np.asarray(ref[n]).ravel(), c[v["index"]].ravel()), n
    n_taps = len(manifest["snap"]["taps"])
    ours = _run_e2e(binary, xs, n_taps, tmp_path)
    ref_out = ccore.run_model_tflm(tfl, xs)
    names = manifest["outputs"]
    batch = {n: np.stack([r[v["index"]].ravel() for r in ref_out]) for n, v in names.items()}
    batch["input"] = np.stack([x.ravel() for x in xs])   # the input tap (step 4b) reads the inputs
    ref = spec_snap_batch(batch, manifest["snap"])
    assert manifest["snap"]["intap"] and (ref["s_in16"] > 0).mean() > 0.9
    for i, (o, r) in enumerate(zip(ours, ref_out)):
        assert o["pred"] == int(np.argmax(r[names["logits"]["index"]].ravel()))
        for key in ("S16", "F16", "m16", "P16", "A16", "Z16", "U16"):
            assert o[key] == int(ref[key][i]), key
        assert o["ebar16"] == [int(e) for e in ref["ebar16"][i]]
        assert o["s16"] == [int(e) for e in ref["s16"][i]]
        assert o["flag"] == int(ref["flag"][i])
    assert len({o["U16"] for o in ours}) > 20


def test_cgen_file_of_spec_v2_still_scores(tmp_path: Path) -> None:
    """A snapuq_model.c generated before the input tap (`.spec_version = 2`, no intap fields, as
    models/resnet8's) still passes snapuq_snap_check and scores as the spec says (v3 without an input
    tap is v2)."""
    tfl = ccore.cached_model("snapshape_v1", _snap_model)
    info, _ = ccore.run_model_c(ccore.build_binary("run_model_ref", ["run_model.c"]), tfl, [])
    manifest = _synthetic_manifest(info)
    manifest["snap"]["intap"], manifest["snap"]["spec_version"] = None, 2
    write_c_model(tmp_path / "gen", manifest, tfl)
    src = tmp_path / "gen" / "snapuq_model.c"
    text = src.read_text()
    assert ".spec_version = 3," in text and "has_intap" not in text
    src.write_text(text.replace(".spec_version = 3,", ".spec_version = 2,"))
    binary = _build_e2e(tmp_path / "gen", "run_e2e_v2")
    rng = np.random.default_rng(4)
    xs = [rng.integers(-128, 128, size=(1, 8, 8, 1), dtype=np.int8) for _ in range(40)]
    ours = _run_e2e(binary, xs, 1, tmp_path)
    for o, r in zip(ours, ccore.run_model_tflm(tfl, xs), strict=True):
        exp = spec_snap_int({n: r[v["index"]] for n, v in manifest["outputs"].items()}, manifest["snap"])
        exp.pop("s_in16")
        assert {k: o[k] for k in exp} == exp


@pytest.mark.parametrize("model", ["digits", "resnet8"])
def test_generated_quantize_input_equals_the_host(tmp_path: Path, model: str) -> None:
    """The generated snapuq_model_quantize_input (raw reading -> int8 codes on the device) equals its host
    twin `quantize_raw` on every element, and the host's own data path (apply_normalization in float64,
    then quantize_input) on every finite one, exact ties included: the shipped digits manifest (no
    normalization, 1 channel) and resnet8's with a per-channel record (3 channels); NaN, +-inf and
    out-of-range readings saturate."""
    from snapuq.data.user import apply_normalization
    from snapuq.export.convert import quantize_input, quantize_raw

    d = ROOT / "models" / model
    manifest = json.loads((d / "snapuq.json").read_text())
    inp = manifest["input"]
    rng = np.random.default_rng(5)
    shape = inp["shape"][1:]
    if model == "resnet8":
        sd, mean = np.array([0.25, 0.24, 0.26]), np.array([0.49, 0.48, 0.45])
        inp["normalization"] = {"kind": "standard", "scale": (1 / (sd * 255)).tolist(),
                                "offset": (-mean / sd).tolist()}  # fmt: skip
        raw = rng.integers(0, 256, size=(40, *shape)).astype(np.float32)
    else:
        raw = rng.uniform(-0.2, 1.2, size=(40, *shape)).astype(np.float32)
    raw[0].flat[:6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0]
    write_c_model(tmp_path / "gen", manifest, (d / "model_int8.tflite").read_bytes())
    h = (tmp_path / "gen" / "snapuq_model.h").read_text()
    assert f"#define SNAPUQ_MODEL_INPUT_CHANNELS {3 if model == 'resnet8' else 1}u" in h
    out = tmp_path / "run_quantize"
    cmd = ["gcc", *ccore.CFLAGS, *ccore.SAN, f"-I{ccore.CORE}", f"-I{tmp_path / 'gen'}",
           str(ccore.TESTS_C / "run_quantize.c"), str(tmp_path / "gen" / "snapuq_model.c"),
           *(str(ccore.CORE / s) for s in ccore.RUNTIME_SRC + ccore.SNAP_SRC), "-o", str(out)]  # input path
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    (tmp_path / "raw.bin").write_bytes(raw.astype("<f4").tobytes())
    subprocess.run([str(out), str(tmp_path / "raw.bin"), str(len(raw)), str(tmp_path / "codes.bin")],
                   check=True, capture_output=True, text=True)  # fmt: skip
    ours = np.frombuffer((tmp_path / "codes.bin").read_bytes(), np.int8).reshape(len(raw), -1)
    twin = quantize_raw(raw, inp)
    assert (ours == twin).all()
    assert ours[0, :6].tolist()[:5] == [int(inp["zero_point"]), 127, -128, 127, -128] or model == "resnet8"
    fin = np.isfinite(raw).reshape(len(raw), -1).all(1)
    host = quantize_input(apply_normalization(raw[fin], inp.get("normalization") or {"kind": "none"}),
                          float(inp["scale"]), int(inp["zero_point"])).reshape(int(fin.sum()), -1)
    assert (host == ours[fin]).all()
    assert len(np.unique(ours)) > 100   # not a constant path
