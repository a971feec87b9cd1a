"""Compute rules of elementwise ops: out[i] = f(a[i'], b[i'']) where i', i'' are
the broadcast images of i."""
from __future__ import annotations

from typing import Callable

from minic.errors import UnsupportedError
from minic.ir.loops import BinOp, Call, Cast, Expr, Select, const
from minic.ir.types import DType
from minic.lowering.compute import Operand, broadcast_index, fconst
from minic.lowering.rules import Site, rule


def arg(x: Operand, index: tuple[Expr, ...]) -> Expr:
    """Input ``x`` at output ``index``, broadcasting as numpy does."""
    return x.at(broadcast_index(index, x.type.shape))


def sigmoid(x: Expr) -> Expr:
    # 1 / (1 + exp(-x)): for very negative x, exp overflows to inf and the
    # quotient is 0, the right limit; no NaN can appear.
    one = fconst(1.0, x.dtype)
    return BinOp("div", one, BinOp("add", one, Call("exp", (Call("neg", (x,)),))))


UNARY: dict[str, Callable[[Expr], Expr]] = {
    "neg": lambda x: Call("neg", (x,)),
    "abs": lambda x: Call("abs", (x,)),
    "exp": lambda x: Call("exp", (x,)),
    "log": lambda x: Call("log", (x,)),
    "sqrt": lambda x: Call("sqrt", (x,)),
    "rsqrt": lambda x: BinOp("div", fconst(1.0, x.dtype), Call("sqrt", (x,))),
    "tanh": lambda x: Call("tanh", (x,)),
    "sigmoid": sigmoid,
    "relu": lambda x: BinOp("max", x, const(0, x.dtype)),
    "silu": lambda x: BinOp("mul", x, sigmoid(x)),
    "erf": lambda x: Call("erf", (x,)),
    "sin": lambda x: Call("sin", (x,)),
    "cos": lambda x: Call("cos", (x,)),
    "tan": lambda x: Call("tan", (x,)),
    "floor": lambda x: Call("floor", (x,)),
    "ceil": lambda x: Call("ceil", (x,)),
    "round": lambda x: Call("round", (x,)),
}


@rule(*UNARY)
def unary(site: Site, index: tuple[Expr, ...]) -> Expr:
    return UNARY[site.op](arg(site.inputs[0], index))


BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min",
          "eq": "eq", "lt": "lt", "gt": "gt", "and": "and", "or": "or", "xor": "ne"}   # xor of bools is !=


@rule(*BINARY)
def binary(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = (arg(x, index) for x in site.inputs)
    return BinOp(BINARY[site.op], a, b)


@rule("not")
def logical_not(site: Site, index: tuple[Expr, ...]) -> Expr:
    return BinOp("eq", arg(site.inputs[0], index), const(False, DType.bool))


@rule("pow")
def power(site: Site, index: tuple[Expr, ...]) -> Expr:
    base, exponent = site.inputs
    x = arg(base, index)
    if not x.dtype.is_float:
        raise UnsupportedError(f"pow of {x.dtype.value} is not supported by the minic backend")
    # x ** 2 (RMSNorm's x.pow(2)) is a multiply; a libm pow would be slow and less exact.
    if exponent.data is not None and exponent.data.size == 1:
        e = float(exponent.data.reshape(()))
        if e == 2.0:
            return BinOp("mul", x, x)
        if e == 1.0:
            return x
        if e == 0.5:
            return Call("sqrt", (x,))
    return Call("pow", (x, arg(exponent, index)))


@rule("gelu")
def gelu(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = arg(site.inputs[0], index)
    f = lambda v: fconst(v, x.dtype)
    half_x = BinOp("mul", f(0.5), x)
    if site.attrs.approximate == "tanh":
        cube = BinOp("mul", BinOp("mul", x, x), x)
        inner = BinOp("mul", f(0.7978845608028654), BinOp("add", x, BinOp("mul", f(0.044715), cube)))
        return BinOp("mul", half_x, BinOp("add", f(1.0), Call("tanh", (inner,))))
    return BinOp("mul", half_x, BinOp("add", f(1.0), Call("erf", (BinOp("mul", x, f(0.7071067811865476)),))))


@rule("where")
def where(site: Site, index: tuple[Expr, ...]) -> Expr:
    c, a, b = (arg(x, index) for x in site.inputs)
    return Select(c, a, b)


@rule("cast")
def cast(site: Site, index: tuple[Expr, ...]) -> Expr:
    return Cast(site.attrs.dtype, arg(site.inputs[0], index))


@rule("identity", "dropout")
def identity(site: Site, index: tuple[Expr, ...]) -> Expr:
    return arg(site.inputs[0], index)


@rule("batch_norm")
def batch_norm(site: Site, index: tuple[Expr, ...]) -> Expr:
    x, scale, bias, mean, var = site.inputs
    channel = (index[1],)
    dt = x.type.dtype
    inv = BinOp("div", scale.at(channel), Call("sqrt", (BinOp("add", var.at(channel), fconst(site.attrs.eps, dt)),)))
    return BinOp("add", BinOp("mul", BinOp("sub", x.at(index), mean.at(channel)), inv), bias.at(channel))

