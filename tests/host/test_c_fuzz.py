"""Fuzzing the model loader: a short libFuzzer run (clang, ASan+UBSan) on the seed corpus of
converted test models, and a deterministic mutation run of the same target built with gcc."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def seeds() -> list[Path]:
    found = sorted((ccore.BUILD / "models").glob("*.tflite")) + sorted((ROOT / "models").glob("*/*.tflite")) \
        + sorted((ROOT / "models").glob("*/variants/*.tflite"))
    if not found:
        # a clean checkout before any conversion: make one small model
        from test_c_runtime import _mixed_model
        ccore.cached_model("mixed_v1", _mixed_model)
        found = sorted((ccore.BUILD / "models").glob("*.tflite"))
    return found


def _runtime_sources() -> list[str]:
    return [str(ccore.CORE / s) for s in ccore.RUNTIME_SRC]


@pytest.mark.skipif(not ccore.have_tools("clang"), reason="clang not installed")
def test_libfuzzer_short_run(tmp_path: Path) -> None:
    out = tmp_path / "fuzz_loader"
    p = subprocess.run(["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined",
                        "-fno-sanitize-recover=all", f"-I{ccore.CORE}", *_runtime_sources(),
                        str(ccore.TESTS_C / "fuzz_loader.c"), "-o", str(out)], capture_output=True, text=True)
    if p.returncode != 0 and "fuzzer" in p.stderr and "cannot find" in p.stderr:
        pytest.skip("libFuzzer runtime missing (libclang-rt-14-dev)")
    assert p.returncode == 0, p.stderr
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    sizes = []
    for k, s in enumerate(seeds()):
        shutil.copy(s, corpus / f"{k}_{s.name}")
        sizes.append(s.stat().st_size)
    # -max_len covers the largest seed: the shipped models (~120 KB) are fuzzed whole
    max_len = max([65536, *sizes]) + 1024
    r = subprocess.run([str(out), "-max_total_time=15", "-timeout=5", f"-max_len={max_len}", str(corpus)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"Done (\d+) runs", r.stderr)
    assert m and int(m.group(1)) > 1000, r.stderr[-2000:]
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))


def test_gcc_mutation_run() -> None:
    binary = ccore.build_binary("fuzz_loader_main", ["fuzz_loader.c"], ("SNAPUQ_FUZZ_MAIN=1",))
    # inputs that once crashed the loader or a kernel (found by the long libFuzzer run)
    files = sorted((ccore.TESTS_C / "regress").glob("*.tflite")) + seeds()[:6]
    r = subprocess.run([str(binary), "400", *map(str, files)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok 400 mutations")
