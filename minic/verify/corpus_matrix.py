"""``verify --corpus transformers``: every corpus model (minic.models.corpus) on every
path, against eager.  Where the sequence axis is dynamic, one compiled model runs
at two lengths (7, then corpus.SECOND_T) and the cell is ok only if both match."""
from __future__ import annotations

from typing import Callable

from minic import backends
from minic.backends import ModelSource
from minic.compare import as_tuple
from minic.verify.matrix import Cell, check, judged, path_tolerance


def verify_corpus(backend_names: list[str], seed: int = 0, progress: Callable[[Cell], None] | None = None,
                  names: list[str] | None = None) -> list[Cell]:
    """The cells of ``names`` (default: the whole corpus) on ``backend_names``."""
    import torch
    from minic.api import _arrays
    from minic.models import corpus
    cells = []
    for name in names or corpus.names():
        info = corpus.info(name)
        module, _ = corpus.get(name, seed=seed)
        lengths = (7, corpus.SECOND_T) if 1 in info.dynamic_axes[0] else (7,)
        runs = [_arrays(corpus.inputs(name, seed, t)) for t in lengths]
        with torch.no_grad():
            refs = [as_tuple(backends.get("torch")(ModelSource(name, r, module=module))(*r)) for r in runs]
        source = ModelSource(name, runs[0], module=module, dynamic_axes=info.dynamic_axes,
                             input_names=info.input_names)
        for backend in backend_names:
            tol = path_tolerance(backend, refs[0])
            cell = check(source, backend, runs[0], refs[0], tol)
            for inputs, ref in zip(runs[1:], refs[1:]):
                if cell.status == "ok":                  # the same compiled model, another length
                    try:
                        cell = judged(name, backend, as_tuple(cell.runner(*inputs)), ref, tol)
                    except Exception as e:  # noqa: BLE001 - a path failing at the second length is a cell
                        cell = Cell(name, backend, "unsupported" if "Error" in type(e).__name__ else "crash",
                                    detail=f"second length: {type(e).__name__}: {str(e)[:200]}")
            cell.runner = None
            cells.append(cell)
            if progress:
                progress(cell)
    return cells
