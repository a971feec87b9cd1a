"""The pass manager: every pass under its kebab-case name, the optimisation levels as lists of
names, and the runner: run passes by name, verify, print the IR after a pass, time each pass."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, TextIO

from minic.errors import UserError
from minic.ir.graph import Graph
from minic.ir.verify import VerifyError, verify
from minic.limits import fewer_collections
from minic.passes import (algebra, batchnorm, cse, dead_code, fold_constants, fuse_groups, identity,
                          matmul_bias, padding, quantized, reshapes, shape_chains, to_f16, winograd)
from minic.passes.rewrite import Rule, rewrite

Pass = Callable[[Graph], Graph]


def applying(*rules: Rule) -> Pass:
    """The pass that applies ``rules`` until none applies (``rewrite``): most passes are a table of rules.
    Like every pass, its docstring states what it rewrites: its rules' identities, one a line."""
    apply = partial(rewrite, rules=rules)
    apply.__doc__ = "\n".join(r.identity for r in rules)
    return apply


PASSES: dict[str, Pass] = {
    "fake-quantization-to-integer": applying(quantized.integer_contraction, quantized.integer_sums),
    "fold-constant-gather": applying(shape_chains.static_target, shape_chains.constant_gather,
                                     shape_chains.static_entries),
    "fold-constants": applying(fold_constants.fold),
    "eliminate-identity": applying(identity.identity, identity.same_type, identity.identity_permutation,
                                   identity.whole_slice),
    "simplify-algebra": applying(algebra.neutral_operand, algebra.double_negation, algebra.transpose_pair,
                                 algebra.order_keeping_before_max_pool, algebra.constant_factor_into_terms),
    "fuse-reshapes": applying(reshapes.reshape_pair),
    "fold-batchnorm": applying(batchnorm.fold),
    "fuse-matmul-bias": applying(matmul_bias.bias_epilogue),
    "eliminate-common-subexpr": cse.eliminate_common_subexpr,
    "eliminate-dead-code": dead_code.eliminate_dead_code,
    "winograd-conv2d": applying(winograd.winograd_f2x3),
    "explicit-padding": applying(padding.pad_apart),
    # The fusion grouping belongs to lowering (it decides which ops become one
    # kernel); it is a pass so that --print-after shows the groups.  It is the
    # pipeline's "fused" stage (minic/pipeline.py), after the rest of the level.
    "fuse-groups": fuse_groups.fuse_groups,
    # Change the numbers (f16, bf16 storage), so they are in no level: CompileOptions.precision asks.
    "to-f16": to_f16.to_f16,
    "to-bf16": to_f16.to_bf16,
}

# Passes that change the numbers on purpose; every other pass computes exactly what it was given.
ROUNDING = {"to-f16", "to-bf16"}

CLEANUP = ["eliminate-identity", "fold-constants", "eliminate-common-subexpr", "eliminate-dead-code"]

LEVELS: dict[int, list[str]] = {
    0: [],
    1: CLEANUP,
    # Quantized matmuls first, while their weights' dequantization is in sight (folding constants
    # would make it a float weight); then shape programs (they hide static reshapes), then
    # constants, so that folding batch norms and biases sees constant weights; cleanup; then the
    # rewrites for lowering: 3x3 convolutions in Winograd's form (GraphOptions.winograd),
    # padding as nodes of its own, the fusion groups.
    2: ["fake-quantization-to-integer", "fold-constant-gather", "fold-constants", "eliminate-identity",
        "simplify-algebra", "fuse-reshapes", "fold-batchnorm", "fuse-matmul-bias"] + CLEANUP
       + ["winograd-conv2d", "explicit-padding", "fuse-groups"],
}


@dataclass(frozen=True)
class PassStat:
    """One row of --pass-stats."""
    name: str
    nodes_before: int
    nodes_after: int
    seconds: float


def pipeline(level: int = 2, passes: list[str] | None = None) -> list[str]:
    """The pass names to run: an explicit list wins over the level."""
    if passes is None:
        if level not in LEVELS:
            raise UserError(f"unknown optimisation level -O{level}; available: {', '.join(f'-O{n}' for n in LEVELS)}")
        return list(LEVELS[level])
    for name in passes:
        if name not in PASSES:
            raise UserError(f"unknown pass '{name}'; available: {', '.join(PASSES)}")
    return list(passes)


@fewer_collections
def optimize(graph: Graph, level: int = 2, passes: list[str] | None = None, verify_each: bool = False,
             print_after: set[str] | str | None = None, stats: list | None = None,
             out: TextIO | None = None) -> Graph:
    """Run the passes of ``level`` (or the named ``passes``) on a copy of ``graph``.

    verify_each: run the verifier after every pass.  print_after: pass names (or
    "all") after which to print the IR.  stats: a list to append PassStat rows to.
    """
    names = pipeline(level, passes)
    out = out or sys.stdout                         # looked up per call: stdout may be redirected
    if isinstance(print_after, str):
        print_after = set(PASSES) if print_after == "all" else {print_after}
    pipeline(passes=sorted(print_after or ()))      # an unknown name is an error, not silence
    for name in names:
        before, start = len(graph.nodes), time.perf_counter()
        graph = PASSES[name](graph)
        seconds = time.perf_counter() - start
        if verify_each:
            try:
                verify(graph)
            except VerifyError as e:
                raise VerifyError(f"after pass {name}: {e}") from None
        if stats is not None:
            stats.append(PassStat(name, before, len(graph.nodes), seconds))
        if print_after and name in print_after:
            from minic.ir.text import print_graph      # the text format imports the op registry only
            out.write(f"// after {name}\n{print_graph(graph, elide=True)}\n")
    return graph


def format_stats(rows: list[PassStat]) -> str:
    """--pass-stats as a table: pass, nodes before and after, time."""
    width = max([len("pass")] + [len(r.name) for r in rows])
    lines = [f"{'pass':<{width}}  {'before':>6}  {'after':>6}  {'time':>9}"]
    for r in rows:
        lines.append(f"{r.name:<{width}}  {r.nodes_before:>6}  {r.nodes_after:>6}  {r.seconds * 1e3:>6.2f} ms")
    if rows:
        first, last, total = rows[0].nodes_before, rows[-1].nodes_after, sum(r.seconds for r in rows)
        lines.append(f"{'total':<{width}}  {first:>6}  {last:>6}  {total * 1e3:>6.2f} ms")
    return "\n".join(lines)
