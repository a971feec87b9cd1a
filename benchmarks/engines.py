"""The README's speed and memory tables: minic against the strongest CPU engines.

    python benchmarks/engines.py --models llama-tiny,bert-base,resnet50 --threads 1,2 --batch 1,8

Every path runs in its own worker process with the same thread count, built once,
then asked in turn for blocks of calls (``minic bench``; ``minic.bench.harness``).
Prints the date, machine, load average and thread settings, then the latency table
(median over rounds [lowest-highest block median], the best of ONNX Runtime,
OpenVINO and Inductor in bold, minic's ratio to it) and the peak-RSS table.  A
figure is only meaningful with the load it was taken under: measure on a quiet
machine for the README.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from minic.bench import paths as bench_paths
from minic.bench.harness import Config, Timing, run_config
from minic.bench.report import Conditions, markdown, print_config

DEFAULT_VS = "torch,inductor,onnxruntime,openvino,tinygrad"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama-tiny,bert-base,resnet50")
    parser.add_argument("--vs", default=DEFAULT_VS)
    parser.add_argument("--threads", default="2,1")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--out", type=Path, help="also write the tables (Markdown) here")
    parser.add_argument("--json", type=Path, help="also write every figure (JSON) here")
    args = parser.parse_args()
    console = Console(stderr=True, highlight=False, width=200)
    paths = bench_paths.parse(args.vs)
    timing = Timing(args.rounds, args.calls, args.warmup, args.budget)
    conditions = Conditions.now(timing)
    results = []
    for model in args.models.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            for batch in (int(b) for b in args.batch.split(",")):
                config = Config(model, batch, threads, args.size)
                found = run_config(config, paths, timing, lambda p: console.print(f"  built {p}"))
                print_config(console, config, found)      # progress on stderr; the tables on stdout
                results += found
    conditions.finish()
    text = "\n".join(conditions.lines()) + "\n\n" + markdown(results, [p.name for p in paths])
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({**conditions.as_json(), "rows": [r.as_json() for r in results]}, indent=1))


if __name__ == "__main__":
    main()
