"""The stage printers of `show --emit`: loops, LLVM IR, assembly (host and aarch64)."""
import numpy as np

from minic import pipeline
from minic.codegen import CompileOptions
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, TensorType
from minic.lowering import lower_graph
from minic.options import Target
from minic.schedule import default_schedule


def program():
    x = Value("x", TensorType(("B", 64), DType.f32))
    w = constant("w", np.ones((64, 512), np.float32))
    h, y = Value("h", TensorType(("B", 512), DType.f32)), Value("y", TensorType(("B", 512), DType.f32))
    nodes = [Node("matmul", [x, w], [h], ops.get("matmul").make_attrs()),
             Node("tanh", [h], [y], ops.get("tanh").make_attrs())]
    return default_schedule(lower_graph(Graph("m", [x], [y], nodes, [w])), Target(threads=2))


def test_loops_print_with_a_parallel_outer_loop():
    text = str(program())
    assert "parallel for (i1o = 0; i1o < 16; i1o++)" in text and "tanh(" in text


def test_llvm_ir_has_the_entry_point_kernels_and_threads():
    text = str(pipeline.run(program(), "llvm", CompileOptions(num_threads=2), start="scheduled"))
    assert "define void @\"minic_entry\"(ptr" in text
    assert "pthread_create" in text and "llvm.tanh" in text


def test_host_assembly():
    assert "minic_entry" in pipeline.run(program(), "asm", CompileOptions(num_threads=2), start="scheduled")


def test_aarch64_assembly_is_a_codegen_option():
    a55 = CompileOptions(triple="aarch64-linux-gnu", cpu="cortex-a55", num_threads=2)
    text = pipeline.run(program(), "asm", a55, start="scheduled")
    assert "minic_entry" in text and ("fmla" in text or "fmul" in text or "fmadd" in text)


def test_kernels_share_a_function_only_when_their_code_is_equal():
    """Repeated layers share one function; a buffer named like the function it calls
    (torch names outputs after their op: ``ceil = ceil(x)``) does not make two kernels equal."""
    from minic.ir.interpret import interpret
    from minic.runtime import compile_graph
    shape = TensorType((4, 8), DType.f32)
    ins = [Value(n, shape) for n in ("a", "b", "c", "d")]
    outs = [Value(n, shape) for n in ("atan", "ceil", "sin", "sin_1")]
    nodes = [Node(op, [x], [y], ops.get(op).make_attrs()) for op, x, y in zip(("atan", "ceil", "sin", "sin"), ins, outs)]
    graph = Graph("m", ins, outs, nodes)
    text = str(pipeline.run(lower_graph(graph), "llvm", CompileOptions(num_threads=1), start="loops"))
    assert text.count("define internal void") == 3                # the two sin kernels share one
    xs = [np.random.default_rng(k).standard_normal((4, 8)).astype(np.float32) * 3 for k in range(4)]
    for got, want in zip(compile_graph(graph, CompileOptions(num_threads=1))(*xs), interpret(graph, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_kernel_of_many_nests_is_emitted_as_parts():
    """A concat of 150 inputs is one kernel of 150 copy nests; LLVM's optimizer grows faster than a
    function, so codegen emits it as parts of PART nests that the kernel calls in turn."""
    from minic.codegen.module import PART
    from minic.runtime import compile_graph
    x = Value("x", TensorType((1, 3), DType.f32))
    parts = [Value("r", TensorType((1, 3), DType.f32)), Value("n", TensorType((1, 3), DType.f32))]
    nodes = [Node("relu", [x], [parts[0]], ops.get("relu").make_attrs()),
             Node("neg", [x], [parts[1]], ops.get("neg").make_attrs())]
    inputs = [parts[k % 2] for k in range(150)]
    y = Value("y", TensorType((150, 3), DType.f32))
    nodes.append(Node("concat", inputs, [y], ops.get("concat").make_attrs(axis=0)))
    graph = Graph("wide", [x], [y], nodes)
    text = str(pipeline.run(lower_graph(graph), "llvm", CompileOptions(num_threads=1), start="loops"))
    assert text.count(".part") >= 2 * (150 // PART + 1)         # each part defined and called
    data = np.array([[-1.0, 2.0, -3.0]], np.float32)
    got = compile_graph(graph, CompileOptions(num_threads=1))(data)
    np.testing.assert_array_equal(got, np.concatenate([np.maximum(data, 0), -data] * 75))
