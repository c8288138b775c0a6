"""The Uncert token kernel on QEMU Cortex-M4 (mps2-an386, -icount shift=0): instructions per call of the
evidence LUT, the importance and the top-K for the hierarchical model's stage sizes (CIFAR-10: 64 and 16
tokens, MNIST: 49; T = 4, C = 10, K = ⌈0.8·N⌉). `python tests/host/test_tokens_qemu.py OUT.json` writes
the figures docs/TOKENS.md quotes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
import ccore  # noqa: E402

SEMI = ccore.TESTS_C / "qemu_semihost"
LINE = re.compile(r"tokens_icount T=(\d+) N=(\d+) C=(\d+) K=(\d+) lut=(\d+) importance=(\d+) topk=(\d+)")


def measure(tmp: Path) -> list[dict]:
    elf = tmp / "tokens_icount.elf"
    cmd = ["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-mthumb",
           "-mfloat-abi=hard", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", f"-I{ccore.CORE}", "-nostartfiles",
           "-T", str(SEMI / "link.ld"), str(SEMI / "startup.c"), str(SEMI / "tokens_icount_main.c"),
           str(ccore.CORE / "snapuq_tokens.c"), "-lgcc", "-o", str(elf)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    qemu = ["qemu-system-arm", "-M", "mps2-an386", "-icount", "shift=0", "-nographic", "-semihosting-config",
            "enable=on,target=native", "-kernel", str(elf), "-monitor", "none", "-serial", "none"]
    p = subprocess.run(qemu, capture_output=True, text=True, timeout=120)  # dies with the run
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "tokens_icount: ok" in out, out
    keys = ("T", "N", "C", "K", "lut", "importance", "topk")
    return [dict(zip(keys, map(int, m))) for m in LINE.findall(out)]


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_token_kernel_instruction_counts_on_qemu(tmp_path: Path) -> None:
    rows = measure(tmp_path)
    assert [(r["N"], r["K"]) for r in rows] == [(64, 52), (16, 13), (49, 40)]
    by_n = {r["N"]: r for r in rows}
    for r in rows:
        # at least one instruction per logit read, and the LUT's 256 entries; not absurdly many
        assert r["T"] * r["N"] * r["C"] <= r["importance"] < 400 * r["T"] * r["N"] * r["C"], r
        assert 256 <= r["lut"] < 2_000_000 and 0 < r["topk"], r
    # the importance is linear in the tokens, the top-K (O(N·K)) grows faster
    assert 2.5 < by_n[64]["importance"] / by_n[16]["importance"] < 5.5
    assert by_n[64]["topk"] / by_n[16]["topk"] > 5


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        res = measure(Path(d))
    doc = {"board": "mps2-an386 (Cortex-M4), QEMU -icount shift=0, arm-none-eabi-gcc -O2",
           "unit": "instructions per call (SysTick at 40 instructions per tick, mean of 40 calls)",
           "rows": res}
    Path(sys.argv[1]).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
