"""``torch.compile(model, backend="minic")``: minic as a TorchDynamo backend.

torch finds the backend through the ``torch_dynamo_backends`` entry point in
pyproject.toml, so no ``import minic`` is needed first.  What happens:

1. Dynamo captures the Python code as FX graphs (a graph break, such as a
   ``print``, ends one graph and starts another; Python runs in between).
2. AOTAutograd lowers each graph to ATen ops (functional: in-place updates come
   back as outputs), decomposed as minic's torch frontend decomposes them.
3. The ATen graph is partitioned by support (torch's
   ``CapabilityBasedPartitioner``, as OpenVINO's backend does): nodes minic's
   torch frontend converts form partitions; everything else stays with PyTorch.
4. Each partition becomes a ``MinicPartition``: on its first call at a new input
   signature it is exported (``minic.frontend.torch``) and compiled by minic.
   Axes Dynamo made symbolic (``dynamic=True``, or after a recompile) stay
   symbolic, so one compile serves every size; a partition that takes sizes as
   integers is compiled per signature.  A partition minic refuses runs in PyTorch
   from then on (said once in the log).  Tensors cross as numpy views of the
   same memory; the outputs are minic's fresh arrays, wrapped without a copy.

The log ``minic.dynamo`` (INFO) says what ran where: per graph, which ops each
partition holds and which were left to PyTorch; per compile, the shapes and the
time, or why PyTorch keeps the partition.

    model = torch.compile(model, backend="minic", options={"threads": 2})
"""
from __future__ import annotations

import copy
import logging
import time
from collections import Counter
from dataclasses import fields
from typing import Any

import torch
from torch import fx

from minic.errors import MinicError, UserError

log = logging.getLogger("minic.dynamo")

# Ops that move no data on their own: a partition of nothing but these is left to torch.
_LAYOUT_ONLY = ("torch.ops.aten.view", "torch.ops.aten._unsafe_view", "torch.ops.aten.reshape",
                "torch.ops.aten.permute", "torch.ops.aten.expand", "torch.ops.aten.t",
                "torch.ops.aten.transpose", "torch.ops.aten.unsqueeze", "torch.ops.aten.squeeze",
                "torch.ops.aten.slice", "torch.ops.aten.select", "torch.ops.aten.alias",
                "torch.ops.aten.clone", "torch.ops.aten.detach", "_operator.getitem")
_graphs = 0


def backend(gm: fx.GraphModule, example_inputs: list, options: dict | None = None, mode: str | None = None):
    """The Dynamo backend: ``gm`` (torch-level FX) -> a callable on the same inputs."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    compile_options = _compile_options(options)

    def compile_aten(aten_gm: fx.GraphModule, inputs: list):
        return make_boxed_func(partition(aten_gm, compile_options))
    return aot_autograd(fw_compiler=compile_aten, bw_compiler=compile_aten,
                        decompositions=_decompositions())(gm, example_inputs)


def _compile_options(options: dict | None):
    from minic.options import CompileOptions
    options = dict(options or {})
    known = {f.name for f in fields(CompileOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserError(f"torch.compile(backend='minic'): unknown option(s) {unknown}; it takes {sorted(known)}")
    return CompileOptions(**options)


def _decompositions() -> dict:
    """The decompositions minic's torch frontend uses (core ATen, less the ops it keeps whole)."""
    from minic.frontend.torch import KEEP
    table = dict(torch.export.default_decompositions().items())
    for op in KEEP:
        table.pop(op, None)
    return table


def supported(node: fx.Node) -> bool:
    """Whether minic's torch frontend converts ``node`` (shape arithmetic stays with torch:
    a partition takes sizes as inputs, never returns them)."""
    from minic.frontend.torch import handler_of
    if node.op != "call_function":
        return False
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
        return False
    if isinstance(val, (tuple, list)) and not all(isinstance(v, torch.Tensor) for v in val):
        return False
    return handler_of(node.target) is not None


def partition(gm: fx.GraphModule, options) -> fx.GraphModule:
    """``gm`` with every supported region replaced by a ``MinicPartition``."""
    global _graphs
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupport

    class Support(OperatorSupport):
        def is_node_supported(self, submodules, node: fx.Node) -> bool:
            return supported(node)
    _graphs += 1
    graph_id = _graphs
    partitioner = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=False,
                                             non_compute_ops=list(_LAYOUT_ONLY))
    fused = partitioner.fuse_partitions(partitioner.propose_partitions(), prefix="minic_")
    left = Counter(_op(n) for n in fused.graph.nodes
                   if n.op == "call_function" and not isinstance(n.meta.get("val"), (torch.SymInt, int)))
    parts = []
    for node in fused.graph.nodes:
        if node.op == "call_module" and node.target.startswith("minic_"):
            sub = getattr(fused, node.target)
            symbolic = [_symbolic_axes(a) for a in node.args]
            part = MinicPartition(f"graph{graph_id}.{node.target}", sub, symbolic, options)
            setattr(fused, node.target, part)
            parts.append(part)
    fused.recompile()
    log.info("graph %d: %d partition(s) for minic%s; left to PyTorch: %s", graph_id, len(parts),
             "".join(f"\n  {p.name}: {p.describe()}" for p in parts),
             ", ".join(f"{op} x{n}" for op, n in sorted(left.items())) or "nothing")
    return fused


