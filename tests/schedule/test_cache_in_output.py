"""``cache_in_output``: what a row's reduction and its last pass both compute is computed
once and kept in the output row (softmax's exp, layer_norm's fused input sum); where the
rule must not apply it leaves the kernel as it was.  Meaning checked by the Loop IR
interpreter (bit-identical) and compiled; the default schedule's vector code too."""
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from minic.ir.interpret import interpret
from minic.ir.loops import BinOp, Load, Store, print_function, walk
from minic.ir.text import parse_graph
from minic.runtime import CompileOptions, compile_graph, prepare
from minic.schedule.caching import cache_in_output
from minic.schedule.nest import rewrite_loops, stores, the_loop

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import (assert_same_meaning, graph_of, interpreted, kernel_of,  # noqa: E402
                              random_arrays)

OPTIONS = CompileOptions(use_cache=False, num_threads=1)


def _kernel(text: str):
    return kernel_of(parse_graph(text))


def _loads(text: str, buffer: str) -> int:
    return len(re.findall(rf"\b{buffer}\[i", text))


def _bit_identical(before, after, sizes=None):
    sizes = sizes or {}
    arrays = random_arrays(before, sizes)
    want, got = interpreted(before, arrays, sizes), interpreted(after, arrays, sizes)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert_same_meaning(before, after, sizes)


def test_softmax_computes_its_exp_once():
    f = kernel_of(graph_of("softmax", [(3, 4, 40)], axis=-1))
    g = cache_in_output(f)
    text = print_function(g)
    assert print_function(f).count("exp(") == 2 and text.count("exp(") == 1, text
    assert "y[i0, i1, i2] = y[i0, i1, i2] / acc1" in text, text
    _bit_identical(f, g)


def test_layer_norm_sums_its_fused_inputs_once():
    f = _kernel("""graph @g(%a: f32[5, 48], %b: f32[5, 48], %w: f32[48], %c: f32[48]) -> (f32[5, 48]) {
  %s = add(%a, %b) : f32[5, 48]
  %y = layer_norm(%s, %w, %c) {axis = -1, eps = 1e-05} : f32[5, 48]
  return %y
}""")
    g = cache_in_output(f)
    text = print_function(g)
    assert _loads(print_function(f), "a") == 4 and _loads(text, "a") == 1, text
    _bit_identical(f, g)


def test_a_row_over_two_axes_and_a_symbolic_size():
    f = kernel_of(graph_of("softmax", [("T", 3, 17)], axis=-1))
    g = cache_in_output(f)
    assert print_function(g).count("exp(") == 1
    for t in (1, 4):
        _bit_identical(f, g, {"T": t})
    f = _kernel("""graph @g(%a: f32[2, 3, 5], %b: f32[2, 3, 5]) -> (f32[2, 3, 5]) {
  %s = add(%a, %b) : f32[2, 3, 5]
  %y = layer_norm(%s) {axis = 1, eps = 1e-05} : f32[2, 3, 5]
  return %y
}""")
    g = cache_in_output(f)
    assert _loads(print_function(g), "a") == 1
    _bit_identical(f, g)


def test_what_a_later_pass_still_reads_is_not_overwritten():
    """log_softmax's last pass has no exp: the max pass keeps x + b, the sum pass keeps nothing
    more.  A softmax whose last pass reads its input x + b besides the exp (made by hand here:
    fusion would store x + b for two consumers): the exp must not overwrite x + b."""
    f = _kernel("""graph @g(%x: f32[4, 40], %b: f32[4, 40]) -> (f32[4, 40]) {
  %s = add(%x, %b) : f32[4, 40]
  %y = log_softmax(%s) {axis = -1} : f32[4, 40]
  return %y
}""")
    g = cache_in_output(f)
    assert _loads(print_function(g), "x") == 1 and "y[i0, r1] =" not in print_function(g)
    _bit_identical(f, g)
    f = _kernel("""graph @g(%x: f32[4, 40], %b: f32[4, 40]) -> (f32[4, 40]) {
  %s = add(%x, %b) : f32[4, 40]
  %y = softmax(%s) {axis = -1} : f32[4, 40]
  return %y
}""")
    (st,) = [t for t in stores(the_loop(f, "i1").body)]
    x, b = (next(p for p in f.params if p.name == n) for n in "xb")
    row = BinOp("add", Load(x, st.index), Load(b, st.index))
    f = rewrite_loops(f, "i1", lambda t: replace(t, body=Store(st.buffer, st.index, BinOp("mul", st.value, row))))
    g = cache_in_output(f)
    text = print_function(g)
    assert _loads(text, "x") == 1 and "y[i0, r1] =" not in text and text.count("exp(") == 2, text
    _bit_identical(f, g)


