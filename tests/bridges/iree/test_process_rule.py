"""The IREE bridge's one rule: IREE's compiler and torch-mlir never load in a process that may
hold the xtc MLIR bindings (neither can load beside them: docs/production-bugs.md,
iree-xtc-mlir-bindings-clash and torch-mlir-xtc-mlir-bindings-clash).  Checked structurally
and by running it."""
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import minic

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("iree.compiler", "iree.turbine", "torch_mlir")   # iree.turbine imports iree.compiler
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


def test_only_the_child_module_imports_iree_compiler_or_torch_mlir():
    offenders = []
    for folder in ("minic", "bridges", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == CHILD:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in imported_modules(path)
                          if name.startswith(FORBIDDEN)]
    assert offenders == []
    child = [name for _, name in imported_modules(CHILD)]
    assert any(n.startswith("iree.turbine") for n in child) and any(n.startswith("torch_mlir") for n in child)


def test_the_child_module_refuses_to_be_imported():
    with pytest.raises(ImportError, match="run it as `python -m bridges.iree.child`"):
        importlib.import_module("bridges.iree.child")
    assert not [m for m in sys.modules if m.startswith(FORBIDDEN)]


def test_compiling_runs_iree_in_other_processes(monkeypatch):
    """The compile goes through ``iree-compile``, torch-mlir's import and the turbine export
    through ``python -m bridges.iree.child``."""
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
    assert [c[1:4] for c in calls if c[0] == sys.executable] == [["-m", "bridges.iree.child", "torch-mlir"],
                                                                  ["-m", "bridges.iree.child", "turbine"]]
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
print("loaded:", sorted(m for m in sys.modules if m.startswith(("iree.compiler", "iree.turbine", "torch_mlir"))))
"""


def fresh_process(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)


def test_a_process_with_the_mlir_bindings_compiles_through_iree():
    proc = fresh_process(SCRIPT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    errs = {" ".join(ln.split()[:-1]): float(ln.split()[-1]) for ln in lines[:-1]}
    assert set(errs) == {"iree stablehlo", "iree turbine", "mlir"}
    assert max(errs.values()) < 1e-5, errs
    assert lines[-1] == "loaded: []"


IREE_THEN_MLIR = """
import sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import numpy as np, minic
from minic.api import load
source = load("mlp", size="small")
for via in ("stablehlo", "linalg"):                  # the iree backend first, as tests/bridges/iree runs ...
    minic.compile(source, backend="iree", via=via)(*source.example_inputs)
from bridges.mlir import lab                         # ... then the MLIR bridge's vectorized kernel
from bridges.mlir.jit import compile_module
from bridges.mlir.vectorize import VectorPlan
for shape in [(7, 13, 10), (16, 24, 48), (1, 5, 3)]:
    s = lab.LabShape(*shape)
    kernel = compile_module(lab.build_matmul_bias_relu(s), lab.FUNC_NAME, vectorize=VectorPlan.for_lab(s))
    x, w, b = lab.random_inputs(s, seed=7)
    print(*shape, float(np.abs(kernel(x, w, b) - lab.reference(x, w, b)).max()))
print("loaded:", sorted(m for m in sys.modules if m.startswith(("iree.compiler", "iree.turbine", "torch_mlir"))))
"""


def test_the_mlir_bridge_computes_right_after_the_iree_backend():
    """Regression (docs/production-bugs.md#torch-mlir-xtc-mlir-bindings-clash): with torch-mlir
    imported in-process, the MLIR bridge's vectorized kernel gave NaN/wrong values after the iree
    backend ran, and later crashed the process.  In a fresh process, so a crash fails only this test."""
    proc = fresh_process(IREE_THEN_MLIR)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    errs = {tuple(map(int, ln.split()[:3])): float(ln.split()[3]) for ln in lines[:-1]}
    assert set(errs) == {(7, 13, 10), (16, 24, 48), (1, 5, 3)}
    assert all(e <= 1e-5 for e in errs.values()), errs          # NaN fails too
    assert lines[-1] == "loaded: []"
