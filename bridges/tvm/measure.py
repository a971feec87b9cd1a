"""How one batch of candidates is built, measured and reported during tuning.

``tune.py`` decides *which* kernels get trials; this file holds the pieces
MetaSchedule calls for every batch, each replacing a default that does not fit
a small shared CPU:

* ``InProcessBuilder``: compiles the candidates in the tuning process (the
  default starts fresh worker processes for every batch);
* ``SynchronousRunner``: measures a batch before the search goes on (the
  default measures while the next batch is being searched);
* ``runner_worker_setup``: the measuring process gets the CPU intrinsics only
  and a fixed number of TVM threads;
* ``Progress``: one line per measured batch.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, TextIO


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


def runner_worker_setup(threads: int | None) -> None:
    """Initializer of the runner's worker process: the CPU intrinsics, and the
    number of threads the measured kernels run with (before TVM's pool exists)."""
    os.environ["TVM_NUM_THREADS"] = str(threads or os.cpu_count() or 1)
    cpu_intrinsics_only()


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


class SynchronousRunner:
    """A runner that measures a batch before handing control back.

    MetaSchedule's scheduler sends a batch to the runner and, while it is being
    measured, already searches the next task's batch: made for a remote board.
    On a 2-core machine that search would run beside the measurement and slow
    it down; so here ``run`` waits for the results (already-done futures).
    """

    @staticmethod
    def create(inner: Any) -> Any:
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.runner import PyRunner, RunnerFuture

        @derived_object
        class _SynchronousRunner(PyRunner):
            def run(self, runner_inputs):
                results = [future.result() for future in inner.run(runner_inputs)]
                return [RunnerFuture(lambda: True, lambda r=r: r) for r in results]

        return _SynchronousRunner()


class Progress:
    """A measure callback: after each measured batch, print the task's trials and best latency."""

    @staticmethod
    def create(labels: list[str], before: list[int], best_us: list[float | None], budget_text: str,
               batch: int, cap: int, exhausted: set[int], out: TextIO | None) -> Any:
        """``labels[task_id]`` names the task; ``budget_text`` follows the trial count ("/64").
        A batch smaller than asked (``batch``, or what is left of ``cap`` for the task) means
        the search found no more new candidates: the task id goes into ``exhausted``."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        @derived_object
        class _Progress(PyMeasureCallback):
            def __init__(self) -> None:
                super().__init__()
                self.done = list(before)
                self.best = [b / 1e6 if b is not None else float("inf") for b in best_us]
                self.measured = 0
                self.this_run = [0] * len(labels)

            def apply(self, task_scheduler, task_id, candidates, builder_results, runner_results):
                if len(candidates) < min(batch, cap - self.this_run[task_id]):
                    exhausted.add(task_id)
                if not candidates:
                    return
                errors = 0
                for built, ran in zip(builder_results, runner_results):
                    if built.error_msg is not None or ran.error_msg is not None:
                        errors += 1
                        continue
                    secs = [float(s) for s in ran.run_secs]
                    self.best[task_id] = min(self.best[task_id], sum(secs) / len(secs))
                self.done[task_id] += len(candidates)
                self.this_run[task_id] += len(candidates)
                self.measured += len(candidates)
                best = self.best[task_id]
                best_text = f"{best * 1e6:.1f} us" if best < float("inf") else "n/a"
                _print(out, f"    {labels[task_id]}: {self.done[task_id]}{budget_text} trials, best {best_text}"
                            + (f", {errors} failed" if errors else "")
                            + ("" if budget_text else f"  (+{self.measured} this run)"))

        return _Progress()


def _print(out: TextIO | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)
