"""A Graph as a ``torch.nn.Module``: ``forward`` replays the nodes with torch ops,
each op with the torch spelling declared beside its definition (``OpDef.torch``).

    module = to_torch(graph)            # constants become buffers
    y = module(*torch_inputs)           # PyTorch eager: the reference

The module is what the torch-based paths start from (``torch.onnx.export`` for
onnxruntime, ``torch.export`` for TVM and minic's own frontend), so ``forward``
uses only plain, exportable ops: no Python control flow on values, no
``torch.full`` (TVM's frontend rejects it), sizes of symbolic dims read from the
inputs' shapes so that exports stay dynamic.

``float_dtype=torch.float64`` builds the same computation in double precision;
the fuzzer uses it to throw away ill-conditioned graphs.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from minic.errors import UnsupportedError
from minic.ir import ops
from minic.ir.graph import Graph, Node
from minic.frontend.torch import TORCH_DTYPES
from minic.ir.types import DType, Dim, dim_eval

Env = dict[str, Any]                    # symbol -> size (an int, or a traced/symbolic size)


def size(d: Dim, env: Env):
    """A dim's size: an int, or the product of the symbols' sizes read from the inputs."""
    return d if isinstance(d, int) else dim_eval(d, env)


def _torch_dtype(dtype: DType, float_dtype: torch.dtype) -> torch.dtype:
    return float_dtype if dtype == DType.f32 else TORCH_DTYPES[dtype]


@dataclass
class TorchCall:
    """What an op's torch spelling (``OpDef.torch``) may look at besides its inputs."""
    node: Node
    env: Env
    float_dtype: torch.dtype
    torch = torch
    F = F

    @property
    def attrs(self) -> Any:
        return self.node.attrs

    @property
    def out(self) -> list:
        """The sizes of output 0 (symbolic dims read from the inputs)."""
        return [self.size(d) for d in self.node.outputs[0].type.shape]

    def size(self, d: Dim):
        return size(d, self.env)

    def dtype(self, dtype: DType) -> torch.dtype:
        return _torch_dtype(dtype, self.float_dtype)


def replay(node: Node, args: list[torch.Tensor], env: Env, float_dtype: torch.dtype):
    """One node's result(s) with torch ops: the op's own torch spelling."""
    spelling = ops.get(node.op).torch
    if spelling is None:
        raise UnsupportedError(f"to_torch: no torch spelling for op '{node.op}'")
    if isinstance(spelling, str):
        return functools.reduce(getattr, spelling.split("."), torch)(*args)
    return spelling(TorchCall(node, env, float_dtype), *args)


class GraphModule(torch.nn.Module):
    """``forward`` runs the graph's nodes in order with torch ops."""

    def __init__(self, graph: Graph, float_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.ir = graph
        self.float_dtype = float_dtype
        self.names: dict[str, str] = {}
        for i, c in enumerate(graph.constants):
            t = torch.from_numpy(c.data.copy())
            self.register_buffer(f"c{i}", t.to(float_dtype) if t.is_floating_point() else t)
            self.names[c.name] = f"c{i}"

    def forward(self, *xs: torch.Tensor):
        g = self.ir
        env: Env = {}
        for v, x in zip(g.inputs, xs):
            for axis, d in enumerate(v.type.shape):
                if isinstance(d, str) and d.isidentifier() and d not in env:
                    env[d] = x.shape[axis]
        values = dict(zip(g.inputs, xs))
        values.update((c, getattr(self, self.names[c.name])) for c in g.constants)
        for node in g.nodes:
            result = replay(node, [values[v] for v in node.inputs], env, self.float_dtype)
            results = result if isinstance(result, (tuple, list)) else (result,)
            for v, r in zip(node.outputs, results):
                want = _torch_dtype(v.type.dtype, self.float_dtype)
                values[v] = r if r.dtype == want else r.to(want)   # torch.sum(int32) gives int64
        outs = tuple(values[v] for v in g.outputs)
        return outs[0] if len(outs) == 1 else outs


def to_torch(graph: Graph, float_dtype: torch.dtype = torch.float32) -> GraphModule:
    """The torch module that computes what ``graph`` computes (in eval mode)."""
    return GraphModule(graph, float_dtype).eval()
