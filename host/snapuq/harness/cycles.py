"""Cycles per inference modelled from the instruction stream QEMU executes (`cycles_modelled`, `ms_modelled`).

QEMU counts instructions, not cycles. A TCG plugin (firmware/tools/qemu_insn_plugin.c, built here with the
host compiler) records, inside every call of the model's invoke function: each translation block executed,
how often, how often it fell through (the rest ended in a taken branch), QEMU's disassembly of each of its
instructions, the loads each instruction made from flash, and the misses of a small LRU cache model of the
part's flash accelerator (instruction lines per block executed, data lines per flash load).

The cycles are then weighted here, instruction by instruction, with the Cortex-M4 timings of Arm's
Technical Reference Manual (Cortex-M4 TRM r0p1, §3.3 "Instruction set summary", Table 3-1):
  - data processing, SIMD / DSP (SXTB16, SXTAB16, SSAT, QADD...), MUL, MLA / MLS and the DSP multiply-
    accumulates (SMLAD, SMLABB, SMULL, SMLAL, SMMUL...): 1 (the M4's single-cycle MAC; the error bar's high
    end takes MLA as 2, the Cortex-M3's figure); SDIV / UDIV: 2-12, taken as 7;
  - LDR / STR (byte, half, word, signed): 2, and 1 when the instruction before was a single load or store
    (neighbouring loads and stores pipeline their address and data phases); LDRD / STRD: 3;
  - LDM / STM / PUSH / POP: 1 + N registers; with PC: + P;
  - branches: 1 when not taken, 1 + P when taken (P = 2 of the TRM's 1-3 cycle pipeline refill);
    TBB / TBH 2 + P;
  - IT: 1 (not folded); VFP: 1, VLDR / VSTR 2, VDIV / VSQRT 14, VMLA 3;
plus the flash wait states of the board: every missed line of the accelerator's instruction cache and of its
data cache costs the part's wait states (a line fill stalls for the first word; the prefetch buffer hides
sequential fetches).

Cortex-M7: Arm's TRM publishes no instruction timings, and its dual issue is not modelled; the M7 figure
weights loads, stores, multiplies and MACs as 1 cycle (its 64-bit load path: LDRD 1, LDM 1 + N/2), a taken
branch + 1 (the branch predictor hides most), with the L1 caches (16 KB, 32-byte lines) against the flash
wait states. It is single-issue: read it as an upper estimate; no published M7 latency validates it.

Every figure carries its error bar: the same stream weighted with the low and the high ends of the timing
ranges (cycles_low / cycles_high: refill P 1-3, SDIV 2-12, IT folded or not, STR 1-2, a cache-line miss
costing half the wait states to all of them + 1). What the model was checked against, and what not, is in
docs/BENCH.md ("Modelled cycles")."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections import Counter as Tally
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snapuq import resources
from snapuq.errors import SnapuqError

PLUGIN_SRC = resources.firmware_dir() / "tools" / "qemu_insn_plugin.c"
INVOKE_SYMBOL = "snapuq_model_invoke"
HARNESS_INFERENCES = 10  # the harness models the first N inferences of a session, then QEMU runs unplugged
FLASH_RANGE = (0x0000_0000, 0x1000_0000)  # below SRAM: the images' code and constants (the boards' flash)

# what the model has been checked against (docs/BENCH.md, "Modelled cycles"); every figure also carries its
# error bar: the spread between the low and high ends of the timing ranges (estimate's cycles_low / _high)
VALIDATION = {
    "m4": "checked on 7 published NUCLEO-L4R5ZI latencies (MLPerf Tiny v1.0, microTVM's own generated code, "
          "native and CMSIS-NN, rebuilt and run here): modelled / published - 1 from -17 % to +18 %, mean "
          "|error| 10 % (docs/BENCH.md)",
    "m7": "not validated (single-issue; no published M7 latency of the same software)"}
ERROR_BAR = {"m4": "timing ranges per figure; -17 % .. +18 % against 7 published L4R5ZI latencies",
             "m7": "timing ranges per figure, single-issue (M7 dual issue not modelled); not validated"}


@dataclass(frozen=True)
class Silicon:
    key: str
    mcu: str
    core: str  # "m4" / "m7"
    clock_hz: int
    flash_ws: int
    icache: tuple[int, int]  # lines, bytes per line
    dcache: tuple[int, int]
    source: str


SILICON = {
    "l432kc": Silicon("l432kc", "STM32L432KC", "m4", 80_000_000, 4, (32, 32), (8, 32),
                      "RM0394: 4 wait states at 80 MHz (range 1); ART: prefetch, 1 KB instruction cache "
                      "(32 lines of 4 x 64 bits), 256 B data cache (8 lines)"),
    "l4r5zi": Silicon("l4r5zi", "STM32L4R5ZI", "m4", 120_000_000, 5, (32, 32), (8, 32),
                      "RM0432: 5 wait states at 120 MHz (range 1 boost); ART: prefetch, 1 KB instruction "
                      "cache (32 lines of 4 x 64 bits), 256 B data cache (8 lines)"),
    "f767zi": Silicon("f767zi", "STM32F767ZI", "m7", 216_000_000, 7, (512, 32), (512, 32),
                      "RM0410: 7 wait states at 216 MHz; Cortex-M7 L1 caches 16 KB I / 16 KB D "
                      "(32-byte lines), flash on AXI"),
}
# the part each QEMU board stands for (the budgets its linker script carries)
BOARD_SILICON = {"qemu_m4": "l432kc", "qemu_m7": "f767zi"}


# ------------------------------------------------------------------ the plugin


def plugin_library(build_dir: Path | None = None) -> Path:
    """The plugin's shared object, compiled when its source changed (one per source checksum)."""
    src = PLUGIN_SRC.read_bytes()
    key = hashlib.sha256(src).hexdigest()[:16]
    out = Path(build_dir or resources.work_dir("qemu-plugin")).resolve() / f"insn_{key}.so"
    if out.is_file():
        return out
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SnapuqError("no host C compiler (gcc) for the QEMU instruction plugin (apt-get install gcc)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{id(out)}.so")
    p = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-std=gnu99", "-Wall", "-Wextra", "-Werror",
                        str(PLUGIN_SRC), "-o", str(tmp)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SnapuqError(f"the QEMU instruction plugin does not compile: {p.stderr.strip()[-300:]}")
    tmp.replace(out)
    return out


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise SnapuqError(f"{name} not found (apt-get install binutils-arm-none-eabi)")
    return exe


