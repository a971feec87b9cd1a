"""Graphs through TOSA (and pad through linalg): op by op against minic's interpreter,
what TOSA cannot say, the i1 guard, and the TOSA bugs met on the way."""
import numpy as np
import pytest

from bridges.mlir.backend import MlirModel
from minic.errors import UnsupportedError
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph


def graph(signature: str, body: str):
    return parse_graph(f"graph @g({signature}) {{\n{body}\n}}")


def inputs_for(g, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for v in g.inputs:
        shape, dt = [int(d) for d in v.type.shape], v.type.dtype.numpy
        if dt == np.bool_:
            out.append(rng.random(shape) < 0.5)
        elif dt.kind == "i":
            out.append(rng.integers(-3, 3, shape).astype(dt))     # valid gather indices on 3
        else:
            out.append(rng.standard_normal(shape).astype(dt))
    return out


def check(g, via, seed=0, atol=1e-5):
    xs = inputs_for(g, seed)
    got = MlirModel(g, via=via)(*xs)
    got = got if isinstance(got, tuple) else (got,)
    for y, want in zip(got, interpret(g, xs)):
        assert y.dtype == want.dtype and y.shape == want.shape
        np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), atol=atol, rtol=1e-5)


PADS = {
    "constant": ("%x: f32[2, 3, 4]) -> (f32[3, 3, 7]",
                 "%y = pad(%x) {pads = [1, 0, 2, 0, 0, 1], value = 1.5} : f32[3, 3, 7]"),
    "reflect": ("%x: f32[2, 3, 4]) -> (f32[2, 9, 10]",       # wider than the axis: numpy reflects again
                "%y = pad(%x) {pads = [0, 3, 2, 0, 3, 4], mode = \"reflect\"} : f32[2, 9, 10]"),
    "edge": ("%x: f32[2, 3, 4]) -> (f32[2, 6, 5]",
             "%y = pad(%x) {pads = [0, 1, 0, 0, 2, 1], mode = \"edge\"} : f32[2, 6, 5]"),
    "rank4": ("%x: f32[2, 3, 4, 2]) -> (f32[2, 6, 5, 2]",   # TOSA: concat, not tosa.pad (bug below)
              "%y = pad(%x) {pads = [0, 1, 0, 0, 0, 2, 1, 0], value = -2.0} : f32[2, 6, 5, 2]"),
    "bool": ("%x: bool[3, 2]) -> (bool[4, 4]",
             "%y = pad(%x) {pads = [1, 1, 0, 1], value = 1.0} : bool[4, 4]"),
}


@pytest.mark.parametrize("via", ["linalg", "tosa"])
@pytest.mark.parametrize("case", sorted(PADS))
def test_pad_modes(case, via):
    sig, node = PADS[case]
    check(graph(sig, f"  {node}\n  return %y"), via)


