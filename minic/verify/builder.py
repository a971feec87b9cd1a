"""The growing graph of the random-graph generator: a pool of typed values and
its way to add a node (``emit``, over ``minic.ir.build.make_node``: the op's own inference judges it).

Besides its type, every value in the pool carries two facts the generator needs
to keep the numbers well behaved on every path:

* ``bound``: an upper estimate of ``max |x|``, so that ``exp`` or ``pow`` never
  see a large argument (the spec squashes it with ``tanh`` first);
* ``exact``: computed without any rounding (an input, a constant, or data moved
  or selected by layout ops, ``max``, ``relu``, ``floor`` ...).  Only exact values
  feed the discontinuous ops (``floor``, ``eq``, ``lt``, a cast to int): a 1-ulp
  difference between two compilers in front of ``floor`` would flip its result
  and report a "bug" that is only rounding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from minic.ir.build import make_node
from minic.ir.graph import Node, Value, constant
from minic.ir.types import DType, Dim, TensorType

# Ops whose result is exactly one of their input elements (or a sign/rounding of
# one): exact inputs give an exact result.
EXACT_OPS = {"neg", "abs", "relu", "max", "min", "floor", "ceil", "round", "identity", "dropout",
             "reduce_max", "reduce_min", "max_pool2d", "where", "cast", "eq", "lt", "gt", "and", "or",
             "xor", "not", "reshape", "expand", "flatten", "squeeze", "unsqueeze", "transpose",
             "concat", "split", "slice", "gather", "pad"}
SYMBOL = "B"                     # the one dynamic dim random graphs use (a batch axis)
INPUT_RANGE = 2.0                # inputs are uniform in [-2, 2]


class Reject(Exception):
    """This op cannot be placed on the current pool; the generator tries another."""


@dataclass
class Slot:
    value: Value
    bound: float                 # max |x| (an upper estimate)
    exact: bool                  # no rounding happened on the way here
    uses: int = 0

    @property
    def type(self) -> TensorType:
        return self.value.type

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.value.type.shape

    @property
    def rank(self) -> int:
        return self.value.type.rank

    @property
    def is_float(self) -> bool:
        return self.value.type.dtype == DType.f32

    @property
    def static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)


class Builder:
    """Inputs, constants, nodes and the pool of values a spec may use."""

    def __init__(self, rng: np.random.Generator, dynamic: bool, max_dim: int = 4, max_rank: int = 4):
        self.rng, self.dynamic, self.max_dim, self.max_rank = rng, dynamic, max_dim, max_rank
        self.inputs: list[Value] = []
        self.constants: list[Value] = []
        self.nodes: list[Node] = []
        self.pool: list[Slot] = []
        self.count = 0

    # --- undo: a spec that fails halfway leaves nothing behind -------------------

    def save(self) -> tuple:
        return (len(self.inputs), len(self.constants), len(self.nodes), len(self.pool),
                [s.uses for s in self.pool], self.count)

    def restore(self, state: tuple) -> None:
        n_in, n_const, n_nodes, n_pool, uses, count = state
        del self.inputs[n_in:], self.constants[n_const:], self.nodes[n_nodes:], self.pool[n_pool:]
        for s, u in zip(self.pool, uses):
            s.uses = u
        self.count = count

    # --- random choices ------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def randint(self, lo: int, hi: int) -> int:
        """An int in [lo, hi] (both ends included)."""
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, items):
        items = list(items)
        if not items:
            raise Reject("nothing to choose from")
        return items[int(self.rng.integers(len(items)))]

    def shape(self, rank: int | None = None, lo: int = 1) -> tuple[Dim, ...]:
        """A fresh small shape; in a dynamic graph axis 0 is often the symbol B."""
        rank = self.randint(1, self.max_rank) if rank is None else rank
        dims: list[Dim] = [self.randint(lo, self.max_dim) for _ in range(rank)]
        if self.dynamic and rank and self.chance(0.6):
            dims[0] = SYMBOL
        return tuple(dims)

    def partner(self, shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
        """A shape that broadcasts with ``shape``: some leading axes dropped, some
        axes 1, and where ``shape`` has a 1, sometimes a larger size."""
        drop = self.randint(0, len(shape)) if self.chance(0.4) else 0
        out = []
        for d in shape[drop:]:
            if d == 1 and self.chance(0.3):
                out.append(self.randint(2, self.max_dim))
            else:
                out.append(1 if self.chance(0.25) else d)
        return tuple(out)

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # --- values --------------------------------------------------------------------

    def input(self, shape: tuple[Dim, ...], dtype: DType = DType.f32) -> Slot:
        if self.dynamic and not self.inputs and (not shape or shape[0] != SYMBOL):
            shape = (SYMBOL,) + tuple(shape[1:]) if shape else (SYMBOL,)   # exporters take B from input 0
        v = Value(self.name("x"), TensorType(tuple(shape), dtype))
        self.inputs.append(v)
        slot = Slot(v, INPUT_RANGE if dtype.is_float else 1.0, True)
        self.pool.append(slot)
        return slot

    def const(self, data: np.ndarray) -> Slot:
        v = constant(self.name("c"), np.asarray(data, order="C"))
        self.constants.append(v)
        bound = float(np.abs(data).max()) if data.size and data.dtype != np.bool_ else 1.0
        return Slot(v, bound, True)

    def uniform(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> Slot:
        """A float constant; symbolic dims (never in constants) become 1."""
        concrete = tuple(d if isinstance(d, int) else 1 for d in shape)
        return self.const(self.rng.uniform(lo, hi, concrete).astype(np.float32))

    def operand(self, shape: tuple[Dim, ...], dtype: DType = DType.f32) -> Slot:
        """A value of exactly ``shape``: from the pool if one fits, else a new input or constant."""
        fits = [s for s in self.pool if s.shape == tuple(shape) and s.type.dtype == dtype]
        if fits and self.chance(0.5):
            return self.choice(fits)
        if dtype == DType.f32 and (self.chance(0.5) or not self.dynamic):
            if all(isinstance(d, int) for d in shape) and self.chance(0.5):
                return self.uniform(shape)
        return self.input(shape, dtype)

    def pick(self, want: Callable[[Slot], bool] = lambda s: s.is_float,
             fresh: Callable[[], Slot] | None = None) -> Slot:
        """An operand: an unused result if one fits (so the graph stays one DAG),
        else any fitting value, else ``fresh()`` (a new input by default)."""
        fits = [s for s in self.pool if want(s)]
        unused = [s for s in fits if s.uses == 0 and s.value not in self.inputs]
        if unused and self.chance(0.8):
            return unused[-1] if self.chance(0.6) else self.choice(unused)
        if fits and self.chance(0.85):
            return self.choice(fits)
        slot = fresh() if fresh is not None else self.input(self.shape())
        if not want(slot):
            raise Reject("a fresh value does not fit")
        return slot

    # --- nodes ---------------------------------------------------------------------

    def emit(self, op: str, inputs: list[Slot], bound: float, **attrs) -> list[Slot]:
        """Add ``op(inputs) {attrs}`` (``make_node``: a UserError there means this combination
        is invalid)."""
        node = make_node(op, [s.value for s in inputs], attrs, names=lambda _: self.name("v"))
        if any(0 in v.type.shape for v in node.outputs):
            raise Reject(f"{op} would give an empty tensor")     # restore() takes back the names
        self.nodes.append(node)
        for s in inputs:
            s.uses += 1
        exact = op in EXACT_OPS and all(s.exact for s in inputs)
        slots = [Slot(v, float(bound), exact) for v in node.outputs]
        self.pool.extend(slots)
        return slots

    def emit1(self, op: str, inputs: list[Slot], bound: float, **attrs) -> Slot:
        return self.emit(op, inputs, bound, **attrs)[0]