def invoke_window(elf: Path, symbol: str = INVOKE_SYMBOL) -> tuple[int, list[int]]:
    """(entry address of `symbol`, the return addresses of its calls) in the ELF."""
    nm = subprocess.run([_tool("arm-none-eabi-nm"), str(elf)], capture_output=True, text=True).stdout
    entry = None
    for ln in nm.splitlines():
        parts = ln.split()
        if len(parts) == 3 and parts[2] == symbol and parts[1] in "Tt":
            entry = int(parts[0], 16) & ~1
    if entry is None:
        raise SnapuqError(f"{elf}: no function {symbol}")
    dis = subprocess.run([_tool("arm-none-eabi-objdump"), "-d", "--no-show-raw-insn", str(elf)],
                         capture_output=True, text=True).stdout
    call = re.compile(rf"^\s*([0-9a-f]+):\s+(bl|blx|b\.w|b)\s+[0-9a-f]+ <{re.escape(symbol)}>")
    rets = []
    for ln in dis.splitlines():
        m = call.match(ln)
        if m and m.group(2).startswith("bl"):
            rets.append(int(m.group(1), 16) + 4)  # BL is 32-bit
    if not rets:
        raise SnapuqError(f"{elf}: no call of {symbol} found")
    return entry, sorted(set(rets))[:16]


