"""One node case of the ONNX suite through one minic path, and its outcome.

A case passes when every output matches ONNX's expected one (shape, kind of
element type, values within the case's own rtol/atol); it is *refused* when
minic raises a ``UserError`` (an op, element type or opset it lacks, said in
one line); *wrong* when an output differs; a *crash* is anything else (an
internal exception, a native crash of the worker, a timeout).
"""
from __future__ import annotations

import functools
import re
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from minic.errors import UserError
from minic.ir.types import DType

OUTCOMES = ("pass", "refused", "wrong", "crash")


@dataclass(frozen=True)
class Result:
    name: str
    outcome: str            # one of OUTCOMES
    detail: str = ""        # the refusal's message, the mismatch, the exception
    seconds: float = 0.0

    @property
    def reason(self) -> str:
        """The refusal's message in a form that groups: names, numbers and types dropped."""
        return refusal_reason(self.detail) if self.outcome == "refused" else self.outcome


@functools.cache
def load_cases() -> tuple[Any, ...]:
    """Every node case of the suite that has a model (all 1,884 in onnx 1.20)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        return tuple(c for c in collect_testcases(None) if c.model is not None)


def run_case(case: Any, path: str) -> Result:
    """Prepare ``case``'s model on ``path`` (minic | interp), run every data set, compare."""
    from minic.frontend.onnx_backend import MinicBackend
    start = time.perf_counter()

    def done(outcome: str, detail: str = "") -> Result:
        return Result(case.name, outcome, detail, time.perf_counter() - start)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = MinicBackend.prepare(case.model, backend=path)
            for inputs, expected in case.data_sets:
                problem = compare(rep.run([_array(x) for x in inputs]), expected, case.rtol, case.atol)
                if problem:
                    return done("wrong", problem)
    except UserError as e:
        return done("refused", str(e).splitlines()[0] if str(e) else type(e).__name__)
    except Exception as e:  # noqa: BLE001 - an internal error is the outcome being measured
        return done("crash", f"{type(e).__name__}: {str(e)[:300]}")
    return done("pass")


def _array(x: Any) -> Any:
    """A case's datum as numpy: some cases store a TensorProto instead of an array."""
    import onnx
    return onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def compare(got: Any, expected: list[Any], rtol: float, atol: float) -> str:
    """'' when ``got`` matches ``expected``, else what differs."""
    got = list(got)
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for k, (g, w) in enumerate(zip(got, expected)):
        problem = _compare_one(g, w, rtol, atol)
        if problem:
            return f"output {k}: {problem}"
    return ""


def _compare_one(g: Any, w: Any, rtol: float, atol: float) -> str:
    w = _array(w)
    if w is None or isinstance(w, list):             # an optional's absence, a sequence
        if isinstance(w, list):
            if not isinstance(g, (list, tuple)) or len(g) != len(w):
                return f"expected a sequence of {len(w)}"
            return next((p for p in (_compare_one(a, b, rtol, atol) for a, b in zip(g, w)) if p), "")
        return "" if g is None else "expected no value (an empty optional)"
    w, g = np.asarray(w), np.asarray(g)
    if g.shape != w.shape:
        return f"shape {list(g.shape)}, expected {list(w.shape)}"
    if g.dtype != w.dtype:
        return f"dtype {g.dtype}, expected {w.dtype}"
    if w.dtype.kind in "fc" or w.dtype.kind == "V":
        if w.dtype == DType.bf16.numpy:
            # The bf16 cases carry f32 tolerances (rtol 1e-3, a quarter of one bf16 ulp);
            # rounding to bf16 after another step (the interpreter rounds after every op,
            # ONNX's reference once) moves a result by one ulp, at most 2^-7 relative.
            rtol = max(rtol, 2.0 ** -7)
        try:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())[:300]
        return ""
    if not np.array_equal(g, w):
        bad = int(np.sum(g != w))
        return f"{bad} of {w.size} elements differ"
    return ""


_GROUPS = [
    (r"op is not supported", "op not supported"),
    (r"element type|dtype .* is not supported|cast to ONNX type", "element type"),
    (r"opset \d+ is not supported", "opset outside the range minic reads"),
    (r"must be (known at compile time|a constant)|computed from values unknown", "a value needed at compile time"),
    (r"sequence|optional", "sequence/optional values"),
    (r"only 2-D", "only 2-D windows"),
]


def refusal_reason(message: str) -> str:
    """A refusal message as a group: ``node #0 (Foo, opset 21): op is not supported`` -> 'op not supported'."""
    for pattern, group in _GROUPS:
        if re.search(pattern, message):
            return group
    text = re.sub(r"^node [^:]*: |^graph input '[^']*': ", "", message)
    return re.sub(r"'[^']*'|\[[^\]]*\]|\d+", "_", text)[:80]
