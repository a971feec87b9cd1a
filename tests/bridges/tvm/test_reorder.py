"""The custom TIR pass: loop interchange for unit-stride inner loops."""

import tvm
from tvm.script import tirx as T

from bridges.tvm.reorder import demo, interchange_for_unit_stride, naive_matmul, pass_


def _loop_names(func):
    """The loop variables of each top-level nest, outermost first."""
    nests = []
    stmts = func.body.seq if isinstance(func.body, tvm.tirx.SeqStmt) else [func.body]
    for stmt in stmts:
        names = []
        while isinstance(stmt, tvm.tirx.For):
            names.append(stmt.loop_var.name)
            stmt = stmt.body
        nests.append(names)
    return nests


def test_matmul_gets_j_innermost_and_init_untouched():
    after = interchange_for_unit_stride(naive_matmul(16))
    assert _loop_names(after) == [["i", "j"], ["i", "k", "j"]]


def test_it_runs_as_a_tvm_pass():
    mod = pass_()(tvm.IRModule({"matmul": naive_matmul(16)}))
    assert _loop_names(mod["matmul"]) == [["i", "j"], ["i", "k", "j"]]


def test_already_unit_stride_nest_is_unchanged():
    @T.prim_func
    def add(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        for i, j in T.grid(8, 8):
            B[i, j] = A[i, j] + T.float32(1)
    assert _loop_names(interchange_for_unit_stride(add)) == [["i", "j"]]


def test_column_walk_is_interchanged():
    @T.prim_func
    def colsum_copy(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        for j, i in T.grid(8, 8):
            B[i, j] = A[i, j] * T.float32(2)
    assert _loop_names(interchange_for_unit_stride(colsum_copy)) == [["i", "j"]]


def test_reading_another_element_of_the_output_blocks_the_interchange():
    @T.prim_func
    def scan(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        for j, i in T.grid(7, 8):
            B[i, j + 1] = B[i, j] + A[i, j]       # a recurrence along j: order matters
    assert _loop_names(interchange_for_unit_stride(scan)) == [["j", "i"]]


def test_two_reductions_keep_their_order():
    @T.prim_func
    def sum2(A: T.Buffer((8, 8, 8), "float32"), B: T.Buffer((8,), "float32")):
        for r, s, i in T.grid(8, 8, 8):
            B[i] = B[i] + A[r, s, i]
    # i is already innermost and unit stride; r before s must stay
    assert _loop_names(interchange_for_unit_stride(sum2)) == [["r", "s", "i"]]

    @T.prim_func
    def sum2_bad(A: T.Buffer((8, 8, 8), "float32"), B: T.Buffer((8,), "float32")):
        for i, s, r in T.grid(8, 8, 8):
            B[i] = B[i] + A[i, r, s]             # s would win, but moving it after r reorders the sum
    assert _loop_names(interchange_for_unit_stride(sum2_bad)) == [["i", "s", "r"]]


def test_demo_is_identical_and_interchanged():
    """The demo's timing is its output (the README figure), never a test's assertion."""
    result = demo(n=192, repeat=1)
    assert result.identical
    assert "for i, k, j in T.grid(192, 192, 192)" in result.after
    assert result.before_s > 0 and result.after_s > 0
