"""``torch.compile(model, backend="minic")`` on the whole transformers corpus (minic/models/corpus.py):
the error against eager, the partitions minic compiled, what PyTorch kept.

    python benchmarks/dynamo_corpus.py [NAME ...]

The tests run one corpus model (tests/test_dynamo.py); this runs them all (~25 s each here).
"""
from __future__ import annotations

import logging
import sys
import time

import torch

from minic.dynamo import backend
from minic.models import corpus


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    names = sys.argv[1:] or corpus.names()
    log = logging.getLogger("minic.dynamo")
    log.setLevel(logging.INFO)
    print("| model | max abs error vs eager | graphs | minic compiles | PyTorch kept a partition | "
          "ops left to PyTorch | seconds |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for name in names:
        torch._dynamo.reset()
        collect = Collect()
        log.addHandler(collect)
        module, inputs = corpus.get(name)
        start = time.perf_counter()
        with torch.no_grad():
            got, want = torch.compile(module, backend=backend)(*inputs), module(*inputs)
        seconds = time.perf_counter() - start
        log.removeHandler(collect)
        m = collect.messages
        left = sorted({part.strip() for x in m if x.startswith("graph ")
                       for part in x.split("left to PyTorch:")[1].split(",") if "nothing" not in part})
        print(f"| {name} | {(got - want).abs().max().item():.1e} | {sum(x.startswith('graph ') for x in m)} | "
              f"{sum('minic compiled it' in x for x in m)} | {sum('PyTorch runs it' in x for x in m)} | "
              f"{', '.join(left) or '-'} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
