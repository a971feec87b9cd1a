"""A Graph as a ``torch.nn.Module``: ``forward`` replays the nodes with torch ops.

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

from typing import Any, Callable

import torch
import torch.nn.functional as F

from minic.errors import UnsupportedError
from minic.ir.graph import Graph, Node
from minic.ir.ops.layout import END
from minic.ir.types import DType, Dim, dim_eval

Env = dict[str, Any]                    # symbol -> size (an int, or a traced/symbolic size)

UNARY: dict[str, Callable] = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": F.silu, "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "not": torch.logical_not,
    "identity": lambda x: x.clone(),
}
BINARY: dict[str, Callable] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "max": torch.maximum, "min": torch.minimum, "eq": torch.eq, "lt": torch.lt, "gt": torch.gt,
    "and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor,
}
REDUCE: dict[str, Callable] = {"reduce_sum": torch.sum, "reduce_mean": torch.mean}


def size(d: Dim, env: Env):
    """A dim's size: an int, or the product of the symbols' sizes read from the inputs."""
    return d if isinstance(d, int) else dim_eval(d, env)


def sizes(shape, env: Env) -> list:
    return [size(d, env) for d in shape]


def _torch_dtype(dtype: DType, float_dtype: torch.dtype) -> torch.dtype:
    return {DType.f32: float_dtype, DType.f16: torch.float16, DType.i64: torch.int64,
            DType.i32: torch.int32, DType.bool: torch.bool}[dtype]


def replay(node: Node, args: list[torch.Tensor], env: Env, float_dtype: torch.dtype):
    """One node's result(s) with torch ops."""
    op, a = node.op, node.attrs
    x = args[0] if args else None
    if op in UNARY:
        return UNARY[op](x)
    if op in BINARY:
        return BINARY[op](*args)
    if op in REDUCE:
        return REDUCE[op](x, dim=tuple(a.axes), keepdim=a.keepdims)
    if op in ("reduce_max", "reduce_min"):
        # One axis at a time (from the back) with max/min over a dim, not amax/amin:
        # TVM 0.27's torch.export frontend has no converter for amax/amin.
        pick = torch.max if op == "reduce_max" else torch.min
        for axis in sorted((ax % x.dim() for ax in a.axes), reverse=True):
            x = pick(x, axis, keepdim=a.keepdims).values
        return x
    if op == "gelu":
        return F.gelu(x, approximate=a.approximate)
    if op == "dropout":
        return F.dropout(x, a.p, training=False)
    if op == "where":
        return torch.where(*args)
    if op == "cast":
        return x.to(_torch_dtype(a.dtype, float_dtype))
    if op in ("softmax", "log_softmax"):
        return (torch.softmax if op == "softmax" else torch.log_softmax)(x, a.axis)
    if op == "layer_norm":                      # the normalised axes are static: spell them as ints
        shape = node.inputs[0].type.shape[a.axis % x.dim():]
        return F.layer_norm(x, shape, *args[1:], eps=a.eps)
    if op == "batch_norm":
        scale, bias, mean, var = args[1:]
        return F.batch_norm(x, mean, var, scale, bias, training=False, eps=a.eps)
    if op == "matmul":
        return torch.matmul(*args)
    if op == "gemm":
        left = x.t() if a.trans_a else x
        right = args[1].t() if a.trans_b else args[1]
        if len(args) == 3:
            return torch.addmm(args[2], left, right, beta=a.beta, alpha=a.alpha)
        return left @ right * a.alpha if a.alpha != 1.0 else left @ right
    if op in ("conv2d", "max_pool2d", "avg_pool2d"):
        return _window(op, a, args)
    if op == "global_avg_pool":
        return F.adaptive_avg_pool2d(x, 1) if x.dim() == 4 else x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
    return _layout(node, args, env)


def _symmetric(padding: tuple[int, int, int, int], op: str) -> tuple[int, int]:
    top, left, bottom, right = padding
    if (top, left) != (bottom, right):
        raise UnsupportedError(f"{op}: torch has no asymmetric padding {list(padding)}")
    return top, left


def _window(op: str, a: Any, args: list[torch.Tensor]) -> torch.Tensor:
    pad = _symmetric(a.padding, op)
    if op == "conv2d":
        return F.conv2d(args[0], args[1], args[2] if len(args) == 3 else None, a.stride, pad, a.dilation, a.groups)
    if op == "max_pool2d":
        return F.max_pool2d(args[0], a.kernel, a.stride, pad, a.dilation, ceil_mode=a.ceil_mode)
    if a.dilation != (1, 1):
        raise UnsupportedError("avg_pool2d: torch has no dilated average pooling")
    return F.avg_pool2d(args[0], a.kernel, a.stride, pad, ceil_mode=a.ceil_mode,
                        count_include_pad=a.count_include_pad)


def _layout(node: Node, args: list[torch.Tensor], env: Env):
    op, a, x = node.op, node.attrs, args[0]
    out = sizes(node.outputs[0].type.shape, env)
    if op in ("reshape", "flatten"):
        return x.reshape(out)
    if op == "expand":
        return x.expand(out)
    if op == "squeeze":
        # One axis at a time, from the back: torch.onnx.export (TorchScript) fails on
        # torch.squeeze(x, dim=(0, 1)) -- docs/production-bugs.md#torch-onnx-squeeze-tuple.
        for axis in sorted((ax % x.dim() for ax in a.axes), reverse=True):
            x = torch.squeeze(x, axis)
        return x
    if op == "unsqueeze":
        for axis in sorted(ax % len(out) for ax in a.axes):
            x = x.unsqueeze(axis)
        return x
    if op == "transpose":
        return x.permute(a.perm)
    if op == "concat":
        return torch.cat(args, dim=a.axis)
    if op == "split":
        return torch.split(x, list(a.sizes), dim=a.axis)
    if op == "slice":
        index = [slice(None)] * x.dim()
        for axis, start, end, step in zip(a.axes, a.starts, a.ends, a.steps):
            if step < 0:
                raise UnsupportedError("slice: torch has no negative steps")
            index[axis] = slice(size(start, env), None if end == END else size(end, env), step)
        return x[tuple(index)]
    if op == "gather":
        if args[1].dim() == 1:
            return torch.index_select(x, a.axis, args[1])
        return torch.index_select(x, a.axis, args[1].reshape(-1)).reshape(out)
    if op == "pad":
        widths = []
        rank = x.dim()
        for axis in reversed(range(rank)):               # torch lists the last axis first
            widths += [a.pads[axis], a.pads[axis + rank]]
        mode = {"edge": "replicate"}.get(a.mode, a.mode)
        if mode != "constant":                            # torch pads all but N, C in these modes
            widths = widths[:2 * (rank - 2)]
        return F.pad(x, widths, mode=mode, value=a.value if mode == "constant" else None)
    raise UnsupportedError(f"to_torch: no torch spelling for op '{op}'")


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
