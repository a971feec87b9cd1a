"""explicit-padding: ``conv2d(x){padding=p} -> conv2d(pad(x, p, 0)){padding=0}``, and
``max_pool2d(x){padding=p} -> max_pool2d(pad(x, p, -inf)){padding=0}``; an int8 conv
``conv2d_integer(x, w, @z){padding=p} -> conv2d_integer(pad(x, p, z), w){padding=0}`` (its
padding reads the zero point ``@z``, a constant; docs/int8.md).  An int8 conv of C input
channels, C not a multiple of 4 (an image's 3), gets them padded to one, and its weights zero
filters there: the int8 micro-kernel takes four input channels a step (vpdpbusd).

A padded window reads some taps outside its input; lowered as it is, every tap
tests its row and column against the input's bounds, inside the innermost loop
of the convolution.  With the padding made a node of its own, the window's taps
are all in bounds and its loops run unguarded.  The ``pad`` itself costs nothing
extra after fusion: ``fuse-groups`` gives it to its producer's kernel, which then
stores straight into the interior of the padded buffer and fills the border.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from minic.ir.compute import initial
from minic.ir.graph import Node
from minic.passes.rewrite import Match, rule


def _pad_value(node: Node) -> float | None:
    """What ``node``'s window reads in its padding, when known now: 0 adds nothing to a sum, the
    type's lowest value (-inf, 0 for u8) never wins a max, an int8 conv's zero point is its 0."""
    if node.op == "max_pool2d":
        return float(initial("max", node.inputs[0].type.dtype).value)
    if node.op == "conv2d" or len(node.inputs) == 2:
        return 0.0
    z = node.inputs[2]
    return float(z.data) if z.is_constant else None      # a zero point known only at run time stays


@rule("conv2d", "max_pool2d", "conv2d_integer")
def pad_apart(m: Match) -> Node | None:
    """conv2d(x){padding=p} -> conv2d(pad(x, p, 0)){padding=0};  max_pool2d alike with -inf (its type's
    lowest value), conv2d_integer with @z"""
    node, x = m.node, m.node.inputs[0]
    more = _channels_to_add(node)
    if not (any(node.attrs.padding) or more) or not all(isinstance(d, int) for d in x.type.shape[2:]):
        return None
    if node.op == "max_pool2d" and node.attrs.ceil_mode:     # its last window may overhang the padding too
        return None
    value = _pad_value(node)
    if value is None:
        return None
    top, left, bottom, right = node.attrs.padding
    key = ("pad", id(x), node.attrs.padding, value, more)    # two windows may share one pad
    if key not in m.memo:
        m.memo[key] = m.emit("pad", [x], f"{x.name}_padded", pads=(0, 0, top, left, 0, more, bottom, right),
                             value=value)
    rest = node.inputs[1:] if node.op != "conv2d_integer" else [        # the pad reads z now
        m.constant(node.inputs[1].name + "_4", np.pad(node.inputs[1].data, ((0, 0), (0, more), (0, 0), (0, 0))))
        if more else node.inputs[1]]
    return replace(node, inputs=[m.memo[key], *rest], attrs=replace(node.attrs, padding=(0,) * 4))


def _channels_to_add(node: Node) -> int:
    """The zero channels that make an int8 conv's input channels a multiple of 4 (groups = 1,
    constant weights), else 0."""
    if node.op != "conv2d_integer" or node.attrs.groups != 1 or not node.inputs[1].is_constant:
        return 0
    return -node.inputs[1].type.shape[1] % 4
