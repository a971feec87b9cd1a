"""Reproduces the README's table: node counts of every zoo model before and after -O2.

    python benchmarks/node_counts.py [--size small|full]
"""
from __future__ import annotations

import argparse

import minic
from minic import models
from minic.passes import optimize


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=("small", "full"), default="full")
    args = parser.parse_args()
    print(f"| model ({args.size}) | nodes before | after -O2 | change |")
    print("| --- | ---: | ---: | ---: |")
    for name in models.names():
        graph = minic.api.graph_of(minic.load(name, size=args.size))
        after = optimize(graph, level=2)
        n0, n1 = len(graph.nodes), len(after.nodes)
        print(f"| {name} | {n0} | {n1} | {100 * (n1 - n0) / n0:+.0f}% |")


if __name__ == "__main__":
    main()
