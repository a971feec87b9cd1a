"""The stage printers of `show --emit`: loops, LLVM IR, assembly (host and aarch64)."""
import numpy as np

from minic import pipeline
from minic.codegen import CompileOptions
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, TensorType
from minic.lowering import lower_graph
from minic.schedule import default_schedule


def program():
    x = Value("x", TensorType(("B", 64), DType.f32))
    w = constant("w", np.ones((64, 512), np.float32))
    h, y = Value("h", TensorType(("B", 512), DType.f32)), Value("y", TensorType(("B", 512), DType.f32))
    nodes = [Node("matmul", [x, w], [h], ops.get("matmul").make_attrs()),
             Node("tanh", [h], [y], ops.get("tanh").make_attrs())]
    return default_schedule(lower_graph(Graph("m", [x], [y], nodes, [w])), CompileOptions(num_threads=2))


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
