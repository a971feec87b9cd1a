"""Random valid graphs, NNSmith-style, reproducible from a seed.

    graph = generate(seed=7)                    # a verified minic Graph
    inputs = make_inputs(graph, seed=7, env={"B": 3})

``generate`` grows a DAG one node at a time: it draws an op name from the
registry's specs (``op_specs.SPECS``, one per op), and the spec picks operands —
earlier results first, so the graph stays connected, or new inputs and constants
of a shape that fits — and attributes.  The op's own shape inference accepts or
rejects the node; a rejected spec is undone and another op drawn.  The graph's
outputs are the results nothing else uses.

Shapes are tiny (dims 1..4, rank <= 4) and graphs short (<= 8 nodes by default,
counting the guard nodes that keep values in range), so one graph compiles in
well under a second on every path.  A quarter of the graphs are *dynamic*: input
0 (and others, at random) has the symbolic batch dim ``B`` on axis 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.verify.builder import SYMBOL, Builder, Reject
from minic.verify.op_specs import SPECS
from minic.errors import UserError
from minic.ir.graph import Graph, Value
from minic.ir.types import DType
from minic.ir.verify import verify

EXAMPLE_DIMS = {SYMBOL: 2}       # the size of B when exporting (torch.export specialises 0 and 1)
RUN_DIMS = {SYMBOL: 3}           # ... and when running: a dynamic graph must not be fixed to 2


@dataclass(frozen=True)
class Config:
    max_nodes: int = 8
    dynamic: float = 0.25        # the share of graphs with a symbolic batch dim
    max_dim: int = 4
    max_rank: int = 4
    ops: tuple[str, ...] = tuple(sorted(SPECS))


def generate(seed: int, config: Config = Config()) -> Graph:
    """A random, verified Graph with 1..``max_nodes`` nodes; the same seed gives the same graph."""
    rng = np.random.default_rng(seed)
    b = Builder(rng, dynamic=bool(rng.random() < config.dynamic), max_dim=config.max_dim,
                max_rank=config.max_rank)
    target = b.randint(2, config.max_nodes)
    for _ in range(40 * config.max_nodes):
        if len(b.nodes) >= target:
            break
        state = b.save()
        try:
            SPECS[b.choice(config.ops)](b)
        except (Reject, UserError):
            b.restore(state)
            continue
        if len(b.nodes) > config.max_nodes:          # the guards took it past the limit
            b.restore(state)
    if not b.nodes:
        raise UserError(f"random graph {seed}: no op could be placed (ops: {', '.join(config.ops)})")
    used = {v for node in b.nodes for v in node.inputs}
    outputs = [v for node in b.nodes for v in node.outputs if v not in used]
    graph = Graph(f"random_{seed}", b.inputs, outputs, b.nodes, b.constants)
    return verify(graph)


def dynamic_axes(graph: Graph) -> tuple[dict[int, str], ...]:
    """``{axis: symbol}`` per input, for the exporters; () for a static graph."""
    axes = tuple({a: d for a, d in enumerate(v.type.shape) if isinstance(d, str)} for v in graph.inputs)
    return axes if any(axes) else ()


def make_inputs(graph: Graph, seed: int, env: dict[str, int] | None = None) -> tuple[np.ndarray, ...]:
    """Inputs for ``graph``: floats uniform in [-2, 2], ints in [-3, 3], random bools;
    symbolic dims take their value from ``env`` (default ``RUN_DIMS``)."""
    rng = np.random.default_rng([seed, 1])
    env = RUN_DIMS if env is None else env
    return tuple(_input(rng, v, env) for v in graph.inputs)


def _input(rng: np.random.Generator, v: Value, env: dict[str, int]) -> np.ndarray:
    shape = v.type.concrete(env)
    dtype = v.type.dtype
    if dtype == DType.bool:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.is_float:
        return np.asarray(rng.uniform(-2.0, 2.0, shape), dtype.numpy)
    return np.asarray(rng.integers(-3, 4, shape), dtype.numpy)

