"""A probe of bad arguments and damaged model directories through the real command line (`snapuq.cli.main`
in this process): every row ends in exit status 1 or 2, one line on stderr that names the option, file or
part, and no traceback — before any training, conversion or device contact. The damaged directories are
copies of models/digits with their MANIFEST.sha256 recorded, then one part changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from snapuq import cli

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits"

ARGS = [  # (argv, words the one line must hold)
    ("eval {m} --report {t}/r --limit -5", ("--limit",)),
    ("eval {m} --report {t}/r --n-ood -1", ("--n-ood",)),
    ("eval {m} --report {t}/r --severity 9", ("--severity", "9")),
    ("eval {m} --report {t}/r --segment 0", ("--segment",)),
    ("eval {m} --report {t}/r --segment 1e9", ("--segment", "1e9")),
    ("eval {m} --report {t}/r --seed -4", ("--seed", "-4")),
    ("eval {m} --report {t}/r --methods snap,nosuch", ("nosuch",)),
    ("eval {m} --report {t}/afile", ("--report", "not a directory")),
    ("eval {m} --report {t}/r --ood {t}/nosuch.npz", ("nosuch.npz",)),
    ("eval {t}/nosuchdir --report {t}/r", ("nosuchdir",)),
    ("eval {m} --report {t}/r --seeds 0,0", ("--seeds",)),
    ("eval {m} --report {t}/r --seeds 0,a", ("--seeds",)),
    ("export {m} --n-rep 0", ("--n-rep",)),
    ("export {t}/nosuchdir", ("nosuchdir",)),
    ("verify {t}/nosuchdir", ("nosuchdir",)),
    ("verify {t}/afile", ("afile", "TFLite")),
    ("verify {m} --inputs {t}/x.npz", ("--inputs",)),
    ("verify {t}/bad.tflite", ("bad.tflite",)),
    ("verify {t}/empty.tflite", ("empty.tflite",)),
    ("bench {t}/bad.tflite --out {t}/b.json", ("bad.tflite",)),
    ("bench --model {m} --out {t}/afile/x.json", ("--out", "not a directory")),
    ("bench --model {m} --out {t}/b.json --boards nosuchboard", ("--boards", "nosuchboard")),
    ("calibrate {m} --alpha 2", ("alpha",)),
    ("calibrate {m} --hinge-q 1.5", ("hinge",)),
    ("calibrate {t}/nosuchdir", ("nosuchdir",)),
    ("harness --model {m} --port qemu:nosuch --limit 2 --out {t}/h", ("qemu:nosuch",)),
    ("harness --model {m} --port {t}/nodev --limit 2 --out {t}/h", ("--port",)),
    ("harness --model {m} --port qemu:m4 --limit -2 --out {t}/h", ("--limit",)),
    ("harness --model {m} --port qemu:m4 --limit 2 --out {t}/afile", ("--out", "not a directory")),
    ("harness --model {m} --port qemu:m4 --limit 2 --timeout -1 --out {t}/h", ("--timeout",)),
    ("harness --model {m} --port qemu:m4 --limit 2 --timeout nan --out {t}/h", ("--timeout",)),
    ("micropython blob {t}/nosuchdir --out {t}/x", ("nosuchdir",)),
    ("micropython blob {m} --out {t}/afile/x", ("--out",)),
    ("parts {t}/nosuchdir", ("nosuchdir",)),
    ("train --dataset nosuch --out {t}/t1", ("nosuch",)),
    ("train --dataset digits --out {t}/afile", ("--out", "not a directory")),
    ("train --dataset digits --out {t}/t2 --epochs 0", ("--epochs",)),
    ("train --dataset digits --out {t}/t2 --batch-size 0", ("--batch-size",)),
    ("train --dataset mnist --out {t}/t3 --data-dir {t}/nosuch", ("nosuch",)),
    ("train --dataset cifar10 --out {t}/t3 --data-dir {t}", ("CIFAR-10",)),
    ("train --model {t}/nosuch.keras --data {t}/x.npz --out {t}/t4", ("nosuch.keras",)),
    ("reproduce --data-dir {t}/nosuch", ("--data-dir",)),
    ("reproduce --data-dir {t} --datasets nosuch", ("--datasets",)),
]

PARTS = [  # (damaged copy, command, words): a changed part is named by every consumer
    ("sd_neg", "eval {d} --report {t}/r --limit 50", ("calib.json", "hinge.sd")),
    ("calib_cut", "eval {d} --report {t}/r --limit 50", ("calib.json",)),
    ("calib_cut", "export {d} --no-c", ("calib.json",)),
    ("keras_junk", "eval {d} --report {t}/r --limit 50", ("model.keras",)),
    ("keras_junk", "calibrate {d}", ("model.keras",)),
    ("int8_flip", "verify {d}", ("model_int8.tflite",)),
    ("int8_flip", "bench --model {d} --out {t}/bi.json", ("model_int8.tflite",)),
    ("int8_flip", "micropython blob {d} --out {t}/blob", ("model_int8.tflite",)),
    ("int8_flip", "harness --model {d} --port qemu:m4 --limit 2 --out {t}/hi", ("model_int8.tflite",)),
    ("c_edit", "harness --model {d} --port qemu:m4 --limit 2 --out {t}/hc", ("snapuq_model.c",)),
    ("no_json", "verify {d}", ("snapuq.json",)),
    ("no_json", "micropython blob {d} --out {t}/blob", ("snapuq.json",)),
]


def _damage(d: Path, how: str) -> None:
    if how == "sd_neg":  # a directory of an older snapuq (no manifest) with a bad calib.json: the validator
        c = json.loads((d / "calib.json").read_text())
        c["hinge"]["sd"] = -1.0
        (d / "calib.json").write_text(json.dumps(c))
        (d / "MANIFEST.sha256").unlink()
    elif how == "calib_cut":
        s = (d / "calib.json").read_text()
        (d / "calib.json").write_text(s[: len(s) // 2])
    elif how == "keras_junk":
        (d / "model.keras").write_bytes(b"PK\x03\x04junk")
    elif how == "int8_flip":
        b = bytearray((d / "model_int8.tflite").read_bytes())
        b[len(b) // 2] ^= 0xFF
        (d / "model_int8.tflite").write_bytes(bytes(b))
    elif how == "c_edit":
        s = (d / "snapuq_model.c").read_text()
        (d / "snapuq_model.c").write_text(s.replace("0x", "0X", 1))
    elif how == "no_json":
        (d / "snapuq.json").unlink()


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, Path]:
    if not (DIGITS / "model_int8.tflite").is_file():
        pytest.fail("models/digits is not exported: the shipped model is part of the checkout")
    t = tmp_path_factory.mktemp("probe")
    (t / "afile").write_text("hello")
    (t / "bad.tflite").write_bytes(np.random.default_rng(0).integers(0, 256, 100, dtype=np.uint8).tobytes())
    (t / "empty.tflite").write_bytes(b"")
    np.savez(t / "x.npz", x=np.zeros((4, 8, 8, 1), np.float32))
    m = t / "m"
    shutil.copytree(DIGITS, m, ignore=shutil.ignore_patterns("eval", "variants", "baselines"))
    assert cli.main(["parts", str(m), "--write"]) == 0
    out = {"t": t, "m": m}
    for how in sorted({p[0] for p in PARTS}):
        d = t / how
        shutil.copytree(m, d)
        _damage(d, how)
        out[how] = d
    return out


def _one_line(argv: list[str], capsys, words: tuple[str, ...]) -> None:
    capsys.readouterr()
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's own refusals
        rc = e.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and "%|" not in ln]
    assert rc in (1, 2), f"{argv}: exit {rc}, stderr {err!r}"
    assert "Traceback" not in err
    assert len(lines) == 1, f"{argv}: {len(lines)} lines: {err!r}"
    for w in words:
        assert w in lines[0], f"{argv}: {w!r} not in {lines[0]!r}"


@pytest.mark.parametrize("cmd, words", ARGS, ids=[a[0].split(" --out")[0][:60] for a in ARGS])
def test_bad_argument_one_line(fx, capsys, cmd: str, words: tuple[str, ...]) -> None:
    argv = [a.format(m=fx["m"], t=fx["t"]) for a in cmd.split()]
    _one_line(argv, capsys, words)


@pytest.mark.parametrize("how, cmd, words", PARTS, ids=[f"{p[0]}-{p[1].split()[0]}" for p in PARTS])
def test_damaged_part_named(fx, capsys, how: str, cmd: str, words: tuple[str, ...]) -> None:
    argv = [a.format(d=fx[how], t=fx["t"]) for a in cmd.split()]
    _one_line(argv, capsys, words)