def plugin_arg(so: Path, elf: Path, silicon: Silicon, out: Path, symbol: str = INVOKE_SYMBOL,
               max_windows: int = 0, skip: int = 0) -> str:
    """The value of QEMU's -plugin for this image and part. max_windows: after that many invokes the plugin
    writes its counts and uninstalls itself (the rest of the run at QEMU's full speed; 0: until exit).
    skip: the first invokes left uncounted (inferences run with the per-operator profiler on)."""
    entry, rets = invoke_window(elf, symbol)
    parts = [str(so), f"on={entry:#x}", *(f"off={r:#x}" for r in rets), f"max={int(max_windows)}",
             f"skip={int(skip)}",
             f"flash={FLASH_RANGE[0]:#x}:{FLASH_RANGE[1]:#x}", f"out={out}",
             f"ilines={silicon.icache[0]}", f"iline={silicon.icache[1]}",
             f"dlines={silicon.dcache[0]}", f"dline={silicon.dcache[1]}"]
    return ",".join(parts)


# ------------------------------------------------------------------ reading the counts


@dataclass
class Insn:
    size: int
    flash_loads: int
    dmiss: int
    text: str


@dataclass
class Block:
    vaddr: int
    execs: int
    fallthrough: int
    imiss: int
    insns: list[Insn] = field(default_factory=list)


def read_counts(path: Path) -> tuple[int, list[Block]]:
    """(windows, blocks) of the plugin's output file."""
    if not path.is_file():
        raise SnapuqError(f"{path}: the QEMU instruction plugin wrote no counts (QEMU killed?)")
    windows = 0
    blocks: list[Block] = []
    with open(path) as f:
        for ln in f:
            if ln.startswith("I "):
                _, _a, size, fl, dm, text = (ln.rstrip("\n").split(" ", 5) + [""])[:6]
                blocks[-1].insns.append(Insn(int(size), int(fl), int(dm), text))
            elif ln.startswith("T "):
                _, a, ex, ft, im, _n = ln.split()
                blocks.append(Block(int(a, 16), int(ex), int(ft), int(im)))
            elif ln.startswith("W "):
                windows = int(ln.split()[1])
    return windows, blocks


# ------------------------------------------------------------------ the timings

_COND = "(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)"
_BRANCH = re.compile(rf"^(b|bl|blx|bx|b{_COND}|cbn?z)$")
_MAC = re.compile(r"^(smla|smls|smul|smua|smus|smmul|smmla|smmls|smlal|smull|umull|umlal|umaal|usada?8)")
_SIMD = re.compile(r"^(sxt|uxt|ssat|usat|qadd|qsub|qdadd|qdsub|sadd|ssub|uadd|usub|shadd|shsub|uhadd|uhsub|"
                   r"qasx|qsax|sasx|ssax|pkh|sel|rev|rbit|clz|bfi|bfc|ubfx|sbfx)")


def _mnemonic(text: str) -> tuple[str, str]:
    head, _, ops = text.strip().partition(" ")
    mn = head.lower()
    for suf in (".w", ".n"):
        if mn.endswith(suf):
            mn = mn[: -len(suf)]
    return mn, ops.strip().lower()


def _nregs(ops: str) -> int:
    m = re.search(r"\{([^}]*)\}", ops)
    if not m:
        return 1
    n = 0
    for part in m.group(1).split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            ia, ib = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
            n += (int(ib) - int(ia) + 1) if ia and ib else 2
        elif part:
            n += 1
    return max(n, 1)


def classify(text: str) -> tuple[str, int]:
    """(class, registers moved) of one instruction from QEMU's disassembly."""
    mn, ops = _mnemonic(text)
    if mn in ("tbb", "tbh"):
        return "table_branch", 0
    if _BRANCH.match(mn):
        return "branch", 0
    if mn in ("pop", "ldm", "ldmia", "ldmdb", "ldmfd") or mn.startswith("ldm"):
        return ("pop_pc" if "pc" in ops else "ldm"), _nregs(ops)
    if mn in ("push", "stm", "stmia", "stmdb", "stmfd") or mn.startswith("stm"):
        return "stm", _nregs(ops)
    if mn.startswith("ldr"):
        if ops.startswith("pc"):
            return "pop_pc", 1
        return ("ldrd" if mn.startswith("ldrd") else "load"), 1
    if mn.startswith("str"):
        return ("strd" if mn.startswith("strd") else "store"), 1
    if mn.startswith(("vldm", "vstm", "vpush", "vpop")):
        return "vldm", _nregs(ops)
    if mn.startswith(("vldr", "vstr")):
        return "vldr", 1
    if mn.startswith(("vdiv", "vsqrt")):
        return "vdiv", 0
    if mn.startswith(("vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms")):
        return "vmla", 0
    if mn.startswith("v"):
        return "vfp", 0
    if mn in ("sdiv", "udiv"):
        return "div", 0
    if mn in ("mla", "mls"):
        return "mla", 0
    if mn in ("mul", "muls"):
        return "mul", 0
    if _MAC.match(mn):
        return "mac", 0
    if _SIMD.match(mn):
        return "simd", 0
    if mn.startswith("it"):
        return "it", 0
    return "alu", 0


