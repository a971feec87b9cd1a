"""The ``fused`` stage (bridges/mlir/fusion.py): MLIR's elementwise fusion makes a chain of
elementwise ops one loop nest, and the barriers keep arithmetic out of the operands a
consumer rereads (a matmul's), where the fused body would be recomputed per read."""
from __future__ import annotations

import numpy as np

from bridges.mlir import pipeline
from bridges.mlir.backend import MlirModel
from bridges.mlir.emit import emit
from bridges.mlir.fusion import MAX_FUSED
from bridges.mlir.unroll import affine_loops
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph

CHAIN = 40


def chain_text(n: int) -> str:
    lines = ["graph @chain(%x: f32[4, 8], %b: f32[8]) -> (f32[4, 8]) {", "  %v0 = add(%x, %b) : f32[4, 8]"]
    ops = ["relu", "neg", "abs", "sigmoid", "tanh"]
    lines += [f"  %v{i} = {ops[i % len(ops)]}(%v{i - 1}) : f32[4, 8]" for i in range(1, n)]
    return "\n".join(lines + [f"  return %v{n - 1}", "}"])


def ops_of(module, name: str) -> list:
    return pipeline.ops_named(module.operation, name)


def test_a_chain_of_elementwise_ops_becomes_one_loop_nest():
    graph = parse_graph(chain_text(CHAIN))
    module = emit(graph)
    assert len(ops_of(module, "linalg.generic")) == CHAIN          # one generic per node
    texts = pipeline.lower(module, "affine", dump=["fused"])
    assert texts["fused"].count("linalg.generic") == 1                # one generic for the chain
    loops = affine_loops(module.operation)
    assert len(loops) == 2                                            # one 4 x 8 nest
    assert not ops_of(module, "memref.alloc")                         # no intermediate stored
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    b = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(MlirModel(graph)(x, b), interpret(graph, [x, b])[0], rtol=1e-5, atol=1e-6)


def test_a_chain_longer_than_the_cap_is_cut_into_nests_of_at_most_max_fused():
    """The pass rebuilds the merged body at each fusion (quadratic in a chain's length):
    like minic's groups, a fused generic holds at most MAX_FUSED of them."""
    graph = parse_graph(chain_text(2 * MAX_FUSED + 5))
    module = emit(graph)
    pipeline.lower(module, "fused")
    assert len(ops_of(module, "linalg.generic")) == 3
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    b = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(MlirModel(graph)(x, b), interpret(graph, [x, b])[0], rtol=1e-5, atol=1e-6)


MATMUL = """graph @mm(%x: f32[4, 8], %w: f32[16, 8]) -> (f32[4, 16]) {
  %g = gelu(%x) {approximate = "none"} : f32[4, 8]
  %wt = transpose(%w) {perm = [1, 0]} : f32[8, 16]
  %y = matmul(%g, %wt) : f32[4, 16]
  %z = relu(%y) : f32[4, 16]
  return %z
}"""


def test_arithmetic_stays_out_of_a_matmul_operand_but_a_transpose_fuses():
    """gelu(x) read by the matmul once per output column: fused, its erf would run 16 times per
    element; the transpose moves data only, so the matmul reads w directly."""
    graph = parse_graph(MATMUL)
    module = emit(graph)
    pipeline.lower(module, "fused")
    generics = ops_of(module, "linalg.generic")
    bodies = [[op.name for op in g.regions[0].blocks[0].operations] for g in generics]
    matmul = [b for g, b in zip(generics, bodies) if "reduction" in str(g.attributes["iterator_types"])]
    assert matmul == [["arith.mulf", "arith.addf", "linalg.yield"]]   # nothing recomputed inside
    assert any("math.erf" in b for b in bodies)                       # gelu: a nest of its own
    assert len(generics) == 3                                         # gelu, matmul (reading w), relu
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_allclose(MlirModel(graph)(x, w), interpret(graph, [x, w])[0], rtol=1e-5, atol=1e-5)
