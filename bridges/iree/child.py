"""The only module that imports IREE's compiler API, run as its own process::

    python -m bridges.iree.child turbine MODEL.pt2 OUT.mlir [MODEL.pt2 OUT.mlir ...]

It reads each ``torch.export`` program (``torch.export.save``), exports it with
iree-turbine (``aot.export``, which imports ``iree.compiler``) and writes the
module's MLIR text (torch dialect; ``iree-compile`` lowers it).  The parent
(``bridges.iree.importers.turbine_text``) starts it, so that a process that has
loaded the xtc MLIR bindings (``import mlir``) can still use turbine.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ != "__main__":
    raise ImportError("bridges.iree.child imports IREE's compiler, which cannot load beside the "
                      "MLIR bindings: run it as `python -m bridges.iree.child`, never import it")


def turbine(pairs: list[tuple[Path, Path]]) -> None:
    """Export each program to its MLIR file (several per process: importing turbine
    costs seconds)."""
    import warnings

    import torch
    warnings.filterwarnings("ignore", category=FutureWarning)   # torch's pytree notices
    from iree.turbine import aot

    for program, out in pairs:
        exported = aot.export(torch.export.load(str(program)))
        out.write_text(str(exported.mlir_module))


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "turbine" or len(argv) % 2 == 0:
        print("usage: python -m bridges.iree.child turbine MODEL.pt2 OUT.mlir [MODEL.pt2 OUT.mlir ...]",
              file=sys.stderr)
        return 2
    paths = [Path(p) for p in argv[1:]]
    turbine(list(zip(paths[0::2], paths[1::2])))
    return 0


sys.exit(main(sys.argv[1:]))