# Cycles of each class (not-taken form), per core: the nominal figure and the ends of the TRM's ranges (the
# error bar every modelled figure carries). "load1" / "store1": a single load / store after one (pipelined).
# "P": the refill of a taken branch. "miss": stall per flash-accelerator cache-line miss, in wait states
# (+ extra cycles): low = half the wait states (the prefetch buffer had part of the line), high = all + 1.
_M4_NOMINAL = {"alu": 1, "simd": 1, "mul": 1, "mac": 1, "mla": 1, "div": 7, "it": 1, "load": 2, "load1": 1,
               "store": 2, "store1": 1, "ldrd": 3, "strd": 3, "branch": 1, "table_branch": 2, "vfp": 1,
               "vldr": 2, "vdiv": 14, "vmla": 3, "P": 2, "multi_base": 1, "per_reg": 1.0,
               "miss_ws": 1.0, "miss_extra": 0}
TIMINGS = {
    "m4": {"nominal": _M4_NOMINAL,
           "low": {**_M4_NOMINAL, "div": 2, "it": 0, "store": 1, "P": 1, "miss_ws": 0.5},
           "high": {**_M4_NOMINAL, "mla": 2, "div": 12, "P": 3, "miss_extra": 1}},
}
_M7_NOMINAL = {**_M4_NOMINAL, "mla": 1, "load": 1, "store": 1, "ldrd": 1, "strd": 1, "vldr": 1, "vmla": 1,
               "P": 1, "per_reg": 0.5}
TIMINGS["m7"] = {"nominal": _M7_NOMINAL,
                 "low": {**_M7_NOMINAL, "div": 2, "it": 0, "P": 0, "miss_ws": 0.5},
                 "high": {**_M7_NOMINAL, "div": 12, "P": 2, "miss_extra": 1}}
_LS_SINGLE = ("load", "store")
_MULTI = ("ldm", "stm", "vldm", "pop_pc")


def _tally(blocks: list[Block]) -> dict[str, Any]:
    """What the timings weight: instructions per class (a pipelined single load / store apart), registers
    moved by LDM / STM, taken branches, flash loads and cache-line misses."""
    n: Tally = Tally()
    regs = 0
    taken = 0
    imiss = dmiss = flash_loads = 0
    cls_cache: dict[str, tuple[str, int]] = {}
    for b in blocks:
        prev_ls = False
        last_cls = None
        for ins in b.insns:
            c = cls_cache.get(ins.text)
            if c is None:
                c = cls_cache[ins.text] = classify(ins.text)
            cls, nregs = c
            key = cls + "1" if cls in _LS_SINGLE and prev_ls else cls
            n[key] += b.execs
            if cls in _MULTI:
                regs += nregs * b.execs
            prev_ls = cls in _LS_SINGLE
            last_cls = cls
            flash_loads += ins.flash_loads
            dmiss += ins.dmiss
        imiss += b.imiss
        if last_cls == "branch":
            taken += max(0, b.execs - b.fallthrough)
        elif last_cls in ("table_branch", "pop_pc"):
            taken += b.execs
    return {"n": n, "regs": regs, "taken": taken, "imiss": imiss, "dmiss": dmiss, "flash_loads": flash_loads}


