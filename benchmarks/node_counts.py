"""Reproduces the README's tables: node counts of every zoo model before and after -O2.

    python benchmarks/node_counts.py [--size small|full]          # imported with torch.export
    python benchmarks/node_counts.py --size small --onnx          # exported by torch.onnx.export, then imported
    python benchmarks/node_counts.py --no-explicit-padding        # -O2 without the pads explicit-padding adds
    python benchmarks/node_counts.py --no-winograd                # -O2 without winograd-conv2d's nodes
"""
from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import minic
from minic import models
from minic.passes import optimize, pipeline


def onnx_graph(name: str, size: str, folder: Path):
    """The zoo model exported to ONNX (opset 17, dynamic axes) and read back by minic's importer."""
    import torch

    from minic.frontend.onnx import from_onnx_file
    module, inputs = models.get(name, size=size)
    info = models.info(name)
    path = folder / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, str(path), input_names=list(info.input_names), opset_version=17,
                          dynamic_axes={n: dict(a) for n, a in zip(info.input_names, info.dynamic_axes)},
                          dynamo=False)
    return from_onnx_file(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--onnx", action="store_true", help="start from torch.onnx.export files")
    parser.add_argument("--no-explicit-padding", action="store_true",
                        help="run -O2 without explicit-padding (no pad nodes of its own)")
    parser.add_argument("--no-winograd", action="store_true",
                        help="run -O2 without winograd-conv2d (~90 small nodes per 3x3 convolution it takes)")
    args = parser.parse_args()
    off = [p for p, flag in (("explicit-padding", args.no_explicit_padding), ("winograd-conv2d", args.no_winograd))
           if flag]
    passes = [p for p in pipeline(2) if p not in off] if off else None
    level = "-O2" + (f" without {' and '.join(off)}" if off else "")
    print(f"| model ({args.size}{', from ONNX' if args.onnx else ''}) | nodes before | after {level} | change |")
    print("| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        for name in models.names():
            graph = (onnx_graph(name, args.size, Path(folder)) if args.onnx
                     else minic.api.graph_of(minic.load(name, size=args.size)))
            after = optimize(graph, level=2, passes=passes)
            n0, n1 = len(graph.nodes), len(after.nodes)
            print(f"| {name} | {n0} | {n1} | {100 * (n1 - n0) / n0:+.0f}% |")


if __name__ == "__main__":
    main()
