"""The speed parts of codegen and scheduling: vector exp, rfactor, pre-packed weights,
the thread pool (correctness only; no timing)."""
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from minic.ir.graph import Graph, Node, Value, constant
from minic.ir import ops
from minic.ir.interpret import interpret
from minic.ir.loops import print_function
from minic.ir.types import DType, TensorType
from minic.runtime import CompileOptions, compile_graph, prepare
from minic.schedule.caching import rfactor
from minic.schedule.nest import ScheduleError
from minic.schedule.primitives import split, vectorize

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import assert_same_meaning, compiled, graph_of, kernel_of  # noqa: E402

OPTIONS = CompileOptions(use_cache=False, num_threads=2)


def test_vector_exp_is_accurate_and_keeps_special_values():
    f = kernel_of(graph_of("exp", [(3, 40)]))
    g = vectorize(split(f, "i1", 16, tail="overlap"), "i1i")
    x = np.linspace(-100, 88.7, 120).astype(np.float32).reshape(3, 40)
    x[0, :3] = np.nan, np.inf, -np.inf
    got = compiled(g, {"x0": x, "y": np.zeros_like(x)}, {})["y"]
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    normal = np.isfinite(want) & (want > 1.2e-38)
    assert np.max(np.abs(got[normal] - want[normal]) / want[normal]) < 1e-6
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf and got[0, 2] == 0.0


def test_vector_erf_is_accurate_and_keeps_special_values():
    """GELU's erf runs as a polynomial on the whole vector, not a libm call per lane."""
    import math
    from minic import pipeline
    f = kernel_of(graph_of("erf", [(3, 40)]))
    g = vectorize(split(f, "i1", 16, tail="overlap"), "i1i")
    x = np.concatenate([np.linspace(-5, 5, 117), [np.nan, np.inf, -np.inf]]).astype(np.float32).reshape(3, 40)
    got = compiled(g, {"x0": x, "y": np.zeros_like(x)}, {})["y"]
    want = np.array([math.erf(v) for v in x.astype(np.float64).ravel()]).reshape(x.shape)
    finite = np.isfinite(x)
    assert np.max(np.abs(got[finite] - want[finite])) < 2e-7
    assert np.isnan(got[2, 37]) and got[2, 38] == 1.0 and got[2, 39] == -1.0
    gelu = graph_of("gelu", [(4, 768)])
    text = str(pipeline.run(gelu, "llvm", OPTIONS))
    assert "vectorized" in print_function(prepare(gelu, OPTIONS).kernels[0]) and "erff" not in text
    x = np.random.default_rng(0).standard_normal((4, 768)).astype(np.float32) * 3
    np.testing.assert_allclose(compile_graph(gelu, OPTIONS)(x), interpret(gelu, [x])[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,n", [("reduce_sum", 37), ("reduce_max", 32), ("reduce_min", 5)])
def test_rfactor_vectorizes_reductions(op, n):
    f = kernel_of(graph_of(op, [(3, n)], axes=(1,)))
    g = rfactor(f, "r0", 16)
    assert "r0_part" in print_function(g) or "acc0_part" in print_function(g)
    assert_same_meaning(f, g)


def test_rfactor_needs_a_reduction():
    with pytest.raises(ScheduleError, match="acc = acc op e"):
        rfactor(kernel_of(graph_of("relu", [(3, 40)])), "i1")


def test_rfactor_keeps_each_lane_to_its_own_elements():
    """A body that stores elements and reads one another iteration stores stays serial."""
    from minic.ir.loops import (Allocate, BinOp, Buffer, For, ForKind, Function, Load, Role, Store, Var, const,
                                seq)
    x, y = Buffer("x", (33,), DType.f32, Role.INPUT), Buffer("y", (33,), DType.f32, Role.OUTPUT)
    acc, r = Buffer("acc", (), DType.f32, Role.LOCAL), Var("r")
    update = Store(acc, (), BinOp("add", Load(acc, ()), Load(y, (BinOp("add", r, const(1)),))))
    loop = For(r, const(0), const(32), ForKind.SERIAL, seq(Store(y, (r,), Load(x, (r,))), update))
    f = Function("k", (x, y), (), Allocate(acc, seq(Store(acc, (), const(0, DType.f32)), loop)))
    with pytest.raises(ScheduleError, match="rfactor"):
        rfactor(f, "r", 16)


def test_rfactor_refuses_elements_that_read_the_accumulator():
    """A running sum (y[r] = acc; acc = acc + x[r]) needs the serial order of the sums."""
    from minic.ir.loops import Allocate, BinOp, Buffer, For, ForKind, Function, Load, Role, Store, Var, const, seq
    x, y = Buffer("x", (32,), DType.f32, Role.INPUT), Buffer("y", (32,), DType.f32, Role.OUTPUT)
    acc, r = Buffer("acc", (), DType.f32, Role.LOCAL), Var("r")
    update = Store(acc, (), BinOp("add", Load(acc, ()), Load(x, (r,))))
    loop = For(r, const(0), const(32), ForKind.SERIAL, seq(Store(y, (r,), Load(acc, ())), update))
    f = Function("k", (x, y), (), Allocate(acc, seq(Store(acc, (), const(0, DType.f32)), loop)))
    with pytest.raises(ScheduleError, match="rfactor"):
        rfactor(f, "r", 16)


def test_softmax_default_schedule_vectorizes_and_matches():
    g = graph_of("softmax", [("T", 40)], axis=-1)
    text = print_function(prepare(g, OPTIONS).kernels[0])
    assert "vectorized" in text and "_part" in text
    for t in (1, 5, 33):
        x = np.random.default_rng(t).standard_normal((t, 40)).astype(np.float32)
        np.testing.assert_allclose(compile_graph(g, OPTIONS)(x), interpret(g, [x])[0], rtol=1e-5, atol=1e-6)


def test_weights_are_packed_at_compile_time():
    rng = np.random.default_rng(0)
    x = Value("x", TensorType((9, 20), DType.f32))
    w = constant("w", rng.standard_normal((20, 45)).astype(np.float32))
    y = Value("y", TensorType((9, 45), DType.f32))
    graph = Graph("m", [x], [y], [Node("matmul", [x, w], [y], ops.get("matmul").make_attrs())], [w])
    program = prepare(graph, OPTIONS)
    packed = [name for name in program.constants if name.endswith("w_pack")]
    assert packed and program.constants[packed[0]].shape == (2, 20, 32)
    xs = rng.standard_normal((9, 20)).astype(np.float32)
    np.testing.assert_allclose(compile_graph(graph, OPTIONS)(xs), xs @ w.data, rtol=1e-5, atol=1e-5)


def test_thread_pool_survives_many_calls_and_concurrent_callers():
    g = graph_of("matmul", [(33, 64), (64, 70)])        # enough work for the pool (parallel.PARALLEL_WORK)
    model = compile_graph(g, CompileOptions(use_cache=False, num_threads=4))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((33, 64)).astype(np.float32), rng.standard_normal((64, 70)).astype(np.float32)
    for _ in range(50):
        np.testing.assert_allclose(model(a, b), a @ b, rtol=1e-4, atol=1e-4)
    errors = []

    def call():
        for _ in range(20):
            if not np.allclose(model(a, b), a @ b, rtol=1e-4, atol=1e-4):
                errors.append("mismatch")
    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
