"""Fusion: decide which nodes become one kernel, by setting ``Node.group``.

Lowering inlines a node into the kernel of its group, so fusing a producer into
its consumer means "recompute it wherever the consumer reads it" instead of
"store it, then load it back".  That is a win exactly when the producer is
read about once per element it produced.  The rules, walking consumers before
producers (so a chain grows backwards from its last op):

* A node joins the group of its consumer only if that consumer is its one user
  (and its result is not a graph output).
* At most one *anchor* per group: an op that reduces (matmul, conv2d, pooling,
  reductions, softmax, layer_norm).  Two anchors in one kernel would recompute
  the first inside the second's loop over its reduced axis.
* An anchor fuses forward only into elementwise ops and pure re-indexing
  (reshape, transpose ...): the epilogue (bias, activation, residual add) runs on
  the accumulator.  The anchor's result must broadcast along trailing axes only
  (a row statistic used across its row), never along leading ones.
* Into a contraction or pooling window, which reads each input element many
  times, only data movement fuses (a transpose or reshape feeding a matmul);
  arithmetic would be recomputed once per read.  A cast to 8-bit integers (a
  QuantizeLinear's, read by an int8 matmul or conv) counts as arithmetic: it ends
  its producer's kernel, which stores bytes, a quarter of the f32 it would store,
  and the micro-kernel reads them as they are (docs/int8.md).
* Nor does a concat of values computed for it alone (arithmetic that the concat is the
  one reader of: RoPE's two rotated halves).  In the contraction it would choose between
  its inputs at every read, and each input, arithmetic, would be a kernel of its own; as
  a kernel of its own it computes them and stores one tensor, read plainly.
* A concat of more than WIDE_CONCAT inputs fuses into no consumer.  Inlined, it is a tree
  of selects over all its inputs in the consumer's loop body, one function that LLVM's
  optimizer takes time superlinear in (10,000 inputs into an ``exp``: 70 s); stored, it is
  one copy nest per input (``lowering/kernel.py``), small nests that codegen emits in parts.
* A constant ``pad`` (see ``explicit-padding``) never fuses into a window: there it
  would test bounds once per tap.  It ends its producer's kernel instead, which
  then stores into the interior of the padded buffer (``lowering/kernel.py``).
* A window of a value (``slice``, ``squeeze``, ``unsqueeze``: each element read where
  it lies, at an offset) read by several nodes is first copied, one copy per reader,
  so each fuses into its reader: reading the window is one load with the offset, the
  same work as loading a stored copy, without the kernel that stores it (RoPE's two
  halves of q and k, each read by two products, were 4 kernels per layer).
* At most MAX_GROUP nodes per group.  Lowering inlines a group into one
  expression per stored value, as deep as the group's chain is long, and every
  pass over expressions (simplify, codegen) walks that depth: a cap keeps it
  bounded however long the graph's chains are (TVM's FuseOps caps its groups too,
  at 256 ops).  A longer chain becomes several kernels, each storing its last value.
"""
from __future__ import annotations

from dataclasses import replace

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.ops import OpKind
from minic.ir.types import DType
from minic.passes.rewrite import clone, fresh_name

ANCHORS = (OpKind.REDUCTION, OpKind.NORMALIZE, OpKind.CONTRACTION, OpKind.WINDOW)
MANY_READS = (OpKind.CONTRACTION, OpKind.WINDOW)
REINDEX = ("reshape", "flatten", "squeeze", "unsqueeze", "transpose", "identity", "dropout")
WINDOWS = ("slice", "squeeze", "unsqueeze")
MAX_GROUP = 64
WIDE_CONCAT = 64


def _kind(node: Node) -> OpKind:
    return ops.get(node.op).kind


def _stores_padded(node: Node) -> bool:
    return node.op == "pad" and node.attrs.mode == "constant"


def _moves_data(node: Node) -> bool:
    return _kind(node) == OpKind.LAYOUT or node.op in ("identity", "dropout", "cast")


