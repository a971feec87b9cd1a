"""Every schedule primitive keeps the kernel's meaning (interpreter and compiled,
odd sizes), and refuses what it cannot do with a clear error."""
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minic.ir.loops import ForKind, print_function
from minic.schedule.caching import cache_accumulator, pack
from minic.schedule.nest import ScheduleError, loops_named
from minic.schedule.primitives import fuse, parallel, reorder, split, tile, unroll, vectorize

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import assert_same_meaning, graph_of, kernel_of, matmul_kernel  # noqa: E402


def add_kernel(m=5, n=13):
    return kernel_of(graph_of("add", [(m, n), (m, n)]))


def test_split_exact_divides():
    f = add_kernel(4, 12)
    g = split(f, "i1", 4)
    assert [t.extent.value for t in loops_named(g.body, "i1o") + loops_named(g.body, "i1i")] == [3, 4]
    assert_same_meaning(f, g)


@pytest.mark.parametrize("tail", ["guard", "overlap", "peel"])
def test_split_with_a_tail(tail):
    f = add_kernel(5, 13)
    g = split(f, "i1", 4, tail=tail)
    assert ("if (" in print_function(g)) == (tail == "guard")
    assert ("i1t" in print_function(g)) == (tail == "peel")
    assert_same_meaning(f, g)


def test_peel_split_updates_in_place_once_where_overlap_refuses():
    """y = y * 2 twice is wrong: overlapping blocks refuse it, a peeled rest runs it once."""
    from dataclasses import replace as with_
    from minic.ir.loops import BinOp, Load, Store, const
    from minic.schedule.nest import rewrite_loops
    f = kernel_of(graph_of("relu", [("T", 9)]))
    store = [s for s in __import__("minic.schedule.nest", fromlist=["x"]).stores(f.body)][0]
    twice = Store(store.buffer, store.index, BinOp("mul", Load(store.buffer, store.index), const(2.0, store.buffer.dtype)))
    f = rewrite_loops(f, "i1", lambda t: with_(t, body=twice))
    with pytest.raises(ScheduleError, match="run some iterations twice"):
        split(f, "i1", 4, tail="overlap")
    g = split(f, "i1", 4, tail="peel")
    for t in (1, 3):
        assert_same_meaning(f, g, {"T": t})


def test_split_that_does_not_cover_the_extent_is_an_error():
    with pytest.raises(ScheduleError, match="does not cover its extent 13"):
        split(add_kernel(5, 13), "i1", 4)
    with pytest.raises(ScheduleError, match="needs extent >= 16"):
        split(add_kernel(5, 13), "i1", 16, tail="overlap")
    with pytest.raises(ScheduleError, match="no loop 'zz'"):
        split(add_kernel(), "zz", 2)


def test_symbolic_overlap_split_keeps_a_fallback_for_small_extents():
    g = graph_of("relu", [("T", 9)])
    f = kernel_of(g)
    s = split(f, "i0", 4, tail="overlap")
    assert "if (T >= 4)" in print_function(s)
    for t in (2, 4, 7):
        assert_same_meaning(f, s, {"T": t})


def test_reorder_and_tile():
    f = matmul_kernel()
    assert_same_meaning(f, reorder(f, "i1", "i0"))
    g = tile(f, ("i0", "i1"), (3, 4), tail="guard")
    order = [t.var.name for t in __import__("minic.schedule.nest", fromlist=["x"]).loops(g.body)][:4]
    assert order == ["i0o", "i1o", "i0i", "i1i"]
    assert_same_meaning(f, g)


def test_tile_3d():
    f = kernel_of(graph_of("add", [(3, 5, 7), (3, 5, 7)]))
    assert_same_meaning(f, tile(f, ("i0", "i1", "i2"), (2, 2, 4), tail="guard"))


def test_reorder_needs_a_perfect_nest():
    f = matmul_kernel()
    with pytest.raises(ScheduleError, match="not perfectly nested"):
        reorder(f, "k0", "i0")


