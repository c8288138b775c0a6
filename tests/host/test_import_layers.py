"""The host package's import graph: no cycle among its modules (imports inside functions included), only
the commands parse arguments, and `import snapuq` / `snapuq --help` load no TensorFlow. The layer order itself
is import-linter's contract in pyproject.toml (`make lint` runs `lint-imports`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

HOST = Path(__file__).resolve().parents[2] / "host"
PKG = HOST / "snapuq"
SKIP = ("firmware", "twin", "c")  # links to the C core, the firmware tree and the twin (no package modules)


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(HOST).with_suffix("")
        if rel.parts[1] in SKIP:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its file. `from snapuq import io` is an
    import of snapuq.io (the package __init__ runs too, but it imports nothing at import time)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and t != "snapuq":
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles among host modules: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_checker_sees_a_cycle_inside_a_function() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert cycles(g) == [["a", "b", "c"]]


def test_only_the_commands_parse_arguments() -> None:
    users = []
    for m, p in _modules().items():
        if m.startswith("snapuq.commands") or m == "snapuq.cli":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if "argparse" in names:
                users.append(m)
    assert not users, f"argparse outside snapuq.commands / snapuq.cli: {sorted(set(users))}"


def test_import_and_help_load_no_tensorflow() -> None:
    code = ("import sys, snapuq, snapuq.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(HOST), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# the imports a function may hold: of a module whose import loads Keras / TensorFlow (deferred so that
# `import snapuq` and `snapuq --help` stay light), and the package's PEP 562 __getattr__ (snapuq.attach
# imports snapuq.api on first use: a subpackage import never pulls the model-building stack)
DEFERRED = {"snapuq.nn.heads": "import keras"}
LAZY_ATTRIBUTES = {"snapuq/__init__.py": "snapuq.api"}


def _function_imports(p: Path) -> list[tuple[int, str]]:
    out = []
    tree = ast.parse(p.read_text())
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.Import):
                out += [(n.lineno, a.name) for a in n.names if a.name.startswith("snapuq")]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").startswith("snapuq"):
                full = [f"{n.module}.{a.name}" for a in n.names]
                out += [(n.lineno, f if f in _modules() else n.module) for f in full]
    return sorted(set(out))


def test_package_imports_sit_at_the_top_of_modules() -> None:
    """Only TensorFlow's deferral puts an import of a package module inside a function (an import hidden
    in a function also hides a cycle from a reader)."""
    mods = _modules()
    for m, why in DEFERRED.items():  # the exemption holds only while the module really is that heavy
        assert any(ast.unparse(n) == why for n in ast.parse(mods[m].read_text()).body), (m, why)
    found = [f"{p.relative_to(HOST)}:{line} {t}" for m, p in mods.items() for line, t in _function_imports(p)
             if t not in DEFERRED and LAZY_ATTRIBUTES.get(str(p.relative_to(HOST))) != t]  # fmt: skip
    assert not found, "imports inside functions (move them to the module top): " + ", ".join(found)


def test_the_top_import_check_sees_a_function_import(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("def f():\n    if True:\n        from snapuq.io import write_text\n    return write_text\n")
    assert _function_imports(p) == [(3, "snapuq.io")]
