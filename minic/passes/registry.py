"""Every pass under its kebab-case name, and the optimisation levels as lists of names."""
from __future__ import annotations

from functools import partial
from typing import Callable

from minic.ir.graph import Graph
from minic.passes import (algebra, batchnorm, cse, dead_code, fold_constants, fuse_groups, identity, matmul_bias,
                          padding, reshapes, shape_chains, to_f16, winograd)
from minic.passes.rewrite import Rule, rewrite

Pass = Callable[[Graph], Graph]


def applying(*rules: Rule) -> Pass:
    """The pass that applies ``rules`` until none applies (``rewrite``): most passes are a table of rules."""
    return partial(rewrite, rules=rules)


PASSES: dict[str, Pass] = {
    "fold-constant-gather": applying(shape_chains.static_target, shape_chains.constant_gather,
                                     shape_chains.static_entries),
    "fold-constants": applying(fold_constants.fold),
    "eliminate-identity": applying(identity.identity, identity.same_type, identity.identity_permutation,
                                   identity.whole_slice),
    "simplify-algebra": applying(algebra.neutral_operand, algebra.double_negation, algebra.transpose_pair),
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
    # Changes the numbers (f16 storage), so it is in no level: CompileOptions.precision asks for it.
    "to-f16": to_f16.to_f16,
}

# Passes that change the numbers on purpose; every other pass computes exactly what it was given.
ROUNDING = {"to-f16"}

CLEANUP = ["eliminate-identity", "fold-constants", "eliminate-common-subexpr", "eliminate-dead-code"]

LEVELS: dict[int, list[str]] = {
    0: [],
    1: CLEANUP,
    # Shape programs first (they hide static reshapes), then constants, so that
    # folding batch norms and biases sees constant weights; cleanup; then the
    # rewrites for lowering: 3x3 convolutions in Winograd's form (GraphOptions.winograd),
    # padding as nodes of its own, the fusion groups.
    2: ["fold-constant-gather", "fold-constants", "eliminate-identity", "simplify-algebra",
        "fuse-reshapes", "fold-batchnorm", "fuse-matmul-bias"] + CLEANUP
       + ["winograd-conv2d", "explicit-padding", "fuse-groups"],
}
