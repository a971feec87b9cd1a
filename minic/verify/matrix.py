"""One cell of the verify matrix: run a source through one backend and judge it."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from minic import backends
from minic.backends import ModelSource
from minic.compare import Errors, as_tuple, errors
from minic.errors import MinicError
from minic.verify.tolerance import tolerance

STATUSES = ("ok", "mismatch", "unsupported", "crash")


@dataclass
class Cell:
    model: str
    backend: str
    status: str                            # one of STATUSES
    errors: Errors | None = None
    detail: str = ""                       # why unsupported/crashed, or where the mismatch is
    compile_s: float = 0.0
    outputs: tuple[np.ndarray, ...] = ()
    runner: Callable[..., Any] | None = field(default=None, repr=False)
    tolerance: float | None = None         # the bound the cell was judged by (path_tolerance)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "backend": self.backend, "status": self.status,
                "max_abs": self.errors.abs if self.errors else None,
                "max_rel": self.errors.rel if self.errors else None, "detail": self.detail}


def backend_tolerance(backend: str, default: float) -> float:
    """A backend that computes in lower precision by design (``qnn``: fp16 on the HTP)
    states its own bound as ``compile.tolerance``; the others get ``default``."""
    try:
        return getattr(backends.get(backend), "tolerance", default)
    except ImportError:
        return default                  # the cell will say why it cannot load


def path_tolerance(backend: str, reference) -> float:
    """The bound a backend's outputs are judged by against ``reference`` outputs: the
    policy's bound for the reference's dtype (``minic.verify.tolerance``), or the
    backend's own where it states one.  Every judge asks this one function (verify's
    matrix and random graphs, the report, ``run --check``), so a number is ok or a
    mismatch everywhere alike."""
    return backend_tolerance(backend, tolerance(as_tuple(reference)[0].dtype))


def first_difference(outputs, references, tol: float) -> str:
    """Where the first element out of tolerance sits, for the mismatch report."""
    for i, (y, r) in enumerate(zip(as_tuple(outputs), as_tuple(references))):
        if y.shape != r.shape:
            return f"output {i}: shape {list(y.shape)} vs {list(r.shape)}"
        diff = np.abs(y.astype(np.float64) - r.astype(np.float64))
        bad = np.argwhere(~(diff <= tol + tol * np.abs(r)))
        if bad.size:
            idx = tuple(int(j) for j in bad[0])
            return f"output {i}{list(idx)}: {y[idx]!r} vs {r[idx]!r}"
    return ""


def check(source: ModelSource, backend: str, inputs, reference, tol: float | None = None,
          reraise: bool = False, **options: Any) -> Cell:
    """Compile and run ``source`` with ``backend``; compare with ``reference`` outputs
    within ``tol`` (default: ``path_tolerance``).  Errors become unsupported/crash cells,
    or propagate when ``reraise``."""
    if tol is None:
        tol = path_tolerance(backend, reference)
    try:
        t0 = time.perf_counter()
        run = backends.get(backend)(source, **options)
        compile_s = time.perf_counter() - t0
        outputs = as_tuple(run(*inputs))
    except MinicError as e:
        if reraise:
            raise
        return Cell(source.name, backend, "unsupported", detail=str(e))
    except Exception as e:  # noqa: BLE001 - a crashing path is a cell, not the end of the matrix
        if reraise:
            raise
        return Cell(source.name, backend, "crash", detail=f"{type(e).__name__}: {str(e)[:300]}")
    return judged(source.name, backend, outputs, reference, tol, compile_s, run)


def judged(model: str, backend: str, outputs, reference, tol: float, compile_s: float = 0.0,
           run: Callable[..., Any] | None = None) -> Cell:
    """The cell of outputs that ran: ok, or a mismatch with where it starts."""
    errs = errors(outputs, reference)
    ok = errs.within(tol)
    return Cell(model, backend, "ok" if ok else "mismatch", errs,
                "" if ok else first_difference(outputs, reference, tol), compile_s, outputs, run, tol)
