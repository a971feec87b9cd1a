"""Elementwise fusion on linalg tensors: MLIR's ``linalg-fuse-elementwise-ops``, with a cost rule.

The emitters write one ``linalg.generic`` per op, so a chain of 600 elementwise ops is
600 loop nests in one function, and LLVM's optimizer (``ExecutionEngine`` at O2) is
superlinear in that: 20 s to compile at load 6 (55 s at load 9).  The upstream pass merges a producer generic
(all loops parallel, one use) into the generic that reads it, body into body, so the
chain becomes one nest, and the intermediates never exist.

Its rule for *which* producers to fuse is only "one use", and the fused body runs each
time the consumer reads an element.  Where the consumer reads each element many times
(a matmul reads A[m, k] once per output column n; a broadcast reads b[j] once per row),
the producer is recomputed that often: GELU's erf ran once per multiply-add of the next
matmul, and bert-base (small) took 36 ms a call instead of 11.  The cost function
(``ControlFusionFn``) is C++ only; the textual pass takes no options.  So two Python
passes bracket it:

* ``FusionBarriers`` gives each producer that computes (a pure move such as a transpose
  costs nothing to redo) and that a consumer reads through a map which is not a
  permutation of the consumer's loops a second use, an unregistered
  ``minic.fusion_barrier`` op, so the upstream pass (one-use producers only) skips it;
* ``DropFusionBarriers`` erases the barriers afterwards.

The barriers also cut a chain every ``MAX_FUSED`` generics.

What fuses then is what is computed once per element: elementwise chains, the
elementwise inputs of a reduction over them, and moves into anything.  (An ``i1``
producer, a compare before its select in the TOSA route, fuses anyway: the
alternative is an ``i1`` tensor in memory, which LLVM 22 aborts on, see README.)  minic's own fusion (``minic/passes``) draws the
same line at the graph level, before any loops exist: arithmetic does not fuse into a
matmul operand, a transpose does.
"""
from __future__ import annotations

from dataclasses import dataclass

from bridges.mlir.pipeline import ops_named

BARRIER = "minic.fusion_barrier"
FUSE = "func.func(linalg-fuse-elementwise-ops),canonicalize"
RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
# At most this many generics fused into one, as minic's fuse-groups caps a group at 64
# nodes: the pass rebuilds the merged body at each step, so a chain costs it quadratic
# time (52 s for 5,000 ops uncapped), and one huge body buys nothing.
MAX_FUSED = 64


def _all_parallel(generic) -> bool:
    return all("parallel" in str(t) for t in generic.attributes["iterator_types"])


def rereads(consumer) -> list:
    """The inputs of ``consumer`` that it reads more than once per element: those whose
    indexing map is not a permutation of its loops, and that a fusion would recompute."""
    from mlir import ir
    view = consumer.opview
    maps = [ir.AffineMapAttr(m).value for m in consumer.attributes["indexing_maps"]]
    return [v for v, m in zip(view.inputs, maps) if not m.is_permutation]


def _fusable(value) -> bool:
    """What the upstream pass fuses: the one-use result of an all-parallel generic."""
    from mlir import ir
    return (isinstance(value, ir.OpResult) and value.owner.name == "linalg.generic"
            and _all_parallel(value.owner) and len(list(value.uses)) == 1)


def _is_i1(value) -> bool:
    from mlir import ir
    return str(ir.ShapedType(value.type).element_type) == "i1"


def _moves(generic) -> bool:
    """A body that only yields one of its inputs (a transpose, a broadcast): no arithmetic."""
    from mlir import ir
    ops = list(generic.regions[0].blocks[0].operations)
    return len(ops) == 1 and isinstance(ops[0].operands[0], ir.BlockArgument)


def needs_barrier(value) -> list:
    """The producers a reread of ``value`` would recompute if fused: ``value`` itself when it
    computes; through a move (fused: the consumer reads the source directly), what the move
    reads (and through a reshape, what it reshapes).  An i1 fuses anyway (in memory it would reach the i1-store abort)."""
    from mlir import ir
    if isinstance(value, ir.OpResult) and value.owner.name in RESHAPES and len(list(value.uses)) == 1:
        return needs_barrier(value.owner.operands[0])      # the pass folds reshapes into generics
    if not _fusable(value) or _is_i1(value):
        return []
    if _moves(value.owner):
        return [p for v in value.owner.opview.inputs for p in needs_barrier(v)]
    return [value]


@dataclass
class FusionBarriers:
    """Python pass: a ``minic.fusion_barrier`` use beside each producer a fusion would recompute."""

    NAME = "linalg-fusion-barriers-py"

    def __call__(self, op, pass_) -> None:
        from mlir import ir
        sizes = {}              # a generic's result -> how many generics it holds once fused
        for consumer in ops_named(op, "linalg.generic"):
            blocked = {p for v in rereads(consumer) for p in needs_barrier(v)}
            fused = [v for v in consumer.opview.inputs if _fusable(v) and v not in blocked]
            size = 1 + sum(sizes.get(v, 1) for v in fused)
            if size > MAX_FUSED:            # a new nest starts here
                blocked |= {v for v in fused if not _is_i1(v)}
                size = 1 + sum(sizes.get(v, 1) for v in fused if _is_i1(v))
            sizes[consumer.results[0]] = size
            for value in blocked:
                with ir.InsertionPoint(consumer), consumer.location:
                    ir.Operation.create(BARRIER, operands=[value])

    def add_to(self, pm) -> None:
        """Call in the module's context (as ``pipeline.run_stage`` does): the barrier is an op
        of no dialect, which the context must allow before any pass runs (setting it while
        a pass manager runs asserts)."""
        from mlir import ir
        ir.Context.current.allow_unregistered_dialects = True
        pm.add(self, name=self.NAME, argument=self.NAME, description=self.__doc__.splitlines()[0])


@dataclass
class DropFusionBarriers:
    """Python pass: erase the ``minic.fusion_barrier`` ops."""

    NAME = "drop-fusion-barriers-py"

    def __call__(self, op, pass_) -> None:
        for barrier in ops_named(op, BARRIER):
            barrier.erase()

    def add_to(self, pm) -> None:
        pm.add(self, name=self.NAME, argument=self.NAME, description=self.__doc__.splitlines()[0])


@dataclass
class FuseElementwise:
    """The stage's passes in order: barriers, the upstream fusion (+ canonicalize), no barriers."""

    def add_to(self, pm) -> None:
        FusionBarriers().add_to(pm)
        pm.add(FUSE)
        DropFusionBarriers().add_to(pm)
