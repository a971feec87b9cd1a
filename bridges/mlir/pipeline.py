"""Step 2: the lowering pipeline, linalg on tensors -> LLVM dialect, as named stages.

Progressive lowering: each stage rewrites the module into lower-level dialects
and the IR stays valid (and printable) between any two stages::

    linalg      linalg on tensors: values, no memory            (the input)
    fused       elementwise chains merged into one generic      linalg-fuse-elementwise-ops (fusion.py)
    vectorized  tiled, vector dialect ops (only with a VectorPlan)  vectorize.py
    bufferized  linalg on memrefs: buffers, allocs, deallocs    one-shot-bufferize
    affine      affine.for loop nests with affine.load/store    convert-linalg-to-affine-loops
    unrolled    innermost loops unrolled by our Python pass     (only with unroll=F)
    scf         scf.for + arith index math                      lower-affine
    cf          a CFG of blocks and branches                    convert-scf-to-cf
    llvm        the LLVM dialect, ready for the JIT             convert-*-to-llvm

``lower(module, upto="affine", dump=...)`` runs the stages in order and can
print the IR after each; the CLI's ``--emit`` uses the same names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from minic.errors import UserError


@dataclass(frozen=True)
class Stage:
    """One named step: a textual pass pipeline (mlir-opt syntax) or a Python pass."""

    name: str
    passes: str = ""                          # e.g. "func.func(lower-affine)"
    python_pass: Callable | None = None       # an object with add_to(pm)
    about: str = ""


# The bufferization options that make the compiled function easy to call from numpy:
# memref<4x5xf32> arguments with the plain row-major layout (identity-layout-map),
# and the result turned into an output argument the caller allocates.
BUFFERIZE = ("one-shot-bufferize{bufferize-function-boundaries "
             "function-boundary-type-conversion=identity-layout-map},"
             "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},"
             "buffer-deallocation-pipeline")

# math-expand-ops rewrites math ops without an LLVM intrinsic (tanh, ...) into
# exp and arith; erf and the rest become libm calls, resolved by the JIT in-process.
TO_LLVM = ("func.func(math-expand-ops),func.func(convert-vector-to-scf),"
           "func.func(convert-math-to-llvm),convert-math-to-libm,convert-scf-to-cf,convert-vector-to-llvm,"
           "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
           "convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
           "convert-index-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts")


def ops_named(op, name: str) -> list:
    """Every op called ``name`` nested in ``op`` (``op`` included), outer ones first."""
    from mlir import ir

    found = []

    def visit(inner):
        if inner.name == name:
            found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


@dataclass
class CopiesToLinalg:
    """A small Python pass: ``memref.copy(a, b)`` -> ``linalg.copy ins(a) outs(b)``.

    Bufferization copies slices with ``memref.copy``; between strided views that
    lowers to a call into MLIR's runtime library (``memrefCopy``), which the xtc
    wheels do not ship.  As a ``linalg.copy`` it becomes plain loops instead.
    """

    NAME = "memref-copy-to-linalg-py"

    def __call__(self, op, pass_) -> None:
        from mlir import ir
        from mlir.dialects import linalg

        for copy in ops_named(op, "memref.copy"):
            with ir.InsertionPoint(copy), copy.location:
                linalg.copy(copy.operands[0], outs=[copy.operands[1]])
            copy.erase()

    def add_to(self, pm) -> None:
        pm.add(self, name=self.NAME, argument=self.NAME, description=self.__doc__.splitlines()[0])


def stages(unroll: int | None = None, vectorize=None) -> list[Stage]:
    """The stage list, optionally with the Python unroll pass or a ``VectorPlan``."""
    from bridges.mlir.unroll import AffineLoopUnroll

    from bridges.mlir.fusion import FuseElementwise

    out = [Stage("linalg", about="linalg on tensors (the input)"),
           Stage("fused", python_pass=FuseElementwise(),
                 about="elementwise chains -> one linalg.generic")]
    if vectorize is not None:
        from bridges.mlir.vectorize import vectorize_stage
        out.append(vectorize_stage(vectorize))
    out += [
        Stage("bufferized", BUFFERIZE, python_pass=CopiesToLinalg(),
              about="tensors -> memrefs, results -> out-params"),
        Stage("affine", "func.func(convert-linalg-to-affine-loops)",
              about="linalg ops -> affine.for loop nests"),
    ]
    if unroll is not None:
        out.append(Stage("unrolled", python_pass=AffineLoopUnroll(unroll),
                         about=f"Python pass: innermost affine.for unrolled by {unroll}"))
    out += [
        Stage("scf", "func.func(lower-affine),canonicalize",
              about="affine.for -> scf.for, affine maps -> arith"),
        Stage("cf", "func.func(convert-vector-to-scf),convert-scf-to-cf",
              about="structured loops -> blocks and branches"),
        Stage("llvm", TO_LLVM, about="every dialect -> the LLVM dialect"),
    ]
    return out


def stage_names(unroll: int | None = None, vectorize=None) -> list[str]:
    return [s.name for s in stages(unroll, vectorize)]


def run_stage(module, stage: Stage) -> None:
    """Run one stage on ``module`` in place."""
    from mlir.passmanager import PassManager

    if not stage.passes and stage.python_pass is None:
        return
    with module.context:
        pm = PassManager("builtin.module")
        if stage.passes:
            pm.add(stage.passes)
        if stage.python_pass is not None:
            stage.python_pass.add_to(pm)
        pm.run(module.operation)


def lower(module, upto: str = "llvm", *, unroll: int | None = None, vectorize=None,
          dump: Iterable[str] | str = (), show: Callable[[str, str], None] | None = None):
    """Lower ``module`` in place through the stages up to and including ``upto``.

    ``dump`` names the stages whose IR to keep (or "all"); the texts are returned
    as ``{stage name: IR}`` and, if given, passed to ``show(name, text)`` as
    soon as each stage is done.
    """
    from mlir.ir import MLIRError

    plan = stages(unroll, vectorize)
    names = [s.name for s in plan]
    if upto not in names:
        raise UserError(f"unknown MLIR stage '{upto}'; stages: {', '.join(names)}")
    wanted = set(names) if dump == "all" else set(dump)
    unknown = wanted - set(names)
    if unknown:
        raise UserError(f"unknown MLIR stage(s) {sorted(unknown)}; stages: {', '.join(names)}")
    texts: dict[str, str] = {}
    for stage in plan:
        if stage.name == "llvm":
            check_no_i1_stores(module)
        try:
            run_stage(module, stage)
        except MLIRError as err:
            raise UserError(f"MLIR stage '{stage.name}' failed: {first_line(err)}") from err
        if stage.name in wanted:
            texts[stage.name] = str(module)
            if show is not None:
                show(stage.name, texts[stage.name])
        if stage.name == upto:
            break
    return texts


def check_no_i1_stores(module) -> None:
    """Refuse a store of an ``i1``: LLVM 22's ``finalize-memref-to-llvm`` asserts on one
    and *aborts the process* (see README).  The emitters keep bools as i8 in memory; this
    guard catches any i1 tensor that bufferization still put in memory."""
    from mlir import ir

    found: list[str] = []

    def visit(op):
        if op.name in ("memref.store", "affine.store") and str(op.operands[0].type) == "i1":
            found.append(str(op.operands[1].type))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found:
        from minic.errors import UnsupportedError
        raise UnsupportedError(f"MLIR bridge: an i1 tensor was bufferized ({found[0]}); "
                               "lowering it would abort in finalize-memref-to-llvm")


def first_line(err: Exception) -> str:
    """The first informative line of an MLIR diagnostic (they span many lines)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    detail = [ln for ln in lines if ln.startswith("error:")]
    return (detail or lines or ["(no message)"])[0]


def clone(module):
    """An independent copy of ``module`` (lowering rewrites in place)."""
    from mlir import ir

    with module.context:
        return ir.Module.parse(str(module))
