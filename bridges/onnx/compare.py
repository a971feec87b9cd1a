"""Step 3: check and measure — accuracy against PyTorch, and latency.

Accuracy: every ONNX variant runs the same inputs as the torch module and we
keep the largest absolute difference (and how often the top-1 token agrees).
Latency: the candidates are timed *interleaved* (one run of each, round after
round), so that a slow moment of the machine hits all of them alike; we report
the median.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import median
from typing import Callable

import numpy as np
import onnx

Batch = tuple[str, np.ndarray]         # (kind: "synthetic" | "text", input array)


@dataclass
class AccuracyRow:
    """How one variant compares with PyTorch over all inputs."""

    label: str
    inputs: int = 0
    max_abs_error: float = 0.0
    max_abs_reference: float = 0.0
    top1_agreement: float = 1.0            # fraction of positions with the same argmax
    by_kind: dict[str, float] = field(default_factory=dict)   # kind -> max abs error
    shapes: set[tuple[int, ...]] = field(default_factory=set)

    def within(self, tolerance: float) -> bool:
        return self.max_abs_error <= tolerance


def ort_session(model: onnx.ModelProto, provider: str = "CPUExecutionProvider",
                level: str = "all", threads: int | None = None, profile_prefix: str | None = None):
    """An ONNX Runtime session on ``model`` (``level``: "disabled", "basic", "all";
    ``threads``: intra-op threads, default one per core; ``profile_prefix``: turn on
    ORT's profiler, which writes ``<prefix>_<date>.json`` when the session ends profiling)."""
    import onnxruntime as ort

    levels = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[level]
    # ORT's worker threads spin-wait after each run; on a 2-core machine they then
    # steal the cores from whatever runs next (PyTorch, in an interleaved benchmark).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model.SerializeToString(), options, providers=[provider])


def torch_outputs(module, batches: list[Batch]) -> list[np.ndarray]:
    """The reference: PyTorch eager on every input."""
    import torch

    with torch.no_grad():
        return [module(torch.from_numpy(x)).numpy() for _, x in batches]


def accuracy(label: str, session, batches: list[Batch],
             references: list[np.ndarray]) -> AccuracyRow:
    """Run ``session`` on every batch and compare with the matching reference."""
    row = AccuracyRow(label)
    input_name = session.get_inputs()[0].name
    agree = total = 0
    for (kind, x), ref in zip(batches, references):
        out = session.run(None, {input_name: x})[0]
        if out.shape != ref.shape:
            raise AssertionError(f"{label}: output shape {out.shape} != reference {ref.shape}")
        err = float(np.max(np.abs(out - ref)))
        row.inputs += 1
        row.max_abs_error = max(row.max_abs_error, err)
        row.max_abs_reference = max(row.max_abs_reference, float(np.max(np.abs(ref))))
        row.by_kind[kind] = max(row.by_kind.get(kind, 0.0), err)
        row.shapes.add(tuple(x.shape))
        agree += int(np.sum(out.argmax(-1) == ref.argmax(-1)))
        total += out.argmax(-1).size
    row.top1_agreement = agree / max(total, 1)
    return row


def time_interleaved(candidates: dict[str, Callable[[], object]], repeats: int = 20,
                     warmup: int = 3) -> dict[str, float]:
    """Median wall time in milliseconds of each candidate, timed round-robin."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {label: [] for label in candidates}
    for _ in range(repeats):
        for label, fn in candidates.items():
            start = time.perf_counter()
            fn()
            samples[label].append((time.perf_counter() - start) * 1e3)
    return {label: median(times) for label, times in samples.items()}


def cuda_status() -> str | None:
    """None when ONNX Runtime can run on CUDA here, else the reason it cannot."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return ("no CUDAExecutionProvider: the onnxruntime wheel is CPU-only "
                "(onnxruntime-gpu is not installed) and this machine has no GPU")
    return None
