"""The only module that imports IREE's compiler API or torch-mlir, run as its own process::

    python -m bridges.iree.child turbine MODEL.pt2 OUT.mlir [MODEL.pt2 OUT.mlir ...]
    python -m bridges.iree.child torch-mlir DIALECT MODEL.pt2 OUT.mlir [DIALECT MODEL.pt2 OUT.mlir ...]

It reads each ``torch.export`` program (``torch.export.save``), imports it and writes
the module's MLIR text:

    turbine      iree-turbine's ``aot.export`` (imports ``iree.compiler``): torch dialect
    torch-mlir   torch-mlir's ``fx.export_and_import`` in each program's DIALECT
                 (stablehlo, linalg-on-tensors, tosa, torch)

Both carry their own copy of MLIR/LLVM, which cannot load beside the xtc MLIR
bindings (``import mlir``): docs/production-bugs.md, iree-xtc-mlir-bindings-clash and
torch-mlir-xtc-mlir-bindings-clash.  The parent (``bridges.iree.importers``) starts
one child per batch of programs (the imports cost seconds).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ != "__main__":
    raise ImportError("bridges.iree.child imports IREE's compiler and torch-mlir, which cannot load beside "
                      "the MLIR bindings: run it as `python -m bridges.iree.child`, never import it")

USAGE = ("usage: python -m bridges.iree.child turbine MODEL.pt2 OUT.mlir [MODEL.pt2 OUT.mlir ...]\n"
         "       python -m bridges.iree.child torch-mlir DIALECT MODEL.pt2 OUT.mlir [DIALECT MODEL.pt2 OUT.mlir ...]")


def turbine(pairs: list[tuple[Path, Path]]) -> None:
    """Export each program to its MLIR file with iree-turbine."""
    import torch
    from iree.turbine import aot

    for program, out in pairs:
        exported = aot.export(torch.export.load(str(program)))
        out.write_text(str(exported.mlir_module))


def torch_mlir(triples: list[tuple[str, Path, Path]]) -> None:
    """Import each program with torch-mlir's FX importer, lowered to its dialect."""
    import torch
    from torch_mlir import fx
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    from bridges.iree.importers import FUNC_NAME, keep_non_persistent_buffers

    for dialect, program, out in triples:
        decomposed = torch.export.load(str(program)).run_decompositions(get_decomposition_table())
        keep_non_persistent_buffers(decomposed)
        # decomposition_table={}: decomposed above already (an empty table skips the step).
        module = fx.export_and_import(decomposed, output_type=dialect, func_name=FUNC_NAME,
                                      decomposition_table={})
        out.write_text(str(module))


def main(argv: list[str]) -> int:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)   # torch's pytree notices

    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    width = {"turbine": 2, "torch-mlir": 3}.get(command)
    if width is None or not rest or len(rest) % width:
        print(USAGE, file=sys.stderr)
        return 2
    groups = [tuple(rest[i:i + width]) for i in range(0, len(rest), width)]
    if command == "turbine":
        turbine([(Path(program), Path(out)) for program, out in groups])
    else:
        torch_mlir([(dialect, Path(program), Path(out)) for dialect, program, out in groups])
    return 0


sys.exit(main(sys.argv[1:]))
