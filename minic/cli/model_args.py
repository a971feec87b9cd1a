"""The MODEL argument every command takes, and its inputs, read in one place.

MODEL is a zoo name, an ``.onnx`` or ``.mc`` file, or ``path/to/file.py:Name`` (a
module class, or a factory returning a module or ``(module, example_inputs)``;
PyTorch eager is then the reference).  ``--inputs FILE.npz`` gives the inputs
(by input name, or ``arr_0, arr_1, ...`` in order), ``--shape`` random ones;
else the zoo's, the factory's, or random ones for a graph.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from minic.backends import ModelSource

MODEL_HELP = "zoo name, .onnx or .mc file, or path/to/file.py:Name (an nn.Module class or factory)"


def add_model_args(p: argparse.ArgumentParser, size: str = "full", model: bool = True,
                   help: str = MODEL_HELP) -> None:
    """MODEL, --size, --seed, --inputs and --shape."""
    if model:
        p.add_argument("model", help=help)
    p.add_argument("--size", choices=("small", "full"), default=size, help="zoo model size (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and example inputs")
    add_input_args(p)


def add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", type=Path, help=".npz file with the inputs (by input name, or arr_0, arr_1, ...), "
                   "or .npy file with the one input")
    p.add_argument("--shape", action="append", default=[], metavar="[NAME=]D,D,...[:DTYPE]",
                   help="random inputs of this shape instead (once per input; dtype float32 unless given)")


def given_inputs(args: argparse.Namespace):
    """The inputs ``--inputs`` or ``--shape`` give, or None (the model's own)."""
    from minic.inputs import given
    return given(getattr(args, "inputs", None), getattr(args, "shape", None) or [], getattr(args, "seed", 0))


def load_model(args: argparse.Namespace, model: str | None = None, given="args") -> ModelSource:
    """The ModelSource of ``args.model`` (or ``model``) with the inputs ``args`` give
    (``given=None``: with the model's own example inputs)."""
    from minic.api import load
    return load(model if model is not None else args.model, given_inputs(args) if given == "args" else given,
                size=getattr(args, "size", "full"), seed=getattr(args, "seed", 0))
