from minic.ir.compute import count, reduce_over
from minic.ir.loops import BinOp, Call, const
from minic.ir.ops.shapes import norm_axis


def RULE(site, index):
    """(x - mean) / sqrt(var + eps) * scale + bias over the axes from ``axis`` on.  The variance is
    the mean of (x - mean)²: the mean of x² minus mean² loses every digit when the mean is large."""
    x = site.inputs[0]
    dt = x.type.dtype
    first = norm_axis(site.attrs.axis, x.type.rank)
    axes = tuple(range(first, x.type.rank))
    n = count(x.type.shape[first:], dt)
    mean = BinOp("div", reduce_over(site, x, axes, True, index, "sum"), n)
    centred = lambda e: BinOp("sub", e, mean)
    var = BinOp("div", reduce_over(site, x, axes, True, index, "sum", lambda e: BinOp("mul", centred(e), centred(e))), n)
    y = BinOp("div", centred(x.at(index)), Call("sqrt", (BinOp("add", var, const(site.attrs.eps, dt)),)))
    for op, param in zip(("mul", "add"), site.inputs[1:]):     # the scale and the bias, when given, over the normalized axes
        y = BinOp(op, y, param.at(index[first:]))
    return y
