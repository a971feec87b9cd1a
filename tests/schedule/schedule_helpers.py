"""Small kernels to schedule, and checks that a schedule kept their meaning:
the Loop IR interpreter and the compiled code must both agree with the kernel
as lowered."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from minic.options import CompileOptions
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.loops import Function, Program, Role
from minic.ir.loops_interp import run_function
from minic.ir.loops_verify import verify_function
from minic.ir.types import DType, TensorType, dim_eval
from minic.lowering import lower_graph
from minic.passes.fuse_groups import fuse_groups
from minic.tune.measure import compile_kernel
from minic.schedule.nest import unique_loops

OPTIONS = CompileOptions(use_cache=False, num_threads=2)


def graph_of(op: str, shapes: list[tuple], out_dtype=DType.f32, **attrs) -> Graph:
    ins = [Value(f"x{k}", TensorType(tuple(s), DType.f32)) for k, s in enumerate(shapes)]
    opdef = ops.get(op)
    a = opdef.make_attrs(**attrs)
    (out_type,) = opdef.infer(a, [v.type for v in ins])
    out = Value("y", out_type)
    return Graph(op, ins, [out], [Node(op, ins, [out], a)], [])


def kernel_of(graph: Graph) -> Function:
    """The single kernel of a graph (fused), with unique loop names."""
    program = lower_graph(fuse_groups(graph))
    assert len(program.kernels) == 1
    return unique_loops(program.kernels[0])


def matmul_kernel(m=7, k=5, n=11) -> Function:
    return kernel_of(graph_of("matmul", [(m, k), (k, n)]))


def random_arrays(f: Function, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {b.name: rng.standard_normal(tuple(dim_eval(d, sizes) for d in b.shape)).astype(b.dtype.numpy)
            for b in f.params}


def outputs(f: Function) -> list[str]:
    return [b.name for b in f.params if b.role in (Role.OUTPUT, Role.TEMP)]


def interpreted(f: Function, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    memory = {k: v.copy() for k, v in arrays.items()}
    run_function(f, memory, sizes)
    return {n: memory[n] for n in outputs(f)}


def compiled(f: Function, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    memory = {k: v.copy() for k, v in arrays.items()}
    run, _ = compile_kernel(f, OPTIONS)
    run(memory, sizes)
    return {n: memory[n] for n in outputs(f)}


def assert_same_meaning(before: Function, after: Function, sizes: dict[str, int] | None = None,
                        interpret: bool = True) -> None:
    """``after`` computes what ``before`` does: interpreted, and compiled to native code."""
    sizes = sizes or {}
    verify_function(after)
    arrays = random_arrays(before, sizes)
    want = interpreted(before, arrays, sizes)
    if interpret:
        got = interpreted(after, arrays, sizes)
        for n in want:
            np.testing.assert_allclose(got[n], want[n], rtol=1e-5, atol=1e-5)
    got = compiled(after, arrays, sizes)
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-4, atol=1e-4)


def program_with(program: Program, kernels: list[Function]) -> Program:
    return replace(program, kernels=kernels)
