"""Control flow at run time: ``loop``, an op that carries a *body* graph and runs it once per
iteration, and ``if``, an op that carries two branch graphs and runs the one its condition picks.

One op serves ONNX's ``Loop`` and ``Scan`` and the recurrent layers (RNN, GRU, LSTM) when
their trip count or sequence length is known only at run time (a static one is unrolled at
import: minic/frontend/onnx_control.py).  Its inputs, in order:

    [trip]  [cond]  carried...  scanned...  captured...

* ``trip`` (with ``trip=True``): the most iterations, an i64 scalar;
* ``cond`` (with ``condition=True``): whether the first iteration runs, a bool scalar; the
  body's first output is then the condition for the next one (a while loop);
* ``carried``: the loop-carried values, the body's next ones replace them at each iteration;
* ``scanned``: tensors sliced along their axis 0, one slice per iteration (Scan's inputs,
  an LSTM's time steps); their length bounds the iterations;
* ``captured``: values of the outer graph the body reads, the same at every iteration.

The body takes ``(iteration: i64[], carried..., one slice of each scanned..., captured...)``
and returns ``([cond], carried..., per-iteration outputs...)``.  The loop's results are the
last carried values, then each per-iteration output stacked along a new axis 0, of size the
scanned inputs' length or, without scanned inputs, the ``count`` symbol (a size the data
decides, as nonzero's: ops/data_sized.py).

    %h, %ys = loop(%h0, %xs) {body = @lstm_step, carried = 1, scanned = 1} : f32[B, 8], f32[T, B, 8]

It has no compute rule: its control flow runs on the host, in ``run_loop`` below.  The
interpreter runs the body by interpreting it (minic/ir/interpret.py); a compiled model is cut at
the loop, as at nonzero, and runs the body compiled once as a model of its own
(minic/runtime/split.py).  TVM Relax and ONNX Runtime keep such control flow in a small VM
that calls compiled kernels; minic's host loop is that VM, kept to one op.

``if`` serves ONNX's ``If`` when its condition is known at run time only (a known one inlines
its branch at import).  Its inputs are ``[cond] captured...``: a bool scalar, then the outer
values the branches read; each branch takes all the captured values and returns the node's
results.  Where the branches' outputs differ in a dim (one returns ``x``, the other a slice of
it), the output has a fresh symbol there, from ``sizes`` (a size the data decides):

    %y = if(%c, %x) {then_branch = @then, else_branch = @else, sizes = [if_2]} : f32[if_2, 4]

Both branches are compiled, once each, when the model is; ``run_if`` runs the one picked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from minic.errors import DataError, UserError
from minic.ir.graph import QUIET, Graph
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import require
from minic.ir.types import Dim, DType, TensorType, dim_bind, dim_eval, symbols


@dataclass(frozen=True)
class LoopAttrs:
    body: Graph
    carried: int                        # loop-carried values
    scanned: int = field(default=0, metadata=QUIET)                   # inputs sliced along axis 0, one per iteration
    trip: bool = field(default=False, metadata=QUIET)                 # the first input is the trip count (i64 scalar)
    condition: bool = field(default=False, metadata=QUIET)            # the next input is the first condition;
    #                                                                   the body's first output the next one
    count: str | None = field(default=None, metadata=QUIET)           # without scanned inputs: the symbol of the
    #                                                                   number of iterations (a size the data decides)
    reverse_in: tuple[bool, ...] = field(default=(), metadata=QUIET)  # per scanned input: slice from its end
    reverse_out: tuple[bool, ...] = field(default=(), metadata=QUIET)  # per stacked output: last iteration first

    def check(self) -> None:
        require(self.carried >= 0 and self.scanned >= 0, "loop: carried and scanned are counts")
        require(len(self.reverse_in) in (0, self.scanned), f"loop: reverse_in needs one flag per scanned input "
                                                           f"({self.scanned}), got {len(self.reverse_in)}")
        # the stacked outputs are as long as the scanned inputs: nothing may stop the loop before their end
        require(not (self.scanned and (self.trip or self.condition)),
                "loop: scanned inputs run to their end; a trip count or condition with them is not supported")
        require(self.count is None or self.count.isidentifier(),
                f"loop: the count symbol must be an identifier, got {self.count!r}")

    @property
    def decided(self) -> tuple[str | None, ...]:
        """The symbols of the sizes the data decides: the iterations', where there is one."""
        return (self.count,)

    @property
    def first(self) -> int:
        """How many inputs come before the carried values (the trip count, the condition)."""
        return int(self.trip) + int(self.condition)

    @property
    def stacked(self) -> int:
        """How many per-iteration outputs the body has (stacked into the loop's results)."""
        return len(self.body.outputs) - int(self.condition) - self.carried


