"""Extension: vectorize the lab program with the transform dialect, and measure it.

The scalar pipeline turns ``linalg.matmul`` into three ``affine.for`` loops of
scalar loads, ``mulf``/``addf`` and stores.  Here a *transform script* (a small
MLIR program whose payload is our module) schedules it instead, the way IREE
does on CPUs::

    %mm = match linalg.matmul          tile [TM, TN, TK] with scf.for
                                       vectorize the tile -> vector.contract on
                                       vector<TMxTKxf32>, vector<TKxTNxf32>
    %ew = match linalg.generic/fill    tile [1, TN], vectorize -> vector<1xTNxf32>
    apply patterns: contract -> outer products -> FMAs on vector<TNxf32>,
                    n-D transfers -> 1-D loads/stores

The script is built with the Python builders of the transform dialect and run
by a Python-defined pass that calls the transform interpreter, so it slots into
``pipeline.py`` as the ``vectorized`` stage, before bufferization.

Tile sizes must divide the shapes (the vectorizer needs static tile shapes), so
each one is the largest divisor of its dimension not above the preferred size.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from bridges.mlir.lab import FUNC_NAME, LabShape

PREFERRED = (4, 16, 4)   # rows of C per tile, columns (16 f32 = one AVX-512 register), k step


def divisor_at_most(size: int, preferred: int) -> int:
    """The largest divisor of ``size`` that is <= ``preferred``."""
    return max(t for t in range(1, min(size, preferred) + 1) if size % t == 0)


@dataclass(frozen=True)
class VectorPlan:
    """Tile (= vector) sizes: matmul loops (i, j, k) and the 2-D elementwise loops."""

    matmul: tuple[int, int, int]
    elementwise: tuple[int, int]

    @staticmethod
    def for_lab(shape: LabShape) -> "VectorPlan":
        tm, tn, tk = (divisor_at_most(d, p) for d, p in zip((shape.m, shape.n, shape.k), PREFERRED))
        return VectorPlan((tm, tn, tk), (1, tn))


def build_schedule(plan: VectorPlan, context):
    """The transform script: a module with ``@__transform_main`` (see the module docstring)."""
    from mlir import ir
    from mlir.dialects import transform
    from mlir.dialects.transform import structured, vector

    with context, ir.Location.unknown():
        schedule = ir.Module.create()
        schedule.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        any_op = transform.AnyOpType.get()
        with ir.InsertionPoint(schedule.body):
            seq = transform.NamedSequenceOp("__transform_main", [any_op], [],
                                            arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}])
            with ir.InsertionPoint(seq.body):
                root = seq.bodyTarget
                matmul = structured.MatchOp.match_op_names(root, ["linalg.matmul"]).result
                tile = structured.TileUsingForOp(matmul, sizes=list(plan.matmul))
                structured.VectorizeOp(tile.tiled_linalg_op)
                elementwise = structured.MatchOp.match_op_names(root, ["linalg.generic", "linalg.fill"]).result
                tile = structured.TileUsingForOp(elementwise, sizes=list(plan.elementwise))
                structured.VectorizeOp(tile.tiled_linalg_op)

                funcs = structured.MatchOp.match_op_names(root, ["func.func"]).result
                # First turn mul + multi_reduction back into vector.contract ...
                with ir.InsertionPoint(transform.ApplyPatternsOp(funcs).patterns):
                    vector.apply_patterns_vector_reduction_to_contract()
                    vector.apply_patterns_vector_transfer_permutation_patterns()
                # ... then lower contract -> outer products -> FMAs, n-D -> 1-D transfers.
                with ir.InsertionPoint(transform.ApplyPatternsOp(funcs).patterns):
                    vector.apply_patterns_vector_lower_transfer(max_transfer_rank=1)
                    vector.apply_patterns_vector_lower_multi_reduction(
                        lowering_strategy=vector.VectorMultiReductionLowering.InnerParallel)
                    vector.apply_patterns_vector_lower_contraction(
                        lowering_strategy=vector.VectorContractLowering.OuterProduct)
                    vector.apply_patterns_vector_lower_outerproduct()
                    vector.apply_patterns_vector_transfer_permutation_patterns()
                    transform.apply_patterns_canonicalization()
                transform.YieldOp([])
        schedule.operation.verify()
    return schedule


@dataclass
class TransformSchedulePass:
    """A Python pass that applies a transform script to the module it runs on."""

    plan: VectorPlan
    NAME = "apply-transform-schedule-py"

    def __call__(self, op, pass_) -> None:
        from mlir.dialects.transform import interpreter

        schedule = build_schedule(self.plan, op.context)
        entry = schedule.body.operations[0]
        try:
            interpreter.apply_named_sequence(op, entry, schedule)
        except Exception:
            pass_.signal_pass_failure()
            raise

    def add_to(self, pm) -> None:
        pm.add(self, name=self.NAME, argument=self.NAME,
               description="tile and vectorize linalg ops with a transform script (Python)")


def vectorize_stage(plan: VectorPlan):
    """The ``vectorized`` stage of ``pipeline.stages``."""
    from bridges.mlir.pipeline import Stage

    return Stage("vectorized", python_pass=TransformSchedulePass(plan),
                 about=f"transform dialect: tile {list(plan.matmul)} + vectorize")


@dataclass(frozen=True)
class BenchResult:
    """Median times of the scalar and the vectorized kernel on one shape."""

    shape: LabShape
    plan: VectorPlan
    scalar_ms: float
    vector_ms: float
    scalar_err: float
    vector_err: float
    repeats: int

    @property
    def speedup(self) -> float:
        return self.scalar_ms / self.vector_ms


def median_ms(fn, args, repeats: int) -> float:
    """Median wall time of ``fn(*args)`` in milliseconds, after one warm-up call."""
    fn(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def bench(shape: LabShape = LabShape(256, 256, 256), repeats: int = 20, seed: int = 0) -> BenchResult:
    """JIT the lab program scalar and vectorized; check both against numpy and time them."""
    import numpy as np

    from bridges.mlir.jit import compile_module
    from bridges.mlir.lab import build_matmul_bias_relu, random_inputs, reference

    plan = VectorPlan.for_lab(shape)
    args = random_inputs(shape, seed)
    want = reference(*args)
    scalar = compile_module(build_matmul_bias_relu(shape), FUNC_NAME)
    vector = compile_module(build_matmul_bias_relu(shape), FUNC_NAME, vectorize=plan)
    errs = [float(np.abs(k(*args) - want).max()) for k in (scalar, vector)]
    return BenchResult(shape, plan, median_ms(scalar, args, repeats), median_ms(vector, args, repeats),
                       errs[0], errs[1], repeats)
