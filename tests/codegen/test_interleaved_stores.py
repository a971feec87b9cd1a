"""Stores side by side (``y[.., j, q] = v_q`` for every q of y's last axis, j the lanes: the copy
that puts four channels of a conv's image together for vpdpbusd) run as one vector store of
them all, the values interleaved by a shuffle; before, each lane and q was a scalar store, and
the scheduler left such a loop to LLVM, which vectorized 8 columns at a time and stored the rest
(a 28-column row's last 4) byte by byte."""
import numpy as np
import pytest

from minic import pipeline
from minic.ir.loops import BinOp, Buffer, For, ForKind, Function, Load, Role, Store, Var, const, seq
from minic.ir.types import DType
from minic.options import CompileOptions
from minic.schedule.default import schedule_kernel
from minic.schedule.nest import loops
from minic.tune.measure import compile_kernel, kernel_program


def interleave(n: int, m: int, dtype: DType, kind: ForKind) -> Function:
    """y[i, j, q] = x[i, q, j] for q < m (written out), j < n: m rows of x side by side in y."""
    x, y = Buffer("x", (3, m, n), dtype, Role.INPUT), Buffer("y", (3, n, m), dtype, Role.OUTPUT)
    i, j = Var("i"), Var("j")
    body = seq(*(Store(y, (i, j, const(q)), Load(x, (i, const(q), j))) for q in range(m)))
    return Function("interleave", (x, y), (), For(i, const(0), const(3), ForKind.SERIAL,
                                                 For(j, const(0), const(n), kind, body)))


@pytest.mark.parametrize("dtype", [DType.u8, DType.f32])
@pytest.mark.parametrize("n,m", [(16, 4), (7, 4), (16, 2), (16, 3), (11, 4)])
def test_a_vectorized_loop_stores_its_side_by_side_values_in_one_store(n, m, dtype):
    f = interleave(n, m, dtype, ForKind.VECTORIZED)
    options = CompileOptions(use_cache=False, num_threads=1)
    llvm_ir = str(pipeline.run(kernel_program(f), "llvm", options, start="scheduled"))
    width = "i8" if dtype == DType.u8 else "float"
    assert f"store <{n * m} x {width}>" in llvm_ir, "one store of the m values of every lane"
    run, _ = compile_kernel(f, options)
    x = (np.arange(3 * m * n) * 7 % 251).astype(dtype.numpy).reshape(3, m, n)
    arrays = {"x": x, "y": np.zeros((3, n, m), dtype.numpy)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], x.transpose(0, 2, 1))


@pytest.mark.parametrize("n", [28, 14, 7])
def test_the_scheduler_vectorizes_a_loop_of_side_by_side_stores(n):
    # a row of 28: blocks of 16, the last overlapping the first (a copy may store twice); 14 and 7: one vector
    options = CompileOptions(use_cache=False, num_threads=1)
    f = schedule_kernel(interleave(n, 4, DType.u8, ForKind.SERIAL), options.target)
    vector = [t for t in loops(f.body) if t.kind == ForKind.VECTORIZED]
    assert len(vector) == 1 and vector[0].extent.value == min(n, 16)
    run, _ = compile_kernel(f, options)
    x = np.random.default_rng(0).integers(0, 256, (3, 4, n)).astype(np.uint8)
    arrays = {"x": x, "y": np.zeros((3, n, 4), np.uint8)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], x.transpose(0, 2, 1))


def test_side_by_side_stores_that_read_their_own_output_stay_one_by_one():
    # y[j, 1] = y[j, 0] + 1 after y[j, 0] is stored: the values cannot all be computed first
    y = Buffer("y", (16, 2), DType.f32, Role.OUTPUT)
    j = Var("j")
    body = seq(Store(y, (j, const(0)), BinOp("mul", Load(y, (j, const(1))), const(2.0, DType.f32))),
               Store(y, (j, const(1)), BinOp("add", Load(y, (j, const(0))), const(1.0, DType.f32))))
    f = Function("chained", (y,), (), For(j, const(0), const(16), ForKind.VECTORIZED, body))
    run, _ = compile_kernel(f, CompileOptions(use_cache=False, num_threads=1))
    start = np.arange(32, dtype=np.float32).reshape(16, 2)
    arrays = {"y": start.copy()}
    run(arrays, {})
    want = np.stack([start[:, 1] * 2, start[:, 1] * 2 + 1], 1)
    np.testing.assert_array_equal(arrays["y"], want)