def _substitute(d: Dim, env: dict[str, Dim], op: str = "loop") -> Dim:
    """A body dim in the outer graph's terms (its symbols bound by the node's input types)."""
    if isinstance(d, str) and d in env:
        return env[d]
    sizes = {s: n for s, n in env.items() if isinstance(n, int)}
    bound = dim_bind(d, sizes)
    unmapped = {s for s in symbols(bound) if s in env and env[s] != s}
    require(not unmapped, f"{op}: the body's size {d} cannot be written in the outer graph's symbols")
    return bound


def _bind_body(op: str, body: Graph, given: list[TensorType]) -> dict[str, Dim]:
    """The body's input symbols bound to the dims of the types the node gives it (checked)."""
    require(len(body.inputs) == len(given), f"{op}: the body @{body.name} takes {len(body.inputs)} inputs, "
                                            f"the {op} gives {len(given)}")
    env: dict[str, Dim] = {}
    for v, t in zip(body.inputs, given):
        require(v.type.dtype == t.dtype and v.type.rank == t.rank,
                f"{op}: the body's input '{v.name}' is {v.type}, the {op} gives {t}")
        for mine, theirs in zip(v.type.shape, t.shape):
            if isinstance(mine, str) and mine.isidentifier():
                require(env.setdefault(mine, theirs) == theirs, f"{op}: the body's {mine} is both {env[mine]} and {theirs}")
            else:
                require(mine == theirs, f"{op}: the body's input '{v.name}' is {v.type}, the {op} gives {t}")
    return env


def _body_outputs(op: str, body: Graph, given: list[TensorType]) -> list[TensorType]:
    """The types of the body's outputs in the outer graph's symbols."""
    env = _bind_body(op, body, given)
    return [TensorType(tuple(_substitute(d, env, op) for d in v.type.shape), v.type.dtype) for v in body.outputs]


def _infer(attrs: LoopAttrs, ts: list[TensorType]) -> list[TensorType]:
    body, first, c, m = attrs.body, attrs.first, attrs.carried, attrs.scanned
    if attrs.trip:
        require(ts[0].dtype == DType.i64 and ts[0].shape in ((), (1,)), f"loop: the trip count must be one i64, got {ts[0]}")
    if attrs.condition:
        t = ts[int(attrs.trip)]
        require(t.dtype == DType.bool and t.shape in ((), (1,)), f"loop: the condition must be one bool, got {t}")
    carried, scanned, captured = ts[first:first + c], ts[first + c:first + c + m], ts[first + c + m:]
    require(all(t.rank >= 1 for t in scanned), "loop: a scanned input needs an axis to slice")
    lengths = {t.shape[0] for t in scanned}
    require(len(lengths) <= 1, f"loop: the scanned inputs differ in length: {sorted(map(str, lengths))}")
    given = [TensorType((), DType.i64)] + carried + [TensorType(t.shape[1:], t.dtype) for t in scanned] + captured
    outs = _body_outputs("loop", body, given)
    if attrs.condition:
        require(outs[0].dtype == DType.bool and outs[0].shape in ((), (1,)),
                f"loop: the body's first output is the condition, one bool; got {outs[0]}")
        outs = outs[1:]
    for k, (t, o) in enumerate(zip(carried, outs)):
        require(t == o, f"loop: carried value {k} is {t} but the body makes it {o} (a loop-carried value keeps its type)")
    require(len(outs) >= c, f"loop: the body returns {len(outs)} values after the condition, fewer than {c} carried")
    length = lengths.pop() if lengths else attrs.count
    require(length is not None or len(outs) == c, "loop: stacked outputs need scanned inputs or a count symbol")
    require(len(attrs.reverse_out) in (0, len(outs) - c), "loop: reverse_out needs one flag per stacked output")
    return carried + [TensorType((length,) + o.shape, o.dtype) for o in outs[c:]]


