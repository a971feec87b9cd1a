"""The default schedule: contractions get the register-tiled micro-kernel of
``templates.py`` (with tuned knobs when a record exists); every other big
enough loop nest runs its outermost loop in parallel.

Lowering gives each stored value one nest whose outer loops run over the
output's axes; iterations of such a loop write disjoint elements, so they may
run on different threads.  A nest is worth threads when it does enough work:
its estimated element count (constant extents multiplied; a symbolic extent
counts as ``SYMBOL_GUESS``) must reach ``MIN_WORK``.
"""
from __future__ import annotations

from dataclasses import replace

from minic.codegen.options import CompileOptions
from minic.ir.loops import Allocate, Const, For, ForKind, Function, Program, Seq, Stmt, sub_stmts, walk_stmts
from minic.schedule.nest import ScheduleError
from minic.schedule.templates import Knobs, default_knobs, find_contraction, schedule_contraction

MIN_WORK = 1 << 15             # below this, creating threads costs more than it saves
SYMBOL_GUESS = 16


def _work(s: Stmt) -> int:
    """A rough count of innermost iterations (the body work) of a statement."""
    if isinstance(s, For):
        n = s.extent.value if isinstance(s.extent, Const) else SYMBOL_GUESS
        return n * max(1, _work(s.body))
    return sum(_work(t) for t in sub_stmts(s)) or 1


def _has_parallel(s: Stmt) -> bool:
    return any(isinstance(t, For) and t.kind == ForKind.PARALLEL for t in walk_stmts(s))


def _parallelize(s: Stmt) -> Stmt:
    if _has_parallel(s):                   # scheduled already (a template chose its loop)
        return s
    if isinstance(s, Seq):
        return Seq(tuple(_parallelize(t) for t in s.stmts))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _parallelize(s.body))
    if isinstance(s, For):
        if isinstance(s.extent, Const) and s.extent.value == 1:    # an axis of size 1: look inside
            return replace(s, body=_parallelize(s.body))
        if s.kind == ForKind.SERIAL and _work(s) >= MIN_WORK:
            return replace(s, kind=ForKind.PARALLEL)
    return s


def schedule_kernel(k: Function, options: CompileOptions, knobs: Knobs | None = None) -> Function:
    """``k`` scheduled: the contraction template (``knobs``, else the defaults), then parallel loops."""
    if find_contraction(k) is not None:
        try:
            k = schedule_contraction(k, knobs or default_knobs(k), options.threads)
        except ScheduleError:
            pass                           # a nest the template cannot take runs as lowered
    if options.threads <= 1:
        return k
    return replace(k, body=_parallelize(k.body))


def default_schedule(program: Program, options: CompileOptions | None = None) -> Program:
    """``program`` with each kernel's outer output loop parallel where it pays."""
    options = options or CompileOptions()
    return replace(program, kernels=[schedule_kernel(k, options) for k in program.kernels])