def test_fuse():
    f = kernel_of(graph_of("add", [(3, 5, 7), (3, 5, 7)]))
    g = fuse(f, "i0", "i1")
    assert len(loops_named(g.body, "i0i1")) == 1 and loops_named(g.body, "i0i1")[0].extent.value == 15
    assert_same_meaning(f, g)
    with pytest.raises(ScheduleError, match="not the only statement"):
        fuse(f, "i0", "i2")


def test_unroll_and_its_limits():
    f = add_kernel(3, 5)
    g = unroll(f, "i0")
    assert loops_named(g.body, "i0")[0].kind == ForKind.UNROLLED
    assert_same_meaning(f, g)
    with pytest.raises(ScheduleError, match="needs a constant extent"):
        unroll(kernel_of(graph_of("relu", [("T", 3)])), "i0")


def test_vectorize_elementwise_with_gathers_and_calls():
    f = kernel_of(graph_of("gelu", [(3, 37)]))
    g = vectorize(split(f, "i1", 16, tail="overlap"), "i1i")
    assert_same_meaning(f, g)
    # a transposed read is gathered lane by lane
    t = kernel_of(graph_of("transpose", [(5, 19)], perm=(1, 0)))
    assert_same_meaning(t, vectorize(t, "i1"))


def test_vectorizing_a_reduction_axis_is_an_error():
    f = matmul_kernel()
    with pytest.raises(ScheduleError, match="reduction"):
        vectorize(f, "k0")
    with pytest.raises(ScheduleError, match="not innermost"):
        vectorize(f, "i1")


def test_parallel_refuses_a_reduction_loop():
    f = matmul_kernel()
    assert_same_meaning(f, parallel(f, "i0"))
    with pytest.raises(ScheduleError, match="reduction"):
        parallel(f, "k0")


def test_cache_accumulator_and_pack_make_the_micro_kernel():
    f = matmul_kernel(7, 5, 11)
    g = split(f, "i1", 4, tail="overlap")
    g = split(g, "i0", 3, tail="overlap")
    g = reorder(g, "i1o", "i0o", "i0i", "i1i")
    g = cache_accumulator(g, "i0i", "i1i")
    assert "f32 acc0[3, 4];" in print_function(g)
    assert_same_meaning(f, g)
    g = vectorize(unroll(g, "i0i"), "i1i")
    g = pack(g, "i1o", "x1")
    assert "x1_pack[5, 4]" in print_function(g)
    assert_same_meaning(f, parallel(g, "i1o"))


def test_cache_accumulator_needs_the_band_around_the_accumulator():
    f = matmul_kernel()
    with pytest.raises(ScheduleError, match="scalar accumulator"):
        cache_accumulator(f, "i0")


def test_pack_errors():
    f = matmul_kernel()
    with pytest.raises(ScheduleError, match="does not read"):
        pack(f, "i0", "nothing")
    with pytest.raises(ScheduleError, match="writes acc0"):
        pack(f, "i0", "acc0")          # the accumulator: read and written inside the loop


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 9), factor=st.integers(1, 5), tail=st.sampled_from(["guard", "overlap"]))
def test_split_then_vectorize_on_drawn_sizes(m, n, factor, tail):
    f = add_kernel(m, n)
    if tail == "overlap" and n < factor:
        with pytest.raises(ScheduleError):
            split(f, "i1", factor, tail=tail)
        return
    g = split(f, "i1", factor, tail=tail)
    if tail == "overlap":
        g = vectorize(g, "i1i")
    assert_same_meaning(f, g, interpret=False)


def test_overlap_split_refuses_in_place_updates():
    from minic.ir.loops import BinOp, For, ForKind, Function, Load, Store, Var, const
    from minic.ir.loops import Buffer, Role
    from minic.ir.types import DType
    x = Buffer("x", (10,), DType.f32, Role.OUTPUT)
    i = Var("i")
    body = For(i, const(0), const(10), ForKind.SERIAL,
               Store(x, (i,), BinOp("add", Load(x, (i,)), const(1.0, DType.f32))))
    f = Function("inc", (x,), (), body)
    with pytest.raises(ScheduleError, match="run some iterations twice"):
        split(f, "i", 4, tail="overlap")
    assert_same_meaning(f, split(f, "i", 4, tail="guard"))
