"""Core ATen against eager on PyTorch's own OpInfo samples
(``torch.testing._internal.common_methods_invocations.op_db``; needs ``expecttest``).

For each OpInfo whose ATen name is a Core ATen op the frontend covers, the first
few small samples become one module (the sample's tensors are its inputs, so
nothing is folded at import); it is exported, converted, and run on the
interpreter and the compiled path against eager, within the tolerance policy.
The overloads each export actually reached are recorded: a case only tests the
overloads it reaches.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils import _pytree as pytree

from minic.compare import errors
from minic.errors import UserError
from minic.verify.tolerance import tolerance

MAX_SAMPLES = 3
MAX_ELEMENTS = 4096


@dataclass
class Case:
    name: str                                   # the OpInfo's name (and variant)
    dtype: torch.dtype
    samples: list = field(default_factory=list)


@dataclass
class Outcome:
    case: str
    reached: set[str]                           # Core ATen overloads the export produced
    result: str                                 # ok | refused | mismatch
    detail: str = ""


def _small(sample) -> bool:
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    return bool(tensors) and all(t.numel() <= MAX_ELEMENTS and t.numel() > 0 and not t.is_complex()
                                 and t.layout == torch.strided for t in tensors)


def cases(names: set[str]) -> list[Case]:
    """The OpInfos named (by ATen name) in ``names``, each with up to MAX_SAMPLES small samples."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    out = []
    for info in op_db:
        if info.aten_name not in names:
            continue
        supported = info.supported_dtypes("cpu")
        dtype = next((d for d in (torch.float32, torch.int64, torch.bool) if d in supported), None)
        if dtype is None:
            continue
        picked = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in info.sample_inputs("cpu", dtype, requires_grad=False):
                if _small(s):
                    picked.append((info.op, s))
                if len(picked) == MAX_SAMPLES:
                    break
        if picked:
            out.append(Case(f"{info.name}{'.' + info.variant_test_name if info.variant_test_name else ''}", dtype, picked))
    return out


class Samples(torch.nn.Module):
    """All of a case's samples in one forward: one export, one compile."""

    def __init__(self, case: Case) -> None:
        super().__init__()
        self.calls, self.inputs = [], []
        for op, s in case.samples:
            leaves, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
            where = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]
            self.calls.append((op, leaves, spec, where, len(self.inputs)))
            self.inputs += [leaves[i].clone() for i in where]

    def forward(self, *xs):
        outs = []
        for op, leaves, spec, where, first in self.calls:
            leaves = list(leaves)
            for k, i in enumerate(where):
                leaves[i] = xs[first + k]
            inp, args, kwargs = pytree.tree_unflatten(leaves, spec)
            result = op(inp, *args, **kwargs)
            outs += [r for r in pytree.tree_leaves(result) if isinstance(r, torch.Tensor)]
        return tuple(outs)


def run(case: Case, core: set[str], cache_dir) -> Outcome:
    from minic.frontend.torch import Converter, _export, numpy_of
    from minic.ir.interpret import interpret
    from minic.runtime import CompileOptions, compile_graph
    module = Samples(case)
    inputs = tuple(module.inputs)
    try:
        with torch.no_grad():
            want = [numpy_of(t) for t in module(*inputs)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = _export(module, inputs, None)
    except Exception as e:                      # noqa: BLE001 - eager or torch.export rejects the sample
        return Outcome(case.name, set(), "skipped", f"{type(e).__name__}: {str(e)[:120]}")
    reached = {str(n.target) for n in program.graph.nodes if n.op == "call_function"} & core
    try:
        graph = Converter(program, "case", None).run()
        arrays = [numpy_of(t) for t in inputs]
        results = {"interp": interpret(graph, arrays),
                   "minic": compile_graph(graph, CompileOptions(cache_dir=cache_dir))(*arrays)}
    except UserError as e:
        return Outcome(case.name, reached, "refused", str(e).splitlines()[0])
    for path, got in results.items():
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(got) != len(want):
            return Outcome(case.name, reached, "mismatch", f"{path}: {len(got)} outputs, eager has {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            if g.shape != w.shape or g.dtype != w.dtype:
                return Outcome(case.name, reached, "mismatch", f"{path} output {k}: {g.dtype}{list(g.shape)} "
                                                                f"vs eager {w.dtype}{list(w.shape)}")
            e = errors(g.astype(np.float64), w.astype(np.float64))
            if not e.within(tolerance(w.dtype)):
                return Outcome(case.name, reached, "mismatch", f"{path} output {k}: {e}")
    return Outcome(case.name, reached, "ok")
