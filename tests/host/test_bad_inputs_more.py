"""More bad inputs (issue 29, item 8), through the real command line (`snapuq.cli.main` in this process, on
real files written in tmp_path): each ends in one line on stderr naming the file or option, a non-zero exit
and no traceback, before any training or conversion starts.

- damaged user data: zero-byte / damaged / object-array / complex .npz given as `--data` or `--ood`, a PNG
  whose header claims more than MAX_IMAGE_PIXELS (a decompression bomb, never decoded), a WAV cut short in
  its header, NaN float WAV samples, inputs x 1e30, y_test labels beyond the model's logits;
- options: --eps inf, --rank / --cov-rank above MAX_RANK (was a 40 GB TensorFlow allocation), --seed -1,
  export --n-rep -1, bench --boards '', bench --table with an empty list, --seeds '', paths with spaces
  that would go to make, and bench --data-dir (was ignored: the recorded dataset path was read instead);
- a clean `snapuq train --model` prints its one result line and nothing of the TFLite converter's dump.

The rows marked "no TF" fail before TensorFlow loads: their --model is a file that is no Keras model, so a
row that got as far as loading it would fail with another message. The rows that need the model (its
input size or its logits) run with a tiny Keras model and TFLite conversion patched to fail the test."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from snapuq import cli

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "digits"
needs_digits = pytest.mark.skipif(not (MODEL / "model_int8.tflite").exists(),
                                  reason="models/digits not exported")  # fmt: skip


def _png(w: int, h: int) -> bytes:
    """A PNG whose header says w x h grey pixels and whose data is a few bytes (decoding it would fail)."""

    def chunk(t: bytes, b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + chunk(b"IEND", b""))  # fmt: skip


def _folder(root: Path, ext: str, write) -> Path:
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(5):
            write(root / c / f"{i}{ext}", i)
    return root


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, Path]:
    from PIL import Image
    from scipy.io import wavfile

    t = tmp_path_factory.mktemp("bad_more")
    rng = np.random.default_rng(0)
    x = rng.random((120, 8, 8, 1)).astype(np.float32)
    y = np.arange(120) % 10
    f: dict[str, Path] = {"t": t}

    def npz(name: str, **arrays) -> None:
        np.savez(t / f"{name}.npz", **arrays)
        f[name] = t / f"{name}.npz"

    split = {"x_train": x[:90], "y_train": y[:90], "x_test": x[90:], "y_test": y[90:]}
    npz("good", **split)
    (t / "zero.npz").write_bytes(b"")
    f["zero"] = t / "zero.npz"
    (t / "damaged.npz").write_bytes(b"PK\x03\x04" + bytes(rng.integers(0, 256, 300, dtype=np.uint8)))
    f["damaged"] = t / "damaged.npz"
    npz("objarr", **{**split, "x_train": np.array([x[0], "a"], dtype=object), "y_train": y[:2]})
    npz("complex", **{**split, "x_train": x[:90] + 1j})
    npz("huge", **{**split, "x_train": x[:90] * 1e30})
    yt = y[90:].copy()
    yt[0] = 12
    npz("ybeyond", **{**split, "y_test": yt})
    npz("ood_obj", x_ood=np.array([x[0], "a"], dtype=object))
    npz("ood_complex", x_ood=x[:20] + 1j)
    np.save(t / "lone.npy", x[:4])
    (t / "lone.npy").rename(t / "lone.npz")
    f["lone"] = t / "lone.npz"

    def png(p: Path, i: int) -> None:
        Image.fromarray((rng.random((8, 8)) * 255).astype(np.uint8)).save(p)

    # 900 M pixels (past Pillow's own bomb error), 108 M (Pillow warns only), 25 M (Pillow says nothing)
    bombs = {"bomb": (30000, 30000), "bomb_warn": (12000, 9000), "bomb_quiet": (5000, 5000)}
    for name, (w, h) in bombs.items():
        d = _folder(t / name, ".png", png)
        (d / "a" / "bomb.png").write_bytes(_png(w, h))
        f[name] = d

    def wav(p: Path, i: int) -> None:
        wavfile.write(p, 16000, (rng.standard_normal(16000) * 1000).astype(np.int16))

    d = _folder(t / "wav_cut", ".wav", wav)
    (d / "a" / "cut.wav").write_bytes((d / "a" / "0.wav").read_bytes()[:30])
    f["wav_cut"] = d
    d = _folder(t / "wav_nan", ".wav", wav)
    w = (rng.standard_normal(16000) * 0.1).astype(np.float32)
    w[7] = np.nan
    wavfile.write(d / "a" / "nan.wav", 16000, w)
    f["wav_nan"] = d

    (t / "notkeras.keras").write_text("not a model")  # reached only by a row that got past the data checks
    f["notkeras"] = t / "notkeras.keras"
    (t / "with space").mkdir()
    f["space"] = t / "with space"
    if MODEL.is_dir():  # a model directory moved away from the data.npz its config.json names
        mv = t / "moved"
        mv.mkdir()
        for n in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite"):
            shutil.copy(MODEL / n, mv / n)
        cfg = json.loads((mv / "config.json").read_text())
        cfg["dataset"] = str(t / "gone" / "data.npz")
        (mv / "config.json").write_text(json.dumps(cfg))
        f["moved"] = mv
        sd = t / "strseed"
        shutil.copytree(mv, sd)
        cfg["seed"] = "abc"
        (sd / "config.json").write_text(json.dumps(cfg))
        f["strseed"] = sd
    return f


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's usage error (one line: snapuq.cli.OneLineParser)
        rc = int(e.code or 0)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line(rc: int, err: str, words: tuple[str, ...]) -> str:
    lines = err.strip().splitlines()
    assert rc != 0, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


TRAIN = "train --no-baselines --no-progress --epochs 1 --out {t}/out"
NOMODEL = TRAIN + " --model {notkeras}"  # a file that is no Keras model: these rows never load it

# (case, argv, words the one line must hold): these fail before TensorFlow loads ("no TF")
NO_TF = [
    ("--data zero-byte .npz", NOMODEL + " --data {zero}", ("zero.npz", "0 bytes")),
    ("--data damaged .npz", NOMODEL + " --data {damaged}", ("damaged.npz", "not a readable")),
    ("--data object array", NOMODEL + " --data {objarr}", ("objarr.npz", "x_train", "object")),
    ("--data complex inputs", NOMODEL + " --data {complex}", ("complex.npz", "complex")),
    ("--data a lone .npy", NOMODEL + " --data {lone}", ("lone.npz", "not an .npz")),
    ("--eps inf", TRAIN + " --dataset digits --eps inf", ("--eps",)),
    ("--eps nan (--model)", NOMODEL + " --data {good} --eps nan", ("--eps",)),
    ("--rank 100000", TRAIN + " --dataset digits --rank 100000", ("--rank", "1024")),
    ("--rank 100000 (--model)", NOMODEL + " --data {good} --rank 100000", ("--rank",)),
    ("--cov-rank 100000", TRAIN + " --dataset digits --cov-rank 100000", ("--cov-rank",)),
    ("--seed -1", TRAIN + " --dataset digits --seed -1", ("--seed",)),
    ("--seed 2^32 (--model)", NOMODEL + " --data {good} --seed 4294967296", ("--seed",)),
    ("--seed not a number", TRAIN + " --dataset digits --seed abc", ("--seed",)),
    ("--lambda-reg inf", TRAIN + " --dataset digits --lambda-reg inf", ("--lambda-reg",)),
    ("bench --table --methods ''", "bench --table --methods= --out {t}/tb.json", ("--methods",)),
    ("bench --table --workloads ''", "bench --table --workloads= --out {t}/tb.json", ("--workloads",)),
    ("bench --table --table-boards ''", "bench --table --table-boards= --out {t}/tb.json",
     ("--table-boards",)),
    ("bench --table --build-dir with a space", "bench --table --out {t}/tb.json --build-dir {space}/b",
     ("--build-dir", "with space", "make")),
    ("reproduce --seeds ''", "reproduce --data-dir {t} --seeds=", ("--seeds",)),
]

NEEDS_DIGITS = [
    ("export --n-rep -1", "export {M} --n-rep -1 --no-c", ("--n-rep",)),
    ("export --n-check -1", "export {M} --n-check -1 --no-c", ("--n-check",)),
    ("bench --boards ''", "bench --model {M} --out {t}/b.json --boards=", ("--boards",)),
    ("bench --boards ' , '", "bench --model {M} --out {t}/b.json --boards={comma}", ("--boards",)),
    ("bench --build-dir with a space", "bench --model {M} --out {t}/b.json --build-dir {space}/b",
     ("--build-dir", "with space", "make")),
    ("bench --model with a space", "bench --model {space} --out {t}/b.json", ("--model", "with space")),
    ("bench --data-dir is read (a moved model)",
     "bench --model {moved} --out {t}/b.json --boards m4 --data-dir {t}/nodata.npz", ("nodata.npz",)),
    ("eval --seed -4", "eval {M} --report {t}/r_seed --seed -4", ("--seed", "-4")),
    ("eval --seed 2^32", "eval {M} --report {t}/r_seed --seed 4294967296", ("--seed",)),
    ("bench: a string seed in config.json", "bench --model {strseed} --out {t}/b.json",
     ("config.json", "seed")),
]


def _argv(cmd: str, fx: dict[str, Path]) -> list[str]:
    """Split at spaces, then fill the {placeholders}: a path with a space stays one argument."""
    subs = {k: str(v) for k, v in fx.items()} | {"M": str(MODEL), "comma": " , "}
    return [a.format(**subs) for a in cmd.split()]


@pytest.mark.parametrize("name,cmd,words", NO_TF, ids=[c[0] for c in NO_TF])
def test_refused_before_tensorflow(fx, capsys, name: str, cmd: str, words: tuple[str, ...]) -> None:
    rc, _out, err = _cli(capsys, _argv(cmd, fx))
    line = _one_line(rc, err, words)
    assert "cannot load the Keras model" not in line, line  # refused before the model file was read
    assert not (fx["t"] / "out" / "config.json").exists()


@needs_digits
@pytest.mark.parametrize("name,cmd,words", NEEDS_DIGITS, ids=[c[0] for c in NEEDS_DIGITS])
def test_refused_with_the_shipped_model(fx, capsys, name: str, cmd: str, words: tuple[str, ...]) -> None:
    rc, _out, err = _cli(capsys, _argv(cmd, fx))
    _one_line(rc, err, words)
    assert not (fx["t"] / "b.json").exists()


# ------------------------------------------------------------------------------------- with a Keras model
@pytest.fixture(scope="module")
def models(fx) -> dict[str, Path]:
    import keras
    from keras import layers

    def small(shape, name: str) -> Path:
        i = keras.Input(shape)
        h = layers.Conv2D(8, 3, padding="same", activation="relu", name="c1")(i)
        h = layers.Conv2D(8, 3, padding="same", activation="relu", name="c2")(h)
        h = layers.GlobalAveragePooling2D(name="gap")(h)
        p = fx["t"] / f"{name}.keras"
        keras.Model(i, layers.Dense(10, name="out")(h)).save(p)
        return p

    return {"img": small((8, 8, 1), "img"), "audio": small((49, 10, 1), "audio")}


WITH_MODEL = [
    ("--data inputs x 1e30", "img", "{huge}", ("huge.npz", "x_train", "1e+06")),
    ("--data y_test beyond the logits", "img", "{ybeyond}", ("ybeyond.npz", "y_test", "12", "10 classes")),
    ("--data PNG bomb (900 M pixels)", "img", "{bomb}", ("bomb.png", "MAX_IMAGE_PIXELS")),
    ("--data PNG bomb (108 M pixels)", "img", "{bomb_warn}", ("bomb.png", "MAX_IMAGE_PIXELS")),
    ("--data PNG of 25 M pixels", "img", "{bomb_quiet}", ("bomb.png", "5000x5000", "MAX_IMAGE_PIXELS")),
    ("--data WAV header cut short", "audio", "{wav_cut}", ("cut.wav", "wav")),
    ("--data NaN float WAV samples", "audio", "{wav_nan}", ("nan.wav", "NaN")),
]


@pytest.mark.parametrize("name,model,data,words", WITH_MODEL, ids=[c[0] for c in WITH_MODEL])
def test_refused_before_conversion(fx, models, capsys, monkeypatch, name, model, data, words) -> None:
    from snapuq.export import capacity as api

    def no_conversion(*_a, **_k):
        raise AssertionError("TFLite conversion started")

    monkeypatch.setattr(api, "_convert", no_conversion)
    argv = _argv(TRAIN + f" --model {models[model]} --data {data}", fx)
    rc, _out, err = _cli(capsys, argv)
    _one_line(rc, err, words)


@needs_digits
@pytest.mark.parametrize("data,words", [
    ("{zero}", ("zero.npz", "0 bytes")),
    ("{damaged}", ("damaged.npz", "not a readable")),
    ("{ood_obj}", ("ood_obj.npz", "object")),
    ("{ood_complex}", ("ood_complex.npz", "complex")),
    ("{bomb}", ("bomb.png", "MAX_IMAGE_PIXELS")),
], ids=["zero-byte", "damaged", "object array", "complex", "PNG bomb"])  # fmt: skip
def test_eval_ood_refused(fx, capsys, data: str, words: tuple[str, ...]) -> None:
    argv = _argv(f"eval {MODEL} --report {{t}}/ev --no-progress --limit 10 --ood {data}", fx)
    rc, _out, err = _cli(capsys, argv)
    _one_line(rc, err, words)


def test_train_model_holds_the_converter_dump(fx, models) -> None:
    """TFLite's converter printed ~12 lines to stdout and more to stderr during `snapuq train --model`; they
    are held (shown with -v) like export's, and a clean run prints its one result line. A fresh process:
    the hold works on file descriptors 1 and 2, which pytest's capture replaces in this one."""
    out_dir = fx["t"] / "clean"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"))
    p = subprocess.run([sys.executable, "-m", "snapuq.cli", "train", "--model", str(models["img"]), "--data",
                        str(fx["good"]), "--out", str(out_dir), "--no-baselines", "--no-progress", "--epochs",
                        "1"], capture_output=True, text=True, timeout=300, cwd=fx["t"], env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.strip() == "", p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"snapuq train: {out_dir}: test accuracy"), p.stdout
    assert (out_dir / "config.json").is_file()


@pytest.mark.parametrize("argv,msg", [
    (["--methods", ""], "--methods: empty list"),
    (["--methods", " , "], "--methods: empty list"),
    (["--seeds", ""], "--seeds must list"),
])  # fmt: skip
def test_eval_empty_lists_are_refused(argv, msg, tmp_path, capsys):
    from snapuq.cli import main as cli_main

    assert cli_main(["eval", str(ROOT / "models" / "digits"), "--report", str(tmp_path / "r"), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err
