"""torch -> MLIR text, the production way: torch-mlir's FX importer or iree-turbine.

Both run in a child process (``bridges/iree/child.py``, one per batch of programs),
which reads the ``torch.export`` programs from ``.pt2`` files: torch-mlir and IREE's
compiler each carry their own copy of MLIR/LLVM, and neither can load beside the
xtc MLIR bindings (docs/production-bugs.md: torch-mlir-xtc-mlir-bindings-clash,
iree-xtc-mlir-bindings-clash).

torch-mlir (``torch_mlir.fx.export_and_import``) decomposes the ``torch.export``
program and lowers the torch dialect to one of::

    stablehlo   the StableHLO dialect (what JAX, TensorFlow and PyTorch/XLA emit)
    linalg      linalg on tensors (+ arith, tensor, math): upstream MLIR's own
    tosa        TOSA (IREE 3.13 rejects torch-mlir's form: docs/production-bugs.md)
    torch       the torch dialect itself (aten ops as MLIR ops)

iree-turbine's ``aot.export`` outputs the torch dialect, which ``iree-compile``
lowers itself.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from minic.errors import UnsupportedError

DIALECTS = {"stablehlo": "stablehlo", "linalg": "linalg-on-tensors", "tosa": "tosa", "torch": "torch"}
FUNC_NAME = "main"


def _tensors(inputs: Sequence[np.ndarray]):
    import torch
    return tuple(torch.from_numpy(np.asarray(a, order="C")) for a in inputs)    # (ascontiguousarray: 0-d -> 1-d)


def exported(module, inputs: Sequence[np.ndarray]):
    """``torch.export`` of ``module`` at the shapes of ``inputs`` (static: IREE's kernels
    here are compiled per shape)."""
    import torch
    return torch.export.export(module.eval(), _tensors(inputs))


def keep_non_persistent_buffers(program) -> None:
    """Workaround for torch-mlir's frozen import (docs/production-bugs.md,
    torch-mlir-non-persistent-buffers): it looks every buffer up in ``state_dict``,
    but ``torch.export`` keeps non-persistent ones (RoPE tables, causal masks) in
    ``constants``.  Copied over *after* decomposition: torch's verifier forbids it."""
    for name in program.graph_signature.non_persistent_buffers:
        program.state_dict.setdefault(name, program.constants[name])


def check_dialect(dialect: str) -> None:
    """A user's dialect name, or the error that lists them."""
    if dialect not in DIALECTS:
        raise UnsupportedError(f"torch-mlir: unknown dialect '{dialect}'; choose from {', '.join(DIALECTS)}")


def torch_mlir_texts(programs: Sequence[tuple[object, Sequence[np.ndarray], str]]) -> list[str]:
    """torch-mlir's MLIR text (weights included, as resource blobs) for each ``(module, inputs,
    dialect)``, all imported in one child process."""
    for _, _, dialect in programs:
        check_dialect(dialect)
    return child_texts("torch-mlir", [((DIALECTS[d],), m, x) for m, x, d in programs], "torch-mlir import")


def torch_mlir_text(module, inputs: Sequence[np.ndarray], dialect: str) -> str:
    """torch-mlir's MLIR text in ``dialect`` for ``module``, imported in a child process."""
    return torch_mlir_texts([(module, inputs, dialect)])[0]


def child_env() -> dict[str, str]:
    """This process's environment, with the folder that holds ``bridges`` first on the
    child's path (so it runs this checkout's code)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def child_texts(command: str, jobs: Sequence[tuple[tuple[str, ...], object, Sequence[np.ndarray]]],
                what: str) -> list[str]:
    """Run ``python -m bridges.iree.child COMMAND`` once for every ``(args, module, inputs)``
    (each program passed as ``args MODEL.pt2 OUT.mlir``, a ``torch.export.save`` file) and
    return each program's MLIR text."""
    import torch

    with tempfile.TemporaryDirectory(prefix="minic-iree-child-") as tmp:
        argv, outs = [], []
        for i, (args, module, inputs) in enumerate(jobs):
            program, out = Path(tmp) / f"model{i}.pt2", Path(tmp) / f"model{i}.mlir"
            torch.export.save(exported(module, inputs), str(program))
            argv += [*args, str(program), str(out)]
            outs.append(out)
        proc = subprocess.run([sys.executable, "-m", "bridges.iree.child", command, *argv],
                              capture_output=True, text=True, env=child_env())
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise UnsupportedError(f"{what}: {lines[-1] if lines else 'exit ' + str(proc.returncode)}")
        return [out.read_text() for out in outs]


def turbine_texts(models: Sequence[tuple[object, Sequence[np.ndarray]]]) -> list[str]:
    """iree-turbine's MLIR text for each ``(module, inputs)``, all exported in one child process."""
    return child_texts("turbine", [((), m, x) for m, x in models], "iree-turbine export")


def turbine_text(module, inputs: Sequence[np.ndarray]) -> str:
    """iree-turbine's MLIR text for ``module``, exported in a child process."""
    return turbine_texts([(module, inputs)])[0]
