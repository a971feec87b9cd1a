"""A custom MLIR pass written in Python: unroll innermost ``affine.for`` loops.

MLIR ships ``affine-loop-unroll`` in C++; this is the same idea rebuilt from
the Python bindings, to show that a pass is just a function that walks the IR
and rewrites it.  It is registered like any other pass with
``PassManager.add(AffineLoopUnroll(4), name=...)`` and runs between the
upstream passes of the pipeline.

For an innermost loop with constant bounds and trip count ``T``::

    affine.for %i = 0 to 10 {            affine.for %i = 0 to 8 step 4 {
      S(%i)                                S(%i)
    }                              ==>     S(%i + 1)      (affine.apply)
                                           S(%i + 2)
                                           S(%i + 3)
                                         }
                                         affine.for %i = 8 to 10 {   (epilogue:
                                           S(%i)                      T mod 4 left)
                                         }

The main loop runs ``T // 4`` times; the original loop, its lower bound moved
to where the main loop stopped, becomes the epilogue, and is erased when 4
divides ``T``.  Loop-carried values (``iter_args``) are threaded from one copy
of the body to the next.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LoopBounds:
    """Constant bounds of an ``affine.for``: ``for i = lower to upper step step``."""

    lower: int
    upper: int
    step: int

    @property
    def trip_count(self) -> int:
        return max(0, -(-(self.upper - self.lower) // self.step))


@dataclass
class UnrollRecord:
    """What happened to one loop: its trip count before and after, and the epilogue's."""

    before: LoopBounds
    main_trips: int
    epilogue_trips: int


def constant_bounds(loop) -> LoopBounds | None:
    """The bounds of an ``affine.for`` if both are constants (single-result maps), else None."""
    from mlir import ir

    maps = [ir.AffineMapAttr(loop.attributes[k]).value for k in ("lowerBoundMap", "upperBoundMap")]
    if any(m.n_inputs != 0 or len(m.results) != 1 for m in maps):
        return None
    exprs = [m.results[0] for m in maps]
    if not all(isinstance(e, ir.AffineConstantExpr) for e in exprs):
        return None
    step = ir.IntegerAttr(loop.attributes["step"]).value
    return LoopBounds(exprs[0].value, exprs[1].value, step)


def affine_loops(op) -> list:
    """All ``affine.for`` ops nested in ``op``, outer loops first."""
    from bridges.mlir.pipeline import ops_named
    return ops_named(op, "affine.for")


def is_innermost(loop) -> bool:
    """True when no other ``affine.for`` is nested in ``loop``'s body."""
    return len(affine_loops(loop)) == 1      # the walk includes the loop itself


def _remap_operands(op, mapping: dict) -> None:
    """Make a clone use the new values: every operand found in ``mapping`` is replaced,
    in ``op`` and in any op nested in its regions."""
    from mlir import ir

    def visit(inner):
        for i, value in enumerate(inner.operands):
            if value in mapping:
                inner.operands[i] = mapping[value]
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)


def unroll_loop(loop, factor: int) -> UnrollRecord | None:
    """Unroll one innermost ``affine.for`` by ``factor`` (see the module docstring).

    Returns None (and leaves the loop alone) when its bounds are not constant or
    it runs fewer than ``factor`` times.
    """
    from mlir import ir
    from mlir.dialects import affine

    bounds = constant_bounds(loop)
    if bounds is None or bounds.trip_count < factor:
        return None
    old = loop.opview
    groups, rest = divmod(bounds.trip_count, factor)
    main_upper = bounds.lower + groups * factor * bounds.step

    with ir.Location.unknown(loop.context):
        with ir.InsertionPoint(loop):
            main = affine.AffineForOp(bounds.lower, main_upper, factor * bounds.step,
                                      iter_args=list(old.operation.operands) or None)
        body = list(old.body.operations)
        terminator, body = body[-1], body[:-1]
        carried = list(main.inner_iter_args)
        with ir.InsertionPoint(main.body):
            for copy in range(factor):
                # Copy number `copy` sees the induction variable i + copy*step.
                iv = main.induction_variable
                if copy:
                    shift = ir.AffineMap.get(1, 0, [ir.AffineDimExpr.get(0)
                                                    + ir.AffineConstantExpr.get(copy * bounds.step)])
                    iv = affine.apply(shift, [iv])
                mapping = {old.induction_variable: iv}
                mapping.update(zip(old.inner_iter_args, carried))
                for op in body:
                    clone = op.clone()
                    _remap_operands(clone, mapping)
                    mapping.update(zip(op.results, clone.results))
                carried = [mapping.get(v, v) for v in terminator.operands]
            affine.yield_(carried)

    if rest:
        # The original loop becomes the epilogue: start where the main loop stopped,
        # carrying in the values the main loop produced.
        loop.attributes["lowerBoundMap"] = ir.AffineMapAttr.get(
            ir.AffineMap.get_constant(main_upper, loop.context))
        for i, value in enumerate(main.results):
            loop.operands[i] = value
    else:
        for before, after in zip(loop.results, main.results):
            before.replace_all_uses_with(after)
        loop.erase()
    return UnrollRecord(bounds, groups, rest)


@dataclass
class AffineLoopUnroll:
    """The pass object: ``pm.add(AffineLoopUnroll(4), name="affine-loop-unroll-py")``.

    MLIR calls it with the operation it is anchored on (the module) and the
    pass handle; ``records`` keeps one entry per loop it unrolled.
    """

    factor: int = 4
    records: list[UnrollRecord] = field(default_factory=list)

    NAME = "affine-loop-unroll-py"

    def __post_init__(self) -> None:
        from minic.errors import UserError

        if not isinstance(self.factor, int) or self.factor < 2:
            raise UserError(f"affine-loop-unroll: factor must be an integer >= 2, got {self.factor!r}")

    def __call__(self, op, pass_) -> None:
        try:
            # Collect first, rewrite after: the walk must not see half-rewritten IR.
            targets = [loop for loop in affine_loops(op) if is_innermost(loop)]
            for loop in targets:
                record = unroll_loop(loop, self.factor)
                if record is not None:
                    self.records.append(record)
        except Exception:
            pass_.signal_pass_failure()
            raise

    def add_to(self, pm) -> None:
        """Append this pass to a ``PassManager``."""
        pm.add(self, name=self.NAME, argument=self.NAME,
               description=f"unroll innermost affine.for loops by {self.factor} (Python)")
