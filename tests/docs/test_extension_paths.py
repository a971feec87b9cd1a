"""The extension paths work as written: the patches a chapter prints (```diff blocks) are
applied, in order, to a scratch copy of the tree, and the tests they touch run there.

Chapter 9 adds a unary op through every path (op, KEEP, both importers, the registry
tests' cases, the MLIR bridge's linalg and TOSA tables); chapter 3 adds a graph pass
(rule, registration, golden case, random-graph pattern).  A patch that no longer
applies, or whose tests fail, fails here: the chapter must follow the code.  Marked
slow (a copy of the tree and two pytest runs in it, about a minute);
``python -m pytest tests/docs/test_extension_paths.py`` runs it alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docrun import blocks

ROOT = Path(__file__).resolve().parents[2]


def patches(page: Path) -> str:
    """The ```diff blocks of ``page``, in order, as one patch."""
    return "".join(b.text for b in blocks(page.read_text()) if b.lang == "diff")


def scratch_tree(tmp_path: Path) -> Path:
    """A copy of the working tree's files (tracked, and untracked ones git does not ignore)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    tree = tmp_path / "tree"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)         # for git apply
    return tree


def apply(tree: Path, patch: str) -> None:
    done = subprocess.run(["git", "apply", "--verbose", "-"], cwd=tree, input=patch, capture_output=True, text=True)
    assert done.returncode == 0, f"the chapter's patch no longer applies:\n{done.stderr}"


def pytest_in(tree: Path, *args: str) -> None:
    """Run pytest in ``tree``: its own ``minic`` is imported (the current folder comes first)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(tree / ".cache")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *args],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def python_in(tree: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(tree / ".cache")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


# Every path of chapter 9's op, in the patched tree: torch (kept whole by KEEP) and ONNX import to one
# node, minic compiles it, MLIR runs it by linalg and by TOSA, and all agree with PyTorch.
EVERY_PATH = """
import numpy as np, torch
from onnx import TensorProto, helper
import minic
from minic.frontend.onnx import from_onnx
from minic.frontend.torch import from_torch
from bridges.mlir.backend import MlirModel
assert minic.__file__.startswith({tree!r}), minic.__file__

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.nn.functional.softplus(self.lin(x), beta=2.0)

torch.manual_seed(0)
net, x = Net().eval(), torch.randn(3, 8)
want = net(x).detach().numpy()
graph = from_torch(net, (x,))
print([n.op for n in graph.nodes])
np.testing.assert_allclose(minic.compile(graph, use_cache=False)(x.numpy()), want, rtol=1e-5, atol=1e-6)
for via in ("linalg", "tosa"):
    np.testing.assert_allclose(MlirModel(graph, via=via)(x.numpy()), want, rtol=1e-5, atol=1e-6)
node = helper.make_node("Softplus", ["x"], ["y"])
proto = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])]),
                          opset_imports=[helper.make_opsetid("", 17)])
print([n.op for n in from_onnx(proto).nodes])
"""


@pytest.mark.slow
def test_chapter_9_makes_a_permanent_op(tmp_path):
    patch = patches(ROOT / "docs" / "09-adding-an-op.md")
    assert "+define(\"softplus\"" in patch and "aten.softplus.default" in patch
    tree = scratch_tree(tmp_path)
    apply(tree, patch)
    assert python_in(tree, EVERY_PATH.format(tree=str(tree))).splitlines() == [
        "['transpose', 'gemm', 'softplus']", "['softplus']"]
    pytest_in(tree, "tests/ir/test_ops_vs_torch.py", "tests/lowering/test_rules.py",
              "tests/verify/test_random_graphs.py::test_every_spec_is_used_and_specs_cover_the_registry",
              "-k", "softplus or every")


@pytest.mark.slow
def test_chapter_3_adds_a_pass_end_to_end(tmp_path):
    patch = patches(ROOT / "docs" / "03-graph-passes.md")
    assert "PASSES" in patch and "golden" in patch and "PATTERNS" in patch
    tree = scratch_tree(tmp_path)
    apply(tree, patch)
    pytest_in(tree, "tests/passes/test_golden.py", "tests/passes/test_semantics.py", "tests/passes/test_manager.py",
              "-k", "relu or every or random_graphs_exercise")


def test_patches_are_read_in_order(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```diff not-run: a patch\n--- a/x\n+++ b/x\n```\ntext\n```python\nprint(1)\n```\n"
                    "```diff not-run: a patch\n--- a/y\n+++ b/y\n```\n")
    assert patches(page) == "--- a/x\n+++ b/x\n--- a/y\n+++ b/y\n"
