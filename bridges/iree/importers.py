"""torch -> MLIR text, the production way: torch-mlir's FX importer or iree-turbine.

torch-mlir (``torch_mlir.fx.export_and_import``) runs in this process -- it has its
own copy of MLIR's Python bindings, which loads beside xtc's and IREE's runtime.
It decomposes the ``torch.export`` program and lowers the torch dialect to one of::

    stablehlo   the StableHLO dialect (what JAX, TensorFlow and PyTorch/XLA emit)
    linalg      linalg on tensors (+ arith, tensor, math): upstream MLIR's own
    tosa        TOSA (IREE 3.13 rejects torch-mlir's form: docs/production-bugs.md)
    torch       the torch dialect itself (aten ops as MLIR ops)

iree-turbine's ``aot.export`` imports IREE's compiler, so it runs in a child
process (``bridges/iree/child.py``) that reads the ``torch.export`` program from
a ``.pt2`` file; its output is torch dialect, which ``iree-compile`` lowers itself.
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
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs)


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


def torch_mlir_module(module, inputs: Sequence[np.ndarray], dialect: str):
    """torch-mlir's module (its own ``ir.Module``) for ``module`` in ``dialect``."""
    from torch_mlir import fx
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    if dialect not in DIALECTS:
        raise UnsupportedError(f"torch-mlir: unknown dialect '{dialect}'; choose from {', '.join(DIALECTS)}")
    program = exported(module, inputs).run_decompositions(get_decomposition_table())
    keep_non_persistent_buffers(program)
    # decomposition_table={}: decomposed above already (an empty table skips the step).
    return fx.export_and_import(program, output_type=DIALECTS[dialect], func_name=FUNC_NAME,
                                decomposition_table={})


def torch_mlir_text(module, inputs: Sequence[np.ndarray], dialect: str) -> str:
    """The MLIR text (weights included, as resource blobs) of ``torch_mlir_module``."""
    return str(torch_mlir_module(module, inputs, dialect))


def child_env() -> dict[str, str]:
    """This process's environment, with the folder that holds ``bridges`` first on the
    child's path (so it runs this checkout's code)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def turbine_texts(models: Sequence[tuple[object, Sequence[np.ndarray]]]) -> list[str]:
    """iree-turbine's MLIR text for each ``(module, inputs)``, all exported in one child process."""
    import torch

    with tempfile.TemporaryDirectory(prefix="minic-turbine-") as tmp:
        args = []
        for i, (module, inputs) in enumerate(models):
            program, out = Path(tmp) / f"model{i}.pt2", Path(tmp) / f"model{i}.mlir"
            torch.export.save(exported(module, inputs), str(program))
            args += [str(program), str(out)]
        proc = subprocess.run([sys.executable, "-m", "bridges.iree.child", "turbine", *args],
                              capture_output=True, text=True, env=child_env())
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise UnsupportedError(f"iree-turbine export: {lines[-1] if lines else 'exit ' + str(proc.returncode)}")
        return [Path(out).read_text() for out in args[1::2]]


def turbine_text(module, inputs: Sequence[np.ndarray]) -> str:
    """iree-turbine's MLIR text for ``module``, exported in a child process."""
    return turbine_texts([(module, inputs)])[0]
