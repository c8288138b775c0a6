"""firmware/core/snapuq_tokens.c against snapuq.tokens.fixed on random inputs (gcc, ASan + UBSan)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from snapuq.tokens import fixed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "firmware", "core")
sys.path.insert(0, os.path.join(ROOT, "tests", "c"))
import ccore  # noqa: E402  (core.mk: the one list of core sources)

TOKENS_SRC = [os.path.join(CORE, s) for s in ccore.core_sources("TOKENS")]
DRIVER = os.path.join(ROOT, "tests", "c", "test_snapuq_tokens.c")

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> str:
    exe = str(tmp_path_factory.mktemp("tokens_c") / "test_snapuq_tokens")
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g", "-O1",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-I", CORE,
           *TOKENS_SRC, DRIVER, "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def _cases(rng: np.random.Generator, n: int) -> list[dict]:
    cases = []
    for i in range(n):
        T = int(rng.integers(1, 9)) if i else 4
        N = int(rng.integers(1, 40))
        C = int(rng.integers(2, 20))
        if i % 5 == 4:  # extremes: scale near the bounds, saturated codes, constant logits
            scale = int(rng.choice([1, 7, (1 << 23) - 1, 1 << 20]))
            q = rng.choice(np.array([-128, 127, 0], np.int8), size=(T, N, C)).astype(np.int8)
        else:
            scale = int(rng.integers(200, 40000))
            q = rng.integers(-128, 128, size=(T, N, C)).astype(np.int8)
        if i % 7 == 6:
            q[:] = q[0:1]  # identical steps: std 0, many ties
        zp = int(rng.integers(-128, 128))
        mw, sw = [(65536, 58982), (65536, 0), (0, 65536), (131072, 131072), (12345, 777)][i % 5]
        K = int(rng.integers(1, N + 1))
        cases.append({"q": q, "scale": scale, "zp": zp, "mw": mw, "sw": sw, "K": K})
    return cases


def _run(driver: str, cases: list[dict]) -> list[dict]:
    lines = [str(len(cases))]
    for c in cases:
        T, N, C = c["q"].shape
        lines.append(f"{T} {N} {C} {c['scale']} {c['zp']} {c['mw']} {c['sw']} {c['K']}")
        lines.append(" ".join(str(int(v)) for v in c["q"].ravel()))
    r = subprocess.run([driver], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    out = r.stdout.splitlines()
    assert out[0] == "error checks ok"
    assert out[-1] == f"done {len(cases)}"
    res, cur = [], {}
    for line in out[1:-1]:
        key, *vals = line.split()
        cur[key] = [int(v) for v in vals]
        if key == "mask":
            res.append(cur)
            cur = {}
    return res


def test_c_kernel_equals_host_on_random_inputs(driver):
    rng = np.random.default_rng(1234)
    cases = _cases(rng, 120)
    got = _run(driver, cases)
    assert len(got) == len(cases)
    for c, g in zip(cases, got):
        assert g["status_lut"] == [0] and g["status_imp"] == [0] and g["status_topk"] == [0]
        lut = fixed.evidence_lut(c["scale"], c["zp"])
        np.testing.assert_array_equal(np.array(g["lut"], np.uint64), lut.astype(np.uint64))
        scores, u = fixed.importance_int(c["q"], c["scale"], c["zp"], c["mw"], c["sw"], return_u=True)
        np.testing.assert_array_equal(np.array(g["scores"]), scores.astype(np.int64))
        np.testing.assert_array_equal(np.array(g["u"]), u.ravel().astype(np.int64))
        idx = fixed.topk_int(scores, c["K"])
        np.testing.assert_array_equal(np.array(g["topk"]), idx)
        mask = np.zeros(len(scores), np.int64)
        mask[idx] = 1
        np.testing.assert_array_equal(np.array(g["mask"]), mask)


def test_c_table_is_generated_from_the_host_table():
    src = "".join(open(p).read() for p in TOKENS_SRC)
    assert fixed.c_g_table() in src
