"""Production-tool bugs the IREE bridge meets, each shown by a test (docs/production-bugs.md).

Each is ``xfail(strict=True)`` on the tool's own error: the day a tool is fixed,
the test XPASSes, fails the run, and the workaround (or the recorded gap) can go."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bridges.iree.compiler import IreeCompileError, compile_vmfb
from bridges.iree.runtime import IreeModule
from minic.verify.tolerance import F32

DOC = "docs/production-bugs.md"


@pytest.mark.xfail(strict=True, raises=IreeCompileError, reason=f"{DOC}#torch-mlir-tosa-rejected-by-iree")
def test_iree_compiles_torch_mlirs_tosa():
    from bridges.iree.importers import torch_mlir_text
    from minic import models
    module, inputs = models.get("mlp", size="small")
    text = torch_mlir_text(module, [t.numpy() for t in inputs], "tosa")
    assert "tosa.const_shape" in text
    try:
        compile_vmfb(text)
    except IreeCompileError as e:
        assert "custom op 'tosa.const_shape' expected 'values'" in str(e)
        raise


CONV = """
func.func @main(%x: tensor<1x4x4x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x1x1xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x4x1x1xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
         ins(%x, %w : tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) outs(%acc : tensor<1x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  return %y : tensor<1x4x1x1xf32>
}
"""


@pytest.mark.xfail(strict=True, raises=IreeCompileError, reason=f"{DOC}#iree-fold-unit-extent-dims-conv")
def test_iree_compiles_a_strided_conv_with_a_1x1_output():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2).numpy()
    try:
        vmfb = compile_vmfb(CONV).vmfb
    except IreeCompileError as e:
        assert "'linalg.generic' op inferred input/output operand #1 has shape's dimension #2 to be 4, " \
               "but found 3" in str(e)
        raise
    np.testing.assert_allclose(IreeModule(vmfb)(x, w), want, atol=F32, rtol=0)


def test_the_same_conv_compiles_when_the_input_is_exactly_the_window():
    """What the bug needs: a 3x3 input (the window) compiles and runs right."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2).numpy()
    vmfb = compile_vmfb(CONV.replace("1x4x4x4", "1x4x3x3")).vmfb
    np.testing.assert_allclose(IreeModule(vmfb)(x, w), want, atol=F32, rtol=0)


class Masked(torch.nn.Module):
    """A non-persistent buffer, as RoPE tables and causal masks are (llama-tiny)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.arange(4, dtype=torch.float32), persistent=False)

    def forward(self, x):
        return x * self.scale


NON_PERSISTENT = """
import torch
from torch_mlir import fx
class Masked(torch.nn.Module):                   # as in the test module
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.arange(4, dtype=torch.float32), persistent=False)
    def forward(self, x):
        return x * self.scale
fx.export_and_import(Masked(), torch.ones(2, 4), output_type="linalg-on-tensors")
"""


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"{DOC}#torch-mlir-non-persistent-buffers")
def test_torch_mlir_imports_a_non_persistent_buffer():
    # In a fresh process: torch-mlir cannot load beside the xtc MLIR bindings
    # (docs/production-bugs.md#torch-mlir-xtc-mlir-bindings-clash).
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", NON_PERSISTENT], capture_output=True, text=True, env=env, cwd=root)
    last = ([ln for ln in proc.stderr.splitlines() if ln.strip()] or [""])[-1]
    if proc.returncode != 0 and last != "AssertionError: Could not find state mapping for buffer":
        pytest.fail(f"another error than the recorded one: {proc.stderr[-500:]}")      # not an xfail
    assert proc.returncode == 0


def test_the_non_persistent_buffer_workaround():
    from bridges.iree.backend import mlir_text
    x = np.ones((2, 4), np.float32)
    vmfb = compile_vmfb(mlir_text(Masked(), [x], "stablehlo")).vmfb
    np.testing.assert_array_equal(IreeModule(vmfb)(x), x * np.arange(4, dtype=np.float32))


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"{DOC}#iree-xtc-mlir-bindings-clash")
@pytest.mark.parametrize("first, second", [("mlir.ir", "iree.compiler.ir"), ("iree.compiler.ir", "mlir.ir")])
def test_iree_compiler_and_xtc_mlir_bindings_load_together(first, second):
    proc = subprocess.run([sys.executable, "-c", f"import {first}\nimport {second}"],
                          capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0 and "undefined symbol: _ZN8nanobind6detail" not in proc.stderr:
        pytest.fail(f"another error than the recorded one: {proc.stderr[-500:]}")   # not an xfail
    assert proc.returncode == 0
