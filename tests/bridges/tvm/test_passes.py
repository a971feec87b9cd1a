"""The Relax pass sequence: counts, dumps, and what each pass is for."""
import io

import numpy as np
import pytest
import torch

from bridges.tvm.importer import from_torch
from bridges.tvm.passes import count, format_steps, optimize, pass_names
from minic.errors import UserError


def test_pipeline_is_the_named_sequence():
    assert pass_names() == ["DecomposeOpsForInference", "LegalizeOps", "AnnotateTIROpPattern",
                            "FoldConstant", "FuseOps", "FuseTIR", "EliminateCommonSubexpr",
                            "DeadCodeElimination"]


def test_mlp_counts_before_and_after(mlp):
    steps = {s.name: s.counts for s in mlp["steps"]}
    # x @ W1^T + b1, relu, x @ W2^T + b2: 7 ops, two of them transposes of constants
    assert (steps["input"].ops, steps["input"].kernel_calls) == (7, 7)
    assert steps["LegalizeOps"].call_tir == 7 and steps["LegalizeOps"].ops == 0
    assert steps["FoldConstant"].call_tir == 5          # the weight transposes ran at compile time
    assert steps["FuseOps"].fused == 2                  # matmul+add+relu, matmul+add
    final = steps["DeadCodeElimination"]
    assert (final.call_tir, final.prim_funcs, final.kernel_calls) == (2, 2, 2)
    names = sorted(gv.name_hint for gv in mlp["mod"].functions if gv.name_hint != "main")
    assert names == ["fused_matmul1_add1", "fused_matmul_add_relu"]


class _Repeated(torch.nn.Module):
    """The same matmul + softmax twice: only EliminateCommonSubexpr removes the copy."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return torch.cat([torch.softmax(x @ self.w, -1), torch.softmax(x @ self.w, -1)])


def test_common_subexpressions_are_shared_then_dead_code_dropped():
    imported = from_torch(_Repeated().eval(), (np.ones((4, 8), np.float32),), "repeated")
    _, steps = optimize(imported.mod)
    by_name = {s.name: s.counts for s in steps}
    assert by_name["FuseTIR"].call_tir == 5
    assert by_name["EliminateCommonSubexpr"].call_tir == 3
    assert by_name["EliminateCommonSubexpr"].bindings > by_name["DeadCodeElimination"].bindings
    assert by_name["DeadCodeElimination"].kernel_calls == 3


def test_dumps_and_print_after(tmp_path, zoo_arrays):
    module, inputs, _ = zoo_arrays("mlp", "small")
    imported = from_torch(module, inputs, "mlp")
    out = io.StringIO()
    optimize(imported.mod, dump_dir=tmp_path, print_after=("FuseTIR",), out=out)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[0] == "00-input.py" and files[-1] == "08-DeadCodeElimination.py" and len(files) == 9
    assert "R.matmul" in (tmp_path / "00-input.py").read_text()
    assert "R.call_tir" in (tmp_path / "06-FuseTIR.py").read_text()
    assert "IR after FuseTIR" in out.getvalue() and "IR after FuseOps" not in out.getvalue()


def test_unknown_print_after_pass_is_a_user_error(mlp):
    with pytest.raises(UserError, match="unknown pass 'FuseAll'"):
        optimize(mlp["imported"].mod, print_after=("FuseAll",), out=io.StringIO())


def test_count_and_table_agree(mlp):
    assert count(mlp["mod"]) == mlp["steps"][-1].counts
    table = format_steps(mlp["steps"]).splitlines()
    assert len(table) == 1 + len(mlp["steps"]) and table[-1].startswith("DeadCodeElimination")
