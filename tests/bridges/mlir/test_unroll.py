"""The Python AffineLoopUnroll pass: IR shape after the rewrite, and same results."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bridges.mlir import lab, pipeline
from bridges.mlir.jit import Kernel
from bridges.mlir.unroll import AffineLoopUnroll, affine_loops, constant_bounds, is_innermost
from minic.errors import UserError


def innermost(module):
    return [constant_bounds(lp) for lp in affine_loops(module.operation) if is_innermost(lp)]


def matmul_k_loop(k: int):
    module = lab.build_matmul_bias_relu(lab.LabShape(2, k, 3))
    pipeline.lower(module, "affine")
    return module


def test_innermost_trip_count_divided_by_four_and_body_replicated():
    module = matmul_k_loop(16)
    before = [lp for lp in affine_loops(module.operation) if is_innermost(lp)]
    k_loop = before[1]                                   # fill, matmul, bias + relu (fused)
    assert constant_bounds(k_loop).trip_count == 16
    loads_before = str(k_loop).count("affine.load")      # x, w, acc
    assert loads_before == 3

    unroll = AffineLoopUnroll(4)
    pipeline.run_stage(module, pipeline.Stage("unrolled", python_pass=unroll))
    after = [lp for lp in affine_loops(module.operation) if is_innermost(lp)]
    assert len(after) == 3                               # k divisible by 4: no epilogue
    new_k = after[1]
    assert constant_bounds(new_k).trip_count == 4 and constant_bounds(new_k).step == 4
    text = str(new_k)
    assert text.count("affine.load") == 4 * loads_before
    assert text.count("arith.mulf") == 4 and text.count("affine.apply") == 3
    k_records = [r for r in unroll.records if r.before.trip_count == 16]
    assert len(k_records) == 1 and k_records[0].main_trips == 4 and k_records[0].epilogue_trips == 0


def test_remainder_goes_to_an_epilogue_loop():
    module = matmul_k_loop(10)
    pipeline.run_stage(module, pipeline.Stage("unrolled", python_pass=AffineLoopUnroll(4)))
    bounds = innermost(module)
    # fill and bias + relu loops run 3 times (< 4): untouched.  k = 10: 0..8 step 4, then 8..10.
    assert [(b.lower, b.upper, b.step) for b in bounds] == \
        [(0, 3, 1), (0, 8, 4), (8, 10, 1), (0, 3, 1)]
    assert module.operation.verify()


def test_bad_factor_is_a_user_error():
    with pytest.raises(UserError, match="factor must be an integer >= 2"):
        AffineLoopUnroll(1)


LOOP = """
func.func @f(%a: memref<64xf32>, %out: memref<64xf32>, %sum: memref<1xf32>)
    attributes {{llvm.emit_c_interface}} {{
  %z = arith.constant 0.0 : f32
  affine.for %i = {lo} to {hi} step {step} {{
    %v = affine.load %a[%i] : memref<64xf32>
    %w = arith.mulf %v, %v : f32
    affine.store %w, %out[%i] : memref<64xf32>
  }}
  %s = affine.for %i = {lo} to {hi} step {step} iter_args(%acc = %z) -> f32 {{
    %v = affine.load %a[%i] : memref<64xf32>
    %t = arith.addf %acc, %v : f32
    affine.yield %t : f32
  }}
  affine.store %s, %sum[0] : memref<1xf32>
  return
}}
"""


def run_loop(lo, hi, step, factor):
    """JIT the test function, optionally unrolled; return its two outputs."""
    from mlir import ir

    from bridges.mlir.jit import TensorSig

    with ir.Context():
        module = ir.Module.parse(LOOP.format(lo=lo, hi=hi, step=step))
        records = []
        if factor:
            unroll = AffineLoopUnroll(factor)
            pipeline.run_stage(module, pipeline.Stage("unrolled", python_pass=unroll))
            records = unroll.records
        for name in ("scf", "cf", "llvm"):
            pipeline.run_stage(module, next(s for s in pipeline.stages() if s.name == name))
        kernel = Kernel(module, "f", [TensorSig((64,), np.float32)] * 2 + [TensorSig((1,), np.float32)], [])
    a = np.arange(64, dtype=np.float32) / 8
    out, total = np.zeros(64, np.float32), np.zeros(1, np.float32)
    kernel(a, out, total)
    return out, total, records


@settings(max_examples=12, deadline=None)
@given(lo=st.integers(0, 10), span=st.integers(0, 40), step=st.integers(1, 3),
       factor=st.integers(2, 5))
def test_unrolled_loops_compute_the_same(lo, span, step, factor):
    hi = lo + span
    want_out, want_sum, _ = run_loop(lo, hi, step, None)
    got_out, got_sum, records = run_loop(lo, hi, step, factor)
    np.testing.assert_array_equal(got_out, want_out)
    np.testing.assert_allclose(got_sum, want_sum, rtol=1e-6)
    trips = len(range(lo, hi, step))
    if trips >= factor:
        assert [(r.main_trips, r.epilogue_trips) for r in records] == [divmod(trips, factor)] * 2
    else:
        assert records == []
