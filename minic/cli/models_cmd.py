"""``python -m minic models``: list the zoo."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from minic import models
    table = Table("model", "inputs", "dynamic axes", "description")
    for name in models.names():
        info = models.info(name)
        axes = ", ".join(f"{n}[{a}]={s}" for n, d in zip(info.input_names, info.dynamic_axes) for a, s in d.items())
        table.add_row(name, ", ".join(info.input_names), axes, info.description)
    Console().print(table)
    return 0
