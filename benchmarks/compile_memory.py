"""Where minic's compile-time memory goes: resident memory after each step of one compile.

    python benchmarks/compile_memory.py bert-base [--size full]

One process builds the zoo model, imports it (torch.export -> Graph), takes it down
every stage of the pipeline (``minic.pipeline``: opt, fused, loops, scheduled, llvm,
LLVM's optimizer, object code), loads the object code and runs it once.  After each
step it prints the process's resident set (psutil) and its peak so far (getrusage),
the figures ``minic bench`` compares with the other engines' peak RSS.  Memory, unlike
time, barely moves with the machine's load.
"""
from __future__ import annotations

import argparse
import resource
import warnings

import psutil


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def file_mb() -> float:
    """The part of the resident set that is pages of mapped files (libraries' code and data)."""
    return psutil.Process().memory_info().shared / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--size", choices=("small", "full"), default="full")
    args = parser.parse_args()
    rows: list[tuple[str, float, float, float]] = []

    def step(name: str) -> None:
        rows.append((name, rss_mb(), file_mb(), peak_mb()))
        added = rows[-1][1] - rows[-2][1] if len(rows) > 1 else 0.0
        print(f"{name:40} RSS {rows[-1][1]:6.0f} MB ({added:+5.0f}; of it files {rows[-1][2]:4.0f})   "
              f"peak so far {rows[-1][3]:6.0f} MB", flush=True)

    import torch  # noqa: F401
    step("python + torch imported")
    from minic import backends
    from minic.api import graph_of, load
    source = load(args.model, size=args.size)
    step("zoo model built (torch)")
    backends.reference(source)
    step("PyTorch eager's reference run")
    from minic.pipeline import Compilation
    from minic.runtime import CompileOptions, CompiledModel
    from minic.codegen.jit import Loaded
    from minic.runtime.layout import EntryLayout
    step("minic's compiler imported (llvmlite)")
    import minic.frontend.torch  # noqa: F401
    step("torch frontend imported (sympy)")
    import torch._dynamo  # noqa: F401
    step("torch.export's torch._dynamo imported")
    graph = graph_of(source)
    step("torch.export traced, Graph made")
    options = CompileOptions(use_cache=False)
    c = Compilation(graph, options, keep=("scheduled",))     # what compile_graph keeps
    for stage in ("opt", "fused", "loops", "scheduled", "llvm"):
        c.run(stage)
        step(f"stage {stage}")
    c._make("optimized")
    step("LLVM's optimizer")
    obj = c.run("object")
    step("stage object")
    program = c.run("scheduled")
    constants = {program.values[name]: data for name, data in program.constants.items()}
    model = CompiledModel(EntryLayout.of(program), constants, Loaded(obj, options.target))
    step("object code loaded (JIT)")
    model(*source.example_inputs)
    step("first run")
    print(f"\nweights of the torch model: {sum(p.numel() * 4 for p in source.module.parameters()) / 2**20:.0f} MB; "
          f"constants of the Graph: {sum(k.data.nbytes for k in graph.constants) / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