def test_a_reduction_term_that_reads_the_output_keeps_its_own_values():
    """Made by hand: the sum pass's term also reads y[i0, r1], where the rule would keep the exp;
    the kept exp would change what it reads, so the rule must not apply."""
    f = kernel_of(graph_of("softmax", [(3, 40)], axis=-1))
    (st,) = stores(the_loop(f, "r1").body)
    y = next(p for p in f.params if p.name == "y")
    at = next(x for x in walk(st.value) if isinstance(x, Load) and x.buffer.name == "x0").index   # (i0, r1)
    term = BinOp("mul", st.value.b, Load(y, at))
    f = rewrite_loops(f, "r1", lambda t: replace(t, body=Store(st.buffer, st.index, BinOp("add", st.value.a, term))))
    assert cache_in_output(f) == f
    _bit_identical(f, cache_in_output(f))


def test_where_the_rule_does_not_apply_the_kernel_stays():
    plain = kernel_of(graph_of("softmax", [(4, 40)], axis=0))        # the row is not the output's last axis
    assert cache_in_output(plain) == plain
    f16 = _kernel("""graph @g(%x: f16[4, 40]) -> (f16[4, 40]) {
  %y = softmax(%x) {axis = -1} : f16[4, 40]
  return %y
}""")
    assert cache_in_output(f16) == f16                                # f16 would round the kept exp


def test_default_schedule_keeps_the_exp_in_vectors_and_the_last_pass_in_place():
    """The kept exp goes with rfactor's vector lanes; the last pass (y = y / s) runs in
    blocks of 16 and the rest one by one (overlapping blocks would divide twice)."""
    g = graph_of("softmax", [("T", 37)], axis=-1)
    text = print_function(prepare(g, OPTIONS).kernels[0])
    assert "i1t" in text and "min(" not in text, text
    final = [line for line in text.splitlines() if "/ acc1" in line]
    assert final and not any("exp(" in line for line in final), text
    for t in (1, 3):
        x = np.random.default_rng(t).standard_normal((t, 37)).astype(np.float32) * 4
        np.testing.assert_allclose(compile_graph(g, OPTIONS)(x), interpret(g, [x])[0], rtol=1e-5, atol=1e-7)


