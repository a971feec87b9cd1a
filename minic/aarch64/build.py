"""Cross-compile a Graph into a folder: object, weights, harness, static executable.

    DIR/model.o        the model for the target (the pipeline's object stage)
    DIR/weights.bin    the constants, each at a 64-byte boundary
    DIR/harness.c      main(): tensor file in, minic_entry, tensor file out
    DIR/layout.json    the entry layout and the options (what the files were built from)
    DIR/model          the static executable: {triple}-gcc -static harness.c model.o -lm

Linking needs the target's cross gcc (Debian: gcc-aarch64-linux-gnu and
libc6-dev-arm64-cross); without it the folder holds everything but ``model``
and ``link`` raises a UserError saying what to install.
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from minic import pipeline, tools
from minic.options import CompileOptions
from minic.aarch64.harness import ALIGN, harness_source
from minic.errors import UserError
from minic.files import write_atomic
from minic.ir.graph import Graph
from minic.ir.loops import Program, Role
from minic.runtime.layout import EntryLayout

@dataclass
class CrossBuild:
    """A cross-compiled model in ``directory``; ``executable`` is None until linked."""
    directory: Path
    layout: EntryLayout
    options: CompileOptions
    executable: Path | None = None

    @property
    def object_path(self) -> Path:
        return self.directory / "model.o"


def weights_blob(program: Program, layout: EntryLayout) -> tuple[bytes, list[int]]:
    """The constants in entry order, each padded to ALIGN; and their offsets."""
    parts, offsets, at = [], [], 0
    for slot in layout.role(Role.CONST):
        data = np.ascontiguousarray(program.constants[slot.name], slot.dtype.numpy)
        data = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
        offsets.append(at)
        pad = -len(data) % ALIGN
        parts += [data, b"\0" * pad]
        at += len(data) + pad
    return b"".join(parts), offsets


def cross_compile(graph: Graph, options: CompileOptions, directory: Path, link_now: bool = True) -> CrossBuild:
    """Compile ``graph`` for ``options.triple`` into ``directory`` (and link, if asked)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"{directory}: exists and is not a folder")
    compilation = pipeline.Compilation(graph, options, keep=("scheduled",))
    program = compilation.run("scheduled")
    layout = EntryLayout.of(program)
    obj = compilation.run("object")          # checked to be for options.triple's machine
    blob, offsets = weights_blob(program, layout)
    write_atomic(directory / "model.o", obj)
    write_atomic(directory / "weights.bin", blob)
    write_atomic(directory / "harness.c", harness_source(layout, offsets, options.triple).encode())
    described = {k: str(v) for k, v in asdict(options).items()}
    write_atomic(directory / "layout.json",
                 json.dumps({"options": described, "layout": json.loads(layout.to_json())}, indent=1).encode())
    build = CrossBuild(directory, layout, options)
    return link(build) if link_now else build


def link(build: CrossBuild) -> CrossBuild:
    """``{triple}-gcc -static``: harness + object -> ``DIR/model``."""
    triple = build.options.triple
    gcc = tools.cross_gcc(triple, f"linking for {triple} ({build.directory} holds model.o and harness.c)")
    # cwd = the folder: harness.c's .incbin finds weights.bin there.
    command = [gcc, "-O2", "-static", "-o", "model", "harness.c", "model.o", "-lm", "-lpthread"]
    done = subprocess.run(command, cwd=build.directory, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"linking failed ({' '.join(command)}): {done.stderr.strip()[:2000]}")
    build.executable = build.directory / "model"
    return build
