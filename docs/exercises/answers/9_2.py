import numpy as np

from minic.errors import UserError
from minic.ir.loops import BinOp, Call, Select, const
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg
from minic.ir.ops.shapes import broadcast
from minic.ir.types import TensorType


def hypot_infer(attrs, types):
    a, b = types
    if a.dtype != b.dtype or not a.dtype.is_float:
        raise UserError(f"hypot needs two float inputs of one dtype, got {a.dtype.value} and {b.dtype.value}")
    return [TensorType(broadcast(a.shape, b.shape), a.dtype)]      # broadcast raises UserError itself


def hypot_reference(attrs, a, b):
    return np.hypot(a, b).astype(a.dtype)


def hypot_rule(site, index):
    """big * sqrt(1 + (small / big)²): a² + b² overflows f32 from |a| ~ 2e19 on, the ratio never does."""
    a, b = (Call("abs", (arg(x, index),)) for x in site.inputs)
    f = lambda v: const(v, a.dtype)
    big, small = BinOp("max", a, b), BinOp("min", a, b)
    ratio = BinOp("div", small, big)
    scaled = BinOp("mul", big, Call("sqrt", (BinOp("add", f(1.0), BinOp("mul", ratio, ratio)),)))
    return Select(BinOp("eq", big, f(0.0)), f(0.0), scaled)          # 0 / 0 would be NaN


define("hypot", OpKind.ELEMENTWISE, hypot_infer, hypot_reference, hypot_rule, arity=(2, 2),
       doc="sqrt(a² + b²), with broadcasting", torch="hypot")
