"""Elementwise ops: out[i] = f(a[i'], b[i''], ...), where i', i'' are the numpy
broadcast images of i.  Each op is one row: its numpy reference, its compute
rule (a Loop IR expression of its inputs' elements) and its torch spelling."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from minic.ir.compute import DataCheck, Operand, Site, as_i64, broadcast_index
from minic.ir.loops import BinOp, BitCast, Call, Cast, Expr, Select, const, power
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import broadcast, require
from minic.ir.types import DType, TensorType

def erf(x: np.ndarray) -> np.ndarray:
    """erf in f64, rounded to x's type: torch's vectorized erf (numpy has none; ``math.erf`` a
    value at a time is 30x slower, and gives the same f32 values)."""
    import torch
    return torch.special.erf(torch.from_numpy(np.asarray(x, np.float64))).numpy().astype(x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    # Two branches so that exp never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def sigmoid_expr(x: Expr) -> Expr:
    # 1 / (1 + exp(-x)): for very negative x, exp overflows to inf and the
    # quotient is 0, the right limit; no NaN can appear.
    one = const(1.0, x.dtype)
    return BinOp("div", one, BinOp("add", one, Call("exp", (Call("neg", (x,)),))))


def arg(x: Operand, index: tuple[Expr, ...]) -> Expr:
    """Input ``x`` at output ``index``, broadcasting as numpy does."""
    return x.at(broadcast_index(index, x.type.shape))


def _unary_infer(name: str, float_only: bool):
    def infer(attrs, ts: list[TensorType]) -> list[TensorType]:
        require(not (float_only and not ts[0].dtype.is_float), f"{name} needs a float input, got {ts[0].dtype.value}")
        require(ts[0].dtype != DType.bool, f"{name} does not take bool")
        return [ts[0]]
    return infer


def broadcast_infer(name: str, what: str = "inputs", accepts: Callable[[DType], bool] = lambda d: True,
                    result: DType | None = None):
    """Inputs of one dtype that ``accepts`` takes, broadcast together; the result has dtype
    ``result``, else theirs."""
    def infer(attrs, ts: list[TensorType]) -> list[TensorType]:
        dtype = ts[0].dtype
        require(all(t.dtype == dtype for t in ts) and accepts(dtype),
                f"{name} needs {what} of one dtype, got {', '.join(t.dtype.value for t in ts)}")
        return [TensorType(broadcast(*(t.shape for t in ts)), result or dtype)]
    return infer


def _logical_infer(name: str):
    """Bools (logical), or integers of one dtype (bitwise): torch's bitwise_* take both."""
    return broadcast_infer(name, "bool or integer inputs", lambda d: d == DType.bool or d.is_int)


def unary(name: str, sample: str = "float_unary", reference: Callable[[np.ndarray], np.ndarray] | None = None,
          compute: Callable[[Expr], Expr] | None = None, torch: str | None = None) -> None:
    """out = f(x), by default numpy's, the Loop IR's and torch's function ``name``;
    ``sample`` "unary" for ops that also take ints, else float only."""
    reference, compute = reference or getattr(np, name), compute or (lambda x: Call(name, (x,)))
    define(name, OpKind.ELEMENTWISE, _unary_infer(name, sample != "unary"), lambda attrs, x: reference(x),
           lambda site, index: compute(arg(site.inputs[0], index)), doc=f"{name}(x), elementwise",
           torch=torch or name, sample=sample)


# The functions of one name in numpy, the Loop IR and torch, by random-graph spec ("onnx" names
# none, so the cross-check does not generate them: the ONNX node suite checks them).
_SAME_NAME = {"unary": ["abs"], "exp": ["exp"], "domain": ["log", "sqrt"], "tan": ["tan"],
              "bounded_unary": ["tanh", "sin", "cos"], "rounding": ["floor", "ceil", "round"],
              "onnx": ["sinh", "cosh"]}
