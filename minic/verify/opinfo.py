"""Core ATen against eager on PyTorch's own OpInfo samples
(``torch.testing._internal.common_methods_invocations.op_db``; needs ``expecttest``).

For each OpInfo whose ATen name is a Core ATen op the frontend covers, the first
few small samples become one module (the sample's tensors are its inputs, so
nothing is folded at import); it is exported, converted, and run on the
interpreter and the compiled path against eager, within the tolerance policy.
The overloads each export actually reached are recorded: a case only tests the
overloads it reaches.

``run_batch`` puts many cases in one module (a submodule each): one export and
one compile for all of them, which is most of the time a case takes.  Each FX
node names its submodule, so what a case reached, and a refusal's case, stay known.

``python -m minic.verify.opinfo --all [--ops NAME,...]`` is the full sweep: every
sample of every selected OpInfo (not the first few), each sample a case of its own,
an OpInfo's samples batched in a forked child with a time and memory limit
(``fuzz_attributes.in_child``: a crash or hang is an outcome, not the end of the sweep).
A sample is skipped, and counted, only where minic cannot take it (a complex or
non-strided tensor, or none) or a tensor has more than SWEEP_MAX_ELEMENTS elements.
An ATen overload is covered only when every sample reaching it is ok.
"""
from __future__ import annotations

import collections

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils import _pytree as pytree

from minic.compare import errors
from minic.errors import UserError
from minic.verify.tolerance import tolerance

MAX_SAMPLES = 3
MAX_ELEMENTS = 4096
SWEEP_MAX_ELEMENTS = 1 << 16                    # the sweep's limit per tensor (time, not correctness)
SWEEP_TIME_LIMIT_S = 600                        # per OpInfo's child


@dataclass
class Case:
    name: str                                   # the OpInfo's name (and variant)
    dtype: torch.dtype
    samples: list = field(default_factory=list)


@dataclass
class Outcome:
    case: str
    reached: set[str]                           # Core ATen overloads the export produced
    result: str                                 # ok | refused | mismatch
    detail: str = ""


def _small(sample) -> bool:
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    return bool(tensors) and all(t.numel() <= MAX_ELEMENTS and t.numel() > 0 and not t.is_complex()
                                 and t.layout == torch.strided for t in tensors)


def _infos(names: set[str]):
    """(OpInfo, dtype) for the OpInfos named (by ATen name) in ``names`` that take f32, i64 or bool."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    for info in op_db:
        if info.aten_name not in names:
            continue
        supported = info.supported_dtypes("cpu")
        dtype = next((d for d in (torch.float32, torch.int64, torch.bool) if d in supported), None)
        if dtype is not None:
            yield info, dtype


def _label(info) -> str:
    return f"{info.name}{'.' + info.variant_test_name if info.variant_test_name else ''}"


def cases(names: set[str]) -> list[Case]:
    """The OpInfos named (by ATen name) in ``names``, each with up to MAX_SAMPLES small samples."""
    out = []
    for info, dtype in _infos(names):
        picked = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in info.sample_inputs("cpu", dtype, requires_grad=False):
                if _small(s):
                    picked.append((info.op, s))
                if len(picked) == MAX_SAMPLES:
                    break
        if picked:
            out.append(Case(_label(info), dtype, picked))
    return out


class Samples(torch.nn.Module):
    """All of a case's samples in one forward: one export, one compile."""

    def __init__(self, case: Case) -> None:
        super().__init__()
        self.calls, self.inputs = [], []
        for op, s in case.samples:
            leaves, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
            where = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]
            self.calls.append((op, leaves, spec, where, len(self.inputs)))
            self.inputs += [leaves[i].clone() for i in where]

    def forward(self, *xs):
        outs = []
        for op, leaves, spec, where, first in self.calls:
            leaves = list(leaves)
            for k, i in enumerate(where):
                leaves[i] = xs[first + k]
            inp, args, kwargs = pytree.tree_unflatten(leaves, spec)
            result = op(inp, *args, **kwargs)
            outs += [r for r in pytree.tree_leaves(result) if isinstance(r, torch.Tensor)]
        return tuple(outs)


def _reached(program, core: set[str]) -> set[str]:
    return {str(n.target) for n in program.graph.nodes if n.op == "call_function"} & core


