"""Steps 4 and 6 of the lab: build the optimized module, untuned or with a database.

The seed called ``relay.build(mod, target, params)`` and ran the result with the
graph executor.  Today it is ``tvm.compile(mod, target)`` → an Executable, run by
``relax.VirtualMachine``.

* **untuned**: every PrimFunc keeps the loops LegalizeOps wrote (one naive loop
  nest per op; only LLVM's own vectorizer helps).  This is the baseline.
* **tuned**: ``MetaScheduleApplyDatabase`` first replaces each PrimFunc that
  has a record in the tuning database with the best schedule found for it
  (tiled, vectorized, parallel loops); PrimFuncs without a record stay naive.

Targets are dicts (``{"kind": "llvm", "num-cores": 2}``); MetaSchedule needs
``num-cores`` on CPU targets to decide how many threads a schedule may use.
How many threads actually run is the runtime's business: see ``set_threads``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bridges.data_checks import raise_flagged
from minic.errors import UserError


def host_target() -> dict[str, Any]:
    """This machine: LLVM for the host CPU, all its cores.

    ``mcpu`` is LLVM's name for this CPU (e.g. ``znver4``); without it LLVM targets
    a generic x86-64 and uses no AVX at all.
    """
    import tvm
    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu()),
            "num-cores": os.cpu_count() or 1}


def as_target(target: dict[str, Any] | str | None) -> Any:
    """A ``tvm.target.Target`` from a dict, a string, or None (the host)."""
    import tvm
    try:
        return tvm.target.Target(host_target() if target is None else target)
    except Exception as e:  # TVM raises its own error type for a bad target
        raise UserError(f"invalid TVM target {target!r}: {str(e).splitlines()[0]}") from e


def size_thread_pool() -> None:
    """Let TVM's runtime thread pool have one thread per core (call before its first use).

    TVM sizes its pool once, when a parallel kernel first runs, from
    ``TVM_NUM_THREADS``, else from half the hardware threads on x86 (it assumes
    two hyper-threads per core): 1 thread on a 2-vCPU machine, whatever the
    target's ``num-cores`` says.  An explicit ``TVM_NUM_THREADS`` is kept.
    """
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))


def set_threads(n: int | None) -> None:
    """Run TVM kernels in this process with ``n`` threads (None: the whole pool).

    ``runtime.config_threadpool(1, n)`` narrows the pool sized by
    ``size_thread_pool``; it cannot grow it past that size.
    """
    import tvm
    size_thread_pool()
    if n is not None and n < 1:
        raise UserError(f"--threads must be >= 1, got {n}")
    pool = int(os.environ["TVM_NUM_THREADS"])
    tvm.get_global_func("runtime.config_threadpool")(1, n or pool)   # 1: "big" cores = all cores here
    if n is not None and tvm.runtime.num_threads() != n:
        raise UserError(f"TVM's thread pool has {tvm.runtime.num_threads()} threads, cannot use {n} "
                        f"(TVM_NUM_THREADS={pool}, or the pool started before it was set)")


def apply_database(mod: Any, target: Any, work_dir: str | Path) -> Any:
    """Swap each PrimFunc of ``mod`` for its best schedule in ``work_dir``'s database."""
    import tvm
    from tvm import relax
    from bridges.tvm.tune import open_database

    database = open_database(work_dir)
    with target, database, tvm.transform.PassContext(opt_level=3):
        return relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(mod)


def build(mod: Any, target: Any, work_dir: str | Path | None = None) -> Any:
    """Compile an optimized module (see passes.optimize) to an Executable.

    With ``work_dir`` the schedules in its tuning database are applied first.
    """
    import tvm

    if work_dir is not None:
        mod = apply_database(mod, target, work_dir)
    with tvm.transform.PassContext(opt_level=3):
        return tvm.compile(mod, target=target)


@dataclass
class VMRunner:
    """An Executable loaded in a Relax VM: ``runner(*arrays) -> array or tuple``."""

    executable: Any
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    checks: tuple[str, ...] = ()              # main returns (result, one flag per check): checks.py
    name: str = "model"

    def __post_init__(self) -> None:
        import tvm
        from tvm import relax
        size_thread_pool()
        self.device = tvm.cpu()
        self.vm = relax.VirtualMachine(self.executable, self.device)
        self._main = self.vm["main"]

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        import tvm
        self._check(arrays)
        args = [tvm.runtime.tensor(np.asarray(a, order="C"), self.device) for a in arrays]
        result = _to_numpy(self._main(*args))
        if not self.checks:
            return result
        raise_flagged(self.name, "tvm", self.checks, result[1:])
        return result[0]

    def op_times(self, *arrays: np.ndarray, repeat: int = 10) -> list[tuple[str, str, float]]:
        """(kernel, kernel, seconds per run) of every function the VM calls, timed around
        each Call instruction by the VM's instrument hook (after one warm-up run): the
        median over the runs of each function's time in a run."""
        import statistics
        import time

        import tvm
        self._check(arrays)
        args = [tvm.runtime.tensor(np.asarray(a, order="C"), self.device) for a in arrays]
        per_run: dict[str, list[float]] = {}
        started: list[float] = []
        run = 0

        def instrument(func, symbol, before_run, ret_value, *call_args):
            if before_run:
                started.append(time.perf_counter())
            else:
                per_run.setdefault(symbol, [0.0] * repeat)[run] += time.perf_counter() - started.pop()
        self._main(*args)
        self.vm.set_instrument(tvm.runtime.convert(instrument))
        try:
            for run in range(repeat):
                self._main(*args)
        finally:
            self.vm.set_instrument(None)
        return [(name, name, statistics.median(times)) for name, times in per_run.items()]

    def _check(self, arrays: tuple[np.ndarray, ...]) -> None:
        # the VM would reject a wrong shape too, but from native code: say it in one line here
        if len(arrays) != len(self.input_shapes):
            raise UserError(f"expected {len(self.input_shapes)} inputs, got {len(arrays)}")
        for i, (a, shape, dtype) in enumerate(zip(arrays, self.input_shapes, self.input_dtypes)):
            if tuple(a.shape) != shape or str(a.dtype) != dtype:
                raise UserError(f"input {i}: expected {dtype}{list(shape)}, got {a.dtype}{list(a.shape)}")


def _to_numpy(value: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    if hasattr(value, "numpy"):
        return value.numpy()
    return tuple(_to_numpy(v) for v in value)      # a Relax tuple of tensors
