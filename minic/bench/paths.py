"""The paths ``minic bench`` can time, and how each is given its thread count.

A bench path is a backend of ``minic.backends`` (minic's own, or a bridge's from the
``minic.backends`` entry points) with the options it runs with.  Threads are set in
two ways, both applied to every worker so that every path gets the same count:

* process-wide, before anything is imported: ``THREAD_ENV`` (OpenMP, BLAS, TVM's
  pool, tinygrad's CPU device) and ``torch.set_num_threads`` — PyTorch eager,
  Inductor's OpenMP kernels, TVM and tinygrad take their count from these;
* the path's own option, for engines with their own pool (``threads_option``):
  ``num_threads`` of minic, ``threads`` of ONNX Runtime (intra-op), OpenVINO
  (``INFERENCE_NUM_THREADS``) and IREE (its task system's workers).

Any backend name not registered here is timed with the process-wide settings only;
a named variant of ``minic debug`` (``mlir-tosa``) runs with that variant's options.
A bridge that lands later adds its line with ``register``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minic import backends
from minic.errors import UserError

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS", "NUM_CPU_THREADS")


@dataclass(frozen=True)
class BenchPath:
    name: str                                     # what --vs takes: "openvino"
    backend: str                                  # the minic.backends name
    options: dict[str, Any] = field(default_factory=dict)
    threads_option: str = ""                      # the backend option for the thread count ("": process-wide only)
    source_dir: str = ""                          # run the worker on the minic/bridges sources in this folder
                                                  # ("": the running ones); an A/B of two revisions

    def options_for(self, threads: int) -> dict[str, Any]:
        """The backend's options for a run on ``threads`` threads."""
        return {**self.options, self.threads_option: threads} if self.threads_option else dict(self.options)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend, "options": self.options,
                "threads_option": self.threads_option, "source_dir": self.source_dir}


PATHS: dict[str, BenchPath] = {}
ALIASES = {"torch-compile": "inductor", "ort": "onnxruntime", "eager": "torch"}


def register(path: BenchPath) -> BenchPath:
    PATHS[path.name] = path
    return path


register(BenchPath("torch", "torch"))
register(BenchPath("inductor", "inductor"))
register(BenchPath("onnxruntime", "onnxruntime", threads_option="threads"))
register(BenchPath("openvino", "openvino", {"precision": "f32"}, threads_option="threads"))
register(BenchPath("tvm", "tvm"))
register(BenchPath("tinygrad", "tinygrad"))
# No disk cache: the build's time and memory are a compile's, as they are for every other path.
register(BenchPath("minic", "minic", {"use_cache": False}, threads_option="num_threads"))
register(BenchPath("iree", "iree", threads_option="threads"))
for _via in ("stablehlo", "linalg", "turbine"):
    register(BenchPath(f"iree-{_via}", "iree", {"via": _via}, threads_option="threads"))


def resolve(name: str) -> BenchPath:
    """The bench path ``name``: registered here, a ``minic debug`` variant, or a bare backend."""
    name = ALIASES.get(name.strip(), name.strip())
    if name in PATHS:
        return PATHS[name]
    from minic.debug.paths import PATHS as DEBUG_PATHS
    if name in DEBUG_PATHS:
        variant = DEBUG_PATHS[name]
        return BenchPath(name, variant.backend, dict(variant.options))
    if name in backends.names():
        return BenchPath(name, name)
    raise UserError(f"unknown bench path '{name}'; available: {', '.join(available())}")


def available() -> list[str]:
    have = set(backends.names())
    return sorted({n for n, p in PATHS.items() if p.backend in have} | have)


def parse(spec: str) -> list[BenchPath]:
    """``--vs`` (comma-separated) -> paths, torch first and minic last, each once."""
    names = [ALIASES.get(s.strip(), s.strip()) for s in spec.split(",") if s.strip()]
    ordered = ["torch"] + [n for n in names if n not in ("torch", "minic")] + ["minic"]
    seen: list[str] = []
    for n in ordered:
        if n not in seen:
            seen.append(n)
    return [resolve(n) for n in seen]
