"""The lab program: built with the Python builders, valid linalg, lowered, JIT-run."""
import numpy as np
import pytest

from bridges.mlir import lab, pipeline
from bridges.mlir.jit import compile_module
from bridges.mlir.unroll import affine_loops, constant_bounds, is_innermost
from minic.errors import UserError


def op_names(module) -> list[str]:
    from mlir import ir

    names = []
    module.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE,
                          ir.WalkOrder.PRE_ORDER)
    return names


def test_linalg_form_is_valid_and_has_the_three_ops():
    module = lab.build_matmul_bias_relu(lab.LabShape(4, 8, 5))
    assert module.operation.verify()
    names = op_names(module)
    assert names.count("linalg.matmul") == 1
    assert names.count("linalg.generic") == 2          # bias add, relu
    text = str(module)
    assert "affine_map<(d0, d1) -> (d1)>" in text      # the bias broadcast is an indexing map
    assert "arith.maximumf" in text
    assert "tensor<4x8xf32>, %arg1: tensor<8x5xf32>, %arg2: tensor<5xf32>) -> tensor<4x5xf32>" in text


@pytest.mark.parametrize("bad", [(0, 2, 2), (2, -1, 2), (2, 2, 1.5)])
def test_bad_shape_is_a_user_error(bad):
    with pytest.raises(UserError, match="lab shape"):
        lab.build_matmul_bias_relu(lab.LabShape(*bad))


def test_affine_stage_has_the_expected_loop_nests():
    m, k, n = 3, 7, 5
    module = lab.build_matmul_bias_relu(lab.LabShape(m, k, n))
    pipeline.lower(module, "affine")
    names = op_names(module)
    assert not [x for x in names if x.startswith("linalg.")]
    # fill (m, n), matmul (m, n, k), bias + relu (m, n; fused): 7 loops, 3 innermost.
    loops = affine_loops(module.operation)
    assert len(loops) == 7
    trips = [constant_bounds(lp).trip_count for lp in loops]
    assert trips == [m, n, m, n, k, m, n]
    assert sum(is_innermost(lp) for lp in loops) == 3
    assert names.count("memref.alloc") == names.count("memref.dealloc") == 1


def test_every_stage_dumps_and_llvm_stage_is_only_llvm():
    module = lab.build_matmul_bias_relu(lab.LabShape(2, 3, 4))
    texts = pipeline.lower(module, "llvm", unroll=4, dump="all")
    assert list(texts) == ["linalg", "fused", "bufferized", "affine", "unrolled", "scf", "cf", "llvm"]
    assert "memref<2x3xf32>" in texts["bufferized"] and "tensor<" not in texts["bufferized"]
    assert "scf.for" in texts["scf"] and "affine.for" not in texts["scf"]
    assert "cf.cond_br" in texts["cf"] and "scf.for" not in texts["cf"]
    dialects = {name.split(".")[0] for name in op_names(module)}
    assert dialects == {"builtin", "llvm"}


def test_unknown_stage_is_a_user_error():
    module = lab.build_matmul_bias_relu(lab.LabShape(2, 2, 2))
    with pytest.raises(UserError, match="unknown MLIR stage 'loops'"):
        pipeline.lower(module, "loops")


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 10), (32, 64, 48)])
@pytest.mark.parametrize("unroll", [None, 4])
def test_jit_matches_numpy(shape, unroll):
    s = lab.LabShape(*shape)
    kernel = compile_module(lab.build_matmul_bias_relu(s), lab.FUNC_NAME, unroll=unroll)
    x, w, b = lab.random_inputs(s, seed=sum(shape))
    got = kernel(x, w, b)
    assert got.shape == (s.m, s.n) and got.dtype == np.float32
    np.testing.assert_allclose(got, lab.reference(x, w, b), atol=1e-5, rtol=0)
    assert (got >= 0).all()
    if got.size > 16:
        assert (got == 0).any()                       # relu did clip something


def test_jit_rejects_wrong_shapes():
    s = lab.LabShape(2, 3, 4)
    kernel = compile_module(lab.build_matmul_bias_relu(s), lab.FUNC_NAME)
    x, w, b = lab.random_inputs(s)
    with pytest.raises(UserError, match=r"argument 1: expected float32\[3, 4\]"):
        kernel(x, w.T, b)
    with pytest.raises(UserError, match="takes 3 arrays"):
        kernel(x, w)
