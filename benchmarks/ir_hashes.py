"""Hash every pipeline stage's IR text, to show that a refactoring changed no output.

    python benchmarks/ir_hashes.py > before.txt         # on main
    python benchmarks/ir_hashes.py > after.txt          # on the change; then: diff before.txt after.txt

One line per graph (the zoo models at small size, then ``--random`` graphs of
``minic.verify.random_graphs``): a short sha1 of the text of each stage, graph to llvm
(graphs printed with large constants elided, Loop IR and LLVM IR as printed).  An
error at a stage is hashed as its message.  Run it from the checkout to be measured:
the checkout's ``minic`` is imported, not an installed copy.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's minic

from minic.api import graph_of, load                     # noqa: E402
from minic.ir.text import print_graph                    # noqa: E402
from minic.options import CompileOptions                 # noqa: E402
from minic.pipeline import Compilation                   # noqa: E402
from minic.verify.random_graphs import generate          # noqa: E402

STAGES = ("graph", "opt", "fused", "loops", "scheduled", "llvm")
ZOO = ("mlp", "cnn", "resnet50", "bert-base", "llama-tiny")


def stage_hashes(graph) -> str:
    c = Compilation(graph, CompileOptions(use_cache=False))
    parts = []
    for stage in STAGES:
        try:
            ir = c.run(stage)
            text = print_graph(ir, elide=True) if stage in ("graph", "opt", "fused") else str(ir)
        except Exception as e:  # noqa: BLE001 - a stage's failure is part of what is compared
            text = f"ERROR {type(e).__name__}: {e}"
        parts.append(f"{stage}:{hashlib.sha1(text.encode()).hexdigest()[:12]}")
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=300, help="random graphs after the zoo (seeds 0..N-1)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    for name in ZOO:
        print(name, stage_hashes(graph_of(load(name, size="small"))), flush=True)
    for seed in range(args.random):
        print(f"random{seed}", stage_hashes(generate(seed)), flush=True)


if __name__ == "__main__":
    main()
