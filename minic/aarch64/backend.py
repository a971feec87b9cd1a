"""The ``minic-aarch64`` backend: cross-compile, link, and run under qemu-user.

It is registered on request (``register_backend()``), not on import of
minic: running every model of ``verify``'s matrix under an emulator would be
slow, so only ``run --target aarch64 --emulate`` (and code that asks) adds it.
"""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from minic import backends, tools
from minic.backends import ModelSource
from minic.options import CompileOptions, full_triple
from minic.aarch64.build import cross_compile
from minic.aarch64.emulate import EmulatedModel

NAME = "minic-aarch64"
DEFAULT_CPU = "cortex-a55"


def compile_emulated(source: ModelSource, target: str = "aarch64", cpu: str = DEFAULT_CPU, features: str = "",
                     num_threads: int = 4, repeat: int = 1) -> EmulatedModel:
    """Build ``source`` for ``target`` in a temporary folder; the result runs it under qemu."""
    from minic.backends import graph_of
    triple = full_triple(target)
    tools.cross_gcc(triple, NAME)             # both before a minute of compiling: one line if either is missing
    tools.qemu(triple, NAME)
    folder = tempfile.TemporaryDirectory(prefix="minic-cross-")
    build = cross_compile(graph_of(source), CompileOptions.cross(triple, cpu, features, num_threads), Path(folder.name))
    model = EmulatedModel(build, repeat)
    model.folder = folder                       # the folder is removed with the model
    return model


def register_backend() -> str:
    """Make ``minic-aarch64`` a backend name (idempotent); returns the name."""
    backends.register(NAME)(compile_emulated)
    return NAME


def emulation_summary(rows, host: str = "minic") -> list[str]:
    """Lines for ``run --emulate``: the emulated build against the host build, and
    both latencies (the emulated one labelled as such).  ``rows``: (Cell, latency)."""
    from minic.compare import errors
    from minic.timing import fmt_ms
    cells = {cell.backend: (cell, latency) for cell, latency in rows}
    if NAME not in cells or cells[NAME][0].runner is None:
        return []
    emulated, _ = cells[NAME]
    build = emulated.runner.build
    lines = []
    if host in cells and cells[host][0].runner is not None:
        e = errors(emulated.outputs, cells[host][0].outputs)
        lines.append(f"{NAME} ({build.options.cpu}, under {tools.qemu(build.options.triple)}) vs host build: "
                     f"max abs diff {e.abs:.2e}, max rel diff {e.rel:.2e}")
    times = emulated.runner.run_times_s
    if times and host in cells:
        lines.append(f"model call: host {fmt_ms(cells[host][1])}; {NAME} {fmt_ms(statistics.median(times))} "
                     f"EMULATED (median of {len(times)} warm runs inside qemu-user; not a {build.options.cpu} figure)")
    lines.append(f"(the table's {NAME} latency is one whole qemu process per call: start-up, files, model)")
    return lines
