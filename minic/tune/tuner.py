"""The tuner, AutoTVM-style: a template with knobs, a search, real measurements.

For one contraction kernel the search space is every ``Knobs`` value (rows x
lanes x pack x parallel: 96 points; lane counts are powers of two, as
LLVM splits other vector widths badly).  Each trial schedules the kernel with one
point, compiles it alone and times it (warm-up, median of repeats,
``measure.py``).  Two strategies:

* ``random``: points drawn without replacement;
* ``anneal``: simulated annealing over neighbouring points (one knob changed),
  where a *cost model* picks which neighbour to measure: a least-squares fit of
  log(time) on a few features of the points measured so far (register tile
  size, wasted rows and lanes, registers left over ...), as AutoTVM ranks
  candidates with a learned model before spending measurements on them.

Trials are timed as the kernel runs in its model (``measure.py``): the model's
sizes, thread count and thread pool, and weights rotated over copies so that
they arrive from as far as the model's other weights push them.

The default knobs are trial 0.  After the search, the default and the search's
fastest points are timed again, interleaved, and a point replaces the default
only if it beats it by more than the noise of those paired rounds
(``confirm.py``); otherwise the result, and its record, keep the default.  So a
tuned model runs each kernel with the default or with knobs that were
measurably faster next to it.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from datetime import date
from typing import Callable

import numpy as np

from minic.options import CompileOptions, converts_bf16, dots_u8s8
from minic.ir.loops import Const, Function, Role
from minic.tune import records
from minic.tune.confirm import CANDIDATES, PASSES, ROUNDS, Comparison, block_size, pick, time_together
from minic.tune.measure import flops, measure, ready
from minic.schedule.nest import ScheduleError, unique_loops
from minic.schedule.templates import Knobs, default_knobs, find_contraction, schedule_contraction, signature

SPACE = {"rows": (1, 2, 3, 4, 5, 6, 7, 8), "lanes": (16, 32, 64), "pack": (True, False),
         "parallel": ("outer", "rows")}
STRATEGIES = ("anneal", "random")
REGISTERS = 32               # AVX-512 has 32 vector registers


@dataclass
class Trial:
    knobs: Knobs
    seconds: float           # inf when the point failed to schedule


@dataclass
class TuneResult:
    kernel: str
    signature: str
    flops: float
    default: Trial                  # the default knobs, timed in the confirmation rounds
    best: Trial                     # a point that beat the default beyond the margin, else the default
    comparison: Comparison | None   # the strongest point against the default (None: none to confirm)
    trials: list[Trial] = field(default_factory=list)   # the search; trial 0 is the default

    @property
    def kept_default(self) -> bool:
        return self.best.knobs == self.default.knobs

    def gflops(self, trial: Trial) -> float:
        return self.flops / trial.seconds / 1e9 if trial.seconds and math.isfinite(trial.seconds) else 0.0


def all_points() -> list[Knobs]:
    return [Knobs(r, n, p, q) for r in SPACE["rows"] for n in SPACE["lanes"]
            for p in SPACE["pack"] for q in SPACE["parallel"]]


def neighbours(k: Knobs) -> list[Knobs]:
    """Points that differ from ``k`` in one knob (rows and lanes by one step)."""
    out = []
    for name, values in SPACE.items():
        i = values.index(getattr(k, name))
        steps = (i - 1, i + 1) if name in ("rows", "lanes") else range(len(values))
        for j in steps:
            if 0 <= j < len(values) and j != i:
                out.append(Knobs(**{**k.to_json(), name: values[j]}))
    return out


def features(k: Knobs, rows: int | None, lanes: int | None) -> list[float]:
    """What the cost model sees of a point (``rows``/``lanes``: the kernel's extents when known)."""
    vectors = k.lanes // 16
    accumulators = k.rows * vectors
    spare = REGISTERS - accumulators - vectors - 1
    waste_r = (math.ceil(rows / k.rows) * k.rows / rows - 1) if rows else 0.0
    waste_l = (math.ceil(lanes / k.lanes) * k.lanes / lanes - 1) if lanes else 0.0
    return [1.0, math.log(accumulators), 1.0 / k.rows, 1.0 / vectors, min(spare, 0) / 8, waste_r, waste_l,
            float(k.pack), float(k.parallel == "rows")]


class CostModel:
    """log(seconds) ~ features, by ridge-regularised least squares over the measured trials."""

    def __init__(self, rows: int | None, lanes: int | None) -> None:
        self.rows, self.lanes = rows, lanes
        self.x: list[list[float]] = []
        self.y: list[float] = []
        self.w: np.ndarray | None = None

    def add(self, k: Knobs, seconds: float) -> None:
        if math.isfinite(seconds):
            self.x.append(features(k, self.rows, self.lanes))
            self.y.append(math.log(seconds))
            x, y = np.array(self.x), np.array(self.y)
            self.w = np.linalg.solve(x.T @ x + 0.1 * np.eye(x.shape[1]), x.T @ y)

    def predict(self, k: Knobs) -> float:
        return 0.0 if self.w is None else float(np.array(features(k, self.rows, self.lanes)) @ self.w)


def _extents(f: Function) -> tuple[int | None, int | None]:
    c = find_contraction(unique_loops(f))
    value = lambda t: t.extent.value if isinstance(t.extent, Const) else None  # noqa: E731
    return value(c.row), value(c.lane)


def tune_kernel(f: Function, sizes: dict[str, int], options: CompileOptions, trials: int,
                strategy: str = "anneal", seed: int = 0, repeat: int = 10, rounds: int = ROUNDS,
                cold_bytes: int = 0, on_trial: Callable[[Trial], None] | None = None) -> TuneResult:
    """Search the knobs of contraction kernel ``f`` with ``trials`` measurements (median of
    ``repeat`` calls each), then confirm the best against the default in ``rounds`` rounds.
    ``cold_bytes``: the model's other weights (see ``measure.py``)."""
    if strategy not in STRATEGIES:
        raise ScheduleError(f"unknown tuning strategy '{strategy}' (use {' or '.join(STRATEGIES)})")
    if find_contraction(f) is None:
        raise ScheduleError(f"kernel {f.name} has no contraction to tune")
    rng = random.Random(seed)
    seen: dict[Knobs, Trial] = {}
    dots = converts_bf16(options.target), dots_u8s8(options.target)     # as default_schedule will compile it

    def run(k: Knobs) -> Trial:
        if k not in seen:
            try:
                seconds = measure(schedule_contraction(f, k, options.threads, *dots), sizes, options, repeat,
                                  cold_bytes=cold_bytes).seconds
            except ScheduleError:
                seconds = math.inf
            seen[k] = Trial(k, seconds)
            model.add(k, seconds)
            if on_trial:
                on_trial(seen[k])
        return seen[k]

    model = CostModel(*_extents(f))
    start = run(default_knobs(f))
    # Weights are packed at compile time in a model (prepack.py), so unpacked points only
    # look good here, where a small weight stays in cache between timed runs: leave them out.
    weights = any(b.role == Role.CONST for b in f.params)
    pool = [k for k in all_points() if k != start.knobs and (k.pack or not weights)]
    rng.shuffle(pool)
    current, temperature = start, 0.3
    while len(seen) < min(trials, len(pool) + 1):
        if strategy == "random":
            run(next(k for k in pool if k not in seen))
            continue
        fresh = [k for k in neighbours(current.knobs) if k not in seen and k in pool] or \
            [k for k in pool if k not in seen]
        candidates = rng.sample(fresh, min(8, len(fresh)))
        point = min(candidates, key=model.predict) if rng.random() > 0.2 else candidates[0]   # some exploration
        trial = run(point)
        worse = trial.seconds / current.seconds - 1 if math.isfinite(trial.seconds) else math.inf
        if worse <= 0 or rng.random() < math.exp(-worse / temperature):
            current = trial
        temperature *= 0.9
    search = list(seen.values())
    default, best, comparison = _confirm(f, sizes, options, search, rounds, cold_bytes)
    return TuneResult(f.name, signature(f), flops(f, sizes), default, best, comparison, search)


def _confirm(f: Function, sizes: dict[str, int], options: CompileOptions, search: list[Trial], rounds: int,
             cold_bytes: int) -> tuple[Trial, Trial, Comparison | None]:
    """(default, best, comparison): the default (``search[0]``) and the search's fastest
    ``CANDIDATES`` points timed again, interleaved; the best is the default unless a
    point beats it beyond the margin twice, the second time freshly compiled, alone
    against the default (``confirm.py``)."""
    default = search[0]
    contenders = sorted((t for t in search[1:] if math.isfinite(t.seconds)), key=lambda t: t.seconds)[:CANDIDATES]
    if not contenders or rounds < 1 or not math.isfinite(default.seconds):
        return default, default, None
    dots = converts_bf16(options.target), dots_u8s8(options.target)
    for _ in range(PASSES):
        calls = [ready(schedule_contraction(f, t.knobs, options.threads, *dots), sizes, options, cold_bytes)[0]
                 for t in [default] + contenders]
        medians = time_together(calls, rounds, block_size(search[0].seconds))
        winner, comparison = pick(medians[0], medians[1:])
        default = Trial(default.knobs, statistics.median(medians[0]))
        if winner is None:
            return default, default, comparison
        contenders = [Trial(contenders[winner].knobs, statistics.median(medians[1 + winner]))]
    return default, contenders[0], comparison


def as_record(result: TuneResult, options: CompileOptions) -> records.Record:
    c = result.comparison
    return records.Record(result.signature, records.target_of(options.target), result.best.knobs.to_json(),
                          result.best.seconds, result.default.seconds, result.gflops(result.best),
                          len(result.trials), result.kernel, date.today().isoformat(),
                          kept_default=result.kept_default, gain=c.gain if c else 0.0,
                          margin=c.margin if c else 0.0)
