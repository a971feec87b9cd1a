"""What a compile holds in memory: the torch frontend imports weights as read-only views
(the compiled model copies the ones it keeps), lets go of torch.export's trace once it is
converted, and neither running a torch model on numpy arrays nor compiling it imports
what only another path needs.

No RSS figure is asserted (it depends on the machine); the facts behind the figures are:
which modules a step imports, which objects outlive it, which arrays share memory.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import minic
from minic.frontend.torch import from_torch

# Run in a fresh interpreter: what it imports and keeps alive, printed as JSON.
_FACTS = r"""
import gc, json, sys
from minic.api import load
from minic import backends
source = load("mlp", size="small")
backends.reference(source)                       # PyTorch eager on the numpy example inputs
facts = {"eager_imports": sorted(m for m in ("sympy", "torch._dynamo", "minic.frontend.torch", "llvmlite", "ml_dtypes")
                                 if m in sys.modules)}
import torch
from torch.fx.experimental import proxy_tensor
backends.graph_of(source)                        # torch.export, then the conversion
gc.collect()
facts["graph_modules_alive"] = sum(isinstance(o, torch.fx.GraphModule) for o in gc.get_objects())
facts["proxy_map_entries"] = len(getattr(proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", {}))
backends.get("minic")(source, use_cache=False)(*source.example_inputs)
facts["compile_imports"] = sorted(m for m in ("ml_dtypes", "onnx", "lark", "rich", "jinja2", "bridges") if m in sys.modules)
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def facts():
    done = subprocess.run([sys.executable, "-c", _FACTS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_running_a_torch_model_imports_neither_the_frontend_nor_the_compiler(facts):
    # numpy <-> torch lives in minic.frontend.torch_arrays; sympy (32 MB) comes with torch.export
    assert facts["eager_imports"] == []


def test_compiling_an_f32_torch_model_imports_only_what_that_path_needs(facts):
    # ml_dtypes (7 MB) only for bf16; the ONNX frontend, the text-IR parser, the CLI's
    # printing and the bridges only on their own paths
    assert facts["compile_imports"] == []


def test_torch_exports_trace_is_let_go_once_converted(facts):
    # torch 2.13 keeps the last trace's nodes (graph, fake tensors, shapes) in a module-level map
    assert facts["graph_modules_alive"] == 0 and facts["proxy_map_entries"] == 0


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.norm(x))


def test_weights_are_imported_as_views_and_the_compiled_model_owns_its_copy(tmp_path):
    torch.manual_seed(0)
    module = Block().eval()
    with torch.no_grad():                       # weights that are not LayerNorm's 1 and 0
        for p in module.parameters():
            p.normal_()
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    graph = from_torch(module, (torch.from_numpy(x),))
    params = [p.detach().numpy() for p in module.parameters()]
    for c in graph.constants:
        if c.data.size > 1:
            assert any(np.shares_memory(c.data, p) for p in params), c.name
            assert not c.data.flags.writeable, c.name
    run = minic.compile(module, (x,), cache_dir=tmp_path)
    before = run(x)
    with torch.no_grad():
        np.testing.assert_allclose(before, module(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)
        for p in module.parameters():
            p.mul_(2.0)                         # a later change to the module ...
    np.testing.assert_array_equal(run(x), before)   # ... does not reach the compiled model


def test_a_scalar_weight_stays_a_scalar():
    """A 0-d buffer is imported as a 0-d constant (a contiguous view must not give it an axis)."""
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.tensor(2.0))

        def forward(self, x):
            return x * self.s

    graph = from_torch(Scale(), (torch.ones(3),))
    assert [c.type.shape for c in graph.constants] == [()]
    np.testing.assert_array_equal(minic.compile(graph)(np.ones(3, np.float32)), [2.0, 2.0, 2.0])


def test_a_compile_lets_go_of_the_weights_no_later_stage_reads():
    """The graph passes fold transposed weights; once the schedule has packed them (the few-rows
    path of a symbolic T reads the packed panel too), the compile holds one copy, not two: with
    the cyclic collector off, so nothing waits for a collection to be freed."""
    import gc
    import weakref

    from minic.api import graph_of, load
    from minic.pipeline import Compilation
    from minic.runtime import CompileOptions
    graph = graph_of(load("llama-tiny", size="small"))
    given = {k.name for k in graph.constants}
    c = Compilation(graph, CompileOptions(use_cache=False), keep=("scheduled",))
    gc.disable()
    try:
        made = {k.name: weakref.ref(k.data) for k in c.run("opt").constants if k.name not in given}
        program, _ = c.run("scheduled"), c.run("object")
        alive = {name for name, ref in made.items() if ref() is not None}
    finally:
        gc.enable()
    transposed = {name for name in made if name.endswith("_wt")}
    assert transposed and not transposed & alive
    assert {id(made[name]()) for name in alive} <= {id(a) for a in program.constants.values()}