for _sample, _names in _SAME_NAME.items():              # round halves to even, as in ONNX and PyTorch
    for _name in _names:
        unary(_name, _sample)
unary("neg", "unary", np.negative)
unary("relu", "unary", lambda x: np.maximum(x, x.dtype.type(0)), lambda x: BinOp("max", x, const(0, x.dtype)))
unary("rsqrt", "domain", lambda x: (1 / np.sqrt(x)).astype(x.dtype),
      lambda x: BinOp("div", const(1.0, x.dtype), Call("sqrt", (x,))))
unary("sigmoid", "bounded_unary", sigmoid, sigmoid_expr)
unary("silu", "float_unary", lambda x: (x * sigmoid(x)).astype(x.dtype),
      lambda x: BinOp("mul", x, sigmoid_expr(x)), "nn.functional.silu")
unary("erf", "bounded_unary", erf)
for _name in ("asin", "acos", "atan", "asinh", "acosh", "atanh"):       # numpy's arcsin, ...
    unary(_name, "onnx", getattr(np, "arc" + _name[1:]))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C semantics: round toward zero; exact in integers (a float quotient loses u64/i64 digits).
    Its checks (int_div_checks) refuse a zero divisor and MIN / -1 first; a stand-in divisor of 1
    keeps numpy quiet when constant folding asks without them."""
    with np.errstate(over="ignore"):
        b = np.where(np.asarray(b) == 0, 1, b).astype(b.dtype)
        q = np.floor_divide(a, b)
        return (q + ((a - q * b != 0) & ((a < 0) != (b < 0)))).astype(a.dtype)


def div_checks(site: Site) -> list[DataCheck]:
    """Integer division (div, mod) needs a nonzero divisor (float division gives inf or nan)."""
    if site.out.dtype.is_float:
        return []
    b = site.inputs[1]
    divisor = lambda index: arg(b, index)
    return [DataCheck(site.out.shape, lambda index: BinOp("eq", divisor(index), const(0, b.type.dtype)),
                      lambda index: as_i64(divisor(index)), "integer division by zero")]


def int_div_checks(site: Site) -> list[DataCheck]:
    """div: also MIN / -1, whose quotient -MIN the dtype cannot hold (C leaves it undefined, x86's
    idiv traps, PyTorch and ONNX Runtime die of SIGFPE): refused, not wrapped to MIN.  (mod needs
    no such check: MIN mod -1 is 0, which every path gives.)"""
    checks = div_checks(site)
    dtype = site.out.dtype
    if dtype.is_float or dtype.is_unsigned:
        return checks
    a, b = site.inputs
    low = int(np.iinfo(dtype.numpy).min)
    overflows = lambda index: BinOp("and", BinOp("eq", arg(a, index), const(low, dtype)),    # noqa: E731
                                    BinOp("eq", arg(b, index), const(-1, dtype)))
    return checks + [DataCheck(site.out.shape, overflows, lambda index: as_i64(arg(a, index)),
                               "integer overflow: {value} / -1 does not fit " + dtype.value)]


def binary(name: str, reference: Callable, torch, result: DType | None = None,
           sample: str | None = "arithmetic", infer=None, compute=None,
           doc: str = "{}(a, b), elementwise with broadcasting", **more) -> None:
    """out = a ∘ b with broadcasting, of a's dtype or ``result``; the rule is, by default, the
    Loop IR operator ``name``."""
    define(name, OpKind.ELEMENTWISE, infer or broadcast_infer(name, result=result),
           lambda attrs, a, b: reference(a, b).astype(result.numpy if result else a.dtype),
           compute or (lambda site, index: BinOp(name, *(arg(x, index) for x in site.inputs))), arity=(2, 2),
           doc=doc.format(name), torch=torch, sample=sample, **more)


binary("add", np.add, "add")
binary("sub", np.subtract, "sub")
binary("mul", np.multiply, "mul")
binary("max", np.maximum, "maximum")
binary("min", np.minimum, "minimum")
binary("div", lambda a, b: np.divide(a, b) if a.dtype.kind == "f" else _int_div(a, b), "div", sample="div",
       checks=int_div_checks, doc="div(a, b), elementwise with broadcasting; integers: C's truncating quotient, "
                                  "a zero divisor or MIN / -1 is a DataError")
binary("eq", np.equal, "eq", DType.bool, "compare")
binary("lt", np.less, "lt", DType.bool, "compare")
binary("gt", np.greater, "gt", DType.bool, "compare")
# ge and le are ops of their own, not not(lt) and not(gt): with a NaN operand every ordered
# comparison is false (IEEE 754, PyTorch, ONNX), and the complement of a false one is true.
binary("ge", np.greater_equal, "ge", DType.bool, "compare")
binary("le", np.less_equal, "le", DType.bool, "compare")


def _logical_torch(name: str):
    """The torch spelling of and/or/xor: logical_* on bools (what torch.onnx exports), bitwise_* else."""
    def spelling(t, a, b):
        return getattr(t.torch, ("logical_" if a.dtype == t.torch.bool else "bitwise_") + name)(a, b)
    return spelling


for _name in ("and", "or", "xor"):          # numpy's bitwise_* are logical on bools too
    binary(_name, getattr(np, "bitwise_" + _name), _logical_torch(_name), infer=_logical_infer(_name),
           sample="logical", doc="{}(a, b): logical on bools, bitwise on integers, with broadcasting")


def _not_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = arg(site.inputs[0], index)
    if x.dtype == DType.bool:
        return BinOp("eq", x, const(False, DType.bool))
    ones = np.iinfo(x.dtype.numpy).max if x.dtype.is_unsigned else -1        # every bit set
    return BinOp("xor", x, const(ones, x.dtype))


define("not", OpKind.ELEMENTWISE, _logical_infer("not"), lambda attrs, x: np.invert(x),
       _not_rule, doc="not(x): logical on bools, bitwise (~x) on integers",
       torch=lambda t, x: t.torch.logical_not(x) if x.dtype == t.torch.bool else t.torch.bitwise_not(x))


def power_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    base, exponent = site.inputs
    x = arg(base, index)
    if not x.dtype.is_float:                 # integers: repeated squaring (codegen's int_power)
        return Call("pow", (x, arg(exponent, index)))
    # x ** 2 (RMSNorm's x.pow(2)) is a multiply; a libm pow would be slow and less exact.
    simple = {2.0: BinOp("mul", x, x), 1.0: x, 0.5: Call("sqrt", (x,))}
    e = float(exponent.data.reshape(())) if exponent.data is not None and exponent.data.size == 1 else None
    return simple[e] if e in simple else Call("pow", (x, arg(exponent, index)))


def power_checks(site: Site) -> list[DataCheck]:
    """Integer 0 to a negative power is a division by zero (a float one is inf)."""
    base, exponent = site.inputs
    if site.out.dtype.is_float or site.out.dtype.is_unsigned:
        return []
    zero = const(0, base.type.dtype)
    fails = lambda index: BinOp("and", BinOp("eq", arg(base, index), zero),          # noqa: E731
                                BinOp("lt", arg(exponent, index), zero))
    return [DataCheck(site.out.shape, fails, lambda index: as_i64(arg(exponent, index)),
                      "pow: integer 0 to a negative power {value} (division by zero)")]


binary("pow", power, "pow", sample=None, compute=power_rule, checks=power_checks)


@dataclass(frozen=True)
class GeluAttrs:
    approximate: Literal["none", "tanh"] = "none"    # "none": x·Φ(x) with erf; "tanh": the tanh approximation


def gelu(attrs: GeluAttrs, x: np.ndarray) -> np.ndarray:
    if attrs.approximate == "tanh":
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.sqrt(2).astype(x.dtype)))).astype(x.dtype)


def gelu_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = arg(site.inputs[0], index)
    f = lambda v: const(v, x.dtype)
    half_x = BinOp("mul", f(0.5), x)
    if site.attrs.approximate == "tanh":
        cube = BinOp("mul", BinOp("mul", x, x), x)
        inner = BinOp("mul", f(0.7978845608028654), BinOp("add", x, BinOp("mul", f(0.044715), cube)))
        return BinOp("mul", half_x, BinOp("add", f(1.0), Call("tanh", (inner,))))
    return BinOp("mul", half_x, BinOp("add", f(1.0), Call("erf", (BinOp("mul", x, f(0.7071067811865476)),))))


define("gelu", OpKind.ELEMENTWISE, _unary_infer("gelu", True), gelu, gelu_rule, GeluAttrs,
       doc="gelu(x) = x·Φ(x) (erf form) or its tanh approximation",
       torch=lambda t, x: t.F.gelu(x, approximate=t.attrs.approximate))


def _where_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    cond, a, b = ts
    require(cond.dtype == DType.bool, f"where: condition must be bool, got {cond.dtype.value}")
    require(a.dtype == b.dtype, f"where: branch dtypes differ: {a.dtype.value} and {b.dtype.value}")
    return [TensorType(broadcast(cond.shape, a.shape, b.shape), a.dtype)]


define("where", OpKind.ELEMENTWISE, _where_infer, lambda attrs, c, a, b: np.where(c, a, b),
       lambda site, index: Select(*(arg(x, index) for x in site.inputs)), arity=(3, 3),
       doc="where(cond, a, b): a where cond else b", torch="where")


@dataclass(frozen=True)
class CastAttrs:
    dtype: DType


define("cast", OpKind.ELEMENTWISE, lambda attrs, ts: [TensorType(ts[0].shape, attrs.dtype)],
       lambda attrs, x: x.astype(attrs.dtype.numpy),
       lambda site, index: Cast(site.attrs.dtype, arg(site.inputs[0], index)), CastAttrs,
       doc="cast(x) to another dtype", f16_via_f32=False,         # its result dtype is the attribute
       torch=lambda t, x: x.to(t.dtype(t.attrs.dtype)))


def _bitcast_infer(attrs: CastAttrs, ts: list[TensorType]) -> list[TensorType]:
    src, dst = ts[0].dtype, attrs.dtype
    require(src.numpy.itemsize == dst.numpy.itemsize,
            f"bitcast: {src.value} and {dst.value} differ in width")
    # f16/bf16 are computed in f32 (lowering/precision.py): their bits are not at hand in a kernel
    require(not (src.is_storage_float or dst.is_storage_float), f"bitcast: {src.value} to {dst.value} is not supported")
    return [TensorType(ts[0].shape, dst)]


define("bitcast", OpKind.ELEMENTWISE, _bitcast_infer, lambda attrs, x: x.view(attrs.dtype.numpy),
       lambda site, index: BitCast(site.attrs.dtype, arg(site.inputs[0], index)), CastAttrs,
       doc="bitcast(x): the same bits read as another dtype of the same width (numpy's x.view)", f16_via_f32=False,
       torch=lambda t, x: x.view(t.dtype(t.attrs.dtype)))


@dataclass(frozen=True)
class DropoutAttrs:
    p: float = 0.5

    def check(self) -> None:
        require(0.0 <= self.p < 1.0, f"dropout: p must be in [0, 1), got {self.p}")


def identity(site: Site, index: tuple[Expr, ...]) -> Expr:
    return arg(site.inputs[0], index)


define("identity", OpKind.ELEMENTWISE, lambda attrs, ts: [ts[0]], lambda attrs, x: x.copy(), identity,
       doc="identity(x) = x", torch=lambda t, x: x.clone(), sample="unary")
define("dropout", OpKind.ELEMENTWISE, lambda attrs, ts: [ts[0]], lambda attrs, x: x.copy(), identity, DropoutAttrs,
       doc="dropout(x) at inference = x", torch=lambda t, x: t.F.dropout(x, t.attrs.p, training=False))
