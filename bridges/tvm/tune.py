"""Step 5 of the lab: search schedules for every kernel with MetaSchedule.

The seed extracted AutoTVM tasks (a hand-written template with knobs per op)
or Ansor tasks; both were removed in TVM 0.20.  MetaSchedule needs no template:

1. **tasks**: each distinct PrimFunc of the optimized module is one task
   (``extract_tasks``; identical kernels, e.g. the 12 layers of BERT, share one
   task, and its weight says how many times it runs);
2. **design space**: schedule rules (multi-level tiling, vectorize, parallel,
   unroll, ...) turn the PrimFunc into a *traced* schedule with random decisions
   (tile sizes, which loops to fuse);
3. **search**: evolutionary search mutates the decisions, an XGBoost cost model
   ranks the candidates, and the best few of each batch are *measured*: built
   and run for real (the "trials");
4. **database**: every measured candidate is a record in ``work_dir``
   (``database_workload.json`` + ``database_tuning_record.json``: the
   "tuning logs"); ``build.apply_database`` picks the best record per kernel.

Two ways to spend the trials (both resume: records already in ``work_dir``
count against the budget, and the search starts from the best of them):

* ``tune``: a budget **per kernel**, ``trials_per_task`` for every task, one
  task after the other.  Predictable; a reshape gets as many trials as the
  matmul that takes 90 % of the time (it stops early when its space runs out,
  and later runs skip it: ``exhausted_kernels.json``).
* ``tune_global``: **one budget for the model**, spent by MetaSchedule's
  gradient task scheduler: one batch for every task first (kernels with no
  record go first, so a small step still reaches every kernel), then each batch
  goes to the task whose ``weight x best latency`` promises the largest gain
  (mostly ``weight x best / batches so far``, plus the recent improvement).

Candidates are built in this process and measured in one runner process, one
batch at a time (``SynchronousRunner``), with ``threads`` TVM threads.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TextIO

from bridges.tvm.measure import (InProcessBuilder, Progress, SynchronousRunner, cpu_intrinsics_only,
                                 runner_worker_setup)
from minic.errors import UserError


DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")


def open_database(work_dir: str | Path) -> Any:
    """The JSON tuning database in ``work_dir`` (created empty if absent).  A corrupt
    or truncated database is moved aside with a warning and tuning starts afresh:
    TVM would otherwise stop with an error from deep inside its JSON reader."""
    from tvm.s_tir import meta_schedule as ms
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    problem = _corrupt_line(work_dir)
    if problem is None:
        try:
            return ms.database.JSONDatabase(work_dir=str(work_dir))
        except Exception as e:  # noqa: BLE001 - TVM raises RuntimeError/TVMError for bad records
            problem = f"TVM cannot read it ({str(e).splitlines()[0][:120]})"
    aside = Path(tempfile.mkdtemp(prefix="corrupt-", dir=work_dir))
    for name in DATABASE_FILES:
        if (work_dir / name).exists():
            os.replace(work_dir / name, aside / name)
    warnings.warn(f"tuning database in {work_dir} is corrupt ({problem}); moved it to {aside} and starting afresh")
    return ms.database.JSONDatabase(work_dir=str(work_dir))


def _corrupt_line(work_dir: Path) -> str | None:
    """Where the database's JSON-lines files stop parsing, or None when they all parse."""
    for name in DATABASE_FILES:
        path = work_dir / name
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.strip():
                try:
                    json.loads(line)
                except ValueError:
                    return f"{name} line {n} is not JSON"
    return None


def extract_tasks(mod: Any, target: Any) -> list[Any]:
    """One task per distinct PrimFunc of an optimized module."""
    from tvm.s_tir import meta_schedule as ms
    return list(ms.relax_integration.extract_tasks(mod, target))


@dataclass
class TaskReport:
    """What tuning did for one kernel."""

    name: str
    weight: int              # how many times main calls this kernel
    flops: float             # floating-point operations per call (TVM's estimate)
    trials_before: int       # records already in the database
    trials_run: int          # measured now
    best_us: float | None    # best measured latency, microseconds (None: no valid record)

    @property
    def gflops(self) -> float | None:
        return self.flops / self.best_us / 1e3 if self.best_us else None

    @property
    def total_us(self) -> float | None:
        """Time this kernel takes per model run: weight x best latency."""
        return self.weight * self.best_us if self.best_us is not None else None


def trials_in_database(database: Any, task_mod: Any) -> int:
    """How many measured records ``database`` holds for this kernel."""
    if not database.has_workload(task_mod):
        return 0
    return len(database.get_top_k(database.commit_workload(task_mod), 1 << 30))


def best_latency_us(database: Any, task_mod: Any) -> float | None:
    """The best measured latency of this kernel in ``database`` (None: no valid record)."""
    if not database.has_workload(task_mod):
        return None
    top = database.get_top_k(database.commit_workload(task_mod), 1)
    if not top:
        return None
    seconds = sum(float(t) for t in top[0].run_secs) / len(top[0].run_secs)
    return seconds * 1e6 if seconds < 1e9 else None     # MetaSchedule writes 1e10 s for a failed run


