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

Budgets are per task: ``trials_per_task`` measured candidates for every kernel.
(With only a global budget the task scheduler may spend it all on the first
task.)  Tuning resumes: records already in ``work_dir`` count against each
task's budget, and the search starts from the best of them.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from minic.errors import UserError


def cpu_intrinsics_only() -> None:
    """Register only the CPU tensor intrinsics (x86, Arm) instead of all of them.

    ``import tvm.s_tir.tensor_intrin`` (done by every TuneContext and every
    build worker) parses the CUDA, ROCm and Hexagon intrinsics too: about 45 s
    of CPU per process here, i.e. per build batch.  Making the package known
    without running its ``__init__`` and importing the CPU parts takes ~2 s.
    Used in this process and as the initializer of the builder/runner workers.
    """
    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return
    package = importlib.util.module_from_spec(importlib.util.find_spec(name))
    sys.modules[name] = package
    import tvm.s_tir.tensor_intrin.arm_cpu  # noqa: F401  (registers the intrinsics)
    import tvm.s_tir.tensor_intrin.x86  # noqa: F401


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
         trials_per_batch: int = 8, population: int = 512, seed: int = 0,
         out: TextIO | None = None) -> list[TaskReport]:
    """Tune every kernel of ``mod`` (optimized by passes.optimize) into ``work_dir``.

    Each task gets ``trials_per_task`` measured candidates in total, counting
    those already in the database; one progress line per batch goes to ``out``.
    ``population``: candidates the evolutionary search keeps per generation
    (512 is MetaSchedule's default; tests use fewer to spend less time searching).
    """
    if trials_per_task < 0:
        raise UserError(f"--trials must be >= 0, got {trials_per_task}")
    cpu_intrinsics_only()
    from tvm.s_tir import meta_schedule as ms

    tasks = extract_tasks(mod, target)
    database = open_database(work_dir)
    runner = None                       # started only if some task needs trials
    reports = []
    for index, task in enumerate(tasks, start=1):
        task_mod = task.dispatched[0]
        before = trials_in_database(database, task_mod)
        todo = max(0, trials_per_task - before)
        label = f"[{index}/{len(tasks)}] {task.task_name} (x{task.weight})"
        if todo > 0:
            _print(out, f"{label}: tuning {todo} trials ({before} already in the database)")
            runner = runner or ms.runner.LocalRunner(
                # 3 runs per measurement after a warm-up, without the default 100 ms
                # minimum per measurement (it would dominate a small model's tuning)
                evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=0),
                initializer=cpu_intrinsics_only)
            _quiet_console()
            contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                [task], str(work_dir), seed=seed,
                strategy=ms.search_strategy.EvolutionarySearch(population_size=population))
            ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(work_dir),
                          max_trials_global=todo, max_trials_per_task=todo,
                          num_trials_per_iter=min(trials_per_batch, todo),
                          builder=InProcessBuilder.create(), runner=runner, database=database,
                          measure_callbacks=[*ms.MeasureCallback.create("default"),
                                             Progress.create(label, before, trials_per_task,
                                                             best_latency_us(database, task_mod), out)])
        best = best_latency_us(database, task_mod)
        reports.append(TaskReport(task.task_name, int(task.weight), estimate_flops(task_mod), before,
                                  trials_in_database(database, task_mod) - before, best))
        if todo == 0:
            _print(out, f"{label}: {before} trials in the database, nothing to do"
                        + (f" (best {best:.1f} us)" if best is not None else ""))
    return reports


class InProcessBuilder:
    """A builder that compiles the candidates in this process, one after the other.

    MetaSchedule's LocalBuilder starts a fresh pool of worker processes for
    every batch (each imports TVM again: 5-10 s on a busy 2-core machine) to
    guard against leaks and hangs; compiling one candidate takes ~0.1 s.  The
    runner still measures in a separate process, so a bad kernel cannot crash us.
    """

    @staticmethod
    def create() -> Any:
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
        from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export

        @derived_object
        class _InProcessBuilder(PyBuilder):
            def build(self, build_inputs):
                results = []
                for item in build_inputs:
                    try:   # default_export writes a .tar of object files the runner loads
                        results.append(BuilderResult(default_export(default_build(item.mod, item.target, None)), None))
                    except Exception as e:  # a candidate that does not compile is a failed trial
                        results.append(BuilderResult(None, f"build failed: {type(e).__name__}: {e}"))
                return results

        return _InProcessBuilder()


class Progress:
    """A measure callback: after each measured batch, print trials done and best latency."""

    @staticmethod
    def create(label: str, before: int, budget: int, best_us: float | None, out: TextIO | None) -> Any:
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        @derived_object
        class _Progress(PyMeasureCallback):
            def __init__(self) -> None:
                super().__init__()
                self.done = before
                self.best = best_us / 1e6 if best_us is not None else float("inf")

            def apply(self, task_scheduler, task_id, candidates, builder_results, runner_results):
                if not candidates:      # the search found nothing new (a small space, exhausted)
                    return
                errors = 0
                for built, ran in zip(builder_results, runner_results):
                    if built.error_msg is not None or ran.error_msg is not None:
                        errors += 1
                        continue
                    secs = [float(s) for s in ran.run_secs]
                    self.best = min(self.best, sum(secs) / len(secs))
                self.done += len(candidates)
                best = f"{self.best * 1e6:.1f} us" if self.best < float("inf") else "n/a"
                _print(out, f"    {label}: {self.done}/{budget} trials, best {best}"
                            + (f", {errors} failed" if errors else ""))

        return _Progress()


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


def _quiet_console() -> None:
    """MetaSchedule logs every trial to the console by default; keep that in
    ``work_dir/logs`` and print only warnings (our own progress lines say the rest).

    Its console handler takes the logger's level when tuning starts, and tuning
    sets the level back to DEBUG: so this runs before every ``tune_tasks``.
    """
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)


def _print(out: TextIO | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)
