"""What f16 means before any code is compiled: the op registry's f16 references
(f16 storage, f32 arithmetic), the to-f16 pass, and the Loop IR rewrite that
widens f16 loads to f32 (and keeps accumulators in f16 only for "f16-acc")."""
from __future__ import annotations

import numpy as np
import pytest

from minic.verify.precision import STRESS, source
from minic.verify.tolerance import F16
from minic.ir import ops
from minic.ir.interpret import interpret
from minic.ir.loops import (Allocate, BinOp, Call, Cast, Load, Store, children, expr_str, print_program, stmt_exprs,
                            walk, walk_stmts)
from minic.ir.loops_interp import run_program
from minic.ir.loops_verify import verify_program
from minic.ir.text import parse_graph
from minic.ir.types import DType
from minic.ir.verify import verify
from minic.lowering import lower_graph
from minic.lowering.precision import widen
from minic.passes import PASSES, LEVELS
from minic.passes.fuse_groups import fuse_groups
from minic.passes.to_f16 import to_f16

GRAPH = """graph @g(%x: f32[B, 4], %n: i64[B, 4]) -> (f32[B, 3], f32[B, 4], bool[B, 4], f32[2]) {
  const @w : f32[4, 3] = dense<[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]>
  const @c : f32[2] = dense<[1.0, 100000.0]>
  %m = matmul(%x, @w) : f32[B, 3]
  %s = softmax(%m) {axis = -1} : f32[B, 3]
  %f = cast(%n) {dtype = f32} : f32[B, 4]
  %t = add(%x, %f) : f32[B, 4]
  %p = gt(%t, %x) : bool[B, 4]
  return %s, %x, %p, @c
}"""


# --- the registry ------------------------------------------------------------------------

def test_f16_sum_accumulates_in_f32_on_every_axis():
    # numpy sums a non-last axis of f16 in f16: 8192 x 0.1 would stop at 256.
    x = np.full((8192, 3), 0.1, np.float16)
    op = ops.get("reduce_sum")
    y = op.reference(op.make_attrs(axes=(0,)), x)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), 819.2, rtol=1e-3)


def test_f16_layer_norm_does_not_overflow_its_variance():
    # (x - mean)**2 in f16 is inf past |x - mean| = 256; the reference works in f32.
    x = np.array([[-1000.0, 0.0, 1000.0, 2000.0]], np.float16)
    op = ops.get("layer_norm")
    y = op.reference(op.make_attrs(axis=-1), x)
    assert y.dtype == np.float16 and np.isfinite(y).all()
    want = ops.get("layer_norm").reference(op.make_attrs(axis=-1), x.astype(np.float32))
    np.testing.assert_allclose(y.astype(np.float32), want, atol=2e-3)


def test_cast_keeps_its_own_result_dtype():
    op = ops.get("cast")
    x = np.array([1.5, 2049.0], np.float16)
    assert op.reference(op.make_attrs(dtype=DType.f32), x).dtype == np.float32
    assert op.reference(op.make_attrs(dtype=DType.i64), x).tolist() == [1, 2048]


# --- the pass ----------------------------------------------------------------------------

def test_to_f16_is_registered_but_in_no_level():
    assert PASSES["to-f16"] is to_f16
    assert all("to-f16" not in names for names in LEVELS.values())


def test_to_f16_keeps_the_signature_and_stores_floats_as_f16():
    g = parse_graph(GRAPH)
    h = verify(to_f16(g))
    assert [str(v.type) for v in h.inputs] == [str(v.type) for v in g.inputs]
    assert [str(v.type) for v in h.outputs] == [str(v.type) for v in g.outputs]
    assert [v.name for v in h.outputs] == [v.name for v in g.outputs]
    assert h.outputs[1] is h.inputs[0]                     # an input returned as is stays untouched
    assert all(c.type.dtype == DType.f16 and c.data.dtype == np.float16 for c in h.constants)
    inner = [v for n in h.nodes[1:-2] for v in n.outputs]  # all but the entry and exit casts
    assert {v.type.dtype for v in inner} == {DType.f16, DType.bool}
    assert np.isinf(h.constants[1].data[1])                # 1e5 is past f16's 65504
    assert g.constants[0].data.dtype == np.float32         # the caller's graph is not changed


def test_to_f16_computes_what_f32_does_to_f16_accuracy():
    g = parse_graph(GRAPH)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    n = rng.integers(0, 3, (3, 4))
    want, got = interpret(g, [x, n]), interpret(to_f16(g), [x, n])
    np.testing.assert_allclose(got[0], want[0], rtol=F16, atol=F16)
    np.testing.assert_array_equal(got[1], x)
    np.testing.assert_array_equal(got[2], want[2])
    assert got[3][0] == 1.0 and np.isinf(got[3][1])


# --- the Loop IR rewrite -------------------------------------------------------------------

def _program(name: str, accumulate: DType):
    return widen(lower_graph(fuse_groups(to_f16(source(name).graph))), accumulate)


def _locals(p) -> set[DType]:
    return {s.buffer.dtype for k in p.kernels for s in walk_stmts(k.body) if isinstance(s, Allocate)}


def test_widen_loads_f16_computes_f32_and_stores_f16():
    p = verify_program(_program("long-sum", DType.f32))
    assert _locals(p) == {DType.f32}
    for k in p.kernels:
        for s in walk_stmts(k.body):
            for e in stmt_exprs(s):
                assert not (isinstance(e, Load) and e.dtype == DType.f16)
                for x in walk(e):            # every f16 load is widened where it is read
                    for c in children(x):
                        if isinstance(c, Load) and c.dtype == DType.f16:
                            assert isinstance(x, Cast) and x.to == DType.f32, expr_str(x)
                    if isinstance(x, (BinOp, Call)):
                        assert x.dtype != DType.f16, expr_str(x)
            if isinstance(s, Store) and s.buffer.dtype == DType.f16:
                assert isinstance(s.value, Cast) and s.value.to == DType.f16
    text = print_program(_program("long-sum", DType.f16))
    assert "f16 acc0;" in text and "acc0 = (f16)((f32)acc0 + " in text


def test_widen_leaves_an_f32_program_alone():
    p = lower_graph(fuse_groups(source("softmax-wide").graph))
    assert widen(p).kernels == p.kernels


@pytest.mark.parametrize("name", sorted(STRESS))
def test_widened_loops_match_the_f16_graph(name):
    """The Loop IR interpreter on the widened program (f32 accumulators) agrees with the
    graph interpreter on the f16 graph: the rewrite keeps the meaning of f16."""
    src = source(name)
    want = interpret(to_f16(src.graph), list(src.example_inputs))[0]
    got = run_program(verify_program(_program(name, DType.f32)), list(src.example_inputs))[0]
    scale = np.max(np.abs(want))
    assert np.max(np.abs(got - want)) <= F16 * scale


def test_f16_accumulators_lose_a_long_sum():
    src = source("long-sum")
    exact = src.example_inputs[0].astype(np.float64).sum(axis=1)
    wide = run_program(_program("long-sum", DType.f32), list(src.example_inputs))[0]
    narrow = run_program(_program("long-sum", DType.f16), list(src.example_inputs))[0]
    err = lambda y: np.max(np.abs(y - exact)) / np.max(np.abs(exact))
    assert err(wide) < 1e-3 < 0.2 < err(narrow)   # f16 steps of 1 or 2 swallow terms of 0.1