def test_a_division_by_what_the_loop_does_not_change_becomes_a_multiply():
    """softmax's y / s and layer_norm's / sqrt(var + eps): one division per row, a multiply
    per element; a constant divisor becomes its reciprocal; a divisor that varies along the
    loop stays a division.  Within an ulp or two of the interpreter."""
    soft = print_function(prepare(graph_of("softmax", [(6, 40)], axis=-1), OPTIONS).kernels[0])
    assert soft.count("* (1.0f / acc1)") == 2, soft                                   # the vectors and the rest
    # ... each behind the test that acc1 is normal (its reciprocal is then normal too), else the division
    assert soft.count("select(abs(acc1) >= 1.1754943508222875e-38f && abs(acc1) <= 8.507059173023462e+37f") == 2, soft
    norm = print_function(prepare(graph_of("layer_norm", [(6, 48)], axis=-1), OPTIONS).kernels[0])
    assert "* (1.0f / sqrt(" in norm, norm
    ratio = parse_graph("""graph @g(%x: f32[4, 48], %d: f32[4, 48]) -> (f32[4, 48]) {
  %s = div(%x, %d) : f32[4, 48]
  %y = mul(%s, %d) : f32[4, 48]
  return %y
}""")
    assert "] / d[" in print_function(prepare(ratio, OPTIONS).kernels[0])
    third = parse_graph("""graph @g(%x: f32[4, 48]) -> (f32[4, 48]) {
  %y = div(%x, %x) : f32[4, 48]
  return %y
}""")
    for graph in (graph_of("softmax", [(6, 40)], axis=-1), graph_of("layer_norm", [(6, 48)], axis=-1), ratio, third):
        xs = [np.random.default_rng(k).standard_normal(v.type.shape).astype(np.float32) + 3
              for k, v in enumerate(graph.inputs)]
        np.testing.assert_allclose(compile_graph(graph, OPTIONS)(*xs), interpret(graph, xs)[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_vector_max_and_min_partials_still_propagate_nan(op):
    """rfactor's lanes combine a float max (min) with a compare and a blend, not llvm.maximum;
    a NaN anywhere in a row, first, last or in the tail, still makes the row's result NaN."""
    g = graph_of(op, [(6, 37)], axes=(1,), keepdims=False)
    assert "_part" in print_function(prepare(g, OPTIONS).kernels[0])
    x = np.random.default_rng(0).standard_normal((6, 37)).astype(np.float32)
    x[0, 0], x[1, 36], x[2, 17], x[3, 5], x[3, 30] = np.nan, np.nan, np.nan, np.inf, -np.inf
    x[4] = np.nan
    got, want = compile_graph(g, OPTIONS)(x), interpret(g, [x])[0]
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[:3]).all() and np.isnan(got[4]) and not np.isnan(got[5])


def test_a_division_by_a_subnormal_or_special_divisor_stays_a_division():
    """x * (1 / u) only for a normal u: 1 / 1e-39 overflows to inf (1e-39 / 1e-39 is 1, not
    inf), 1 / 3e38 is subnormal (precision lost); NaN, inf, 0 and -0 divide as numpy does."""
    g = parse_graph("""graph @g(%x: f32[7, 48], %d: f32[7, 1]) -> (f32[7, 48]) {
  %y = div(%x, %d) : f32[7, 48]
  return %y
}""")
    x = np.random.default_rng(0).standard_normal((7, 48)).astype(np.float32)
    d = np.array([[1e-39], [3e38], [np.nan], [np.inf], [0.0], [-0.0], [3.0]], np.float32)
    x[0], x[1] = 1e-39, 1e38
    with np.errstate(divide="ignore", invalid="ignore"):
        want = x / d
    got = compile_graph(g, OPTIONS)(x, d)
    np.testing.assert_array_equal(got[:6], want[:6])
    np.testing.assert_allclose(got[6], want[6], rtol=1e-6)
    assert (got[0] == 1).all() and np.isinf(got[4]).all()


def test_a_quotient_under_a_step_function_stays_exact():
    """round(x / s) (DynamicQuantizeLinear): x * (1 / s) is an ulp off at times, and an ulp
    under round moves the result a whole step, so that division stays a division."""
    g = parse_graph("""graph @g(%x: f32[4, 48], %d: f32[4, 1]) -> (f32[4, 48]) {
  %q = div(%x, %d) : f32[4, 48]
  %y = round(%q) : f32[4, 48]
  return %y
}""")
    text = print_function(prepare(g, OPTIONS).kernels[0])
    assert "] / d[" in text and "(1.0f /" not in text, text


def test_rows_that_keep_their_sum_in_the_output_still_run_in_parallel():
    """The row loop of add + layer_norm reads its output row back at other columns than it
    wrote them (``cache_in_output``): each row is its own slice (``sliced_by``), so the rows
    run on the threads; it was serial, the one kernel of int8 bert-base that did not scale."""
    g = parse_graph("""graph @g(%a: f32[128, 768], %b: f32[128, 768], %w: f32[768], %c: f32[768]) -> (f32[128, 768]) {
  %s = add(%a, %b) : f32[128, 768]
  %y = layer_norm(%s, %w, %c) {axis = -1, eps = 1e-05} : f32[128, 768]
  return %y
}""")
    two = CompileOptions(use_cache=False, num_threads=2)
    text = print_function(prepare(g, two).kernels[0])
    assert "y[i0, r1o * 16 + r1v]" in text.replace("i0i1", "i0") and "parallel for (i0" in text, text
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((128, 768), (128, 768), (768,), (768,))]
    np.testing.assert_allclose(compile_graph(g, two)(*arrays), interpret(g, arrays)[0], rtol=1e-4, atol=1e-5)
