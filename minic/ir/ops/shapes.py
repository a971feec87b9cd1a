"""Shape helpers shared by the op families: broadcasting and axis normalisation."""
from __future__ import annotations

from minic.errors import UserError
from minic.ir.types import Dim, Shape


def broadcast(*shapes: Shape) -> Shape:
    """numpy-style broadcasting of (possibly symbolic) shapes."""
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise UserError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def norm_axis(axis: int, rank: int) -> int:
    """Map a negative axis to its positive form; raise if out of range."""
    require(-rank <= axis < rank, f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(axes: tuple[int, ...], rank: int) -> tuple[int, ...]:
    out = tuple(sorted(norm_axis(a, rank) for a in axes))
    require(len(set(out)) == len(out), f"axes {axes} repeat an axis")
    return out


def require(cond: bool, message: str) -> None:
    if not cond:
        raise UserError(message)