def tune(mod: Any, target: Any, work_dir: str | Path, trials_per_task: int, *,
         trials_per_batch: int = 8, population: int = 512, seed: int = 0, threads: int | None = None,
         out: TextIO | None = None) -> list[TaskReport]:
    """Tune every kernel of ``mod`` (optimized by passes.optimize) into ``work_dir``.

    Each task gets ``trials_per_task`` measured candidates in total, counting
    those already in the database; one progress line per batch goes to ``out``.
    ``population``: candidates the evolutionary search keeps per generation
    (512 is MetaSchedule's default; tests use fewer to spend less time searching).
    ``threads``: TVM threads of the measured kernels (None: every core).
    """
    if trials_per_task < 0:
        raise UserError(f"--trials must be >= 0, got {trials_per_task}")
    tasks = extract_tasks(mod, target)
    database = open_database(work_dir)
    search = _Search(work_dir, database, trials_per_batch, population, seed, threads, out)
    exhausted = exhausted_kernels(work_dir)
    reports = []
    for index, task in enumerate(tasks, start=1):
        task_mod = task.dispatched[0]
        before = trials_in_database(database, task_mod)
        todo = max(0, trials_per_task - before)
        label = _label(index, len(tasks), task)
        if todo > 0 and _workload_key(task) in exhausted:
            _print(out, f"{label}: search space exhausted at {before} trials, skipped")
        elif todo > 0:
            _print(out, f"{label}: tuning {todo} trials ({before} already in the database)")
            search.run([task], [label], [before], todo, todo, f"/{trials_per_task}")
        else:
            best = best_latency_us(database, task_mod)
            _print(out, f"{label}: {before} trials in the database, nothing to do"
                        + (f" (best {best:.1f} us)" if best is not None else ""))
        reports.append(_report(database, task, before))
    return reports


def tune_global(mod: Any, target: Any, work_dir: str | Path, total_trials: int, *,
                trials_per_batch: int = 8, population: int = 512, seed: int = 0,
                threads: int | None = None, out: TextIO | None = None) -> list[TaskReport]:
    """Tune ``mod`` with one budget: ``total_trials`` measured candidates over all
    kernels (counting those already in the database), spent by the gradient scheduler.

    The scheduler checks the budget before each batch, so it may overshoot by
    less than one batch.  It collects the warm-up round's results only once every
    kernel has had its batch: the first progress lines come all at once.
    """
    if total_trials < 0:
        raise UserError(f"--total-trials must be >= 0, got {total_trials}")
    tasks = extract_tasks(mod, target)
    database = open_database(work_dir)
    before = [trials_in_database(database, t.dispatched[0]) for t in tasks]
    todo = max(0, total_trials - sum(before))
    exhausted = exhausted_kernels(work_dir)
    live = [i for i in range(len(tasks)) if _workload_key(tasks[i]) not in exhausted]
    _print(out, f"{len(tasks)} kernels ({len(tasks) - len(live)} with an exhausted search space), "
                f"{sum(before)} trials in the database, " + (f"tuning {todo} more" if todo else "nothing to do"))
    if todo > 0 and live:
        # the warm-up round visits tasks in list order: kernels without records first
        order = sorted(live, key=lambda i: before[i])
        labels = [_label(i + 1, len(tasks), tasks[i]) for i in order]
        _Search(work_dir, database, trials_per_batch, population, seed, threads, out).run(
            [tasks[i] for i in order], labels, [before[i] for i in order], todo,
            max_trials_per_task=todo, budget_text="")
    return [_report(database, task, b) for task, b in zip(tasks, before)]


@dataclass
class _Search:
    """What one ``ms.tune_tasks`` call needs besides the tasks and budgets."""

    work_dir: str | Path
    database: Any
    trials_per_batch: int
    population: int
    seed: int
    threads: int | None
    out: TextIO | None
    runner: Any = None

    def run(self, tasks: list[Any], labels: list[str], before: list[int], max_trials_global: int,
            max_trials_per_task: int, budget_text: str) -> None:
        """Tune ``tasks`` with MetaSchedule's gradient scheduler (one task: just its batches)."""
        cpu_intrinsics_only()
        from tvm.s_tir import meta_schedule as ms

        if self.runner is None:         # one measuring process for all the calls of this search
            self.runner = SynchronousRunner.create(ms.runner.LocalRunner(
                # 3 runs per measurement after a warm-up, without the default 100 ms
                # minimum per measurement (it would dominate a small model's tuning)
                evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=0),
                initializer=functools.partial(runner_worker_setup, self.threads)))
        best = [best_latency_us(self.database, t.dispatched[0]) for t in tasks]
        exhausted: set[int] = set()
        batch = min(self.trials_per_batch, max_trials_per_task)
        with _metaschedule_logging():
            contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                tasks, str(self.work_dir), seed=self.seed,
                strategy=ms.search_strategy.EvolutionarySearch(population_size=self.population))
        ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(self.work_dir),
                      max_trials_global=max_trials_global, max_trials_per_task=max_trials_per_task,
                      num_trials_per_iter=batch,
                      task_scheduler=ms.task_scheduler.GradientBased(seed=self.seed),
                      builder=InProcessBuilder.create(), runner=self.runner,
                      database=self.database,
                      measure_callbacks=[*ms.MeasureCallback.create("default"),
                                         Progress.create(labels, before, best, budget_text, batch,
                                                         max_trials_per_task, exhausted, self.out)])
        mark_exhausted(self.work_dir, [tasks[i] for i in sorted(exhausted)])


