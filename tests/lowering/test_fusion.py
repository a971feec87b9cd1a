"""fuse_groups decides the kernels; lowering makes each group one kernel and
keeps the results equal to the graph interpreter's."""
import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.interpret import interpret
from minic.ir.loops_interp import run_program
from minic.ir.loops_verify import verify_program
from minic.ir.types import DType, TensorType
from minic.ir.verify import verify
from minic.lowering import lower_graph
from minic.passes.fuse_groups import fuse_groups

RNG = np.random.default_rng(0)


class Builder:
    def __init__(self, *input_shapes):
        self.inputs = [Value(f"x{k}", TensorType(s, DType.f32)) for k, s in enumerate(input_shapes)]
        self.nodes, self.consts = [], []

    def const(self, *shape):
        c = constant(f"c{len(self.consts)}", RNG.standard_normal(shape).astype(np.float32))
        self.consts.append(c)
        return c

    def op(self, name, *args, **attrs):
        node = Node(name, list(args), [], ops.get(name).make_attrs(**attrs))
        from minic.ir.verify import infer_node
        node.outputs = [Value(f"v{len(self.nodes)}", infer_node(node)[0])]
        self.nodes.append(node)
        return node.outputs[0]

    def graph(self, *outputs):
        return verify(Graph("g", self.inputs, list(outputs), self.nodes, self.consts))


