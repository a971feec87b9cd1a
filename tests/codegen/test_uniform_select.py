"""A select whose condition is the same on every lane of a vectorized loop (a concat
along an outer axis: Winograd's transforms pick one slice per point) is a branch: only
the chosen side's vector loads run.  As a select, every side was loaded for each lane
vector, and a side's index could lie outside its buffer on the rows it was not chosen."""
import re

import numpy as np

from minic.codegen.module import build_module
from minic.ir.loops import BinOp, Buffer, For, ForKind, Function, Load, Role, Select, Store, Var, const
from minic.ir.types import DType
from minic.options import CompileOptions
from minic.tune.measure import compile_kernel, kernel_program

LANES = 16


def concat_rows() -> Function:
    """y[i, j] = i < 2 ? a[i, j] : b[i - 2, j] for i < 4, j < 16 vectorized: a and b
    ([2, 16] each) stacked along the rows."""
    a, b = Buffer("a", (2, LANES), DType.f32, Role.INPUT), Buffer("b", (2, LANES), DType.f32, Role.INPUT)
    y = Buffer("y", (4, LANES), DType.f32, Role.OUTPUT)
    i, j = Var("i"), Var("j")
    value = Select(BinOp("lt", i, const(2)), Load(a, (i, j)), Load(b, (BinOp("sub", i, const(2)), j)))
    body = For(i, const(0), const(4), ForKind.SERIAL,
               For(j, const(0), const(LANES), ForKind.VECTORIZED, Store(y, (i, j), value)))
    return Function("concat_rows", (a, b, y), (), body)


def test_uniform_select_runs_one_side():
    f = concat_rows()
    options = CompileOptions(use_cache=False, num_threads=1)
    text = str(build_module(kernel_program(f), options))
    assert "select i1" not in text            # no vector select on a scalar condition: a branch and a phi
    assert re.search(r"phi\s+<16 x float>", text)
    run, _ = compile_kernel(f, options)
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((2, LANES)).astype(np.float32),
              "b": rng.standard_normal((2, LANES)).astype(np.float32), "y": np.zeros((4, LANES), np.float32)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], np.concatenate([arrays["a"], arrays["b"]]))