RunBody = Callable[..., object]        # (iteration, carried..., slices..., captured...) -> array | tuple


def run_loop(attrs: LoopAttrs, arrays: Sequence[np.ndarray], run_body: RunBody) -> tuple[np.ndarray, ...]:
    """The loop's results on ``arrays``, the body run by ``run_body`` (interpreted or compiled)."""
    first, c, m = attrs.first, attrs.carried, attrs.scanned
    arrays = [np.asarray(a) for a in arrays]
    trip = int(arrays[0].reshape(-1)[0]) if attrs.trip else None
    if trip is not None and trip < 0:
        raise DataError(f"loop: the trip count is negative ({trip})")
    going = bool(arrays[int(attrs.trip)].reshape(-1)[0]) if attrs.condition else True
    carried = arrays[first:first + c]
    scanned, captured = arrays[first + c:first + c + m], arrays[first + c + m:]
    reverse_in = attrs.reverse_in or (False,) * m
    length = scanned[0].shape[0] if scanned else None
    if any(a.shape[0] != length for a in scanned):
        raise DataError(f"loop: the scanned inputs differ in length: {[a.shape[0] for a in scanned]}")
    steps = length if trip is None else trip if length is None else min(trip, length)
    if steps is None and not attrs.condition:
        raise DataError("loop: without a trip count, scanned inputs or a condition it never ends")
    frames: list[list[np.ndarray]] = [[] for _ in range(attrs.stacked)]
    t = 0
    while going and (steps is None or t < steps):
        slices = [a[length - 1 - t] if back else a[t] for a, back in zip(scanned, reverse_in)]
        results = run_body(np.asarray(t, np.int64), *carried, *slices, *captured)
        results = list(results) if isinstance(results, tuple) else [results]
        if attrs.condition:
            going = bool(np.asarray(results.pop(0)).reshape(-1)[0])
        carried = results[:c]
        for frame, r in zip(frames, results[c:]):
            frame.append(np.asarray(r))
        t += 1
    if t == 0:                          # no iteration: the results are fresh arrays, never the caller's own
        carried = [np.array(a) for a in carried]
    return tuple(carried) + tuple(_stacked(attrs, j, f, arrays) for j, f in enumerate(frames))


def _stacked(attrs: LoopAttrs, j: int, frames: list[np.ndarray], arrays: list[np.ndarray]) -> np.ndarray:
    """The per-iteration output ``j`` stacked along a new axis 0 (empty when the loop ran 0 times)."""
    if attrs.reverse_out and attrs.reverse_out[j]:
        frames = frames[::-1]
    if frames:
        if len({f.shape for f in frames}) > 1:
            raise DataError(f"loop: output {j} changes shape between iterations: "
                            f"{sorted({f.shape for f in frames})}")
        return np.stack(frames)
    body_out = attrs.body.outputs[int(attrs.condition) + attrs.carried + j]
    c, m = attrs.carried, attrs.scanned
    given = arrays[attrs.first:]
    shapes = [a.shape for a in given[:c]] + [a.shape[1:] for a in given[c:c + m]] + [a.shape for a in given[c + m:]]
    env: dict[str, int] = {}
    for v, shape in zip(attrs.body.inputs[1:], shapes):
        env.update((d, n) for d, n in zip(v.type.shape, shape) if isinstance(d, str) and d.isidentifier())
    try:
        shape = tuple(dim_eval(d, env) for d in body_out.type.shape)
    except UserError:
        raise DataError(f"loop: it ran 0 times, and the size of its output {j} ({body_out.type}) is decided "
                        "by the body's data") from None
    return np.zeros((0,) + shape, body_out.type.dtype.numpy)