def _to_bytes(node: Node) -> bool:
    """A cast to u8 or i8: int8 activations, stored as such (not recomputed at every read)."""
    return node.op == "cast" and node.attrs.dtype in (DType.u8, DType.i8)


def _joins_computed(node: Node, producer: dict, users: dict, outputs: set) -> bool:
    """Whether ``node`` is a concat of a value that arithmetic computes for it alone."""
    return node.op == "concat" and any(
        v in producer and not _moves_data(producer[v]) and _kind(producer[v]) not in ANCHORS
        and v not in outputs and all(u is node for u in users[v]) for v in node.inputs)


def _broadcasts_trailing_only(produced: tuple, consumed: tuple) -> bool:
    """True when ``produced`` equals ``consumed`` except for 1s on trailing axes."""
    k = len(produced)
    while k and produced[k - 1] == 1:
        k -= 1
    return len(produced) == len(consumed) and produced[:k] == consumed[:k]


def _copy_windows(g: Graph) -> None:
    """w = slice(x) read by a and b  ->  w = slice(x) read by a, w_1 = slice(x) read by b, each
    placed just before its reader (in place).  Readers before producers, so a window of a
    window is copied for each copy."""
    users, outputs = g.users(), set(g.outputs)
    for node in reversed(list(g.nodes)):            # the copies go after the node: never visited
        v = node.outputs[0]
        readers = list({id(u): u for u in users.get(v, [])}.values())
        if node.op not in WINDOWS or len(readers) < 2 or v in outputs:
            continue
        g.nodes.remove(node)
        g.nodes.insert(g.nodes.index(readers[0]), node)
        for reader in readers[1:]:
            copy = replace(node, inputs=list(node.inputs), outputs=[Value(fresh_name(g, v.name), v.type)])
            reader.inputs = [copy.outputs[0] if x is v else x for x in reader.inputs]
            for x in node.inputs:
                users[x].append(copy)
            g.nodes.insert(g.nodes.index(reader), copy)


def fuse_groups(graph: Graph) -> Graph:
    """x -> f -> g -> y  ->  x -> [f; g] -> y (one kernel) when f's only user is g and the rules allow."""
    g = clone(graph)
    _copy_windows(g)
    users, producer, outputs = g.users(), g.producers(), set(g.outputs)
    group = {id(n): i for i, n in enumerate(g.nodes)}
    has_anchor = {i: _kind(n) in ANCHORS for i, n in enumerate(g.nodes)}
    members = {i: 1 for i in range(len(g.nodes))}
    many_reads: set[int] = set()           # nodes whose result a contraction of their group re-reads
    for node in reversed(g.nodes):
        if _kind(node) in MANY_READS:
            many_reads.add(id(node))
        consumers = {id(u): u for v in node.outputs for u in users.get(v, [])}
        if len(consumers) != 1 or any(v in outputs for v in node.outputs):
            continue
        consumer = next(iter(consumers.values()))
        target = group[id(consumer)]
        if members[target] >= MAX_GROUP or (node.op == "concat" and len(node.inputs) > WIDE_CONCAT):
            continue
        if _kind(node) in ANCHORS:
            reindex = consumer.op in REINDEX or _stores_padded(consumer)
            # an epilogue: re-indexing, or elementwise with the result broadcast along trailing axes only
            out = consumer.outputs[0].type.shape
            fits = reindex or (_kind(consumer) == OpKind.ELEMENTWISE
                               and all(_broadcasts_trailing_only(v.type.shape, out) for v in node.outputs))
            if has_anchor[target] or not fits:
                continue
            has_anchor[target] = True
        elif _kind(consumer) in MANY_READS or id(consumer) in many_reads:     # it would be re-read
            if (not _moves_data(node) or _to_bytes(node) or _stores_padded(node)
                    or _joins_computed(node, producer, users, outputs)):
                continue
            many_reads.add(id(node))
        group[id(node)] = target
        members[target] += 1
    # Number the groups 0, 1, ... in order of their first node.
    numbering: dict[int, int] = {}
    for n in g.nodes:
        n.group = numbering.setdefault(group[id(n)], len(numbering))
    return g
