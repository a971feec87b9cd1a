"""Names the pages put in backticks still exist in the code: a module path
(``minic/schedule/default.py``, ``bridges/mlir/pipeline.check_x``), a dotted
import (``minic.ir.ops``), a call (``from_torch()``) or a class's field
(``CompileOptions.opt_level``).  A rename that leaves a page behind fails here."""
from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"] + sorted(ROOT.glob("bridges/*/README.md")) \
    + sorted(ROOT.glob("minic/*/README.md"))
FENCED = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
TICKED = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(minic|bridges|tests|benchmarks|scripts|docs)/[\w./-]+")
DOTTED = re.compile(r"(minic|bridges)(\.\w+)+")
CALL = re.compile(r"(\w+)\(\)")
FIELD = re.compile(r"([A-Z]\w+)\.([a-z_]\w*)")


@cache
def definitions() -> dict[str, set[str]]:
    """Every class, function and assigned name of the project's code -> the names inside it
    (a class's fields and methods; empty for others)."""
    found: dict[str, set[str]] = {}
    for folder in ("minic", "bridges", "benchmarks", "scripts", "tests"):
        for file in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.setdefault(node.name, set())
                elif isinstance(node, ast.ClassDef):
                    inner = found.setdefault(node.name, set())
                    for item in ast.walk(node):
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            inner.add(item.name)
                        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            inner.add(item.target.id)
                        elif isinstance(item, ast.Assign):
                            inner.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            found.setdefault(t.id, set())
    return found


def path_exists(name: str) -> bool:
    path = name.split(":")[0].rstrip(".")
    if (ROOT / path).exists():
        return True
    module, _, attr = path.rpartition(".")         # bridges/mlir/pipeline.check_no_i1_stores
    return bool(module) and (ROOT / f"{module}.py").exists() and attr in definitions()


def imports(name: str) -> bool:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def stale(text: str) -> list[str]:
    """The backticked names in ``text`` (outside code blocks) that the code no longer has."""
    defs = definitions()
    out = []
    for m in TICKED.finditer(FENCED.sub("", text)):
        name = m.group(1).strip()
        if PATH.fullmatch(name):
            ok = path_exists(name)
        elif DOTTED.fullmatch(name):
            ok = imports(name)
        elif call := CALL.fullmatch(name):
            ok = call.group(1) in defs
        elif (field := FIELD.fullmatch(name)) and field.group(1) in defs:
            ok = field.group(2) in defs[field.group(1)]
        else:
            continue
        if not ok:
            out.append(name)
    return out


def test_every_name_in_the_docs_exists():
    gone = {str(p.relative_to(ROOT)): names for p in PAGES if (names := stale(p.read_text()))}
    assert not gone, f"names the pages use that the code no longer has: {gone}"


def test_stale_names_are_found():
    assert stale("`minic/no_such.py`, `minic.ir.no_such`, `no_such_function()`, `CompileOptions.no_field`, "
                 "`minic/ir/ops`, `minic.ir.ops.get`, `from_torch()`, `CompileOptions.opt_level`, "
                 "```python\n`ignored.py`\n```") == \
        ["minic/no_such.py", "minic.ir.no_such", "no_such_function()", "CompileOptions.no_field"]
