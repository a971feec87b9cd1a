from minic.ir.compute import reduce_over
from minic.ir.loops import BinOp, Call
from minic.ir.ops.shapes import norm_axis


def RULE(site, index):
    """x - max x - log(sum exp(x - max x)) along the axis: subtracting the max keeps exp finite."""
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    peak = reduce_over(site, x, (axis,), True, index, "max")
    total = reduce_over(site, x, (axis,), True, index, "sum", lambda e: Call("exp", (BinOp("sub", e, peak),)))
    return BinOp("sub", BinOp("sub", x.at(index), peak), Call("log", (total,)))