OPS = {   # each graph exercises a group of TOSA compositions
    "elementwise": ("%a: f32[3, 4], %b: f32[4]) -> (f32[3, 4], f32[3, 4], f32[3, 4], f32[4]", """
  %d = div(%a, %b) : f32[3, 4]
  %q = abs(%d) : f32[3, 4]
  %s = sqrt(%q) : f32[3, 4]
  %t = tan(%a) : f32[3, 4]
  %e = exp(%b) : f32[4]
  %p = pow(%e, %b) : f32[4]
  %m = max(%d, %a) : f32[3, 4]
  %n = neg(%m) : f32[3, 4]
  %g = gelu(%n) {approximate = "tanh"} : f32[3, 4]
  %l = log_softmax(%g) {axis = 0} : f32[3, 4]
  return %s, %t, %l, %p"""),
    "bools": ("%a: f32[2, 3], %b: f32[3], %c: bool[2, 1]) -> (bool[2, 3], f32[2, 3], i32[2, 3]", """
  %lt = lt(%a, %b) : bool[2, 3]
  %eq = eq(%a, %a) : bool[2, 3]
  %x = xor(%lt, %c) : bool[2, 3]
  %o = or(%x, %eq) : bool[2, 3]
  %n = not(%o) : bool[2, 3]
  %w = where(%x, %a, %b) : f32[2, 3]
  %k = cast(%a) {dtype = i32} : i32[2, 3]
  return %n, %w, %k"""),
    "ints": ("%a: i32[2, 3], %b: i32[3]) -> (i32[2, 3], i32[2, 3], bool[2, 3]", """
  %s = add(%a, %b) : i32[2, 3]
  %r = relu(%s) : i32[2, 3]
  %n = neg(%r) : i32[2, 3]
  %m = mul(%n, %a) : i32[2, 3]
  %c = cast(%m) {dtype = bool} : bool[2, 3]
  return %r, %m, %c"""),
    "layout": ("%x: f32[2, 3, 8], %i: i64[4]) -> (f32[2, 2, 4], f32[2, 4, 8], f32[3, 2, 2, 3]", """
  %s = slice(%x) {axes = [1, 2], starts = [1, 1], ends = [3, 8], steps = [1, 2]} : f32[2, 2, 4]
  %g = gather(%x, %i) {axis = 1} : f32[2, 4, 8]
  %a, %b = split(%x) {axis = 2, sizes = [3, 5]} : f32[2, 3, 3], f32[2, 3, 5]
  %t = transpose(%a) {perm = [1, 0, 2]} : f32[3, 2, 3]
  %u = unsqueeze(%t) {axes = [2]} : f32[3, 2, 1, 3]
  %e = expand(%u) {shape = [3, 2, 2, 3]} : f32[3, 2, 2, 3]
  return %s, %g, %e"""),
    "matmul": ("%a: f32[2, 1, 3, 4], %b: f32[5, 4, 2], %v: f32[4]) -> (f32[2, 5, 3, 2], f32[2, 1, 3]", """
  %m = matmul(%a, %b) : f32[2, 5, 3, 2]
  %w = matmul(%a, %v) : f32[2, 1, 3]
  return %m, %w"""),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_groups_match_the_interpreter(name):
    sig, body = OPS[name]
    g = graph(sig, body)
    check(g, "tosa")
    check(g, "linalg")


@pytest.mark.parametrize("sig, body, message", [
    ("%x: f32[3]) -> (f32[3]", "%y = round(%x) : f32[3]", "op 'round' has no TOSA form"),
    ("%x: f32[1, 1, 8, 8]) -> (f32[1, 1, 6, 6]",
     "%y = max_pool2d(%x) {kernel = [2, 2], stride = [1, 1], dilation = [2, 2]} : f32[1, 1, 6, 6]",
     "max_pool2d with dilation"),
    ("%x: f32[1, 1, 1, 1, 1, 1, 2]) -> (f32[1, 1, 1, 1, 1, 1, 2]", "%y = exp(%x) : f32[1, 1, 1, 1, 1, 1, 2]",
     "MAX_RANK is 6"),
])
def test_what_tosa_cannot_say_is_unsupported(sig, body, message):
    g = graph(sig, f"  {body}\n  return %y")
    with pytest.raises(UnsupportedError, match=message):
        MlirModel(g, via="tosa")(*inputs_for(g))


def test_an_i1_store_is_refused_before_it_can_abort():
    from mlir import ir

    from bridges.mlir import pipeline
    text = """func.func @f(%m: memref<4xi1>, %v: i1) {
      %c0 = arith.constant 0 : index
      memref.store %v, %m[%c0] : memref<4xi1>
      return
    }"""
    with ir.Context():
        module = ir.Module.parse(text)
        with pytest.raises(UnsupportedError, match="i1 tensor was bufferized"):
            pipeline.lower(module, "llvm")


TOSA_PAD_RANK4 = """func.func @f(%x: tensor<1x2x3x4xf32>) -> tensor<1x4x5x4xf32> {
  %p = tosa.const_shape {values = dense<[0, 0, 1, 1, 1, 1, 0, 0]> : tensor<8xindex>} : () -> !tosa.shape<8>
  %c = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %y = tosa.pad %x, %p, %c : (tensor<1x2x3x4xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x4x5x4xf32>
  return %y : tensor<1x4x5x4xf32>
}"""

TOSA_NEGATE_I64 = """func.func @f(%x: tensor<2x5xi64>) -> tensor<2x5xi64> {
  %zp = "tosa.const"() {values = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n = tosa.negate %x, %zp, %zp : (tensor<2x5xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x5xi64>
  return %n : tensor<2x5xi64>
}"""


@pytest.mark.xfail(strict=True, reason="docs/production-bugs.md#tosa-validate-pad-shape-rank")
def test_tosa_pad_of_a_rank4_tensor_passes_validation():
    from mlir import ir

    from bridges.mlir.tosa import tosa_to_linalg
    with ir.Context():
        tosa_to_linalg(ir.Module.parse(TOSA_PAD_RANK4))    # raises: '!tosa.shape<8>' exceeds MAX_RANK


@pytest.mark.xfail(strict=True, reason="docs/production-bugs.md#tosa-to-linalg-negate-i64")
def test_tosa_negate_of_i64_lowers_to_valid_ir():
    from mlir import ir

    from bridges.mlir.tosa import tosa_to_linalg
    with ir.Context():
        tosa_to_linalg(ir.Module.parse(TOSA_NEGATE_I64))   # raises: 'arith.extsi' i64 -> i16
