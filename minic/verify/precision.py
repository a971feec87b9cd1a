"""``verify --precision``: per model, how far each precision of the minic path
lands from the f32 reference, and whether its outputs stay finite.

    f32      everything f32 (the ordinary path)
    f16      f16 storage: weights, inputs and the tensors between kernels are
             f16; kernels widen what they load, compute and accumulate in f32
    f16-acc  as f16, but every accumulator is f16 too: a sum is rounded to f16
             after each addition, as on hardware that accumulates in half
    bf16     as f16 with bf16 storage: 8 significant bits instead of 11, f32's
             range (no overflow); kernels compute and accumulate in f32
    int8     the matmuls quantized after training (minic/passes/post_training.py:
             u8 activations calibrated on the example inputs and seeded random ones,
             s8 weights per column), run on integers; judged by the 8-bit bound QDQ8

Beside the zoo, a few *stress* graphs show the ways f16 breaks (docs/f16.md):
a long sum (f16 accumulation stops growing once the sum's spacing exceeds what
each term adds), a wide softmax (its denominator is such a sum), softmax of large
logits (f16 storage itself keeps too few bits of a logit near 1000) and
layer_norm of values far from zero (the sum of a row passes 65504: inf).

The tolerance policy, one bound per precision (``TOLERANCE``), follows from the
storage type's unit roundoff u and the length n of the reductions:

* a value stored in 16 bits is off by at most u relative (f16: u = 2^-11 ≈ 4.9e-4,
  bf16: u = 2^-8 ≈ 3.9e-3), and a deep model's output passes through about 40
  such roundings (weights, activations between kernels): the bound is 40·u
  (f16: 2e-2; bf16, eight times that: 1.6e-1; ``minic.verify.tolerance``);
* an f32 accumulator adds n·2^-24 to that, nothing at the zoo's n (at most a few
  thousand terms), so f16 and bf16 storage are judged by the storage bound alone;
* an f16 accumulator adds up to n·2^-11: past n ≈ 40 terms that may exceed the
  bound, and on the long sums of the stress graphs it does.  ``f16-acc`` is
  judged by the f16 bound, so that its drift shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from minic import backends
from minic.backends import ModelSource
from minic.compare import Errors, as_tuple
from minic.verify.tolerance import BF16, F16, F32, QDQ8
from minic.errors import MinicError, UserError
from minic.options import PRECISIONS as STORAGE_PRECISIONS

# int8: the model's matmuls quantized by minic's post-training quantization (minic/passes/post_training.py)
PRECISIONS = (*STORAGE_PRECISIONS, "int8")
TOLERANCE = {"f32": F32, "f16": F16, "f16-acc": F16, "bf16": BF16, "int8": QDQ8}


# --- the stress graphs: text IR and an input maker each ---------------------------------

def _normal(shape: tuple[int, ...], mean: float, scale: float) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: (mean + scale * rng.standard_normal(shape)).astype(np.float32)


STRESS: dict[str, tuple[str, Callable[[np.random.Generator], np.ndarray]]] = {
    "long-sum": ("""graph @long_sum(%x: f32[4, 16384]) -> (f32[4]) {
  %y = reduce_sum(%x) {axes = [1], keepdims = false} : f32[4]
  return %y
}""", _normal((4, 16384), 0.1, 0.05)),
    "softmax-wide": ("""graph @softmax_wide(%x: f32[4, 16384]) -> (f32[4, 16384]) {
  %y = softmax(%x) {axis = -1} : f32[4, 16384]
  return %y
}""", _normal((4, 16384), 0.0, 1.0)),
    "softmax-large-logits": ("""graph @softmax_large_logits(%x: f32[4, 64]) -> (f32[4, 64]) {
  %y = softmax(%x) {axis = -1} : f32[4, 64]
  return %y
}""", _normal((4, 64), 1000.0, 2.0)),
    "layer-norm-offset": ("""graph @layer_norm_offset(%x: f32[4, 4096]) -> (f32[4, 4096]) {
  %y = layer_norm(%x) {axis = -1, eps = 1e-05} : f32[4, 4096]
  return %y
}""", _normal((4, 4096), 20.0, 1.0)),
}


def source(name: str, size: str = "small", seed: int = 0) -> ModelSource:
    """A stress graph by name, else whatever ``minic.api.load`` makes of ``name``."""
    if name in STRESS:
        from minic.ir.text import parse_graph
        text, make = STRESS[name]
        graph = parse_graph(text)
        return ModelSource(name, (make(np.random.default_rng(seed)),), graph=graph,
                           input_names=tuple(v.name for v in graph.inputs))
    from minic.api import load
    return load(name, size=size, seed=seed)


# --- one cell: a model, a backend, a precision ----------------------------------------------

@dataclass
class PrecisionCell:
    model: str
    backend: str
    precision: str
    status: str                  # ok | drift (finite, beyond tolerance) | inf/nan | unsupported | crash
    errors: Errors | None = None  # over the elements finite in both
    nonfinite: int = 0           # elements that are inf or NaN here but finite in the reference
    detail: str = ""

    def as_dict(self) -> dict:
        return {"model": self.model, "backend": self.backend, "precision": self.precision, "status": self.status,
                "max_abs": self.errors.abs if self.errors else None,
                "max_rel": self.errors.rel if self.errors else None, "nonfinite": self.nonfinite,
                "detail": self.detail}

    def text(self) -> str:
        if self.errors is None:
            return self.status
        figures = f"{self.errors.abs:.1e} / {self.errors.rel:.1e}"
        return figures if self.status == "ok" else f"{self.status}: {figures}" + (
            f" ({self.nonfinite} non-finite)" if self.nonfinite else "")


def judge(outputs, reference, precision: str) -> tuple[str, Errors, int]:
    """Status, errors over the elements finite in both, and how many went non-finite."""
    worst_abs = worst_rel = 0.0
    nonfinite, kinds = 0, set()
    for y, r in zip(as_tuple(outputs), as_tuple(reference)):
        y, r = np.asarray(y, np.float64), np.asarray(r, np.float64)
        lost = np.isfinite(r) & ~np.isfinite(y)
        nonfinite += int(lost.sum())
        kinds |= {"nan" if np.isnan(v) else "inf" for v in y[lost][:1]}
        both = np.isfinite(r) & np.isfinite(y)
        if both.any():
            diff = float(np.max(np.abs(y[both] - r[both])))
            scale = float(np.max(np.abs(r[both])))
            worst_abs, worst_rel = max(worst_abs, diff), max(worst_rel, diff / scale if scale > 0 else diff)
    errs = Errors(worst_abs, worst_rel)
    if nonfinite:
        return "/".join(sorted(kinds)), errs, nonfinite
    # Judged by the relative error alone: a softmax's outputs are all far below any
    # absolute bound, so "abs or rel" would call a 70% error ok.
    return ("ok" if errs.rel <= TOLERANCE[precision] else "drift"), errs, 0


def check(src: ModelSource, backend: str, precision: str, reference) -> PrecisionCell:
    """Run ``src`` on ``backend`` at ``precision`` and judge it against ``reference``."""
    try:
        outputs = backends.get(backend)(src, precision=precision)(*src.example_inputs)
    except MinicError as e:
        return PrecisionCell(src.name, backend, precision, "unsupported", detail=str(e))
    except Exception as e:  # noqa: BLE001 - a crash is a cell, not the end of the table
        return PrecisionCell(src.name, backend, precision, "crash", detail=f"{type(e).__name__}: {str(e)[:300]}")
    status, errs, nonfinite = judge(outputs, reference, precision)
    return PrecisionCell(src.name, backend, precision, status, errs, nonfinite)


def precision_table(names: list[str], precisions: list[str], backend_names: list[str], size: str = "small",
                    seed: int = 0, progress=None) -> list[PrecisionCell]:
    """Every model x backend x precision, each against the model's f32 reference
    (PyTorch for torch models, the interpreter for graphs)."""
    for p in precisions:
        if p not in PRECISIONS:
            raise UserError(f"verify: unknown precision '{p}'; available: {', '.join(PRECISIONS)}")
    cells = []
    for name in names:
        src = source(name, size, seed)
        _, reference = backends.reference(src)
        for backend in backend_names:
            for p in precisions:
                if backend == "interp" and p == "f16-acc":
                    continue                     # the interpreter's sums are numpy's, not a choice
                cells.append(check(src, backend, p, reference))
                if progress:
                    progress(cells[-1])
    return cells


def markdown(cells: list[PrecisionCell]) -> str:
    """One row per model and backend, one column per precision: max abs / max rel error."""
    columns = list(dict.fromkeys(c.precision for c in cells))
    rows = list(dict.fromkeys((c.model, c.backend) for c in cells))
    table = {(c.model, c.backend, c.precision): c.text() for c in cells}
    lines = ["| model | backend | " + " | ".join(columns) + " |", "| --- | --- |" + " --- |" * len(columns)]
    lines += [f"| {m} | {b} | " + " | ".join(table.get((m, b, p), "") for p in columns) + " |" for m, b in rows]
    return "\n".join(lines)
