"""Property tests: every pass, and -O2, computes what the graph computed before.

Random graphs are built from the patterns the passes look for (constants,
no-ops, reshape and transpose chains, neutral elements, conv + batch norm,
matmul + bias, shape programs, duplicates, dead nodes), mixed at random, over a
symbolic batch dim B; the interpreter runs them before and after on random inputs.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.interpret import interpret
from minic.ir.types import DType, TensorType
from minic.ir.verify import verify
from minic.passes import PASSES, optimize
from minic.passes.manager import ROUNDING

SHAPE = ("B", 2, 3, 4)                          # every pool value has this type: NCHW with a symbolic batch


class RandomGraph:
    """Grows a graph one random pattern at a time."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.inputs = [Value(n, TensorType(SHAPE, DType.f32)) for n in ("x", "y")]
        self.constants: list[Value] = []
        self.nodes: list[Node] = []
        self.pool: list[Value] = list(self.inputs)

    def const(self, array) -> Value:
        c = constant(f"c{len(self.constants)}", np.asarray(array))
        self.constants.append(c)
        return c

    def emit(self, op: str, inputs: list[Value], **attrs) -> Value:
        a = ops.get(op).make_attrs(**attrs)
        (t,) = ops.get(op).infer(a, [v.type for v in inputs])
        out = Value(f"v{len(self.nodes)}", t)
        self.nodes.append(Node(op, inputs, [out], a))
        return out

    def pick(self) -> Value:
        return self.pool[self.rng.integers(len(self.pool))]

    def weights(self, *shape: int) -> Value:
        return self.const(self.rng.standard_normal(shape).astype(np.float32) * 0.5)

    # --- the patterns; each returns a new value of type f32[SHAPE] ----------------

    def unary(self, v):
        return self.emit(str(self.rng.choice(["relu", "neg", "tanh", "sigmoid"])), [v])

    def binary(self, v):
        return self.emit(str(self.rng.choice(["add", "mul", "sub"])), [v, self.pick()])

    def neutral(self, v):
        op, number = [("add", 0), ("mul", 1), ("sub", 0), ("div", 1), ("pow", 1)][self.rng.integers(5)]
        shape = [(), (1,), (4,), (3, 4), (1, 2, 3, 4)][self.rng.integers(5)]
        c = self.const(np.full(shape, number, np.float32))
        # On the left the constant is neutral only for add and mul (0 - v is not v);
        # 1 / v stays out, it divides by relu's zeros.
        return self.emit(op, [c, v] if op != "div" and self.rng.random() < 0.5 else [v, c])

    def constant_arith(self, v):
        folded = self.emit(str(self.rng.choice(["add", "mul", "max"])), [self.weights(4), self.weights(4)])
        column = self.emit("reshape", [folded], shape=(4, 1))
        return self.emit("add", [v, self.emit("transpose", [column], perm=(1, 0))])

    def no_op(self, v):
        kind = self.rng.integers(7)
        if kind == 0:
            return self.emit(str(self.rng.choice(["identity", "dropout"])), [v])
        if kind == 1:
            return self.emit("cast", [v], dtype=DType.f32)
        if kind == 2:
            return self.emit("reshape", [v], shape=SHAPE)
        if kind == 3:
            return self.emit("transpose", [v], perm=(0, 1, 2, 3))
        if kind == 4:
            return self.emit("expand", [v], shape=(1, 3, 1))
        if kind == 5:
            return self.emit("slice", [v], axes=(2,), starts=(0,), ends=(2**63 - 1,), steps=(1,))
        return self.emit("concat", [v], axis=1)

    def reshapes(self, v):
        for shape in [("B", 24), ("B", 6, 4), ("2*B", 12), ("B", 2, 12)][: self.rng.integers(1, 5)]:
            v = self.emit("reshape", [v], shape=shape)
        if self.rng.random() < 0.5:
            v = self.emit("unsqueeze", [v], axes=(1,))
            v = self.emit("squeeze", [v], axes=(1,))
        if self.rng.random() < 0.5:
            v = self.emit("flatten", [v], axis=1)
        return self.emit("reshape", [v], shape=SHAPE)

    def transposes(self, v):
        p = tuple(int(i) for i in self.rng.permutation(4))
        q = tuple(int(i) for i in self.rng.permutation(4))
        v = self.emit("transpose", [self.emit("transpose", [v], perm=p)], perm=q)
        back = tuple(int(i) for i in np.argsort([p[i] for i in q]))
        v = self.emit("transpose", [v], perm=back)
        return self.emit("neg", [self.emit("neg", [v])]) if self.rng.random() < 0.5 else v

    def conv_bn(self, v):
        w = self.weights(2, 2, 3, 3)
        bias = [self.weights(2)] if self.rng.random() < 0.5 else []
        v = self.emit("conv2d", [v, w, *bias], padding=(1, 1, 1, 1))
        var = self.const(self.rng.uniform(0.5, 2.0, 2).astype(np.float32))
        return self.emit("batch_norm", [v, self.weights(2), self.weights(2), self.weights(2), var])

    def linear(self, v):
        x = self.emit("reshape", [v], shape=("B", 24))
        if self.rng.random() < 0.5:
            y = self.emit("add", [self.emit("matmul", [x, self.weights(24, 24)]), self.weights(24)])
        else:
            y = self.emit("gemm", [x, self.weights(24, 24)], trans_b=True, alpha=0.5)
        if self.rng.random() < 0.5:
            var = self.const(self.rng.uniform(0.5, 2.0, 24).astype(np.float32))
            y = self.emit("batch_norm", [y, self.weights(24), self.weights(24), self.weights(24), var])
        return self.emit("reshape", [y], shape=SHAPE)

    def shape_program(self, v):
        """x.view(x.size(0), -1).view(x.size(0), 2, 3, 4), as ONNX writes it."""
        size0 = self.emit("gather", [self.emit("shape", [v]), self.const(np.int64(0))], axis=0)
        batch = self.emit("unsqueeze", [size0], axes=(0,))
        flat = self.emit("reshape_dynamic", [v, self.emit("concat", [batch, self.const(np.array([-1]))], axis=0)],
                         shape=("B", 24))
        target = self.emit("concat", [batch, self.const(np.array([2, 3, 4]))], axis=0)
        return self.emit("reshape_dynamic", [flat, target], shape=SHAPE)

    def duplicate(self, v):
        node = self.nodes[self.rng.integers(len(self.nodes))] if self.nodes else None
        if node is None or node.outputs[0].type != TensorType(SHAPE, DType.f32):
            return self.unary(v)
        return self.emit(node.op, list(node.inputs), **dict(vars(node.attrs)))

    def dead(self, v):
        self.emit("exp", [v])                      # read by nothing
        return self.unary(v)

    PATTERNS = ["unary", "binary", "neutral", "constant_arith", "no_op", "reshapes", "transposes",
                "conv_bn", "linear", "shape_program", "duplicate", "dead"]

    def build(self, steps: int) -> Graph:
        for _ in range(steps):
            pattern = self.PATTERNS[self.rng.integers(len(self.PATTERNS))]
            self.pool.append(getattr(self, pattern)(self.pick()))
        # Every pool value nothing reads is a result, so that every pattern counts.
        read = {v for n in self.nodes for v in n.inputs}
        outputs = [v for v in self.pool[len(self.inputs):] if v not in read] or [self.pool[-1]]
        return verify(Graph("random", self.inputs, outputs, self.nodes, self.constants))


