"""Every bad invocation ends in exactly one line on stderr, a non-zero exit status and no
traceback -- through the real command line (a subprocess each), before any expensive work
(no training here: tiny fixtures and the shipped models/digits)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from snapuq.errors import SnapuqError

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "digits"

pytestmark = pytest.mark.skipif(not (MODEL / "model_int8.tflite").exists(),
                                reason="models/digits not exported")


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, Path]:
    t = tmp_path_factory.mktemp("bad")
    f = t / "afile"
    f.write_text("x")

    def model_copy(name: str, edit) -> Path:
        d = t / name
        d.mkdir()
        for n in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite"):
            shutil.copy(MODEL / n, d / n)
        edit(d)
        return d

    def wrong_manifest(d: Path) -> None:
        m = json.loads((d / "snapuq.json").read_text())
        m["input"]["shape"] = [1, 28, 28, 1]
        m["n_classes"] = 7
        (d / "snapuq.json").write_text(json.dumps(m))

    run_bad = t / "rbad"
    run_bad.mkdir()
    (run_bad / "run.json").write_text("{oops")
    notelf = t / "fw.elf"
    notelf.write_text("hello")
    rng = np.random.default_rng(0)
    x8 = rng.random((40, 8, 8, 1)).astype(np.float32)
    x28 = rng.random((20, 28, 28, 1)).astype(np.float32)
    y2, y10 = np.arange(40) % 2, np.arange(20) % 10
    np.savez(t / "oneclass.npz", x_train=x8, y_train=0 * y2, x_test=x8[:10], y_test=0 * y2[:10])
    np.savez(t / "emptytest.npz", x_train=x8, y_train=y2, x_test=x8[:0], y_test=y2[:0])
    np.savez(t / "shape28.npz", x_train=x28, y_train=y10, x_test=x28, y_test=y10)
    return {"t": t, "file": f, "run_bad": run_bad, "notelf": notelf, "one": t / "oneclass.npz",
            "empty": t / "emptytest.npz", "s28": t / "shape28.npz",
            "badcfg": model_copy("badcfg", lambda d: (d / "config.json").write_text("{not json")),
            "badman": model_copy("badman", lambda d: (d / "snapuq.json").write_text("[1,2")),
            "wrongman": model_copy("wrongman", wrong_manifest)}


# (name, argv with {placeholders}, a word the message must contain)
CASES = [
    ("harness --out is a file", "harness --port qemu:m4 --model {M} --out {file}", "not a directory"),
    ("harness --out not writable", "harness --port qemu:m4 --model {M} --out /proc/snapuq_out",
     "not writable"),
    ("harness --limit -5", "harness --port qemu:m4 --model {M} --out {t}/o --limit -5", "--limit"),
    ("harness --limit 0", "harness --port qemu:m4 --model {M} --out {t}/o --limit 0", "--limit"),
    ("harness --start -1", "harness --port qemu:m4 --model {M} --out {t}/o --start -1", "--start"),
    ("harness --retries -1", "harness --port qemu:m4 --model {M} --out {t}/o --retries -1", "--retries"),
    ("harness --timeout 0", "harness --port qemu:m4 --model {M} --out {t}/o --timeout 0", "--timeout"),
    ("harness unknown board", "harness --port qemu:m9 --model {M} --out {t}/o --limit 2", "qemu:m9"),
    ("harness no such serial port", "harness --port /dev/ttyNOPE --model {M} --out {t}/o --limit 2",
     "ttyNOPE"),
    ("harness no model dir", "harness --port qemu:m4 --model {t}/nomodel --out {t}/o", "nomodel"),
    ("harness invalid config.json", "harness --port qemu:m4 --model {badcfg} --out {t}/o", "config.json"),
    ("harness invalid snapuq.json", "harness --port qemu:m4 --model {badman} --dataset digits --out {t}/o",
     "snapuq.json"),
    ("harness manifest vs model", "harness --port qemu:m4 --model {wrongman} --dataset digits --out {t}/o",
     "does not match"),
    ("harness --firmware not an ELF", "harness --port qemu:m4 --model {M} --out {t}/o --firmware {notelf}",
     "not an ELF"),
    ("harness --firmware missing", "harness --port qemu:m4 --model {M} --out {t}/o --firmware {t}/no.elf",
     "no such file"),
    ("harness invalid run.json on --resume", "harness --port qemu:m4 --model {M} --out {run_bad} --resume",
     "run.json"),
    ("harness --power", "harness --port qemu:m4 --model {M} --out {t}/o --power foo", "ppk2"),
    ("harness --severity 9", "harness --port qemu:m4 --model {M} --out {t}/o --stream --severity 9",
     "--severity"),
    ("harness unknown dataset", "harness --port qemu:m4 --model {M} --out {t}/o --dataset nosuch", "nosuch"),
    ("harness unknown option", "harness --port qemu:m4 --model {M} --out {t}/o --bogus", "--bogus"),
    ("harness dataset shape vs model",
     "harness --port qemu:m4 --model {M} --dataset {s28} --out {t}/o --limit 3", "expects (8, 8, 1)"),
    ("harness --build-dir is a file", "harness --port qemu:m4 --model {M} --out {t}/o --build-dir {file}",
     "--build-dir"),
    ("harness --segment 0", "harness --port qemu:m4 --model {M} --out {t}/o --stream --segment 0",
     "--segment"),
    ("eval --report is a file", "eval {M} --report {file}", "not a directory"),
    ("eval --report not writable", "eval {M} --report /proc/snapuq_eval", "not writable"),
    ("eval --limit -5", "eval {M} --report {t}/e --limit -5", "--limit"),
    ("eval --n-ood -1", "eval {M} --report {t}/e --n-ood -1", "--n-ood"),
    ("eval invalid config.json", "eval {badcfg} --report {t}/e", "config.json"),
    ("eval no model dir", "eval {t}/nomodel --report {t}/e", "nomodel"),
    ("export no model dir", "export {t}/nomodel", "nomodel"),
    ("export invalid config.json", "export {badcfg}", "config.json"),
    ("verify invalid snapuq.json", "verify {badman}", "snapuq.json"),
    ("verify manifest vs model", "verify {wrongman}", "does not match"),
    ("verify --n -1", "verify {M} --n -1", "--n"),
    ("bench --out is a directory", "bench --model {M} --out {t}", "directory"),
    ("bench --out not writable", "bench --model {M} --out /proc/snapuq/bench.json", "not writable"),
    ("bench no model", "bench --model {t}/nomodel --out {t}/b.json", "nomodel"),
    ("bench --repeats 0", "bench --model {M} --out {t}/b.json --repeats 0", "--repeats"),
    ("train --out is a file", "train --dataset digits --out {file}", "not a directory"),
    ("train --out not writable", "train --dataset digits --out /proc/snapuq_train", "not writable"),
    ("train --epochs 0", "train --dataset digits --out {t}/m --epochs 0", "--epochs"),
    ("train --backbone nosuch", "train --dataset digits --out {t}/m --backbone nosuch", "nosuch"),
    ("train unknown dataset", "train --dataset nosuch --out {t}/m", "nosuch"),
    ("train --data-dir missing", "train --dataset mnist --data-dir {t}/nodata --out {t}/m", "nodata"),
    ("train --rank 0", "train --dataset digits --out {t}/m --rank 0", "--rank"),
    ("train --batch-size 0", "train --dataset digits --out {t}/m --batch-size 0", "--batch-size"),
    ("train --epochs not a number", "train --dataset digits --out {t}/m --epochs x", "--epochs"),
    ("train --lr -1", "train --dataset digits --out {t}/m --lr -1", "--lr"),
    ("train single class", "train --dataset {one} --out {t}/m", "two classes"),
    ("train empty test split", "train --dataset {empty} --out {t}/m", "test split is empty"),
    ("eval --methods nosuch", "eval {M} --report {t}/e --methods nosuch", "nosuch"),
    ("verify --n 0", "verify {M} --n 0", "--n"),
    ("bench --boards nosuch", "bench --model {M} --out {t}/b.json --boards m9", "m9"),
    ("calibrate no model dir", "calibrate {t}/nomodel", "nomodel"),
    ("tokens --max-train 0", "tokens eval --dataset digits --out {t}/tk --max-train 0", "--max-train"),
    ("tokens --max-train -5", "tokens eval --dataset digits --out {t}/tk --max-train -5", "--max-train"),
    ("tokens --out is a file", "tokens eval --dataset digits --out {file}", "not a directory"),
    ("micropython no model", "micropython blob {t}/nomodel", "nomodel"),
    ("tokens bad action", "tokens {file}", "invalid choice"),
    ("unknown command", "nosuch", "nosuch"),
]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "snapuq.cli", *argv], capture_output=True, text=True,
                          timeout=240, cwd=cwd, env=env)


def test_bad_invocations_one_line_each(fx: dict[str, Path]) -> None:
    subs = {k: str(v) for k, v in fx.items()} | {"M": str(MODEL)}
    # each row its own --out: rows run three at a time, and two harness runs on one --out refuse each other
    argvs = [[f"{fx['t']}/o{i}" if a == "{t}/o" else a.format(**subs) for a in cmd.split()]
             for i, (_n, cmd, _w) in enumerate(CASES)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = list(pool.map(lambda a: _run(a, fx["t"]), argvs))
    bad = []
    for (name, _cmd, word), p in zip(CASES, procs):
        lines = p.stderr.strip().splitlines()
        if p.returncode == 0 or len(lines) != 1 or "Traceback" in p.stderr or word not in p.stderr:
            bad.append(f"{name}: rc={p.returncode} stderr={p.stderr[-400:]!r}")
    assert not bad, "\n".join(bad)


def test_degenerate_data_refused_before_training() -> None:
    from snapuq.nn.training import check_data

    class DS:
        name = "toy"
        x_train = np.zeros((4, 2, 2, 1))
        y_train = np.zeros(4, int)
        x_dev = np.zeros((2, 2, 2, 1))
        x_test = np.zeros((2, 2, 2, 1))

    with pytest.raises(SnapuqError, match="1 class"):
        check_data(DS())
    DS.y_train = np.array([0, 1, 0, 1])
    check_data(DS())
    DS.x_test = np.zeros((0, 2, 2, 1))
    with pytest.raises(SnapuqError, match="test split is empty"):
        check_data(DS())
