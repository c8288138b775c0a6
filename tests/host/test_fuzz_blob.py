"""A short libFuzzer run (clang, ASan+UBSan) of the model blob reader, seeded with the blob of the
shipped digits model generated at test time (`snapuq micropython blob`), -max_len covering it.
The target's own mutator re-computes the blob CRC after mutating, so executions reach the SNAP-section
and model checks instead of stopping at the CRC.
Skipped until the core has the blob reader (firmware/core/snapuq_blob.c)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
MODEL = ROOT / "models" / "digits"

pytestmark = [
    pytest.mark.skipif(not (CORE / "snapuq_blob.c").exists(), reason="no blob reader in the core yet"),
    pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed"),
]


def test_blob_reader_libfuzzer_short_run(tmp_path: Path) -> None:
    from snapuq.native.ccore import core_sources

    m = tmp_path / "m"
    m.mkdir()
    for n in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite"):
        shutil.copy(MODEL / n, m / n)
    p = subprocess.run([sys.executable, "-m", "snapuq.cli", "micropython", "blob", str(m)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    blobs = list(m.glob("*.snapuq"))
    assert blobs
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(blobs[0], corpus / "digits.snapuq")
    # and one with an input-normalization record (SNAP section v3), so mutations reach its checks
    import json

    from snapuq.commands.micropython import load_model_files
    from snapuq.native.blob import write_blob

    tfl, man = load_model_files(m)
    man = json.loads(json.dumps(man))
    man["input"]["normalization"] = {"kind": "standard", "scale": [0.25], "offset": [-1.5]}
    (corpus / "digits_norm.snapuq").write_bytes(write_blob(tfl, man))
    exe = tmp_path / "fuzz_blob"
    incs = [f"-I{d}" for d in [CORE, *[q for q in CORE.rglob("*") if q.is_dir()]]]
    ignore = tmp_path / "ignore.txt"  # no comparison hooks in the CRC loop: 3x more executions per second
    ignore.write_text("fun:snapuq_crc32\n")
    cmd = ["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
           f"-fsanitize-coverage-ignorelist={ignore}", *incs,
           *map(str, core_sources()), str(ROOT / "tests" / "c" / "fuzz_blob.c"), "-o", str(exe), "-lm"]
    b = subprocess.run(cmd, capture_output=True, text=True)
    if b.returncode != 0 and "fuzzer" in b.stderr and "cannot find" in b.stderr:
        pytest.skip("libFuzzer runtime missing (libclang-rt-14-dev)")
    assert b.returncode == 0, b.stderr[-3000:]
    max_len = blobs[0].stat().st_size + 4096
    # the target allocates nothing (static buffers, a malloc-free core): any single allocation over 256 MB
    # fails the run; the process's RSS (libFuzzer's corpus and ASan's quarantine, ~0.4 GB here, once over
    # libFuzzer's default 2 GB limit in a loaded CI run with 32 MB of live heap) is bounded at 4 GB
    r = subprocess.run([str(exe), "-max_total_time=10", "-timeout=10", f"-max_len={max_len}",
                        "-malloc_limit_mb=256", "-rss_limit_mb=4096", str(corpus)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"Done (\d+) runs", r.stderr), r.stderr[-2000:]
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))