def kernels_and_check(g: Graph, *shapes) -> int:
    fused = fuse_groups(g)
    verify(fused)
    program = verify_program(lower_graph(fused))
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    for got, want in zip(run_program(program, arrays), interpret(g, arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return len(program.kernels)


def test_matmul_epilogue_is_one_kernel():
    b = Builder(("B", 6))
    y = b.op("relu", b.op("add", b.op("matmul", b.inputs[0], b.const(6, 5)), b.const(5)))
    assert kernels_and_check(b.graph(y), (3, 6)) == 1


def test_rmsnorm_is_one_kernel():
    b = Builder(("B", 8))
    x = b.inputs[0]
    ms = b.op("reduce_mean", b.op("mul", x, x), axes=(-1,), keepdims=True)
    y = b.op("mul", b.op("mul", x, b.op("rsqrt", b.op("add", ms, b.const(1)))), b.const(8))
    assert kernels_and_check(b.graph(y), (2, 8)) == 1


def test_two_anchors_stay_two_kernels():
    b = Builder((4, 6))
    y = b.op("softmax", b.op("matmul", b.inputs[0], b.const(6, 6)), axis=-1)
    g = b.graph(y)
    assert len({n.group for n in fuse_groups(g).nodes}) == 2
    assert kernels_and_check(g, (4, 6)) == 2


def test_arithmetic_does_not_fuse_into_a_matmul_operand_but_a_transpose_does():
    b = Builder((4, 6), (5, 6))
    t = b.op("transpose", b.inputs[1], perm=(1, 0))           # moves data: fuses into the matmul
    e = b.op("exp", b.inputs[0])                               # arithmetic: would be recomputed 5 times
    y = b.op("matmul", e, t)
    groups = {n.op: n.group for n in fuse_groups(b.graph(y)).nodes}
    assert groups["transpose"] == groups["matmul"] != groups["exp"]
    assert kernels_and_check(b.graph(y), (4, 6), (5, 6)) == 2


def test_a_value_with_two_users_is_stored_once():
    b = Builder((3, 4))
    e = b.op("exp", b.inputs[0])
    y = b.op("add", b.op("neg", e), b.op("sin", e))
    g = b.graph(y)
    assert kernels_and_check(g, (3, 4)) == 2


def test_graph_outputs_that_are_inputs_or_repeated_get_copies():
    b = Builder((2, 3))
    y = b.op("exp", b.inputs[0])
    g = b.graph(y, y, b.inputs[0])
    assert kernels_and_check(g, (2, 3)) == 3


def test_a_slice_read_by_two_nodes_is_copied_into_each():
    """RoPE's rotate-half: each half of x is read by two products; no kernel stores a half."""
    b = Builder(("B", 4, 8), (4, 4))
    x, cos = b.inputs
    lo = b.op("slice", x, axes=(2,), starts=(0,), ends=(4,), steps=(1,))
    hi = b.op("slice", x, axes=(2,), starts=(4,), ends=(8,), steps=(1,))
    first = b.op("sub", b.op("mul", lo, cos), b.op("mul", hi, cos))
    second = b.op("add", b.op("mul", hi, cos), b.op("mul", lo, cos))
    y = b.op("concat", first, b.op("exp", second), axis=2)
    g = b.graph(y)
    fused = fuse_groups(g)
    assert sorted(n.op for n in fused.nodes).count("slice") == 4 and len(g.nodes) == len(b.nodes)
    slices = [n for n in fused.nodes if n.op == "slice"]
    assert len({n.outputs[0].name for n in slices}) == 4
    assert kernels_and_check(g, (2, 4, 8), (4, 4)) == 1
    assert kernels_and_check(b.graph(y, lo), (2, 4, 8), (4, 4)) == 2    # a graph output is stored once


def test_a_concat_of_arithmetic_is_its_own_kernel_before_a_matmul():
    """Fused into the matmul, the concat would choose between its parts at every read and
    leave its arithmetic parts to kernels of their own; stored, it is one nest per part."""
    from minic.ir.loops import Select, stmt_exprs, walk, walk_stmts
    b = Builder((4, 3), (4, 5))
    x0, x1 = b.inputs
    w = b.const(8, 6)
    y = b.op("matmul", b.op("concat", b.op("exp", x0), b.op("tanh", x1), axis=1), w)
    groups = {n.op: n.group for n in fuse_groups(b.graph(y)).nodes}
    assert groups["exp"] == groups["tanh"] == groups["concat"] != groups["matmul"]
    assert kernels_and_check(b.graph(y), (4, 3), (4, 5)) == 2
    first = lower_graph(fuse_groups(b.graph(y))).kernels[0]
    assert not any(isinstance(x, Select) for s in walk_stmts(first.body) for e in stmt_exprs(s) for x in walk(e))
    plain = Builder((4, 3), (4, 5))                     # a concat of inputs only moves data: it fuses
    y = plain.op("matmul", plain.op("concat", *plain.inputs, axis=1), plain.const(8, 6))
    assert kernels_and_check(plain.graph(y), (4, 3), (4, 5)) == 1


def test_a_wide_concat_is_stored_one_nest_per_input_not_fused_into_its_reader():
    """Inlined into the tanh, a concat of more than WIDE_CONCAT inputs would be a tree of selects
    over all of them in one loop body (LLVM's time grows faster than that body); it ends its
    kernel instead, one copy nest per input at its offset, also over a symbolic size."""
    from minic.ir.loops import For, Select, stmt_exprs, walk, walk_stmts
    from minic.passes.fuse_groups import WIDE_CONCAT
    for width, kernels in ((WIDE_CONCAT, 1), (WIDE_CONCAT + 1, 2)):
        b = Builder(("B", 3), (2, 3))
        x, w = b.inputs
        parts = [b.op("exp", x), b.op("neg", w)]
        y = b.op("tanh", b.op("concat", *[parts[k % 2] for k in range(width)], axis=0))
        assert kernels_and_check(b.graph(y), (3, 3), (2, 3)) == kernels
    first = lower_graph(fuse_groups(b.graph(y))).kernels[0]
    assert not any(isinstance(x, Select) for s in walk_stmts(first.body) for e in stmt_exprs(s) for x in walk(e))
    assert len(first.body.stmts) == WIDE_CONCAT + 1 and all(isinstance(s, For) for s in first.body.stmts)


def test_int8_activations_are_stored_as_bytes_for_the_contraction_that_reads_them():
    # QuantizeLinear's clamp then cast to u8, read by an int8 matmul: the cast ends the clamp's
    # kernel, which stores bytes, instead of being recomputed from f32 at each of the matmul's reads
    from minic.ir.text import parse_graph
    g = parse_graph("""graph @g(%x: f32[8, 16]) -> (i32[8, 4]) {
  const @w : i8[16, 4] = dense<1>
  const @lo : f32[] = dense<0.0>
  const @hi : f32[] = dense<255.0>
  %r = round(%x) : f32[8, 16]
  %c = max(%r, @lo) : f32[8, 16]
  %d = min(%c, @hi) : f32[8, 16]
  %q = cast(%d) {dtype = u8} : u8[8, 16]
  %y = matmul_integer(%q, @w) : i32[8, 4]
  return %y
}""")
    fused = fuse_groups(g)
    group = {n.outputs[0].name: n.group for n in fused.nodes}
    assert group["q"] == group["d"] == group["r"] != group["y"]
    program = verify_program(lower_graph(fused))
    x = (60 * RNG.standard_normal((8, 16))).astype(np.float32)
    np.testing.assert_array_equal(run_program(program, [x])[0], interpret(g, [x])[0])
