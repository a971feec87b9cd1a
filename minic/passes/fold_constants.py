"""fold-constants: ``op(@c1, @c2, ...) -> @op(c1, c2, ...)``, computed by the op's numpy reference."""
from __future__ import annotations

import math

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Node, Value
from minic.ir.interpret import resolve
from minic.limits import ensure_values_fit
from minic.passes.rewrite import Match, rule

# Folding expand(@c, [4096, 4096]) would bake a large array into the model that
# the compiled code could compute cheaply; results above this many elements are
# folded only when they are no larger than the constants they come from.
SMALL = 1 << 16


def foldable(node: Node) -> bool:
    """All inputs constant, results static, and not much bigger than the inputs."""
    if not node.inputs or not all(v.is_constant for v in node.inputs):
        return False
    if ops.get(node.op).sized_by_data:            # a loop or an if runs its graphs on the host, not a reference
        return False
    if any(isinstance(d, str) for v in node.outputs for d in v.type.shape):
        return False
    try:
        resolve(node.attrs, {})                    # an attribute naming a symbol (T) needs run time
    except UserError:
        return False
    size = sum(math.prod(v.type.shape) for v in node.outputs)
    return size <= max(SMALL, sum(v.data.size for v in node.inputs))


@rule()
def fold(m: Match) -> tuple[Value, ...] | None:
    """op(@c1, @c2, ...) -> @op(c1, c2, ...): run nodes whose inputs are all constants once, now."""
    return m.folded(evaluate(m.node)) if foldable(m.node) else None


def evaluate(node: Node) -> tuple:
    """The node's results on its constant inputs, by the op's numpy reference."""
    ensure_values_fit(node.outputs, {}, f"folding {node.op} into a constant")
    result = ops.get(node.op).reference(node.attrs, *(v.data for v in node.inputs))
    return result if isinstance(result, tuple) else (result,)
