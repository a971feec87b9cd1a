"""Hash every pipeline stage's IR text, to show that a refactoring changed no output.

    python benchmarks/ir_hashes.py > before.txt         # on main
    python benchmarks/ir_hashes.py > after.txt          # on the change; then: diff before.txt after.txt

One line per graph (the zoo models at small size, then ``--random`` graphs of
``minic.verify.random_graphs``): a short sha1 of the text of each stage, graph to llvm
(graphs printed with large constants elided, Loop IR and LLVM IR as printed), with this
machine's thread count; then the scheduled and LLVM text again at 1 and 8 threads (the
pool's code) and the LLVM text for aarch64 (no masked vectors there).  Tuning records are
not read (``records=os.devnull``), so a ``minic tune`` between two runs changes nothing.  An
error at a stage is hashed as its message.  Run it from the checkout to be measured:
the checkout's ``minic`` is imported, not an installed copy.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
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


NO_RECORDS = {"records": Path(os.devnull), "use_cache": False}
# (tag, options, stages hashed)
VARIANTS = [("", CompileOptions(**NO_RECORDS), STAGES),
            ("t1.", CompileOptions(num_threads=1, **NO_RECORDS), ("scheduled", "llvm")),
            ("t8.", CompileOptions(num_threads=8, **NO_RECORDS), ("scheduled", "llvm")),
            ("arm.", dataclasses.replace(CompileOptions.cross("aarch64"), **NO_RECORDS), ("llvm",))]


def stage_hashes(graph) -> str:
    return " ".join(_hashes(graph, tag, options, stages) for tag, options, stages in VARIANTS)


def _hashes(graph, tag: str, options: CompileOptions, stages: tuple[str, ...]) -> str:
    c = Compilation(graph, options)
    parts = []
    for stage in stages:
        try:
            ir = c.run(stage)
            text = print_graph(ir, elide=True) if stage in ("graph", "opt", "fused") else str(ir)
        except Exception as e:  # noqa: BLE001 - a stage's failure is part of what is compared
            text = f"ERROR {type(e).__name__}: {e}"
        parts.append(f"{tag}{stage}:{hashlib.sha1(text.encode()).hexdigest()[:12]}")
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
