import numpy as np

from minic.errors import UserError
from minic.ir.loops import BinOp, Call, const
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg


def mish_infer(attrs, types):
    (x,) = types
    if not x.dtype.is_float:
        raise UserError(f"mish needs a float input, got {x.dtype.value}")
    return [x]


def mish_reference(attrs, x):
    softplus = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))      # never overflows
    return (x * np.tanh(softplus)).astype(x.dtype)


def mish_rule(site, index):
    x = arg(site.inputs[0], index)
    f = lambda v: const(v, x.dtype)
    softplus = BinOp("add", BinOp("max", x, f(0.0)),
                     Call("log", (BinOp("add", f(1.0), Call("exp", (Call("neg", (Call("abs", (x,)),)),))),)))
    return BinOp("mul", x, Call("tanh", (softplus,)))


define("mish", OpKind.ELEMENTWISE, mish_infer, mish_reference, mish_rule,
       doc="x * tanh(log(1 + exp(x)))", torch=lambda t, x: t.F.mish(x))