def _judge(name: str, reached: set[str], results: dict, want: list) -> Outcome:
    """Each path's outputs against eager's: count, dtype, shape, tolerance."""
    for path, got in results.items():
        if len(got) != len(want):
            return Outcome(name, reached, "mismatch", f"{path}: {len(got)} outputs, eager has {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            if g.shape != w.shape or g.dtype != w.dtype:
                return Outcome(name, reached, "mismatch", f"{path} output {k}: {g.dtype}{list(g.shape)} "
                                                           f"vs eager {w.dtype}{list(w.shape)}")
            e = errors(g.astype(np.float64), w.astype(np.float64))
            if not e.within(tolerance(w.dtype)):
                return Outcome(name, reached, "mismatch", f"{path} output {k}: {e}")
    return Outcome(name, reached, "ok")


def _paths(graph, arrays, cache_dir) -> dict[str, list[np.ndarray]]:
    from minic.ir.interpret import interpret
    from minic.runtime import CompileOptions, compile_graph
    results = {"interp": interpret(graph, arrays),
               "minic": compile_graph(graph, CompileOptions(cache_dir=cache_dir))(*arrays)}
    return {p: list(g) if isinstance(g, (tuple, list)) else [g] for p, g in results.items()}


class Batch(torch.nn.Module):
    """Several cases' modules side by side: submodule ``parts.i`` is case i."""

    def __init__(self, cases: list[Case]) -> None:
        super().__init__()
        self.parts = torch.nn.ModuleList(Samples(c) for c in cases)
        self.inputs = [t for p in self.parts for t in p.inputs]

    def forward(self, *xs):
        outs, k = [], 0
        for part in self.parts:
            outs += part(*xs[k:k + len(part.inputs)])
            k += len(part.inputs)
        return tuple(outs)


def _part(node) -> int | None:
    """Which case (submodule ``parts.i``) an FX node came from."""
    for path, _ in (node.meta.get("nn_module_stack") or {}).values():
        if path.startswith("parts."):
            return int(path.split(".")[1])
    return None


def run_batch(batch: list[Case], core: set[str], cache_dir) -> list[Outcome]:
    """``run`` for many cases with one export and one compile.  A case the converter refuses is
    taken out (its outcome says why) and the rest go again; anything else unattributable
    (an export or run-time failure) falls back to one ``run`` per case."""
    from minic.frontend.torch import Converter, _export, numpy_of
    outcomes, live, wants = [], [], []
    for case in batch:
        try:
            with torch.no_grad():
                module = Samples(case)
                wants.append([numpy_of(t) for t in module(*module.inputs)])
            live.append(case)
        except Exception as e:                  # noqa: BLE001 - eager rejects the sample
            outcomes.append(Outcome(case.name, set(), "skipped", f"{type(e).__name__}: {str(e)[:120]}"))
    while live:
        module = Batch(live)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = _export(module, tuple(module.inputs), None)
        except Exception:                       # noqa: BLE001 - which case torch.export rejects is unknown
            return outcomes + [run(c, core, cache_dir) for c in live]
        reached = [set() for _ in live]
        for n in program.graph.nodes:
            if n.op == "call_function" and str(n.target) in core and (i := _part(n)) is not None:
                reached[i].add(str(n.target))
        converter = Converter(program, "cases", None)
        try:
            graph = converter.run()
        except UserError as e:
            culprit = _part(converter.current)
            if culprit is None:
                return outcomes + [run(c, core, cache_dir) for c in live]
            outcomes.append(Outcome(live[culprit].name, reached[culprit], "refused", str(e).splitlines()[0]))
            del live[culprit], wants[culprit]
            continue
        try:
            results = _paths(graph, [numpy_of(t) for t in module.inputs], cache_dir)
        except UserError:
            return outcomes + [run(c, core, cache_dir) for c in live]
        start = 0
        for case, want, seen in zip(live, wants, reached):
            part = {p: got[start:start + len(want)] for p, got in results.items()}
            outcomes.append(_judge(case.name, seen, part, want))
            start += len(want)
        return outcomes
    return outcomes


def run(case: Case, core: set[str], cache_dir) -> Outcome:
    from minic.frontend.torch import Converter, _export, numpy_of
    module = Samples(case)
    inputs = tuple(module.inputs)
    try:
        with torch.no_grad():
            want = [numpy_of(t) for t in module(*inputs)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = _export(module, inputs, None)
    except Exception as e:                      # noqa: BLE001 - eager or torch.export rejects the sample
        return Outcome(case.name, set(), "skipped", f"{type(e).__name__}: {str(e)[:120]}")
    reached = _reached(program, core)
    try:
        graph = Converter(program, "case", None).run()
        results = _paths(graph, [numpy_of(t) for t in inputs], cache_dir)
    except UserError as e:
        return Outcome(case.name, reached, "refused", str(e).splitlines()[0])
    return _judge(case.name, reached, results, want)


# --- the full sweep ----------------------------------------------------------------------

def _skip_reason(sample) -> str | None:
    """Why the sweep does not run a sample, or None."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not tensors:
        return "no tensor"
    if any(t.is_complex() or t.layout != torch.strided for t in tensors):
        return "complex or non-strided"
    if any(t.numel() > SWEEP_MAX_ELEMENTS for t in tensors):
        return f"over {SWEEP_MAX_ELEMENTS} elements"
    return None


@dataclass
class OpReport:
    info: str
    samples: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)      # reason -> count

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)


def _sweep_one(case_list: list[Case], core: set[str], cache_dir) -> list[Outcome]:
    out = []
    for k in range(0, len(case_list), 16):
        out += run_batch(case_list[k:k + 16], core, cache_dir)
    return out


def sweep(names: set[str], core: set[str], cache_dir, only: set[str] | None = None, progress=None) -> list[OpReport]:
    """Every sample of every OpInfo of ``names`` (or of those labelled in ``only``)."""
    from minic.verify.fuzz_attributes import Outcome as ChildFailure, in_child
    reports = []
    infos = [(i, d) for i, d in _infos(names) if only is None or _label(i) in only or i.name in only]
    for info, dtype in infos:
        rep = OpReport(_label(info))
        torch.manual_seed(0)                        # make_tensor draws the samples' values
        todo = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k, s in enumerate(info.sample_inputs("cpu", dtype, requires_grad=False)):
                rep.samples += 1
                if (why := _skip_reason(s)) is not None:
                    rep.skipped[why] = rep.skipped.get(why, 0) + 1
                else:
                    todo.append(Case(f"{rep.info}#{k}", dtype, [(info.op, s)]))
        got = in_child(_sweep_one, todo, core, cache_dir, time_limit=SWEEP_TIME_LIMIT_S) if todo else []
        if isinstance(got, ChildFailure):           # one child per sample, to name the one that fails
            got = []
            for c in todo:
                one = in_child(_sweep_one, [c], core, cache_dir, time_limit=SWEEP_TIME_LIMIT_S)
                got += [Outcome(c.name, set(), "mismatch", f"{one.status}: {one.detail}")] \
                    if isinstance(one, ChildFailure) else one
        # A sample whose child failed reached what the OpInfo's other samples reach (as far as known).
        seen = set().union(*(o.reached for o in got)) if got else set()
        rep.outcomes = [Outcome(o.case, seen, o.result, o.detail) if not o.reached and o.result == "mismatch" else o
                        for o in got]
        reports.append(rep)
        if progress:
            progress(f"{rep.info}: {rep.count('ok')} ok, {rep.count('refused')} refused, "
                     f"{rep.count('mismatch')} mismatch, {sum(rep.skipped.values())} skipped")
    return reports


def verdicts(reports: list[OpReport]) -> dict[str, bool]:
    """Each overload reached: covered only when every sample reaching it is ok."""
    out: dict[str, bool] = {}
    for rep in reports:
        for o in rep.outcomes:
            for name in o.reached:
                out[name] = out.get(name, True) and o.result == "ok"
    return out


def table(reports: list[OpReport]) -> str:
    rows = [f"{'OpInfo':<40} {'samples':>7} {'ok':>5} {'refused':>7} {'mismatch':>8} {'skipped':>7}"]
    for r in reports:
        rows.append(f"{r.info:<40} {r.samples:>7} {r.count('ok'):>5} {r.count('refused'):>7} "
                    f"{r.count('mismatch'):>8} {sum(r.skipped.values()):>7}")
    t = lambda f: sum(f(r) for r in reports)  # noqa: E731
    rows.append(f"{f'total ({len(reports)} OpInfos)':<40} {t(lambda r: r.samples):>7} {t(lambda r: r.count('ok')):>5} "
                f"{t(lambda r: r.count('refused')):>7} {t(lambda r: r.count('mismatch')):>8} "
                f"{t(lambda r: sum(r.skipped.values())):>7}")
    skipped: dict[str, int] = {}
    for r in reports:
        for why, n in r.skipped.items():
            skipped[why] = skipped.get(why, 0) + n
    if skipped:
        rows.append("skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())))
    v = verdicts(reports)
    rows.append(f"overloads reached: {len(v)}, covered (every sample reaching it ok): {sum(v.values())}")
    rows += [f"  not covered: {name}" for name, ok in sorted(v.items()) if not ok]
    reasons = collections.Counter((r.info, o.detail[:160]) for r in reports for o in r.outcomes if o.result == "refused")
    rows += [f"  refused {n}x {info}: {why}" for (info, why), n in sorted(reasons.items())]
    rows += [f"  MISMATCH {o.case}: {o.detail[:300]}" for r in reports for o in r.outcomes if o.result == "mismatch"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import tempfile
    from minic.frontend.core_aten import coverage
    from minic.progress import progress_bar
    parser = argparse.ArgumentParser(prog="python -m minic.verify.opinfo", description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="every sample of every selected OpInfo (the full sweep)")
    parser.add_argument("--ops", default=None, help="OpInfo names (or name.variant), comma-separated")
    args = parser.parse_args(argv)
    if not args.all:
        parser.error("only the full sweep (--all) is run from here; CI runs a fixed subset (tests/frontend)")
    c = coverage()
    names = {name.split(".")[1] for name in c.covered}
    only = set(args.ops.split(",")) if args.ops else None
    total = sum(1 for i, _ in _infos(names) if only is None or _label(i) in only or i.name in only)
    import minic.runtime  # noqa: F401 - imported once, before the children fork
    with tempfile.TemporaryDirectory() as tmp, progress_bar("OpInfo sweep", total) as advance:
        reports = sweep(names, set(c.covered) | set(c.missing), tmp, only, advance)
    print(table(reports))
    return 1 if any(r.count("mismatch") for r in reports) else 0


if __name__ == "__main__":
    raise SystemExit(main())
