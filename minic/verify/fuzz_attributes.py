"""Mutation fuzz of ONNX attributes: the node suite's models with one attribute changed.

    python -m minic.verify.fuzz_attributes --cases 2000 --seed 0

Case ``i`` of run ``seed`` takes a model of ONNX's node test suite
(``collect_testcases``) that has a node with attributes, and gives one of
its attributes a hostile value (0, -1, 2^31, 2^40, NaN, an entry of a list
changed, dropped or added, another string), and drops the shapes the model
declares for its outputs and inner values (the new value may change them).  Each
case runs in a child process with a time and memory limit, and has one of these
outcomes:

- ``ok``: minic ran it and agrees with ONNX Runtime (or ONNX Runtime refuses
  the model too: ``ort-refuses``, counted apart, since no answer can be compared);
- ``user-error``: minic refused with a one-line ``UserError``;
- ``known``: minic follows the spec where ONNX Runtime has a bug documented in
  docs/production-bugs.md (``known_bugs.KNOWN_ONNXRUNTIME``), and agrees with it elsewhere;
- ``mismatch``, ``internal``, ``hang``, ``signal``: the failures this fuzz is for.

Only the first data set of a test case is run; the inputs are the suite's own.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import resource
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from minic.compare import errors
from minic.verify.known_bugs import KNOWN_ONNXRUNTIME
from minic.verify.tolerance import tolerance

FAILURES = ("mismatch", "internal", "hang", "signal")
TIME_LIMIT_S = 60                           # per case, compile and run (a hang is far beyond it)
MEMORY_LIMIT = 4 << 30                      # bytes of address space a case may take
INTS = (0, -1, 1, 2, 3, -1000, 1000, 1 << 31, 1 << 40, -(1 << 40))
FLOATS = (0.0, -1.0, 1e9, -1e9, math.nan, math.inf, 1e-30)
STRINGS = ("", "nonsense", "NOTSET", "SAME_UPPER", "VALID", "constant", "reflect", "edge", "linear", "nearest",
           "cubic", "half_pixel", "align_corners", "tf_crop_and_resize", "sum", "mean", "max", "min", "DCR", "CRD")


@dataclass
class Case:
    index: int
    test: str                               # the node suite's test name
    node: int
    attribute: str
    value: object                           # the hostile value
    model: bytes                            # the mutated ModelProto
    inputs: list[np.ndarray]

    def describe(self) -> str:
        return f"case {self.index}: {self.test} node #{self.node} {self.attribute}={self.value!r}"


@dataclass
class Outcome:
    status: str
    detail: str = ""


@dataclass
class Report:
    seed: int
    counts: Counter = field(default_factory=Counter)
    failures: list[tuple[Case, Outcome]] = field(default_factory=list)
    known: list[tuple[Case, Outcome]] = field(default_factory=list)
    seconds: float = 0.0

    def table(self) -> str:
        lines = [f"{sum(self.counts.values())} mutated node-suite models (seed {self.seed}), {self.seconds:.0f} s: "
                 + ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))]
        lines += [f"  FAIL {c.describe()}: {o.status}: {o.detail[:300]}" for c, o in self.failures]
        lines += [f"  known {c.describe()}: {o.detail}" for c, o in self.known]
        return "\n".join(lines)


# --- the cases ------------------------------------------------------------------------

_SUITE: list | None = None


def suite() -> list:
    """The node suite's test cases whose model has a node with attributes (not sub-graphs)."""
    global _SUITE
    if _SUITE is None:
        import warnings
        from onnx import AttributeProto
        from onnx.backend.test.case.node import collect_testcases
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = collect_testcases(None)
        _SUITE = [t for t in sorted(cases, key=lambda t: t.name) if t.data_sets and any(
            a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for n in t.model.graph.node for a in n.attribute)]
    return _SUITE


