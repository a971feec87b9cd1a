"""The op registry: every op of the tensor IR, declared once, in the file of its
family (elementwise.py, reduce.py, normalize.py, window.py, contraction.py,
layout.py, dynamic.py, data_sized.py, control.py ...), with everything minic knows about it:

* its typed attributes, its shape/dtype inference and its numpy reference --
  the semantics: the interpreter runs them, constant folding reuses them, and
  every compiled path is tested against them;
* its kind (how it touches memory: fusion decides by it) and its compute rule,
  what one output element is (``minic.ir.compute``), which lowering turns into loops;
* its torch spelling (the cross-checks replay a graph in PyTorch with it) and the
  random-graph generator's spec that fits it (``minic/verify/op_specs.py``).

docs/09-adding-an-op.md walks through adding one.
"""
from __future__ import annotations

import functools
import types
import typing
from dataclasses import MISSING, dataclass, fields, replace
from enum import Enum
from typing import Any, Callable, Literal, Union

import numpy as np

from minic.errors import UserError
from minic.ir.compute import Checks, Rule, check_arrays
from minic.ir.types import Dim, DType, TensorType
from minic.registry import Registry


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
    compute: Rule | None = None             # compute(site, index) -> the output element at index
    attrs: type = NoAttrs
    arity: tuple[int, int] = (1, 1)         # min and max number of inputs
    doc: str = ""
    f16_via_f32: bool = True                # define() makes f16 mean storage only (see via_f32)
    # The torch spelling (minic/verify/to_torch.py): a name under ``torch``
    # ("nn.functional.gelu") called with the inputs, or fn(call, *inputs).
    torch: str | Callable[..., Any] | None = None
    sample: str | None = None               # the random graphs' spec, when not named after the op
    checks: Checks | None = None            # the input data its result is undefined for (compute.DataCheck)
    sized_by_data: bool = False             # its output size is decided by the data (data_sized.py)

    def check_attrs(self, attrs: Any) -> None:
        """Raise UserError unless ``attrs`` is this op's attribute dataclass with valid fields."""
        if type(attrs) is not self.attrs:
            raise UserError(f"{self.name}: attributes must be {self.attrs.__name__}, got {type(attrs).__name__}")
        for name, hint in field_types(self.attrs).items():
            value = getattr(attrs, name)
            if not conforms(value, hint):
                raise UserError(f"{self.name}: attribute '{name}' must be {describe_type(hint)}, got {value!r}")
        getattr(attrs, "check", lambda: None)()        # the class's own checks, if it has any

    def make_attrs(self, **values: Any) -> Any:
        """Build the attribute dataclass from keyword values (the text parser's path)."""
        names = {f.name for f in fields(self.attrs)}
        unknown = set(values) - names
        if unknown:
            raise UserError(f"{self.name}: unknown attribute(s) {sorted(unknown)}; it takes {sorted(names) or 'none'}")
        missing = [f.name for f in fields(self.attrs) if f.name not in values
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise UserError(f"{self.name} needs attribute(s) {', '.join(missing)}")
        attrs = self.attrs(**values)
        self.check_attrs(attrs)
        return attrs


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The declared type of each field of an attribute dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def conforms(value: Any, hint: Any) -> bool:
    """Whether an attribute value has its field's declared type (bools are not ints)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is Literal:                   # a choice among words: Literal["constant", "reflect", "edge"]
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        hints = [args[0]] * len(value) if args[-1] is Ellipsis else list(args)
        return len(hints) == len(value) and all(conforms(v, h) for v, h in zip(value, hints))
    if hint in (int, float):                # an int is a float too
        return isinstance(value, (int, hint)) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True        # NoneType: only None


def describe_type(hint: Any) -> str:
    """A field type in words, for error messages: "a list of ints"."""
    if hint == Dim:
        return "a dim"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if origin is Literal:                   # strings, quoted as the text form writes them
        return "the string " + " or ".join(f'"{a}"' for a in args)
    if origin is tuple:                      # "a list of ints", "a list of 2 ints"
        count = "" if args[-1] is Ellipsis else f"{len(args)} "
        return f"a list of {count}{describe_type(args[0]).split(' ', 1)[-1]}s"
    return {int: "an int", float: "a float", bool: "true or false", str: "a string",
            DType: "a dtype (" + ", ".join(DType.__members__) + ")", type(None): "none"}.get(hint, str(hint))


REGISTRY: Registry = Registry("op")


def _storage_float(dtype: Any) -> bool:
    """f16 or bf16 (ml_dtypes' bfloat16, imported only where a model has bf16)."""
    return isinstance(dtype, np.dtype) and (dtype == np.float16 or dtype.name == "bfloat16")


def via_f32(reference: Callable[..., Any]) -> Callable[..., Any]:
    """The reference with f16 and bf16 as storage types: their inputs are read as
    f32, the op computes in f32 and its float results are rounded back once, at the
    end, as PyTorch's CPU kernels do (their "opmath" type).  numpy's own f16
    arithmetic would round after every step instead: layer_norm's (x - mean)**2
    overflows past 256, and a sum over a non-last axis accumulates in f16."""
    @functools.wraps(reference)
    def run(attrs: Any, *arrays: Any) -> Any:
        narrow_to = next((a.dtype for a in arrays if _storage_float(getattr(a, "dtype", None))), None)
        if narrow_to is None:
            return reference(attrs, *arrays)
        out = reference(attrs, *(a.astype(np.float32) if _storage_float(a.dtype) else a for a in arrays))
        narrow = lambda r: r.astype(narrow_to) if np.asarray(r).dtype == np.float32 else r
        return tuple(narrow(r) for r in out) if isinstance(out, tuple) else narrow(out)
    return run


def define(name: str, kind: OpKind, infer: Callable, reference: Callable, compute: Rule | None,
           attrs: type = NoAttrs, **more: Any) -> OpDef:
    """Declare op ``name`` (the fields of OpDef, in its order) and register it."""
    op = OpDef(name, kind, infer, reference, compute, attrs, **more)
    if op.f16_via_f32:
        op = replace(op, reference=via_f32(op.reference))
    if op.checks is not None:
        op = replace(op, reference=checked(op))
    return REGISTRY.put(op.name, op)


def checked(op: OpDef) -> Callable[..., Any]:
    """The reference, after the op's data checks (``OpDef.checks``) on its input arrays: the
    interpreter and constant folding refuse the data compiled code refuses, with its words."""
    reference = op.reference

    @functools.wraps(reference)
    def run(attrs: Any, *arrays: Any) -> Any:
        arrays = tuple(np.asarray(a) for a in arrays)
        types = [TensorType(a.shape, DType.of(a.dtype)) for a in arrays]
        check_arrays(op.name, op.checks, attrs, op.infer(attrs, types), arrays)
        return reference(attrs, *arrays)
    return run


def get(name: str) -> OpDef:
    return REGISTRY[name]


def names() -> list[str]:
    return sorted(REGISTRY)


# Importing the families fills the registry.
from minic.ir.ops import (elementwise, reduce, normalize, window, contraction, layout, dynamic, indexing, scan,  # noqa: E402,F401
                          data_sized, control)
