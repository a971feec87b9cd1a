"""The IREE bridge's one rule: IREE's compiler never loads in a process that may hold the
xtc MLIR bindings (the two cannot load together: docs/production-bugs.md,
iree-xtc-mlir-bindings-clash).  Checked structurally and by running it."""
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import minic

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("iree.compiler", "iree.turbine")          # iree.turbine imports iree.compiler
CHILD = ROOT / "bridges" / "iree" / "child.py"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement in ``path``, at any depth, and of
    every ``import_module("...")`` call with a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == \
                "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def test_only_the_child_module_imports_iree_compiler():
    offenders = []
    for folder in ("minic", "bridges", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == CHILD:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in imported_modules(path)
                         
                          if name.startswith(FORBIDDEN)]
    assert offenders == []
    assert any(name.startswith("iree.turbine") for _, name in imported_modules(CHILD))


def test_the_child_module_refuses_to_be_imported():
    with pytest.raises(ImportError, match="run it as `python -m bridges.iree.child`"):
        importlib.import_module("bridges.iree.child")
    assert not [m for m in sys.modules if m.startswith(FORBIDDEN)]


def test_compiling_runs_iree_in_other_processes(monkeypatch):
    """The compile goes through ``iree-compile``, the turbine export through ``python -m bridges.iree.child``."""
    calls = []
    real_run = subprocess.run

    def recording_run(argv, *args, **kwargs):
        calls.append([str(a) for a in argv])
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    from minic.api import load
    source = load("mlp", size="small")
    for via in ("stablehlo", "turbine"):
        minic.compile(source, backend="iree", via=via)(*source.example_inputs)
    tools = [Path(c[0]).name for c in calls]
    assert tools.count("iree-compile") == 2
    assert [c[1:4] for c in calls if c[0] == sys.executable] == [["-m", "bridges.iree.child", "turbine"]]
    assert not [m for m in sys.modules if m.startswith(FORBIDDEN)]


SCRIPT = """
import sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import mlir.ir                                   # the xtc bindings first ...
with mlir.ir.Context():
    mlir.ir.Module.parse("func.func @f() { return }")
import numpy as np, minic
from minic.api import load
source = load("mlp", size="small")
want = minic.compile(source, backend="torch")(*source.example_inputs)
for backend, options in (("iree", {"via": "stablehlo"}), ("iree", {"via": "turbine"}), ("mlir", {})):
    got = minic.compile(source, backend=backend, **options)(*source.example_inputs)   # ... then IREE, then MLIR again
    print(backend, options.get("via", ""), float(np.abs(got - want).max()))
print("loaded:", sorted(m for m in sys.modules if m.startswith(("iree.compiler", "iree.turbine"))))
"""


def test_a_process_with_the_mlir_bindings_compiles_through_iree():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    errs = {" ".join(ln.split()[:-1]): float(ln.split()[-1]) for ln in lines[:-1]}
    assert set(errs) == {"iree stablehlo", "iree turbine", "mlir"}
    assert max(errs.values()) < 1e-5, errs
    assert lines[-1] == "loaded: []"
