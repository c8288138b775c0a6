"""The cycle model (snapuq.harness.cycles) on hand-made instruction streams: the classes of QEMU's
disassembly, the Cortex-M4 TRM weights, load pipelining, taken-branch refills, flash stalls, the error bar."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapuq.errors import SnapuqError
from snapuq.harness.cycles import SILICON, Block, Insn, classify, estimate, read_counts


def _block(texts: list[str], execs: int, fallthrough: int = 0, imiss: int = 0,
           flash: tuple[int, int] = (0, 0)) -> Block:
    b = Block(0x1000, execs, fallthrough, imiss)
    b.insns = [Insn(2, 0, 0, t) for t in texts]
    b.insns[0].flash_loads, b.insns[0].dmiss = flash
    return b


@pytest.mark.parametrize("text, cls, n", [
    ("ldr r1, [sp, #0x24]", "load", 1), ("ldr.w r3, [r2, r3, lsl #2]", "load", 1),
    ("ldrsb.w r0, [r1]", "load", 1), ("ldrd r3, r1, [sp, #0x2c]", "ldrd", 1),
    ("strd fp, r0, [sp, #0x2c]", "strd", 1), ("str r1, [sp]", "store", 1),
    ("smlad r0, r1, r2, r0", "mac", 0), ("smull r0, r1, r2, r3", "mac", 0), ("sxtab16 r1, r2, r3", "simd", 0),
    ("mla r0, r1, r2, r3", "mla", 0), ("mul r0, r1", "mul", 0), ("sdiv r0, r1, r2", "div", 0),
    ("bne #0x7b06", "branch", 0), ("ble.w #0x4df8", "branch", 0), ("bl #0x2990", "branch", 0),
    ("cbz r0, #0x10", "branch", 0), ("bx lr", "branch", 0), ("pop {r4, r5, r6, pc}", "pop_pc", 4),
    ("push.w {r4, r5, r6, r7, r8, lr}", "stm", 6), ("ldm r0!, {r1, r2}", "ldm", 2), ("it gt", "it", 0),
    ("adds r0, #1", "alu", 0), ("bic r0, r1", "alu", 0), ("vldr s0, [r0]", "vldr", 1),
    ("vmul.f32 s0, s1, s2", "vfp", 0),
])
def test_classes_of_qemu_disassembly(text: str, cls: str, n: int) -> None:
    assert classify(text) == (cls, n)


def test_m4_weights_pipelining_refill_and_flash_stalls() -> None:
    sil = SILICON["l432kc"]  # 4 wait states
    # 3 loads in a row: 2 + 1 + 1; smlad 1; add 1; a conditional branch taken 7 of 10 times: 1 + 7/10 x P(2)
    blocks = [_block(["ldr r1, [r0]", "ldr r2, [r0, #4]", "ldr r3, [r0, #8]", "smlad r4, r1, r2, r4",
                      "adds r0, #12", "bne #0x1000"], execs=10, fallthrough=3, imiss=2, flash=(10, 5))]
    e = estimate(1, blocks, sil)
    assert e["instructions"] == 60 and e["breakdown"]["taken_branches"] == 7
    assert e["cycles_modelled"] == 10 * (4 + 1 + 1 + 1) + 7 * 2 + (2 + 5) * 4
    assert e["cycles_low"] < e["cycles_modelled"] < e["cycles_high"]
    assert e["ms_modelled"] == pytest.approx(e["cycles_modelled"] / 80e3, rel=1e-5)
    assert e["error_bar"].startswith("-") and "TRM" in e["error_bar"]
    half = estimate(2, blocks, sil)  # two invokes in the stream: per inference, half
    assert half["cycles_modelled"] == pytest.approx(e["cycles_modelled"] / 2, abs=1)
    ens = estimate(2, blocks, sil, inferences=1)  # an ensemble: both invokes make one inference
    assert ens["cycles_modelled"] == e["cycles_modelled"]


def test_m7_is_single_issue_with_one_cycle_loads() -> None:
    blocks = [_block(["ldr r1, [r0]", "ldr r2, [r0, #4]", "mla r0, r1, r2, r0", "b #0x1000"], execs=4)]
    e = estimate(1, blocks, SILICON["f767zi"])
    assert e["cycles_modelled"] == 4 * 4 + 4 * 1  # 1 cycle each, taken branch + 1
    assert "dual issue not modelled" in e["error_bar"]


def test_no_invoke_in_the_stream_is_an_error() -> None:
    with pytest.raises(SnapuqError, match="no call of the model's invoke"):
        estimate(0, [], SILICON["l432kc"])


def test_read_counts_of_the_plugin_format(tmp_path: Path) -> None:
    f = tmp_path / "c.txt"
    f.write_text("W 2\nT 1000 8 2 1 2\nI 1000 2 4 1 ldr r1, [r0]\nI 1002 2 0 0 bne #0x1000\n")
    w, blocks = read_counts(f)
    assert w == 2 and len(blocks) == 1 and blocks[0].execs == 8 and blocks[0].fallthrough == 2
    assert [i.text for i in blocks[0].insns] == ["ldr r1, [r0]", "bne #0x1000"]
    assert blocks[0].insns[0].flash_loads == 4 and blocks[0].insns[0].dmiss == 1
    with pytest.raises(SnapuqError, match="wrote no counts"):
        read_counts(tmp_path / "absent.txt")
