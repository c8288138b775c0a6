"""The SNAP section described once (docs/BLOB.md): firmware/core/snapuq_snap_section.h is the field
table (name, type, offset, since) that the C reader's accessors are generated from, that
snapuq.snap_section parses for the writer, and whose copy in the pure-MicroPython twin is generated.

Checked here: the C preprocessor and the Python parser read the same table; the table is packed
without gaps and gives the documented sizes; the twin's copy is current; the independent oracle
reader (tests/oracles/blob_reader.py, a transcription of docs/BLOB.md) agrees with it; the writer's
section unpacks by the table into the manifest's values; no reader decodes the section by a bare
offset. (Blob bytes are unchanged: test_micropython_blob.py, test_blob_cross.py.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from snapuq import snap_section as L
from snapuq.native.blob import SNAP_HEADER, SNAP_VERSION, snap_section

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
TWIN = ROOT / "micropython_modules" / "twin" / "snapuq.py"

_C_DUMP = r"""
#include <stdio.h>
#include "snapuq_snap_section.h"
#define ROW(tab, n, t, o, s) \
    printf("%s %s %s %d %d %d\n", tab, #n, #t, (int)(o), (int)(s), SNAPUQ_SNAP_SIZEOF_##t);
#define XH(n, t, o, s) ROW("HEADER", n, t, o, s)
#define XT(n, t, o, s) ROW("TAP", n, t, o, s)
#define XO(n, t, o, s) ROW("OUTPUT", n, t, o, s)
#define XI(n, t, o, s) ROW("INTAP", n, t, o, s)
#define XN(n, t, o, s) ROW("NORM", n, t, o, s)
int main(void)
{
    SNAPUQ_SNAP_HEADER_FIELDS(XH)
    SNAPUQ_SNAP_TAP_FIELDS(XT)
    SNAPUQ_SNAP_OUTPUT_FIELDS(XO)
    SNAPUQ_SNAP_INTAP_FIELDS(XI)
    SNAPUQ_SNAP_NORM_FIELDS(XN)
    return 0;
}
"""


def test_the_c_preprocessor_and_the_python_parser_read_the_same_table(tmp_path: Path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler (gcc) to expand the table with")
    src = tmp_path / "dump.c"
    src.write_text(_C_DUMP)
    exe = tmp_path / "dump"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{CORE}", str(src), "-o",
                    str(exe)], check=True)
    rows = [ln.split() for ln in subprocess.run([str(exe)], check=True, capture_output=True,
                                                text=True).stdout.splitlines()]
    py = [[t, f.name, f.type, str(f.offset), str(f.since), str(f.size)]
          for t in L.TABLES for f in L.tables()[t]]
    assert rows == py


def test_the_table_gives_the_documented_sizes() -> None:
    assert [L.size("HEADER", v) for v in (1, 2, 3)] == [108, 112, 116]
    assert (L.size("TAP"), L.size("OUTPUT"), L.size("INTAP")) == (64, 8, 40)
    assert L.field("NORM", "scale").offset == 4
    assert SNAP_HEADER == L.size("HEADER", SNAP_VERSION)
    # docs/BLOB.md's tables name every field, in the section of its table, at its offset
    doc = (ROOT / "docs" / "BLOB.md").read_text()
    heads = {"HEADER": "### Header", "TAP": "### Tap record", "OUTPUT": "### Output record",
             "INTAP": "### Input-tap record", "NORM": "### Input-normalization record"}
    for t, head in heads.items():
        part = doc[doc.index(head):]
        part = part[:part.index("\n### ", 1)] if "\n### " in part[1:] else part
        rows = [r for r in part.splitlines() if r.startswith("| ") and "`" in r]
        for f in L.tables()[t]:
            row = next((r for r in rows if f"`{f.name}`" in r.split("|")[3]), None)
            assert row is not None, f"docs/BLOB.md {head}: no row names `{f.name}`"
            first = int(row.split("|")[1])
            names = re.findall(r"`(\w+)`", row.split("|")[3])
            assert first + f.size * names.index(f.name) == f.offset, (t, f.name)


def test_parser_refuses_a_gap_or_an_unknown_type() -> None:
    text = L.HEADER_FILE.read_text()
    with pytest.raises(Exception, match="expected 12"):
        L.parse(text.replace("X(spec_version, u8, 12, 1)", "X(spec_version, u8, 13, 1)"))
    with pytest.raises(Exception, match="unknown type"):
        L.parse(text.replace("X(n_taps, u8, 15, 1)", "X(n_taps, u7, 15, 1)"))


def test_the_twins_copy_of_the_table_is_current() -> None:
    got = L.twin_current(TWIN.read_text())
    assert got is not None, "the twin has no generated SNAP section block"
    assert got == L.twin_block(), "run `python -m snapuq.snap_section twin --write`"


def test_the_independent_oracle_reader_agrees_with_the_table() -> None:
    from oracles import blob_reader as o

    def codes(t: str, version: int | None = None) -> str:
        return "<" + "".join(f.code for f in L.tables()[t] if version is None or f.since <= version)

    def expand(fmt: str) -> str:
        return re.sub(r"(\d+)([a-zA-Z])", lambda m: m.group(2) * int(m.group(1)) if m.group(2) != "s"
                      else m.group(0), fmt)

    assert expand(o._HDR.format) == codes("HEADER", 1)
    assert expand(o._TAP.format) == codes("TAP")
    assert expand(o._OUT.format) == codes("OUTPUT")
    assert expand(o._INTAP.format) == codes("INTAP")
    sizes = tuple(L.size("HEADER", v) for v in (1, 2, 3))
    assert (o.SNAP_HEADER, o.SNAP_HEADER_V2, o.SNAP_HEADER_V3) == sizes


def test_the_writers_section_unpacks_by_the_table() -> None:
    man = json.loads((ROOT / "models" / "digits" / "snapuq.json").read_text())
    sec = snap_section(man)
    h = L.unpack("HEADER", sec, 0, SNAP_VERSION)
    snap, outs = man["snap"], man["outputs"]
    assert (h["magic"], h["version"], h["header_len"]) == (b"SNAP", SNAP_VERSION, SNAP_HEADER)
    assert h["n_taps"] == len(snap["taps"]) and h["out_logits"] == outs["logits"]["index"]
    assert h["u_threshold_q16"] == snap["u_threshold_q16"] and h["b0_q16"] == snap["logistic"]["b0_q16"]
    for k, t in enumerate(snap["taps"]):
        r = L.unpack("TAP", sec, h["tap_table_off"] + k * h["tap_rec_len"])
        assert all(r[f] == t[f] for f in ("d", "z_a", "k_mu", "p_n", "r_q16", "w_q16"))
        assert r["out_mu"] == outs[t["mu"]]["index"]
        lut = L.unpack("TAP", sec, h["tap_table_off"] + k * h["tap_rec_len"])["inv_sigma_lut_off"]
        assert list(memoryview(sec)[lut:lut + 4 * 256].cast("i")) == list(t["inv_sigma_lut"])
    if snap.get("intap"):
        it = L.unpack("INTAP", sec, h["intap_off"])
        assert (it["rows"], it["cols"], it["z_x"]) == tuple(snap["intap"][k] for k in ("rows", "cols", "z_x"))
    assert L.unpack("HEADER", L.pack("HEADER", h, SNAP_VERSION), 0, SNAP_VERSION) == h
    with pytest.raises(KeyError, match="no field"):
        L.pack("OUTPUT", {"index": 0, "zero_point": 0, "name": 0, "bogus": 1})


def test_no_reader_decodes_the_section_by_a_bare_offset() -> None:
    c = (CORE / "snapuq_blob.c").read_text()
    assert not re.search(r"snap\s*\[|snap\s*\+\s*\d|snap\s*\+\s*r\s*\+\s*\d|\b(u16|u32|i32)at\(", c)
    twin = TWIN.read_text()
    body = twin[twin.index("class _Section"):twin.index("def parse_snap_section")]
    # a field is read by name (_get / _fields); only arrays (LUTs, the class-name table) are indexed
    assert not re.search(r"unpack_from\(\"<[^\"]+\", (sec|self\.sec), (\d+|[^)]*\+ \d+)\)", body)
    assert not re.search(r"\bh\[\d", body)
