"""Seed-lab extensions: the TOSA path and transform-dialect vectorization."""
import numpy as np
import pytest

from bridges.mlir import lab, pipeline
from bridges.mlir.jit import compile_module
from bridges.mlir.tosa import build_matmul_bias_relu_tosa, tosa_to_linalg
from bridges.mlir.vectorize import VectorPlan, bench, divisor_at_most


def test_tosa_program_lowers_to_linalg_and_runs():
    s = lab.LabShape(5, 6, 7)
    module = build_matmul_bias_relu_tosa(s)
    text = str(module)
    for op in ("tosa.matmul", "tosa.add", "tosa.clamp", "tosa.reshape"):
        assert op in text
    tosa_to_linalg(module)
    text = str(module)
    assert "tosa." not in text and "linalg.batch_matmul" in text
    kernel = compile_module(module, lab.FUNC_NAME)
    x, w, b = lab.random_inputs(s, seed=3)
    np.testing.assert_allclose(kernel(x, w, b), lab.reference(x, w, b), atol=1e-5, rtol=0)


@pytest.mark.parametrize("size, preferred, want", [(64, 16, 16), (10, 16, 10), (24, 16, 12),
                                                   (13, 4, 1), (3, 4, 3)])
def test_tile_sizes_divide_the_shape(size, preferred, want):
    assert divisor_at_most(size, preferred) == want


def test_vectorized_ir_uses_vector_fmas():
    s = lab.LabShape(8, 8, 32)
    module = lab.build_matmul_bias_relu(s)
    texts = pipeline.lower(module, "bufferized", vectorize=VectorPlan.for_lab(s), dump=["vectorized"])
    vec = texts["vectorized"]
    assert "linalg.matmul" not in vec and "linalg.generic" not in vec
    assert "vector.fma" in vec and "vector<16xf32>" in vec
    assert vec.count("scf.for") >= 3          # the tile loops


@pytest.mark.parametrize("shape", [(7, 13, 10), (16, 24, 48), (1, 5, 3)])
def test_vectorized_kernel_matches_numpy(shape):
    s = lab.LabShape(*shape)
    kernel = compile_module(lab.build_matmul_bias_relu(s), lab.FUNC_NAME,
                            vectorize=VectorPlan.for_lab(s))
    x, w, b = lab.random_inputs(s, seed=7)
    np.testing.assert_allclose(kernel(x, w, b), lab.reference(x, w, b), atol=1e-5, rtol=0)


def test_the_bench_checks_both_kernels_before_timing_them():
    # How much faster the vectorized kernel is (~7x here) is the bench's output, not an assertion.
    r = bench(lab.LabShape(128, 128, 128), repeats=3)
    assert r.scalar_err <= 1e-5 and r.vector_err <= 1e-5
    assert r.vector_ms > 0 and r.scalar_ms > 0
