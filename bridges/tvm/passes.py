"""Step 2–3 of the lab: the standard Relax optimizations, one at a time, with dumps.

The seed ran Relay's FuseOps, FoldConstant and EliminateCommonSubexpr.  In Relax
the same work is done by this sequence (the order TVM's own pipelines use):

=========================  =================================================
DecomposeOpsForInference   batch_norm → scale/shift (Relay's SimplifyInference)
LegalizeOps                every high-level op (R.matmul) → a TIR PrimFunc
                           called with R.call_tir: from here on it is code
AnnotateTIROpPattern       tag each PrimFunc: elementwise / broadcast /
                           injective / reduction / out-fusable (matmul, conv)
FoldConstant               run PrimFuncs whose inputs are all constants
                           (e.g. the transpose of a Linear weight) at compile time
FuseOps                    group calls by the tags: an out-fusable op takes the
                           elementwise ops after it (matmul + add + relu)
FuseTIR                    merge each group into one PrimFunc: one kernel
EliminateCommonSubexpr     reuse identical calls on identical arguments
DeadCodeElimination        drop bindings and functions nothing uses
=========================  =================================================

``optimize`` checks well-formedness before and after every pass and records
how many bindings, high-level ops and kernel calls ``main`` has at each step.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from bridges.tvm.importer import check_well_formed

def _pipeline() -> list[tuple[str, Callable[[], Any]]]:
    """(name, factory) pairs; factories so that tvm is imported only when used."""
    from tvm import relax
    t = relax.transform
    return [
        ("DecomposeOpsForInference", t.DecomposeOpsForInference),
        ("LegalizeOps", t.LegalizeOps),
        ("AnnotateTIROpPattern", t.AnnotateTIROpPattern),
        ("FoldConstant", t.FoldConstant),
        ("FuseOps", t.FuseOps),
        ("FuseTIR", t.FuseTIR),
        ("EliminateCommonSubexpr", t.EliminateCommonSubexpr),
        ("DeadCodeElimination", lambda: t.DeadCodeElimination(entry_functions=["main"])),
    ]


def pass_names() -> list[str]:
    return [name for name, _ in _pipeline()]


@dataclass(frozen=True)
class Counts:
    """What ``main`` does, counted: each op call or call_tir runs one kernel."""

    bindings: int        # `lv = ...` lines in main
    ops: int             # calls of high-level Relax ops (R.matmul, R.add, ...)
    call_tir: int        # calls of TIR PrimFuncs (after LegalizeOps)
    fused: int           # calls of fused groups (after FuseOps, before FuseTIR merges them)
    prim_funcs: int      # PrimFuncs in the module (distinct kernels to compile)

    @property
    def kernel_calls(self) -> int:
        return self.ops + self.call_tir + self.fused


@dataclass(frozen=True)
class Step:
    """One row of the pass report (the module was well formed after it)."""

    name: str
    counts: Counts


def count(mod: Any) -> Counts:
    """Count bindings, op calls and call_tir calls in ``main``, and PrimFuncs in ``mod``."""
    import tvm
    from tvm import relax, tirx

    bindings = ops = call_tir = fused = 0
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            bindings += 1
            value = binding.value
            if not isinstance(value, relax.Call):
                continue                      # tuples, constants, variables: no kernel
            if isinstance(value.op, tvm.ir.GlobalVar):
                fused += 1                    # a call of a fused Relax function
            elif value.op.name == "relax.call_tir":
                call_tir += 1
            elif value.op.name.startswith("relax."):
                ops += 1
    prim_funcs = sum(isinstance(f, tirx.PrimFunc) for f in mod.functions.values())
    return Counts(bindings, ops, call_tir, fused, prim_funcs)


def optimize(mod: Any, *, dump_dir: str | Path | None = None, print_after: tuple[str, ...] = (),
             out: TextIO | None = None) -> tuple[Any, list[Step]]:
    """Run the pipeline on ``mod``; return the result and one Step per pass.

    ``dump_dir``: write the IR (TVMScript) before the first and after every pass
    to ``00-input.py``, ``01-DecomposeOpsForInference.py``, ...;
    ``print_after``: pass names whose output is printed to ``out``.
    """
    import tvm

    unknown = set(print_after) - set(pass_names()) - {"all"}
    if unknown:
        from minic.errors import UserError
        raise UserError(f"unknown pass '{sorted(unknown)[0]}' for --print-after; "
                        f"passes: {', '.join(pass_names())}")
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "00-input.py").write_text(mod.script())
    check_well_formed(mod, "before the Relax passes")
    steps = [Step("input", count(mod))]
    with tvm.transform.PassContext(opt_level=3):
        for i, (name, make_pass) in enumerate(_pipeline(), start=1):
            mod = make_pass()(mod)
            check_well_formed(mod, f"after {name}")
            steps.append(Step(name, count(mod)))
            if dump is not None:
                (dump / f"{i:02d}-{name}.py").write_text(mod.script())
            if out is not None and (name in print_after or "all" in print_after):
                print(f"// ----- IR after {name} -----", file=out)
                print(mod.script(), file=out)
    return mod, steps


def format_steps(steps: list[Step]) -> str:
    """The pass report as a table: how each pass changed the counts."""
    lines = [f"{'after pass':<26}{'bindings':>9}{'ops':>6}{'call_tir':>10}{'fused':>7}"
             f"{'PrimFuncs':>11}{'kernel calls':>14}"]
    for s in steps:
        c = s.counts
        lines.append(f"{s.name:<26}{c.bindings:>9}{c.ops:>6}{c.call_tir:>10}{c.fused:>7}"
                     f"{c.prim_funcs:>11}{c.kernel_calls:>14}")
    return "\n".join(lines)
