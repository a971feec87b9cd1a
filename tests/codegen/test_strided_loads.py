"""Vector loads with a constant stride (``x[s * j + c]`` in a vectorized loop over
``j``, as a stride-2 pooling window reads): a masked load of the span, then a
shuffle.  The values must be the strided elements, and nothing past the last
lane may be read: a test puts the buffer's end against an unmapped page (and a
7-lane load and store, each one masked access of 8, too)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from minic.options import CompileOptions
from minic.codegen.vector import MAX_STRIDE
from minic.ir.loops import BinOp, Buffer, For, ForKind, Function, Load, Role, Store, Var, const, print_function
from minic.ir.types import DType
from minic.tune.measure import compile_kernel

LANES = 16


def strided_copy(n: int, step: int, offset: int, dtype: DType, lanes: int = LANES) -> Function:
    """y[j] = x[step * j + offset] for j < lanes (16), one vectorized loop."""
    x, y = Buffer("x", (n,), dtype, Role.INPUT), Buffer("y", (lanes,), dtype, Role.OUTPUT)
    j = Var("j")
    index = BinOp("add", BinOp("mul", j, const(step)), const(offset))
    body = For(j, const(0), const(lanes), ForKind.VECTORIZED, Store(y, (j,), Load(x, (index,))))
    return Function("strided", (x, y), (), body)


@pytest.mark.parametrize("dtype", [DType.f32, DType.i64, DType.i32])
@pytest.mark.parametrize("step", range(1, MAX_STRIDE + 2))
@pytest.mark.parametrize("offset", [0, 3])
def test_strided_vector_loads_read_every_step_th_element(dtype, step, offset):
    n = (LANES - 1) * step + offset + 1                  # the last lane reads the last element
    f = strided_copy(n, step, offset, dtype)
    run, _ = compile_kernel(f, CompileOptions(use_cache=False, num_threads=1))
    x = (np.arange(n) * 3 - 7).astype(dtype.numpy)
    arrays = {"x": x, "y": np.zeros(LANES, dtype.numpy)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], x[offset::step][:LANES])


@pytest.mark.parametrize("step,lanes", [(2, LANES), (1, 7)])
def test_a_vector_access_touches_nothing_past_its_last_lane(step, lanes):
    """x and y each end where an inaccessible page begins (a strided load's span; a 7-lane
    load and store, each one masked access of 8).  Run in a child process: touching such a
    page is a segmentation fault there."""
    code = textwrap.dedent(f"""
        import ctypes, mmap, sys
        import numpy as np
        from minic.options import CompileOptions
        from minic.ir.types import DType
        from minic.tune.measure import compile_kernel
        sys.path.insert(0, sys.argv[1])
        from test_strided_loads import strided_copy
        page = mmap.PAGESIZE
        memory = mmap.mmap(-1, 4 * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        libc = ctypes.CDLL(None)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base + page, page, 0) == 0          # the page after x: no access
        assert libc.mprotect(base + 3 * page, page, 0) == 0      # nor after y
        n = {step} * ({lanes} - 1) + 1
        x = np.frombuffer(memory, dtype=np.float32, count=n, offset=page - 4 * n)
        y = np.frombuffer(memory, dtype=np.float32, count={lanes}, offset=3 * page - 4 * {lanes})
        x[:] = np.arange(n)
        f = strided_copy(n, {step}, 0, DType.f32, {lanes})
        run, _ = compile_kernel(f, CompileOptions(use_cache=False, num_threads=1))
        run({{"x": x, "y": y}}, {{}})
        print(y.astype(int).tolist())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    here = os.path.dirname(__file__)
    out = subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, f"child died ({out.returncode}): {out.stderr[-2000:]}"
    assert out.stdout.split("\n")[-2] == str(list(range(0, step * (lanes - 1) + 1, step)))


def test_a_gather_beyond_the_stride_limit_runs_lane_by_lane():
    f = strided_copy((LANES - 1) * (MAX_STRIDE + 3) + 1, MAX_STRIDE + 3, 0, DType.f32)
    assert "vectorized" in print_function(f)
    run, _ = compile_kernel(f, CompileOptions(use_cache=False, num_threads=1))
    x = np.arange(f.params[0].shape[0], dtype=np.float32)
    arrays = {"x": x, "y": np.zeros(LANES, np.float32)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], x[::MAX_STRIDE + 3])


def repeated_copy(n: int, d: int, offset: int) -> Function:
    """y[j] = x[(j + offset) / d] for j < 16, one vectorized loop (an upsampling by d)."""
    x, y = Buffer("x", (n,), DType.f32, Role.INPUT), Buffer("y", (LANES,), DType.f32, Role.OUTPUT)
    j = Var("j")
    index = BinOp("div", BinOp("add", j, const(offset)), const(d))
    body = For(j, const(0), const(LANES), ForKind.VECTORIZED, Store(y, (j,), Load(x, (index,))))
    return Function("repeated", (x, y), (), body)


@pytest.mark.parametrize("d, offset, one_load", [(2, 0, True), (2, 4, True), (4, 8, True), (2, 1, False), (3, 0, False)])
def test_repeated_loads_read_each_element_d_times(d, offset, one_load):
    """``x[(j + c) / d]`` with c a multiple of d (and d dividing the 16 lanes) is one vector
    load of 16 / d elements and a shuffle; otherwise lane by lane.  Either way the values
    are numpy's."""
    from minic.codegen.module import build_module
    from minic.tune.measure import kernel_program
    n = (LANES - 1 + offset) // d + 1
    f = repeated_copy(n, d, offset)
    options = CompileOptions(use_cache=False, num_threads=1)
    text = str(build_module(kernel_program(f), options))
    assert (f"load <{LANES // d} x float>" in text) == one_load
    run, _ = compile_kernel(f, options)
    x = np.arange(n, dtype=np.float32) * 3 - 7
    arrays = {"x": x, "y": np.zeros(LANES, np.float32)}
    run(arrays, {})
    np.testing.assert_array_equal(arrays["y"], x[(np.arange(LANES) + offset) // d])
