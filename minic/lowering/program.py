"""A whole Graph -> a Program: one kernel per fusion group, in dependency order,
over buffers for the inputs, outputs, weights and the values kernels pass on.

Groups come from ``Node.group`` (set by the ``fuse-groups`` pass); a node
without a group is a kernel of its own.  The lifetimes recorded for temporaries
(first and last kernel that touch them) are what the runtime's buffer plan
uses to let temporaries share memory.
"""
from __future__ import annotations

import heapq
import re

from minic.errors import UserError
from minic.ir.graph import Graph, Node, Value
from minic.ir.loops import Buffer, Program, Role
from minic.ir.types import derived_dims, symbols
from minic.ir.verify import verify
from minic.lowering.kernel import build_kernel, copy_kernel


def _groups(graph: Graph) -> tuple[list[list[Node]], set[Value]]:
    """The fusion groups, ordered so that each comes after the groups it reads from, and the values
    that a group reads from another (each stored by its kernel)."""
    members: dict[object, list[Node]] = {}
    for i, node in enumerate(graph.nodes):
        members.setdefault(("g", node.group) if node.group is not None else ("n", i), []).append(node)
    producer = {v: key for key, nodes in members.items() for n in nodes for v in n.outputs}
    reads = {key: {v for n in nodes for v in n.inputs if v in producer and producer[v] != key}
             for key, nodes in members.items()}                  # what each group reads from others
    deps = {key: {producer[v] for v in values} for key, values in reads.items()}
    # Of the ready groups, the one first in the graph (a heap of positions: linear in the graph).
    keys = list(members)
    waiting = {key: len(deps[key]) for key in keys}
    users: dict[object, list[object]] = {}
    for key in keys:
        for d in deps[key]:
            users.setdefault(d, []).append(key)
    ready = [i for i, key in enumerate(keys) if not waiting[key]]
    position = {key: i for i, key in enumerate(keys)}
    done: dict[object, list[Node]] = {}          # the groups in the order they run
    while ready:
        key = keys[heapq.heappop(ready)]
        done[key] = members[key]
        for user in users.get(key, ()):
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, position[user])
    if len(done) < len(members):
        raise UserError(f"graph @{graph.name}: fusion groups depend on each other in a cycle")
    return list(done.values()), set().union(*reads.values())


def _buffer_name(name: str, taken: set[str]) -> str:
    """A graph value's name made a C identifier, and one not in ``taken`` (added to it)."""
    base = re.sub(r"\W", "_", name)
    if not base or base[0].isdigit() or re.fullmatch(r"(acc|[ikrpqc])\d*", base):
        base = "v" + base                        # keep clear of loop and accumulator names
    out, n = base, 1
    while out in taken:
        out, n = f"{base}_{n}", n + 1
    taken.add(out)
    return out


def lower_graph(graph: Graph, round_inlined: bool = True) -> Program:
    """Lower every fusion group of ``graph`` to a kernel; see the module docstring.

    ``round_inlined``: an f16/bf16 value computed inside a kernel (not stored) is rounded to
    its type where it is used, as the graph means and the interpreter does.  ``False`` keeps
    it in f32 registers: what ``precision="f16"`` wants of the f16 values it made (docs/f16.md)."""
    verify(graph)
    sizes = tuple(sorted(set().union(*(symbols(d) for v in graph.inputs for d in v.type.shape))))
    taken: set[str] = set()

    def buffer(v: Value, role: Role, suffix: str = "") -> Buffer:
        return Buffer(_buffer_name(v.name + suffix, taken), v.type.shape, v.type.dtype, role)

    buffers: dict[Value, Buffer] = {v: buffer(v, Role.INPUT) for v in graph.inputs}
    buffers.update((v, buffer(v, Role.CONST)) for v in graph.constants if v.data.size != 1)   # scalars: literals
    groups, crossing = _groups(graph)
    outputs: list[Buffer] = []
    for v in graph.outputs:                      # each output gets a buffer of its own
        own = v not in buffers and not v.is_constant     # not an input, a constant or a repeat
        outputs.append(buffer(v, Role.OUTPUT, "" if own else "_out"))
        if own:
            buffers[v] = outputs[-1]             # its kernel stores it there

    kernels, lifetimes, checks = [], {}, {}
    describe = lambda n: n.describe(graph.nodes.index(n))       # a data check's message names its node
    for nodes in groups:
        # The values the group stores: graph outputs (their buffers are outputs), and those another kernel reads.
        stores = [v for n in nodes for v in n.outputs if buffers.get(v) in outputs or v in crossing]
        buffers.update((v, buffer(v, Role.TEMP)) for v in stores if v not in buffers)
        if not stores:
            continue                             # nothing uses the group: dead code
        label = "_".join(dict.fromkeys(n.op for n in nodes))[:40]
        kernels.append(build_kernel(f"k{len(kernels)}_{label}", nodes, stores, buffers, sizes, checks, describe,
                                    round_inlined))
    for v, target in zip(graph.outputs, outputs):
        if v not in buffers:                     # a scalar constant returned as is
            buffers[v] = buffer(v, Role.CONST)
        if buffers[v] is not target:             # not its own: copied into its output buffer
            kernels.append(copy_kernel(f"k{len(kernels)}_copy", buffers[v], target, sizes))
    for k, kernel in enumerate(kernels):
        for b in kernel.params:
            if b.role == Role.TEMP:                  # from the first kernel that touches it to the last
                lifetimes[b.name] = (lifetimes.get(b.name, (k, k))[0], k)
    used = {b.name for k in kernels for b in k.params}
    constants = {b.name: v.data for v, b in buffers.items() if b.role == Role.CONST and b.name in used}
    table = {b.name: b for b in buffers.values() if b.role != Role.CONST or b.name in used}
    table.update((b.name, b) for b in outputs)
    values = {b.name: v.name for v, b in buffers.items()}
    return Program(graph.name, [buffers[v] for v in graph.inputs], outputs, constants, table,
                   kernels, sizes, lifetimes, values, checks,
                   tuple(sorted(set().union(*(derived_dims(d) for v in graph.values() for d in v.type.shape)))))
