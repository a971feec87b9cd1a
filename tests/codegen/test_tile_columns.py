"""Columns of a local tile read down its rows (``t[j, c]``, j vectorized, c unrolled: a
conv2d's epilogue, which stores along the image columns): the tile is transposed once
with shuffles and each column comes from that; the values must be the tile's.  And
7-lane vectors (tiles of 7 image columns) load and store as one masked access of 8, except
in a local tile, which LLVM keeps in registers only when it is accessed without a mask."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minic import pipeline
from minic.ir.loops import (Allocate, BinOp, Buffer, For, ForKind, Function, Load, Role, Seq, Store, Var, const)
from minic.ir.types import DType
from minic.options import CompileOptions
from minic.tune.measure import compile_kernel, kernel_program

OPTIONS = CompileOptions(use_cache=False, num_threads=1)
sys.path.insert(0, str(Path(__file__).parent))


def transpose_through_tile(rows: int, n: int, bias: bool) -> Function:
    """t[r, :] = x[r, :] (vector stores along the rows); y[c, r] = t[r, c] (+ b[c]), read by columns."""
    x, y = Buffer("x", (rows, n), DType.f32, Role.INPUT), Buffer("y", (n, rows), DType.f32, Role.OUTPUT)
    b = Buffer("b", (n,), DType.f32, Role.INPUT)
    t = Buffer("t", (rows, n), DType.f32, Role.LOCAL)
    r, c = Var("r"), Var("c")
    fill = For(r, const(0), const(rows), ForKind.UNROLLED,
               For(c, const(0), const(n), ForKind.VECTORIZED, Store(t, (r, c), Load(x, (r, c)))))
    value = Load(t, (r, c))
    if bias:
        value = BinOp("add", value, Load(b, (c,)))
    read = For(c, const(0), const(n), ForKind.UNROLLED,
               For(r, const(0), const(rows), ForKind.VECTORIZED, Store(y, (c, r), value)))
    return Function("transpose", (x, b, y), (), Allocate(t, Seq((fill, read))))


@pytest.mark.parametrize("rows", [4, 7, 8])
@pytest.mark.parametrize("n", [8, 16, 32])
def test_tile_columns_are_the_tile_transposed(rows, n):
    f = transpose_through_tile(rows, n, bias=rows == 7)
    run, _ = compile_kernel(f, OPTIONS)
    rng = np.random.default_rng(rows * n)
    x, b = rng.standard_normal((rows, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    arrays = {"x": x, "b": b, "y": np.zeros((n, rows), np.float32)}
    run(arrays, {})
    want = x.T + (b[:, None] if rows == 7 else 0)
    np.testing.assert_array_equal(arrays["y"], want)


def test_tile_columns_are_shuffled_not_gathered_lane_by_lane():
    text = str(pipeline.run(kernel_program(transpose_through_tile(8, 16, bias=False)), "llvm", OPTIONS,
                            start="scheduled"))
    assert "shufflevector" in text and "insertelement" not in text


def test_a_tile_the_transpose_cannot_take_is_still_read_right():
    """9 rows (more than one 8 x 8 block holds) and 12 columns (not a whole block): lane by lane."""
    for rows, n in ((9, 16), (8, 12)):
        run, _ = compile_kernel(transpose_through_tile(rows, n, bias=False), OPTIONS)
        x = np.arange(rows * n, dtype=np.float32).reshape(rows, n)
        arrays = {"x": x, "b": np.zeros(n, np.float32), "y": np.zeros((n, rows), np.float32)}
        run(arrays, {})
        np.testing.assert_array_equal(arrays["y"], x.T)


def test_seven_lanes_are_one_masked_access_of_eight():
    """(That it touches nothing past its last lane: tests/codegen/test_strided_loads.py.)"""
    from test_strided_loads import strided_copy
    text = str(pipeline.run(kernel_program(strided_copy(7, 1, 0, DType.f32, lanes=7)), "llvm", OPTIONS,
                            start="scheduled"))
    assert "llvm.masked.load.v8f32" in text and "llvm.masked.store.v8f32" in text


def test_a_local_tile_of_ten_lanes_is_not_masked():
    """Only memory outside the kernel needs the mask: a masked access to the accumulator
    tile kept it in stack memory (a load, FMA and store per row per step of k; an
    [8, 512] @ [512, 10] GEMM ran at 1.5 GFLOP/s), while plain vector accesses let LLVM
    keep it in registers.  Here: acc[j] += x[k, j] over k, j a 10-lane vector loop."""
    x, y = Buffer("x", (64, 10), DType.f32, Role.INPUT), Buffer("y", (10,), DType.f32, Role.OUTPUT)
    acc = Buffer("acc", (10,), DType.f32, Role.LOCAL)
    k, j = Var("k"), Var("j")

    def lanes(body):
        return For(j, const(0), const(10), ForKind.VECTORIZED, body)
    body = Seq((lanes(Store(acc, (j,), const(0.0, DType.f32))),
                For(k, const(0), const(64), ForKind.SERIAL,
                    lanes(Store(acc, (j,), BinOp("add", Load(acc, (j,)), Load(x, (k, j)))))),
                lanes(Store(y, (j,), Load(acc, (j,))))))
    f = Function("column_sums", (x, y), (), Allocate(acc, body))
    text = str(pipeline.run(kernel_program(f), "llvm", OPTIONS, start="scheduled"))
    masked = [line for line in text.splitlines() if "call" in line and "llvm.masked." in line]
    assert len(masked) == 2, masked          # the load of x, the store of y
    run, _ = compile_kernel(f, OPTIONS)
    arrays = {"x": np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32),
              "y": np.zeros(10, np.float32)}
    want = arrays["x"].sum(axis=0)
    run(arrays, {})
    np.testing.assert_allclose(arrays["y"], want, rtol=1e-5)


@pytest.mark.parametrize("op,c", [("max", 0.0), ("min", 6.0), ("max", -1.5)])
def test_max_with_a_constant_keeps_nan_and_the_zero_sign_of_torch(op, c):
    """max(x, c) in a vector loop is x < c ? c : x (one vmaxps): NaN propagates as with
    llvm.maximum, and relu(-0.0) is -0.0, as torch.relu gives."""
    import torch
    x, y = Buffer("x", (16,), DType.f32, Role.INPUT), Buffer("y", (16,), DType.f32, Role.OUTPUT)
    j = Var("j")
    f = Function("clip", (x, y), (), For(j, const(0), const(16), ForKind.VECTORIZED,
                                         Store(y, (j,), BinOp(op, Load(x, (j,)), const(c, DType.f32)))))
    run, _ = compile_kernel(f, OPTIONS)
    data = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1, -1, 5.9, 6.1, -1.5, 3, -3, 7, 0.5, -0.5, 2],
                    np.float32)
    arrays = {"x": data, "y": np.zeros(16, np.float32)}
    run(arrays, {})
    t = torch.from_numpy(data)
    want = (torch.clamp(t, min=c) if op == "max" else torch.clamp(t, max=c)).numpy()
    np.testing.assert_array_equal(arrays["y"], want)
    np.testing.assert_array_equal(np.signbit(arrays["y"]), np.signbit(want))
