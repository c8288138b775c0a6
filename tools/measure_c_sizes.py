"""Measure the sizes of the C core's public structs and write them into docs/C_CORE.md.

The table between ``<!-- sizes:begin -->`` and ``<!-- sizes:end -->`` in docs/C_CORE.md is this
script's output, never typed; so is the code-size table between ``<!-- codesizes:begin -->`` and
``<!-- codesizes:end -->`` (every core object compiled for Cortex-M0+/M4F/M7 at -Os, summed per core.mk
group, as tests/host/test_c_cross.py builds them). ``--check`` compares the struct table only: code sizes
move with every change to the core, struct sizes only with the public headers.

Struct sizes: for each target a small C file is compiled (not linked, not run) that defines one ``char``
array per struct, ``sizeof(T)`` bytes long; the compiler's symbol table
(``nm --print-size``) then gives the sizes. One method for every target: host gcc (x86-64 here) and
arm-none-eabi-gcc (Cortex-M4 with the firmware's flags; AAPCS, so M0+ / M7 lay out the same).
A target whose compiler is missing is reported and left out, except in check mode.

    python tools/measure_c_sizes.py            # print the table
    python tools/measure_c_sizes.py --write    # rewrite both marked tables in docs/C_CORE.md
    python tools/measure_c_sizes.py --check    # exit 1 if the docs table is not current
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "firmware" / "core"
DOC = ROOT / "docs" / "C_CORE.md"
BEGIN, END = "<!-- sizes:begin -->", "<!-- sizes:end -->"
CODE_BEGIN, CODE_END = "<!-- codesizes:begin -->", "<!-- codesizes:end -->"
ARM_CPUS = {
    "Cortex-M4F": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "Cortex-M7": ["-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"],
    "Cortex-M0+": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
}

# (type, header, what it is for the caller)
STRUCTS = (
    ("snapuq_model_t", "snapuq_runtime.h", "the model: tensors, operators, schedule (static RAM)"),
    ("snapuq_tensor_info_t", "snapuq_runtime.h", "one input/output as the caller sees it"),
    ("snapuq_priv_tensor_t", "snapuq_runtime.h", "per tensor inside the model (x SNAPUQ_MAX_TENSORS)"),
    ("snapuq_priv_op_t", "snapuq_runtime.h", "per operator inside the model (x SNAPUQ_MAX_OPS)"),
    ("snapuq_blob_t", "snapuq_blob.h", "an opened model blob (pointers into it)"),
    ("snapuq_snap_config_t", "snapuq_snap.h", "SNAP constants (LUTs point into the blob)"),
    ("snapuq_snap_params_t", "snapuq_snap.h", "the settable logistic / threshold constants"),
    ("snapuq_snap_result_t", "snapuq_snap.h", "one score"),
    ("snapuq_fit_t", "snapuq_snap.h", "calibration fit (its sample ring is caller-owned)"),
    ("snapuq_monitor_t", "snapuq_snap.h", "drift monitor (its ring is caller-owned)"),
)
# Marginal RAM of the capacity limits: the model struct rebuilt with STEP more of each (one more alone
# can vanish in alignment padding).
LIMITS = ("SNAPUQ_MAX_TENSORS", "SNAPUQ_MAX_OPS", "SNAPUQ_MAX_IO")
STEP = 16


def limit_defaults() -> dict[str, int]:
    """The default limits, read from snapuq_runtime.h."""
    text = (CORE / "snapuq_runtime.h").read_text()
    out = {}
    for lim in LIMITS:
        m = re.search(rf"^#define {lim} (\d+)", text, re.M)
        if m is None:
            raise SystemExit(f"measure_c_sizes: no `#define {lim} N` in snapuq_runtime.h")
        out[lim] = int(m.group(1))
    return out


class Target:
    def __init__(self, label: str, cc: str, nm: str, flags: list[str]) -> None:
        self.label, self.cc, self.nm, self.flags = label, cc, nm, flags

    def available(self) -> bool:
        if self.label.startswith("x86-64") and platform.machine().lower() not in ("x86_64", "amd64"):
            return False
        return shutil.which(self.cc) is not None and shutil.which(self.nm) is not None


TARGETS = (
    Target("x86-64 (host gcc)", "gcc", "nm", []),  # measured only on an x86-64 host
    Target("Cortex-M4 (arm-none-eabi-gcc)", "arm-none-eabi-gcc", "arm-none-eabi-nm",
           ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]),
)


def _source() -> str:
    heads = sorted({h for _, h, _ in STRUCTS})
    lines = [f'#include "{h}"' for h in heads]
    lines += [f"char snapuq_sizeof_{t}[sizeof({t})];" for t, _, _ in STRUCTS]
    return "\n".join(lines) + "\n"


def _sizes(t: Target, defines: dict[str, int], work: Path) -> dict[str, int]:
    src = work / "sizes.c"
    src.write_text(_source())
    obj = work / "sizes.o"
    cmd = [t.cc, "-std=c99", "-fno-common", "-c", *t.flags, f"-I{CORE}",
           *[f"-D{k}={v}" for k, v in defines.items()], str(src), "-o", str(obj)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = subprocess.run([t.nm, "--print-size", str(obj)], check=True, capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.fullmatch(r"[0-9a-fA-F]+ ([0-9a-fA-F]+) [BbCcDd] snapuq_sizeof_(\w+)", line.strip())
        if m:
            got[m.group(2)] = int(m.group(1), 16)
    missing = [s for s, _, _ in STRUCTS if s not in got]
    if missing:
        raise RuntimeError(f"{t.label}: no size for {', '.join(missing)} in `nm` output")
    return got


Sizes = dict[str, dict[str, int]]


def measure(require_all: bool = False) -> tuple[list[Target], Sizes, Sizes]:
    """(targets measured, sizes[target][struct], per-limit bytes[target][limit])."""
    done, sizes, per = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for t in TARGETS:
            if not t.available():
                if require_all:
                    raise SystemExit(f"measure_c_sizes: {t.cc} not found; the table needs every target")
                print(f"measure_c_sizes: {t.cc} not found, {t.label} left out", file=sys.stderr)
                continue
            base = _sizes(t, {}, work)
            sizes[t.label] = base
            per[t.label] = {}
            for lim, n in limit_defaults().items():
                more = _sizes(t, {lim: n + STEP}, work)
                per[t.label][lim] = more["snapuq_model_t"] - base["snapuq_model_t"]
            done.append(t)
    return done, sizes, per


def table(targets: list[Target], sizes: Sizes, per: Sizes) -> str:
    heads = " | ".join(t.label for t in targets)
    lims = limit_defaults()
    rows = [
        "Bytes, measured by `tools/measure_c_sizes.py` (compiled with "
        + " and ".join(f"`{t.cc}`" for t in targets)
        + "; default limits: " + ", ".join(f"{k} {v}" for k, v in lims.items()) + "). "
        "`tests/host/test_c_sizes_doc.py` fails when this table is not current.",
        "",
        f"| struct | what | {heads} |",
        "|---|---|" + "---:|" * len(targets),
    ]
    for s, _, what in STRUCTS:
        rows.append(f"| `{s}` | {what} | " + " | ".join(f"{sizes[t.label][s]:,}" for t in targets) + " |")
    for lim in LIMITS:
        rows.append(f"| `snapuq_model_t` per `{lim}` | each unit of the limit (mean over +{STEP}) | "
                    + " | ".join(f"+{_per_unit(per[t.label][lim])}" for t in targets) + " |")
    return "\n".join(rows)


def core_groups() -> dict[str, list[str]]:
    """core.mk's groups: {"RUNTIME": [file, ...], "DSP": ..., "SNAP": ..., "TOKENS": ...}."""
    out: dict[str, list[str]] = {}
    for g, f in re.findall(r"^SNAPUQ_CORE_([A-Z]+)_SRC \+= (\S+)", (CORE / "core.mk").read_text(), re.M):
        out.setdefault(g, []).append(f)
    return out


