"""Shape helpers shared by the op families: broadcasting and axis normalisation."""
from __future__ import annotations

import itertools

from minic.errors import UserError
from minic.ir.types import Dim, Shape


def broadcast(*shapes: Shape) -> Shape:
    """numpy-style broadcasting of (possibly symbolic) shapes."""
    out: list[Dim] = []
    for dims in itertools.zip_longest(*(s[::-1] for s in shapes), fillvalue=1):    # aligned at the last axis
        sizes = set(dims) - {1}
        if len(sizes) > 1:
            raise UserError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out[::-1])


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