def assert_same_outputs(before: Graph, after: Graph, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for batch in (1, 3):
        arrays = [rng.standard_normal((batch, 2, 3, 4)).astype(np.float32) for _ in before.inputs]
        for x, y in zip(interpret(before, arrays), interpret(after, arrays)):
            assert x.shape == y.shape
            np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(x).max())))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 12))
def test_every_pass_preserves_random_graphs(seed: int, steps: int):
    graph = RandomGraph(seed).build(steps)
    for name, run in PASSES.items():
        out = verify(run(graph))
        if name not in ROUNDING:                   # to-f16 rounds on purpose: tests/f16 checks it
            assert_same_outputs(graph, out, seed)
    stats = []
    optimized = optimize(graph, level=2, verify_each=True, stats=stats)
    assert stats[-1].name == "fuse-groups" and stats[-1].nodes_before <= len(graph.nodes)   # it copies windows
    assert_same_outputs(graph, optimized, seed)


def test_random_graphs_exercise_every_pass():
    """The generator is only worth it if it gives every pass something to rewrite."""
    # winograd-conv2d needs outputs of 14x14 or more (the pool's images are 3x4): tests/passes/test_winograd.py;
    # fake-quantization-to-integer needs 8-bit tensors dequantized into a matmul: tests/int8
    changed = {name: 0 for name in PASSES
               if name not in ("fuse-groups", "winograd-conv2d", "fake-quantization-to-integer")}
    for seed in range(30):
        graph = RandomGraph(seed).build(10)
        for name in changed:
            out = PASSES[name](graph)
            changed[name] += len(out.nodes) != len(graph.nodes) or len(out.constants) != len(graph.constants)
    assert all(changed.values()), changed