def _object_sections(src: str, flags: list[str], obj: Path) -> dict[str, int]:
    subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-Os", "-ffunction-sections", "-fdata-sections", *flags,
                    f"-I{CORE}", "-c", str(CORE / src), "-o", str(obj)], check=True, capture_output=True)
    out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], check=True, capture_output=True,
                         text=True).stdout
    res = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            for key in res:
                if parts[0].startswith("." + key):
                    res[key] += int(parts[1])
    return res


def code_table() -> str:
    """Per CPU and kernel set: .text / .rodata of core.mk's groups (objects summed before linking)."""
    from concurrent.futures import ThreadPoolExecutor

    groups = core_groups()
    named = {"snapuq_blob.c": "blob reader", "snapuq_input.c": "input path"}
    parts = {"runtime (loader, planner, operators, reference kernels)": groups["RUNTIME"],
             "DSP kernels": groups["DSP"],
             "SNAP score, calibration, monitor": [f for f in groups["SNAP"] if f.startswith("snapuq_snap")]}
    for f in groups["SNAP"]:
        if not f.startswith("snapuq_snap"):
            parts[f"`{f}`" + (f" ({named[f]})" if f in named else "")] = [f]
    configs = [(cpu, k) for cpu in ARM_CPUS for k in (("ref", "dsp") if cpu != "Cortex-M0+" else ("ref",))]
    rows = ["Bytes (.text / .rodata), `arm-none-eabi-gcc -Os -ffunction-sections`, each core object compiled "
            "alone and summed per group, before the linker drops what an image does not call; written by "
            "`tools/measure_c_sizes.py --write`.", "",
            "| group | " + " | ".join(f"{c} {k}" for c, k in configs) + " |",
            "|---|" + "---:|" * len(configs)]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        work = Path(tmp)
        jobs = {}
        for n, (c, k) in enumerate(configs):
            flags = ARM_CPUS[c] + [f"-DSNAPUQ_KERNELS_DSP={int(k == 'dsp')}"]
            for f in (f for files in parts.values() for f in files):
                obj = work / f"{n}_{f.replace('/', '_')}.o"
                jobs[(c, k, f)] = pool.submit(_object_sections, f, flags, obj)
        got = {key: j.result() for key, j in jobs.items()}
    for name, files in parts.items():
        cells = []
        for c, k in configs:
            t = sum(got[(c, k, f)]["text"] for f in files)
            r = sum(got[(c, k, f)]["rodata"] for f in files)
            cells.append(f"{t:,} / {r:,}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    writable = [sum(v["data"] + v["bss"] for key, v in got.items() if key[:2] == ck) for ck in configs]
    rows.append("| .data + .bss, all objects | " + " | ".join(f"{w:,}" for w in writable) + " |")
    return "\n".join(rows)


def _per_unit(delta: int) -> str:
    return f"{delta // STEP:,}" if delta % STEP == 0 else f"{delta / STEP:,.1f}"


def rewrite(doc: str, body: str, begin: str = BEGIN, end: str = END) -> str:
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"measure_c_sizes: {DOC.relative_to(ROOT)} has no {begin} ... {end} block")
    return doc[: i + len(begin)] + "\n" + body + "\n" + doc[j:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite the marked tables in docs/C_CORE.md")
    g.add_argument("--check", action="store_true", help="exit 1 if docs/C_CORE.md's table is not current")
    a = ap.parse_args(argv)
    targets, sizes, per = measure(require_all=a.write or a.check)
    body = table(targets, sizes, per)
    if not (a.write or a.check):
        print(body + "\n\n" + (code_table() if shutil.which("arm-none-eabi-gcc") else ""))
        return 0
    doc = DOC.read_text()
    new = rewrite(doc, body)
    if a.write:
        new = rewrite(new, code_table(), CODE_BEGIN, CODE_END)
    if a.check:
        if new != doc:
            print(f"measure_c_sizes: {DOC.relative_to(ROOT)}: the sizes table is not current; run "
                  "`python tools/measure_c_sizes.py --write`", file=sys.stderr)
            return 1
        return 0
    if new != doc:
        DOC.write_text(new)
    print(f"measure_c_sizes: {DOC.relative_to(ROOT)} {'updated' if new != doc else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
