"""Time several paths fairly: each in its own worker process, equal threads, in blocks.

    for each configuration (model, batch, threads):
        start one worker per path; each builds its path once, checks it against
        PyTorch eager and warms up (one at a time, so no build competes with another)
        for round in 1..R:                 (order A B C, then C B A, ...)
            for worker:  pause; ask for a block (one untimed call, then N timed calls)
        stop the workers: each reports its peak RSS (build and run)

A path's figure is the median over rounds of its block medians; the spread is the
lowest and highest block median.  Workers that are not being asked sit blocked on
their pipe, so no path's thread pool spins while another is timed (the pause lets
the last path's threads go idle).  In one process, paths interleaved call by call
slow each other: ONNX Runtime's, OpenVINO's, OpenMP's and minic's pools all spin.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from minic.bench.paths import THREAD_ENV, BenchPath

SETTLE_S = 0.1          # pause before each block: the previous worker's threads go to sleep


@dataclass(frozen=True)
class Config:
    model: str
    batch: int = 1
    threads: int = 1
    size: str = "full"
    seed: int = 0
    inputs: str | None = None           # --inputs FILE.npz, or --shape specs (minic.inputs)
    shapes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.model} B={self.batch} threads={self.threads}"


@dataclass(frozen=True)
class Timing:
    rounds: int = 5
    calls: int = 10                 # timed calls per block (median of a block)
    warmup: int = 3                 # untimed calls after the build
    budget_s: float = 10.0          # a block stops after this long (but has one timed call)
    settle_s: float = SETTLE_S


@dataclass
class Result:
    path: str
    config: Config
    status: str                     # ok | mismatch | unsupported | crash
    detail: str = ""
    compile_s: float = 0.0
    max_abs_err: float | None = None
    rel_err: float | None = None    # max abs error / max |reference|: what a precision's bound judges
    blocks: list[list[float]] = field(default_factory=list)
    cpu_blocks: list[list[float]] = field(default_factory=list)    # CPU seconds of the same calls
    rss_base_mb: float = 0.0        # after torch, the model and the reference: before the path's build
    rss_peak_mb: float = 0.0        # peak of the whole worker: build and every call
    pid: int = 0                    # the worker's process
    source: str = ""                # the folder its minic was imported from

    @property
    def block_medians(self) -> list[float]:
        return [statistics.median(b) for b in self.blocks if b]

    @property
    def median(self) -> float:
        medians = self.block_medians
        return statistics.median(medians) if medians else 0.0

    @property
    def cpu_median(self) -> float:
        """Median over rounds of the block medians of CPU seconds per call (every thread of
        the worker): the load-robust figure of a one-thread run."""
        medians = [statistics.median(b) for b in self.cpu_blocks if b]
        return statistics.median(medians) if medians else 0.0

    @property
    def spread(self) -> tuple[float, float]:
        medians = self.block_medians
        return (min(medians), max(medians)) if medians else (0.0, 0.0)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "model": self.config.model, "batch": self.config.batch,
                "threads": self.config.threads, "status": self.status, "detail": self.detail,
                "compile_s": self.compile_s, "max_abs_err": self.max_abs_err, "rel_err": self.rel_err,
                "precision": self.path.partition(":")[2] or "f32", "median_s": self.median,
                "spread_s": list(self.spread), "block_medians_s": self.block_medians, "blocks_s": self.blocks,
                "cpu_blocks_s": self.cpu_blocks, "cpu_median_s": self.cpu_median,
                "rss_base_mb": self.rss_base_mb, "rss_peak_mb": self.rss_peak_mb}


class Worker:
    """One path's process; ``ask`` sends a request and waits for its one-line answer."""

    def __init__(self, path: BenchPath, config: Config, timing: Timing) -> None:
        self.path = path
        spec = {"model": config.model, "size": config.size, "seed": config.seed, "batch": config.batch,
                "inputs": config.inputs, "shapes": list(config.shapes), "threads": config.threads,
                "warmup": timing.warmup, "path": path.as_json()}
        env = dict(os.environ, **{k: str(config.threads) for k in THREAD_ENV}, **path.env)
        if path.source_dir:
            env["PYTHONPATH"] = os.pathsep.join([path.source_dir, *filter(None, [env.get("PYTHONPATH")])])
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "minic.bench.worker", json.dumps(spec)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=env, cwd=path.source_dir or None)   # -m puts the cwd first

    def read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise WorkerDied(f"worker exited ({self.proc.returncode}): {self.stderr_tail()}")
        return json.loads(line)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.proc.wait()
            raise WorkerDied(f"worker exited ({self.proc.returncode}): {self.stderr_tail()}") from None
        return self.read()

    def stderr_tail(self, lines: int = 3) -> str:
        self.log.seek(0)
        text = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        return " | ".join(text[-lines:])[-400:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class WorkerDied(RuntimeError):
    pass


def run_config(config: Config, paths: list[BenchPath], timing: Timing,
               progress: Callable[[str], None] | None = None) -> list[Result]:
    """Build every path in its own worker, then time them in rounds of blocks."""
    results: list[Result] = []
    live: list[tuple[Worker, Result]] = []
    try:
        for path in paths:
            worker = Worker(path, config, timing)
            try:
                built = worker.read()
            except WorkerDied as e:
                built = {"status": "crash", "detail": str(e)}
            result = Result(path.name, config, built["status"], built.get("detail", ""),
                            built.get("compile_s", 0.0), built.get("max_abs_err"), built.get("rel_err"),
                            rss_base_mb=built.get("rss_base_mb", 0.0),
                            rss_peak_mb=built.get("rss_after_build_mb", 0.0), pid=built.get("pid", 0),
                            source=built.get("source", ""))
            results.append(result)
            if result.status == "ok":
                live.append((worker, result))
            else:
                worker.close()
            if progress:
                progress(path.name)
        for r in range(timing.rounds):
            for worker, result in (live if r % 2 == 0 else list(reversed(live))):
                if result.status != "ok":
                    continue
                time.sleep(timing.settle_s)
                try:
                    block = worker.ask({"cmd": "block", "calls": timing.calls, "budget_s": timing.budget_s})
                    result.blocks.append(block["times"])
                    result.cpu_blocks.append(block.get("cpu", []))
                except WorkerDied as e:
                    result.status, result.detail = "crash", str(e)
        for worker, result in live:
            if result.status == "ok":
                try:
                    result.rss_peak_mb = worker.ask({"cmd": "stop"})["rss_peak_mb"]
                except WorkerDied as e:
                    result.status, result.detail = "crash", str(e)
    finally:
        for worker, _ in live:
            worker.close()
    return results
