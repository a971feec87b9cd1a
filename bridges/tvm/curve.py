"""The tuning curve: the model's latency after the first N trials of a tuning database.

A MetaSchedule database lists every measured candidate in the order it was
measured (``database_tuning_record.json``, one JSON line per record).  Keeping
only the first lines rebuilds the database as it stood after a smaller budget:

* **per kernel** (``first_per_kernel=8``): the first 8 records of each kernel,
  i.e. what ``tune --trials 8`` had left;
* **in order** (``first_records=221``): the first 221 lines, i.e. what
  ``tune --total-trials 221`` had left (the gradient scheduler's choices included).

Every prefix is built and all of them are timed in the same interleaved rounds
as PyTorch eager (``bench.interleaved``): the whole curve is measured under the
same load, which on a shared machine matters more than anything else.
"""
from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from minic.errors import UserError
from minic.timing import fmt_ms


@dataclass
class Point:
    label: str               # "8 trials/kernel" or "first 221 trials"
    records: int             # records kept in the database copy
    predicted_s: float       # sum over kernels of calls x best latency, as the tuning runner measured it
    median_s: float          # the whole model, measured now


def truncate(work_dir: str | Path, into: str | Path, *, first_per_kernel: int | None = None,
             first_records: int | None = None) -> int:
    """Copy the database in ``work_dir`` into ``into``, keeping only its first records
    (per kernel, or overall); returns how many records were kept."""
    source, into = Path(work_dir), Path(into)
    records = source / "database_tuning_record.json"
    if not records.is_file():
        raise UserError(f"no tuning database in {source}")
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "database_workload.json", into / "database_workload.json")
    kept: list[str] = []
    per_kernel: Counter[int] = Counter()
    for line in records.read_text().splitlines():
        if not line.strip():
            continue
        if first_records is not None and len(kept) >= first_records:
            break
        workload = json.loads(line)[0]          # each line: [workload index, record]
        if first_per_kernel is not None and per_kernel[workload] >= first_per_kernel:
            continue
        per_kernel[workload] += 1
        kept.append(line)
    (into / "database_tuning_record.json").write_text("".join(f"{line}\n" for line in kept))
    return len(kept)


@dataclass
class Curve:
    model_flops: float       # sum over kernels of calls x FLOPs (TVM's count)
    eager_s: float           # PyTorch eager's median, timed in the same rounds
    points: list[Point]

    def table(self) -> str:
        """A Markdown table: one row per prefix, then eager."""
        lines = ["| database | records | predicted (sum of x * best) | measured | GFLOPS | vs eager |",
                 "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for p in self.points:
            lines.append(f"| {p.label} | {p.records} | {fmt_ms(p.predicted_s)} | {fmt_ms(p.median_s)} "
                         f"| {self.model_flops / p.median_s / 1e9:.1f} | {self.eager_s / p.median_s:.2f}x |")
        lines.append(f"| PyTorch eager | | | {fmt_ms(self.eager_s)} "
                     f"| {self.model_flops / self.eager_s / 1e9:.1f} | 1.00x |")
        return "\n".join(lines)


def curve(module: Any, inputs: tuple[np.ndarray, ...], name: str, work_dir: str | Path, *,
          per_kernel: tuple[int, ...] = (), first: tuple[int, ...] = (), threads: int | None = None,
          repeat: int = 10, budget_s: float = 120.0, out: TextIO | None = None) -> Curve:
    """Time PyTorch eager and the model built from each prefix of ``work_dir``'s database.

    ``per_kernel``: prefixes of K records per kernel; ``first``: of N records overall.
    ``threads``: for both PyTorch and TVM (None: leave their defaults).
    """
    import torch

    from bridges.tvm.bench import interleaved, with_threads
    from bridges.tvm.build import VMRunner, as_target, build
    from bridges.tvm.importer import from_torch
    from bridges.tvm.passes import optimize
    from bridges.tvm.tune import best_latency_us, estimate_flops, extract_tasks, open_database

    if not per_kernel and not first:
        raise UserError("give the curve's points: --per-kernel 8,32,... or --first 100,200,...")
    imported = from_torch(module, inputs, name)
    mod, _ = optimize(imported.mod)
    target = as_target(None)
    tasks = extract_tasks(mod, target)

    def eager(*arrays):
        with torch.no_grad():
            return module(*(torch.from_numpy(a) for a in arrays)).numpy()

    paths = {"PyTorch eager": with_threads(eager, threads, "torch")}
    points: dict[str, Point] = {}
    with tempfile.TemporaryDirectory(prefix="minic-curve-") as scratch:
        cuts = [(f"{n} trials/kernel", {"first_per_kernel": n}) for n in per_kernel]
        cuts += [(f"first {n} trials", {"first_records": n}) for n in first]
        for index, (label, cut) in enumerate(cuts):
            copy = Path(scratch) / str(index)
            kept = truncate(work_dir, copy, **cut)
            database = open_database(copy)
            predicted = sum(t.weight * (best_latency_us(database, t.dispatched[0]) or 0.0) for t in tasks) / 1e6
            points[label] = Point(label, kept, predicted, 0.0)
            runner = VMRunner(build(mod, target, copy), imported.input_shapes, imported.input_dtypes)
            paths[f"TVM tuned, {label}"] = with_threads(runner, threads, "tvm")
            _say(out, f"built {label}: {kept} records, predicted {predicted * 1e3:.1f} ms")
    times = interleaved(paths, inputs, repeat, budget_s)
    for label, point in points.items():
        point.median_s = statistics.median(times[f"TVM tuned, {label}"])
    flops = sum(t.weight * estimate_flops(t.dispatched[0]) for t in tasks)
    return Curve(flops, statistics.median(times["PyTorch eager"]), list(points.values()))


def _say(out: TextIO | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)