def _cycles(t: dict[str, Any], tm: dict[str, Any], ws: int) -> tuple[dict[str, float], float, float]:
    """(cycles by class, refill cycles, flash stall cycles) of a tally under one set of timings."""
    by: dict[str, float] = {}
    for key, cnt in t["n"].items():
        cls = key[:-1] if key.endswith("1") else key
        if cls in _MULTI:
            by[cls] = by.get(cls, 0.0) + cnt * tm["multi_base"]
        else:
            by[cls] = by.get(cls, 0.0) + cnt * tm[key]
    multi = sum(t["n"].get(c, 0) for c in _MULTI)
    if multi:  # the registers of LDM / STM / PUSH / POP, shared out by class in proportion to their count
        for c in _MULTI:
            if t["n"].get(c):
                by[c] += t["regs"] * tm["per_reg"] * t["n"][c] / multi
    refill = t["taken"] * tm["P"]
    stall = (t["imiss"] + t["dmiss"]) * (ws * tm["miss_ws"] + tm["miss_extra"])
    return by, refill, stall


def estimate(windows: int, blocks: list[Block], silicon: Silicon,
             inferences: int | None = None) -> dict[str, Any]:
    """Cycles per inference (nominal, and the low / high ends of the timings' ranges: the error bar), by
    class, with the taken-branch refills and the flash stalls. `inferences`: how many inferences the stream
    holds when an inference calls invoke more than once (an ensemble's members); default one per invoke."""
    if windows < 1:
        raise SnapuqError("the instruction stream holds no call of the model's invoke function")
    t = _tally(blocks)
    ws = silicon.flash_ws
    tms = TIMINGS[silicon.core]
    by, refill, stall = _cycles(t, tms["nominal"], ws)
    total = sum(by.values()) + refill + stall
    ends = {}
    for end in ("low", "high"):
        b2, r2, s2 = _cycles(t, tms[end], ws)
        ends[end] = sum(b2.values()) + r2 + s2
    w = float(inferences or windows)
    instructions = sum(t["n"].values())
    cycles = total / w
    lo, hi = ends["low"] / total - 1, ends["high"] / total - 1
    bar = f"{lo:+.0%} / {hi:+.0%} (the TRM's timing ranges)"
    if silicon.core == "m4":
        bar += "; -17 % .. +18 % against 7 published L4R5ZI latencies"
    else:
        bar += "; single-issue, M7 dual issue not modelled; not validated"
    n_by: Tally = Tally()
    for key, cnt in t["n"].items():
        n_by[key[:-1] if key.endswith("1") else key] += cnt
    return {
        "cycles_modelled": int(round(cycles)),
        "ms_modelled": cycles / silicon.clock_hz * 1e3,
        "cycles_low": int(round(ends["low"] / w)), "cycles_high": int(round(ends["high"] / w)),
        "ms_low": ends["low"] / w / silicon.clock_hz * 1e3,
        "ms_high": ends["high"] / w / silicon.clock_hz * 1e3,
        "error_bar": bar, "validation": VALIDATION[silicon.core],
        "silicon": silicon.mcu, "clock_hz": silicon.clock_hz, "flash_ws": ws, "core": silicon.core,
        "instructions": int(round(instructions / w)), "cpi": total / instructions if instructions else None,
        "inferences": int(w), "invokes": windows,
        "breakdown": {
            "by_class_cycles": {k: round(v / w) for k, v in sorted(by.items())},
            "by_class_instructions": {k: round(v / w) for k, v in sorted(n_by.items())},
            "taken_branches": round(t["taken"] / w), "refill_cycles": round(refill / w),
            "flash_loads": round(t["flash_loads"] / w), "dcache_misses": round(t["dmiss"] / w),
            "icache_misses": round(t["imiss"] / w), "flash_stall_cycles": round(stall / w),
        },
        "model": f"Cortex-{silicon.core.upper()} timings (snapuq.harness.cycles) + {ws} flash wait states "
                 f"per cache-line miss, {silicon.mcu} at {silicon.clock_hz // 1_000_000} MHz "
                 f"({silicon.source})",
    }


def silicon_for(board: str, override: str | None = None) -> Silicon:
    key = override or BOARD_SILICON.get(board)
    if key is None or key not in SILICON:
        raise SnapuqError(f"no cycle model for board {board} (known: {', '.join(BOARD_SILICON)}; parts: "
                          f"{', '.join(SILICON)})")
    return SILICON[key]