def _op(node: fx.Node) -> str:
    t = node.target
    return t.name() if isinstance(t, torch._ops.OpOverload) else getattr(t, "__name__", str(t))


def _symbolic_axes(arg: Any) -> dict[int, str] | None:
    """``{axis: symbol}`` for a tensor argument whose traced shape has free symbols
    (None for a non-tensor)."""
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    axes = {}
    for i, d in enumerate(val.shape):
        if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol:
            axes[i] = str(d.node.expr)
    return axes


class MinicPartition(torch.nn.Module):
    """A supported region: compiled by minic on first use at each input signature."""

    def __init__(self, name: str, gm: fx.GraphModule, symbolic: list, options) -> None:
        super().__init__()
        self.name, self.gm, self.options = name, gm, options
        self.symbolic = symbolic                        # per argument: {axis: symbol}, or None (not a tensor)
        # One compile for every size when Dynamo traced symbolic axes and no size comes in as an integer.
        self.dynamic = all(s is not None for s in symbolic) and any(symbolic)
        out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        self.tuple_out = isinstance(out, (tuple, list))
        self.compiled: dict[tuple, Any] = {}            # signature -> CompiledModel, or None (torch runs it)
        self.calls = Counter()                          # "minic" / "torch" -> calls

    def describe(self) -> str:
        ops = Counter(_op(n) for n in self.gm.graph.nodes if n.op == "call_function")
        return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.most_common())

    def _signature(self, args: tuple) -> tuple:
        return tuple((a.dtype, a.dim() if self.dynamic else tuple(a.shape)) if isinstance(a, torch.Tensor) else a
                     for a in args)

    def forward(self, *args):
        if any(isinstance(a, torch.Tensor) and type(a) not in (torch.Tensor, torch.nn.Parameter) for a in args):
            return self.gm(*args)               # traced again (fake or functional tensors): torch's graph
        key = self._signature(args)
        if key not in self.compiled:
            self.compiled[key] = self._compile(args, self.dynamic)
            if self.compiled[key] is None and self.dynamic:      # refused with symbols: try per shape
                del self.compiled[key]
                self.dynamic = False
                key = self._signature(args)
                self.compiled[key] = self._compile(args, False)
        model = self.compiled[key]
        if model is None:
            self.calls["torch"] += 1
            return self.gm(*args)
        from minic.frontend.torch_arrays import numpy_of, tensor_of
        self.calls["minic"] += 1
        out = model(*(numpy_of(a) for a in args if isinstance(a, torch.Tensor)))
        outs = tuple(tensor_of(o) for o in (out if isinstance(out, tuple) else (out,)))
        return outs if self.tuple_out else outs[0]

    def _compile(self, args: tuple, dynamic: bool):
        """A CompiledModel for inputs like ``args`` (with Dynamo's symbols when
        ``dynamic``), or None when minic refuses it."""
        from minic.frontend.torch import from_torch
        from minic.runtime import compile_graph
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        axes = tuple(self.symbolic) if dynamic else None
        start = time.perf_counter()
        shapes = ", ".join(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)
        from torch.utils._python_dispatch import _disable_current_modes
        try:
            # The first call may come while AOTAutograd's modes are still active: the export must not see them.
            with _disable_current_modes():
                graph = from_torch(_bound(self.gm, args), tensors, axes, name=self.name.replace(".", "_"))
            model = compile_graph(graph, self.options)
        except Exception as e:  # noqa: BLE001 - PyTorch runs what minic cannot; the answer stays right
            reason = " ".join(str(e).split())[:300]
            # minic's refusals are expected (an op, a dtype); anything else is worth a warning
            log.log(logging.INFO if isinstance(e, MinicError) else logging.WARNING,
                    "%s: PyTorch runs it at %s (minic: %s%s)", self.name, shapes,
                    "" if isinstance(e, MinicError) else f"{type(e).__name__}: ", reason)
            return None
        symbols = sorted({s for a in (axes or ()) for s in a.values()})
        log.info("%s: minic compiled it for %s%s in %.2f s", self.name, shapes,
                 f" (symbolic: {', '.join(symbols)})" if symbols else "", time.perf_counter() - start)
        return model


def _bound(gm: fx.GraphModule, args: tuple) -> fx.GraphModule:
    """The partition as a module of its tensor arguments only: the integer arguments
    (sizes) become the constants of this call."""
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node, a in zip(placeholders, args):
        if not isinstance(a, torch.Tensor):
            for user in list(node.users):
                user.args = fx.node.map_arg(user.args, lambda n, node=node, a=a: a if n is node else n)
                user.kwargs = fx.node.map_arg(user.kwargs, lambda n, node=node, a=a: a if n is node else n)
            graph.erase_node(node)
    return fx.GraphModule(gm, graph)