def _hostile(a, rng: np.random.Generator):
    """A new value of attribute proto ``a``, of its own type."""
    from onnx import AttributeProto as A, helper
    value = helper.get_attribute_value(a)
    if a.type == A.INT:
        return int(rng.choice([*INTS, value + 1, value - 1, -value]))
    if a.type == A.FLOAT:
        return float(rng.choice([*FLOATS, -value, value * 1e6]))
    if a.type == A.STRING:
        return str(rng.choice(STRINGS))
    if a.type in (A.INTS, A.FLOATS):
        pool = INTS if a.type == A.INTS else FLOATS
        items = list(value)
        how = rng.integers(3) if items else 2
        if how == 0:                        # one entry changed
            items[rng.integers(len(items))] = rng.choice(pool)
        elif how == 1:                      # one entry dropped
            del items[rng.integers(len(items))]
        else:                               # one entry added
            items.insert(int(rng.integers(len(items) + 1)), rng.choice(pool))
        return [int(x) if a.type == A.INTS else float(x) for x in items]
    if a.type == A.TENSOR:                  # a tensor's values scaled by a hostile factor, or its shape emptied
        from onnx import numpy_helper
        array = numpy_helper.to_array(value)
        if rng.integers(2) and array.size:
            return numpy_helper.from_array(np.zeros((0,), array.dtype))
        factor = rng.choice([-1, 0, 1 << 20]) if array.dtype.kind in "iu" else rng.choice([-1.0, math.nan, 1e30])
        with np.errstate(all="ignore"):
            return numpy_helper.from_array((array * factor).astype(array.dtype))
    return None


def case(seed: int, index: int) -> Case:
    """Case ``index`` of run ``seed``."""
    import onnx
    from onnx import AttributeProto as A, helper
    rng = np.random.default_rng([seed, index])
    for _ in range(100):
        test = suite()[int(rng.integers(len(suite())))]
        model = onnx.ModelProto()
        model.CopyFrom(test.model)
        with_attrs = [i for i, n in enumerate(model.graph.node)
                      if any(a.type not in (A.GRAPH, A.GRAPHS) for a in n.attribute)]
        k = with_attrs[int(rng.integers(len(with_attrs)))]
        node = model.graph.node[k]
        attrs = [a for a in node.attribute if a.type not in (A.GRAPH, A.GRAPHS)]
        a = attrs[int(rng.integers(len(attrs)))]
        value = _hostile(a, rng)
        if value is None:
            continue
        name = a.name
        node.attribute.remove(a)
        node.attribute.append(helper.make_attribute(name, value, attr_type=a.type))
        # The new value may change the shapes the graph computes: the declared ones go, so that
        # the answer is compared with ONNX Runtime's rather than refused as a declaration that
        # lies (test_onnx_hostile_attrs.py::test_graph_structure_that_lies_is_refused covers that).
        for output in model.graph.output:
            output.type.tensor_type.ClearField("shape")
        del model.graph.value_info[:]
        shown = value if not hasattr(value, "dims") else f"tensor{list(value.dims)}"
        return Case(index, test.name, k, name, shown, model.SerializeToString(), list(test.data_sets[0][0]))
    raise RuntimeError(f"case {index} of seed {seed}: no attribute could be mutated")


# --- one case, in a child process ---------------------------------------------------

