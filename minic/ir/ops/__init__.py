"""The op registry: every op of the tensor IR, with its typed attributes, its
shape/dtype inference and its numpy reference implementation.

The reference implementations are the semantics: the interpreter runs them,
constant folding reuses them, and every compiled path is tested against them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Callable

from minic.errors import UserError
from minic.ir.types import TensorType


class OpKind(Enum):
    """How an op touches memory; lowering and fusion decide by this."""
    ELEMENTWISE = "elementwise"     # out[i] = f(in0[i], in1[i], ...) with broadcasting
    REDUCTION = "reduction"         # reduces some axes
    NORMALIZE = "normalize"         # softmax, layer_norm: a reduction and an elementwise map, one kernel
    CONTRACTION = "contraction"     # matmul, gemm, conv2d
    WINDOW = "window"               # pooling
    LAYOUT = "layout"               # reshape, transpose, slice, concat, gather ...: moves data


@dataclass(frozen=True)
class NoAttrs:
    """Ops without attributes."""


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: OpKind
    infer: Callable[[Any, list[TensorType]], list[TensorType]]
    reference: Callable[..., Any]           # reference(attrs, *numpy arrays) -> array | tuple
    attrs: type = NoAttrs
    arity: tuple[int, int] = (1, 1)         # min and max number of inputs
    doc: str = ""

    def check_attrs(self, attrs: Any) -> None:
        """Raise UserError unless ``attrs`` is this op's attribute dataclass with valid fields."""
        if type(attrs) is not self.attrs:
            raise UserError(f"{self.name}: attributes must be {self.attrs.__name__}, got {type(attrs).__name__}")
        check = getattr(attrs, "check", None)
        if check is not None:
            check()

    def make_attrs(self, **values: Any) -> Any:
        """Build the attribute dataclass from keyword values (the text parser's path)."""
        names = {f.name for f in fields(self.attrs)}
        unknown = set(values) - names
        if unknown:
            raise UserError(f"{self.name}: unknown attribute(s) {sorted(unknown)}; it takes {sorted(names) or 'none'}")
        try:
            attrs = self.attrs(**values)
        except TypeError as e:
            raise UserError(f"{self.name}: {e}") from None
        self.check_attrs(attrs)
        return attrs


REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name} registered twice")
    REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown op '{name}'") from None


def names() -> list[str]:
    return sorted(REGISTRY)


# Importing the families fills the registry.
from minic.ir.ops import elementwise, reduce, normalize, window, contraction, layout, dynamic  # noqa: E402,F401
