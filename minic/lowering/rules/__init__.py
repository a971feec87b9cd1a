"""Compute rules: for every op of the registry, what one output element is.

A rule is ``rule(site, index) -> Expr``: ``site`` holds the node's attributes,
its inputs as ``Operand``s and its output types; ``index`` is the output
element's index, one expression per axis.  Rules are grouped by op family,
like the registry in ``minic/ir/ops/``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from minic.errors import UnsupportedError
from minic.ir.loops import Expr
from minic.ir.types import TensorType
from minic.lowering.compute import Fresh, Operand


@dataclass
class Site:
    """One node being lowered: what a rule may look at."""
    op: str
    attrs: Any
    inputs: list[Operand]
    outputs: list[TensorType]
    output: int                 # which output the rule is asked for (split has several)
    fresh: Fresh

    @property
    def out(self) -> TensorType:
        return self.outputs[self.output]


Rule = Callable[[Site, tuple[Expr, ...]], Expr]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Decorator: ``fn`` is the compute rule of ops ``names``."""
    def wrap(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return wrap


def get(op: str) -> Rule:
    try:
        return RULES[op]
    except KeyError:
        raise UnsupportedError(f"lowering: op '{op}' has no compute rule") from None


from minic.lowering.rules import elementwise, layout, reduce, contraction  # noqa: E402,F401