def _inputs_for(model, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    from minic.frontend.onnx import graph_input_names
    return dict(zip(graph_input_names(model), arrays))


def _onnxruntime(model_bytes: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """ONNX Runtime's answer, or None where it refuses the model or its data."""
    import onnxruntime as ort
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return session.run(None, {n: feeds[n] for n in names if n in feeds})
    except Exception:  # noqa: BLE001 - any refusal of ONNX Runtime's is "no answer"
        return None


def _agree(ours, theirs) -> str | None:
    """None when minic's outputs match ONNX Runtime's, else what differs."""
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs, ONNX Runtime gives {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"output {i}: shape {list(a.shape)}, ONNX Runtime's is {list(b.shape)}"
        if a.dtype != b.dtype and not (a.dtype.kind == b.dtype.kind == "f"):
            return f"output {i}: dtype {a.dtype}, ONNX Runtime's is {b.dtype}"
        if a.dtype.kind in "fc":
            close = np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-3, atol=1e-4, equal_nan=True)
            # or within the project's tolerance of the output's scale (minic/verify/tolerance.py): a float32
            # sum of large terms is off by about 1e-7 of the largest, also where the exact answer is 0
            if not close and not (a.dtype.kind == "f" and errors(a, b).within(tolerance(b.dtype))):
                return f"output {i}: max abs difference {np.nanmax(np.abs(a.astype(np.float64) - b)):.3g}"
        elif not np.array_equal(a, b):
            return f"output {i}: {int(np.sum(a != b))} elements differ"
    return None


def run_one(c: Case, backend: str) -> Outcome:
    """Import, compile and run one case here (in the child); ONNX Runtime compares."""
    import onnx
    import minic
    from minic.errors import UserError
    from minic.frontend.onnx import from_onnx
    model = onnx.ModelProto.FromString(c.model)
    feeds = _inputs_for(model, c.inputs)
    try:
        graph = from_onnx(model)
        arrays = [feeds[n] for n in _inputs_for(model, c.inputs)]
        ours = minic.compile(graph, arrays, backend=backend, use_cache=False)(*arrays) if backend == "minic" \
            else minic.compile(graph, arrays, backend=backend)(*arrays)
    except UserError as e:
        message = str(e)
        if "\n" in message.strip():
            return Outcome("internal", f"a user error of several lines: {message[:300]!r}")
        return Outcome("user-error", message)
    except Exception as e:  # noqa: BLE001 - what this fuzz looks for
        return Outcome("internal", f"{type(e).__name__}: {str(e)[:300]} | "
                                   + " < ".join(traceback.format_exc().strip().splitlines()[-3:-1])[:400])
    theirs = _onnxruntime(c.model, feeds)
    if theirs is None:
        return Outcome("ort-refuses", "minic ran a model ONNX Runtime refuses")
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    differs = _agree(ours, theirs)
    if differs is None:
        return Outcome("ok")
    for bug in KNOWN_ONNXRUNTIME:
        if bug.triggered(model) and _agree(ours, bug.undo(model, feeds, ours, theirs)) is None:
            return Outcome("known", bug.ref)
    return Outcome("mismatch", differs)


def _child(fn, args, conn) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        outcome = fn(*args)
    except MemoryError as e:
        outcome = Outcome("internal", f"MemoryError past {MEMORY_LIMIT >> 30} GiB: {e}")
    except Exception as e:  # noqa: BLE001 - reported to the parent, not lost with the child
        outcome = Outcome("internal", f"{type(e).__name__}: {str(e)[:300]}")
    conn.send(outcome)
    conn.close()


def in_child(fn, *args, time_limit: float = TIME_LIMIT_S):
    """``fn(*args)`` in a forked child with a time and memory limit: its result, or an
    ``Outcome`` ``hang`` or ``signal`` where the child gave none."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(fn, args, child))
    p.start()
    child.close()
    try:
        outcome = parent.recv() if parent.poll(time_limit) else None
    except EOFError:                        # the child ended without an answer
        outcome = None
    p.join(5 if outcome is not None else 0)
    if p.is_alive():
        p.kill()
        p.join()
    if outcome is not None:
        return outcome
    if p.exitcode is not None and p.exitcode < 0:
        return Outcome("signal", f"killed by signal {-p.exitcode}")
    return Outcome("hang", f"no answer within {time_limit:.0f} s")


def bounded(c: Case, backend: str = "minic", time_limit: float = TIME_LIMIT_S) -> Outcome:
    """``run_one`` in a forked child with a time and memory limit: a hang or a signal is an outcome."""
    return in_child(run_one, c, backend, time_limit=time_limit)


def fuzz_attributes(cases: int, seed: int, backend: str = "minic", first: int = 0, progress=None) -> Report:
    """Run cases ``first .. first + cases - 1`` of run ``seed``."""
    import onnxruntime  # noqa: F401 - imported once here, before the children fork
    import minic.runtime  # noqa: F401
    report = Report(seed)
    t0 = time.perf_counter()
    for index in range(first, first + cases):
        c = case(seed, index)
        outcome = bounded(c, backend)
        report.counts[outcome.status] += 1
        if outcome.status in FAILURES:
            report.failures.append((c, outcome))
        elif outcome.status == "known":
            report.known.append((c, outcome))
        if progress:
            progress(f"{c.describe()}: {outcome.status} {outcome.detail[:160]}")
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minic.verify.fuzz_attributes", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="the first case's index (to rerun one: --first N --cases 1)")
    parser.add_argument("--backend", default="minic", help="minic (compiled) or interp")
    parser.add_argument("--verbose", action="store_true", help="a line per case")
    args = parser.parse_args(argv)
    report = fuzz_attributes(args.cases, args.seed, args.backend, args.first,
                             progress=(lambda line: print(line, flush=True)) if args.verbose else None)
    print(report.table())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