def _host_only(op: str, what: str):
    """The reference of an op whose graphs run on the host: there is none to call."""
    def refuse(attrs, *arrays: np.ndarray):
        raise UserError(f"{op}: its {what} in the interpreter (minic/ir/interpret.py) or between compiled "
                        "parts (minic/runtime/split.py), not as a numpy reference")
    return refuse


define("loop", OpKind.LAYOUT, _infer, _host_only("loop", "body runs"), None, LoopAttrs, arity=(0, 1 << 16), f16_via_f32=False,
       doc="loop([trip], [cond], carried..., scanned..., captured...) = (the last carried values, the body's "
           "per-iteration outputs stacked): ONNX's Loop and Scan at run time",
       sized_by_data=True)


# --- if ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class IfAttrs:
    then_branch: Graph                  # run when the condition is true
    else_branch: Graph                  # run when it is false
    sizes: tuple[str, ...] = field(default=(), metadata=QUIET)    # a fresh symbol per dim where the branches'
    #                                                               outputs differ (a size the data decides),
    #                                                               in output order, then axis order

    def check(self) -> None:
        require(all(s.isidentifier() for s in self.sizes),
                f"if: the size symbols must be identifiers, got {self.sizes}")

    @property
    def decided(self) -> tuple[str, ...]:
        """The symbols of the sizes the data decides (ops/data_sized.py: ``sized_outputs``)."""
        return self.sizes


Joined = list[tuple[tuple[Dim | None, ...], DType]]       # per output: its dims (None: the data decides), dtype


def joined_outputs(then_branch: Graph, else_branch: Graph, given: list[TensorType]) -> Joined:
    """Each output of the two branches (both given ``given``) as its dims and dtype, a dim None where
    the branches differ or where it is a size of the branch's own (a count inside it): the data decides
    it.  Branches that differ in their number of outputs, a dtype or a rank are refused."""
    outer = {s for t in given for d in t.shape for s in symbols(d)}
    then_outs, else_outs = _body_outputs("if", then_branch, given), _body_outputs("if", else_branch, given)
    require(len(then_outs) == len(else_outs), f"if: the then branch returns {len(then_outs)} values, "
                                              f"the else branch {len(else_outs)}")
    joined = []
    for k, (a, b) in enumerate(zip(then_outs, else_outs)):
        require(a.dtype == b.dtype and a.rank == b.rank,
                f"if: output {k} is {a} in the then branch and {b} in the else branch (they may differ in sizes only)")
        same = tuple(x if x == y and symbols(x) <= outer else None for x, y in zip(a.shape, b.shape))
        joined.append((same, a.dtype))
    return joined


def _infer_if(attrs: IfAttrs, ts: list[TensorType]) -> list[TensorType]:
    cond = ts[0]
    require(cond.dtype == DType.bool and all(d == 1 for d in cond.shape),
            f"if: the condition must be one bool, got {cond}")
    joined = joined_outputs(attrs.then_branch, attrs.else_branch, ts[1:])
    differing = sum(d is None for shape, _ in joined for d in shape)
    require(differing == len(attrs.sizes), f"if: the branches' outputs differ in {differing} dims, and the node "
                                           f"names {len(attrs.sizes)} size symbols for them")
    fresh = iter(attrs.sizes)
    return [TensorType(tuple(next(fresh) if d is None else d for d in shape), dtype) for shape, dtype in joined]


def run_if(attrs: IfAttrs, arrays: Sequence[np.ndarray], run_then: RunBody,
           run_else: RunBody) -> tuple[np.ndarray, ...]:
    """The results of the branch that ``arrays[0]`` picks, run by ``run_then`` or ``run_else``
    (interpreted or compiled) on the captured values ``arrays[1:]``."""
    taken = bool(np.asarray(arrays[0]).reshape(-1)[0])
    results = (run_then if taken else run_else)(*arrays[1:])
    return tuple(np.asarray(r) for r in (results if isinstance(results, tuple) else (results,)))


define("if", OpKind.LAYOUT, _infer_if, _host_only("if", "branches run"), None, IfAttrs, arity=(1, 1 << 16), f16_via_f32=False,
       doc="if(cond, captured...) = then_branch(captured...) if cond else else_branch(captured...): ONNX's If "
           "whose condition is known at run time only",
       sized_by_data=True)