def _label(index: int, count: int, task: Any) -> str:
    return f"[{index}/{count}] {task.task_name} (x{int(task.weight)})"


def _report(database: Any, task: Any, before: int) -> TaskReport:
    task_mod = task.dispatched[0]
    return TaskReport(task.task_name, int(task.weight), estimate_flops(task_mod), before,
                      trials_in_database(database, task_mod) - before, best_latency_us(database, task_mod))


EXHAUSTED_FILE = "exhausted_kernels.json"   # ours, beside MetaSchedule's two database files


def exhausted_kernels(work_dir: str | Path) -> dict[str, str]:
    """Kernels whose search space ran out in an earlier run: {workload hash: kernel name}.

    A reshape has a handful of schedules; without this list every resume would
    search it again (10-60 s on a busy 2-core machine) only to find nothing new.
    """
    try:
        return dict(json.loads((Path(work_dir) / EXHAUSTED_FILE).read_text()))
    except (OSError, ValueError):
        return {}


def mark_exhausted(work_dir: str | Path, tasks: list[Any]) -> None:
    if tasks:
        marks = exhausted_kernels(work_dir) | {_workload_key(t): t.task_name for t in tasks}
        (Path(work_dir) / EXHAUSTED_FILE).write_text(json.dumps(marks, indent=1, sort_keys=True) + "\n")


def _workload_key(task: Any) -> str:
    import tvm_ffi
    return f"{tvm_ffi.structural_hash(task.dispatched[0]) & (1 << 64) - 1:016x}"


def estimate_flops(task_mod: Any) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops
    return float(estimate_tir_flops(task_mod))


def format_reports(reports: list[TaskReport]) -> str:
    """One line per kernel, the most expensive (weight x latency) first."""
    lines = [f"{'kernel':<44}{'x':>4}{'trials':>8}{'new':>6}{'best (us)':>12}{'GFLOPS':>9}{'x * best (ms)':>15}"]
    ranked = sorted(reports, key=lambda r: -(r.total_us or 0.0))
    for r in ranked:
        best = f"{r.best_us:.1f}" if r.best_us is not None else "-"
        gflops = f"{r.gflops:.1f}" if r.gflops is not None else "-"
        total = f"{r.total_us / 1e3:.2f}" if r.total_us is not None else "-"
        lines.append(f"{r.name[:43]:<44}{r.weight:>4}{r.trials_before + r.trials_run:>8}"
                     f"{r.trials_run:>6}{best:>12}{gflops:>9}{total:>15}")
    known = [r.total_us for r in reports if r.total_us is not None]
    lines.append(f"sum of x * best: {sum(known) / 1e3:.2f} ms (kernels only; the VM adds its own overhead)")
    return "\n".join(lines)


METASCHEDULE_LOGGER = "tvm.s_tir.meta_schedule"


@contextlib.contextmanager
def _metaschedule_logging() -> Iterator[None]:
    """Around MetaSchedule's logging set-up (``extracted_tasks_to_tune_contexts``).

    * It logs every trial to the console by default; keep that in ``work_dir/logs``
      and print only warnings (our own progress lines say the rest).  Its console
      handler takes the logger's level when the set-up runs, and the set-up sets
      the level back to DEBUG: so this wraps every set-up.
    * The set-up rebuilds the logger with ``logging.config.dictConfig``, naming the
      handlers it keeps by their names: a handler without a name (one a program
      added with ``addHandler``; pytest >= 9.1 adds its capture handler to every
      non-propagating logger, as this one is after the first set-up) makes it fail
      with ``AttributeError: 'NoneType' object has no attribute 'format'``.  Such
      handlers are taken off for the set-up and put back after it.
    """
    logger = logging.getLogger(METASCHEDULE_LOGGER)
    logger.setLevel(logging.WARNING)
    unnamed = [h for h in logger.handlers if h.get_name() is None]
    for handler in unnamed:
        logger.removeHandler(handler)
    try:
        yield
    finally:
        for handler in unnamed:
            logger.addHandler(handler)


def _print(out: TextIO | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)
