"""A compiled model kept on disk, and run later without the compiler.

    minic.save(compiled, "out/mlp")              # or: python -m minic compile mlp --target host -o out/mlp
    model = minic.load_compiled("out/mlp")       # ctypes + numpy: no torch, no LLVM in the process
    y = model(x)

The folder holds
- ``model.so``: the object file the JIT loaded, linked by the system linker
  (``cc -shared``; it calls libm and libpthread, nothing of minic's);
- ``weights.bin``: the constants, each on a 64-byte boundary, mapped (not read)
  when the model loads;
- ``manifest.json``: the entry point's buffer list (inputs, outputs, constants,
  temporaries with their lifetimes, symbolic dims), the buffer plan of a static
  model, the data checks' messages, the minic version and the CPU it was built for.

A model compiled as parts (a ``SplitModel``: a graph with a run-time loop, if or
data-sized op, minic/runtime/split.py) is saved as a folder of such folders, one per
compiled part, loop body and if branch, beside a manifest of the steps between them
(minic/runtime/saved_split.py); ``load_compiled`` gives back a callable of the same steps.

The code was compiled for this machine's CPU and its features (as the JIT does),
so ``load_compiled`` refuses a library whose CPU features this one lacks, or one
saved by another minic version: a one-line ``UserError``, never a crash.

Importing this module imports numpy and minic's IR types, never the compiler:
``compile_graph`` and LLVM are reached only by ``save``.  One library's folder is
written and run by minic/runtime/saved_library.py, a model of parts by saved_split.py.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from minic.errors import UserError
from minic.runtime.saved_library import MANIFEST, SavedModel, read_manifest, write_compiled

if TYPE_CHECKING:
    from minic.runtime.saved_split import SavedSplitModel

__all__ = ["load_compiled", "save"]


def save(model, folder: str | os.PathLike) -> Path:
    """Write ``model`` (a CompiledModel for this machine, or a SplitModel of them: see
    minic/runtime/saved_split.py) to ``folder`` (see the module docstring).  An existing save
    there is replaced whole; any other folder with files in it is refused.  The save is
    written into a staging folder beside it and renamed into place: a reader never sees
    half of one."""
    import shutil
    import tempfile
    write = _writer(model)
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or (any(folder.iterdir()) and not (folder / MANIFEST).is_file())):
        raise UserError(f"{folder}: exists and is not a saved minic model; refusing to write over it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(staging, 0o777 & ~mask)                 # mkdtemp's folder is private; a save is not
    try:
        write(model, staging)
        _replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _writer(model):
    """The function that writes ``model`` into an empty folder; a one-line refusal for a model
    that cannot be saved."""
    from minic.runtime.compiled import CompiledModel
    from minic.runtime.split import SplitModel
    if isinstance(model, CompiledModel):
        return write_compiled
    if isinstance(model, SplitModel):
        from minic.runtime.saved_split import write_split
        return write_split
    raise UserError(f"minic.save takes a model compiled by minic's own backend (a CompiledModel, or a SplitModel "
                    f"of them), not a {type(model).__name__}")


def _replace(staging: Path, folder: Path) -> None:
    """Put the staged save at ``folder``: the old save (if any) is moved aside first and
    removed only once the new one is in place."""
    import shutil
    old = None
    if folder.exists():
        old = folder.with_name(f".{folder.name}.old.{os.getpid()}")
        folder.rename(old)
    staging.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def load_compiled(folder: str | os.PathLike) -> "SavedModel | SavedSplitModel":
    """The model saved in ``folder``, ready to call on numpy arrays: a ``SavedModel``, or for a
    model saved as parts a ``SavedSplitModel`` (minic/runtime/saved_split.py)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest.get("kind") == "split":             # saved_split.KIND
        from minic.runtime.saved_split import load_split
        return load_split(folder, manifest)
    return SavedModel(folder, manifest)
