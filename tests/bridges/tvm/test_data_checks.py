"""The tvm path's data checks (bridges/tvm/checks.py, the mechanism of
bridges/data_checks.py): data an op is undefined for is a DataError naming the
op, as on the mlir path, where TVM's kernels read wild memory (SIGSEGV, or a
silent wrong answer for -1) or trap (SIGFPE); good data still gives PyTorch's answer."""
from functools import lru_cache

import numpy as np
import pytest
import torch

from bridges.tvm.backend import compile as tvm_compile
from minic.api import load
from minic.errors import DataError


class Gather(torch.nn.Module):
    def forward(self, x, i):
        return torch.gather(x, 1, i)


class Take(torch.nn.Module):
    """Two takes: x[:, i] (axis 1, 5 columns) and an embedding lookup of j (axis 0, 4 rows)."""
    def forward(self, x, i, j):
        return x[:, i], torch.nn.functional.embedding(j, x)


class Divide(torch.nn.Module):
    """Floor division and remainder in i32 and in i64."""
    def forward(self, a, b, c, d):
        return (torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b),
                torch.div(c, d, rounding_mode="floor"), torch.remainder(c, d))


X = np.arange(20, dtype=np.float32).reshape(4, 5)


@lru_cache(maxsize=None)
def _compiled(module_class, shapes):
    return tvm_compile(load(module_class(), tuple(np.zeros(s, d) for s, d in shapes)))


def compiled(module, *inputs):
    """The tvm runner of ``module`` (compiled once per module and input shapes), checked on ``inputs``."""
    run = _compiled(type(module), tuple((a.shape, a.dtype) for a in inputs))
    want = module(*(torch.from_numpy(a) for a in inputs))
    got = run(*inputs)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w.numpy())
    return run


@pytest.mark.parametrize("bad", [-1, 5, 10**9])
def test_gather_out_of_range_is_a_data_error(bad):
    run = compiled(Gather(), X, np.array([[0, 1], [2, 3], [4, 4], [0, 0]]))
    with pytest.raises(DataError, match=r"tvm path: index out of range \[0, 5\) on axis 1 \(gather_elements\)"):
        run(X, np.array([[0, 1], [2, 3], [4, bad], [0, 0]]))


def test_take_out_of_range_is_a_data_error():
    good = np.array([0, 3])
    run = compiled(Take(), X, good, good)
    with pytest.raises(DataError, match=r"index out of range \[0, 5\) on axis 1 \(take\)"):
        run(X, np.array([0, 10**6]), good)
    with pytest.raises(DataError, match=r"index out of range \[0, 4\) on axis 0 \(take\)"):
        run(X, good, np.array([-1, 0]))            # PyTorch's embedding raises on -1 too


def test_integer_division_by_zero_and_min_by_minus_one_are_data_errors():
    a, b = np.array([7, -7, 5, 0], np.int32), np.array([2, 2, -1, 3], np.int32)
    run = compiled(Divide(), a, b, a.astype(np.int64), b.astype(np.int64))
    for dtype, args in ((np.int32, lambda x, y: (x, y, a.astype(np.int64), b.astype(np.int64))),
                        (np.int64, lambda x, y: (a, b, x, y))):
        with pytest.raises(DataError, match=r"tvm path: integer division by zero \(floor_divide\)"):
            run(*args(np.array([7, -7, 5, 0], dtype), np.array([2, 0, 1, 1], dtype)))
        low = np.iinfo(dtype).min
        name = np.dtype(dtype).name.replace("int", "i")
        with pytest.raises(DataError, match=rf"tvm path: integer overflow: {low} / -1 does not fit {name} "
                                            r"\(floor_divide\)"):         # as on minic's paths: not wrapped
            run(*args(np.array([low, 9, -9, 1], dtype), np.array([-1, -1, 4, 1], dtype)))
        outs = run(*args(np.array([low + 1, 9, -9, 1], dtype), np.array([-1, -1, 4, 1], dtype)))
        quotient, remainder = outs[:2] if dtype == np.int32 else outs[2:]
        np.testing.assert_array_equal(quotient, [-(low + 1), -9, -3, 1])
        np.testing.assert_array_equal(remainder, [0, 0, 3, 0])
        remainder = run(*args(np.array([low, 9, -9, 1], dtype), np.array([5, 5, 4, 1], dtype)))
        np.testing.assert_array_equal(remainder[1] if dtype == np.int32 else remainder[3],
                                      np.remainder(np.array([low, 9, -9, 1], dtype), np.array([5, 5, 4, 1], dtype)))


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/production-bugs.md#tvm-int32-min-compare")
def test_tvm_compares_with_int32_min():
    import tvm
    from tvm import relax
    low = np.iinfo(np.int32).min
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType((3,), "int32"))
    with bb.function("main", [a]):
        bb.emit_func_output(bb.emit(relax.op.equal(a, relax.const(low, "int32"))))
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(np.array([low, low + 1, 5], np.int32))).numpy()
    np.testing.assert_array_equal(got, [True, False, False])
