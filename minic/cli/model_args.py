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
from typing import Any

from minic.backends import ModelSource
from minic.errors import UserError

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


def add_dynamic_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dynamic", action="append", default=[], metavar="all|none|INPUT:AXIS[=NAME],...",
                   help="which input dims stay symbolic in the compiled code (once per input; default: "
                        "the model's own symbolic dims, specialized per shape where an op needs a size)")


def dynamic_option(args: argparse.Namespace) -> Any:
    """``--dynamic`` as ``minic.compile``'s ``dynamic=``: None (not given), True (all), False
    (none), or ``{input: {axis: name}}`` (an input by name or position; a name is optional)."""
    given = getattr(args, "dynamic", None) or []
    if given in (["all"], ["none"]):
        return given == ["all"]
    spec: dict[Any, dict[int, str | None]] = {}
    for text in given:
        name, sep, axes = text.partition(":")
        if not sep or not name or not axes or text in ("all", "none"):
            raise UserError(f"--dynamic {text}: write all, none, or INPUT:AXIS[=NAME],... (e.g. x:0,2=H)")
        key: Any = int(name) if name.isdigit() else name
        for item in axes.split(","):
            axis, _, symbol = item.partition("=")
            try:
                spec.setdefault(key, {})[int(axis)] = symbol or None
            except ValueError:
                raise UserError(f"--dynamic {text}: axis {axis!r} is not an integer") from None
    return spec
