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

A path may run at other precisions than f32 (``--vs openvino:bf16``, or ``--precision``
for every path that has them), each where the engine is at its best:

* an engine's own option: ``bf16`` is minic's and OpenVINO's ``precision="bf16"`` (bf16
  storage and dot products, f32 accumulation) and Inductor under ``torch.autocast``;
* a *recipe* that changes the model (``minic.backends.recipe``): ``int8`` is the model
  quantized statically by ONNX Runtime's quantizer (QDQ, u8 activations calibrated on the
  example inputs and seeded random ones, s8 weights per channel), ``int8-dynamic`` by its
  ``quantize_dynamic``; every engine that reads ONNX runs that same file;
* ``int8-own``: the engine's own post-training quantization of the f32 model (minic's
  ``precision="int8"``, minic/passes/post_training.py: the same recipe, on minic's graph).

Each precision is judged against the f32 reference by its own bound (``TOLERANCE``).

``--isa`` holds the engines to a lesser instruction set than this CPU's (``ISAS``): the code
a CPU without AMX runs (a Zen 4: ``avx512-vnni``), or without AVX-512 (``avx2``), timed on
this one.  Each engine is held by its own switch where it has one: minic compiles for this
CPU's features with the others turned off (LLVM's ``-amx-int8``, ...); oneDNN, under OpenVINO's
CPU plugin and PyTorch's convolutions and matmuls, obeys ``ONEDNN_MAX_CPU_ISA``; PyTorch's
vectorized kernels and Inductor's generated C++ obey ``ATEN_CPU_CAPABILITY`` (Inductor may
still pick its AMX micro-GEMM at ``avx512``).  ONNX Runtime's MLAS chooses its kernels from
cpuid with no switch, so it runs at this CPU's best: the report says which paths were not held.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from minic import backends
from minic.errors import UserError
from minic.options import host_features_without
from minic.verify.precision import TOLERANCE as OWN_TOLERANCE
from minic.verify.tolerance import QDQ8

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS", "NUM_CPU_THREADS")
PRECISIONS = ("f32", "bf16", "int8", "int8-dynamic", "int8-own")
TOLERANCE = {**OWN_TOLERANCE, "int8-dynamic": QDQ8, "int8-own": QDQ8}   # against the f32 reference
INT8 = {"int8": {}, "int8-dynamic": {}}                                 # recipes: the model changes, not the options


@dataclass(frozen=True)
class BenchPath:
    name: str                                     # what --vs takes: "openvino"
    backend: str                                  # the minic.backends name
    options: dict[str, Any] = field(default_factory=dict)
    threads_option: str = ""                      # the backend option for the thread count ("": process-wide only)
    source_dir: str = ""                          # run the worker on the minic/bridges sources in this folder
                                                  # ("": the running ones); an A/B of two revisions
    precision: str = "f32"                        # what it runs at (an option below, or a recipe's model)
    precisions: dict[str, dict[str, Any]] = field(default_factory=lambda: {"f32": {}})   # -> the options for it
    env: dict[str, str] = field(default_factory=dict)   # added to its worker's environment (--isa)

    def at(self, precision: str) -> "BenchPath | None":
        """This path at ``precision`` (named ``openvino:bf16``), or None where it has no such mode."""
        if precision == self.precision:
            return self
        if precision not in self.precisions:
            return None
        return replace(self, name=f"{self.name.partition(':')[0]}:{precision}", precision=precision,
                       options={**self.options, **self.precisions[precision]})

    def options_for(self, threads: int) -> dict[str, Any]:
        """The backend's options for a run on ``threads`` threads."""
        return {**self.options, self.threads_option: threads} if self.threads_option else dict(self.options)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend, "options": self.options,
                "threads_option": self.threads_option, "source_dir": self.source_dir,
                "precision": self.precision, "precisions": self.precisions}


@dataclass(frozen=True)
class Isa:
    """An instruction set to hold every engine to, each by its own switch (``--isa``)."""
    name: str
    turned_off: tuple[str, ...]          # LLVM feature names (prefixes) minic compiles without
    onednn: str                          # ONEDNN_MAX_CPU_ISA: oneDNN's ceiling (OpenVINO, PyTorch)
    aten: str                            # ATEN_CPU_CAPABILITY: PyTorch's kernels, Inductor's C++

    def env(self) -> dict[str, str]:
        return {"ONEDNN_MAX_CPU_ISA": self.onednn, "ATEN_CPU_CAPABILITY": self.aten}


ISAS = {"avx512-vnni": Isa("avx512-vnni", ("amx",), "AVX512_CORE_VNNI", "avx512"),
        "avx2": Isa("avx2", ("amx", "avx512", "avxvnni", "avxifma", "avxneconvert", "avx10"), "AVX2", "avx2")}
HELD = ("minic", "openvino", "torch", "inductor")       # the engines that have a switch


def isa(name: str) -> Isa:
    if name not in ISAS:
        raise UserError(f"--isa takes {', '.join(ISAS)}, not '{name}'")
    return ISAS[name]


def held_to(paths: list[BenchPath], to: Isa) -> list[BenchPath]:
    """``paths`` held to the instruction set ``to``: every worker's environment carries oneDNN's
    and ATen's switches; minic compiles for this CPU's features less those ``to`` turns off."""
    features = host_features_without(to.turned_off)
    return [replace(p, env={**p.env, **to.env()},
                    options={**p.options, "features": features} if p.backend == "minic" else p.options)
            for p in paths]


def not_held(paths: list[BenchPath]) -> list[str]:
    """The engines among ``paths`` that ``--isa`` cannot hold: they run at this CPU's best."""
    return sorted({p.name.partition(":")[0] for p in paths} - set(HELD))


def held_line(to: Isa, paths: list[BenchPath]) -> str:
    """How a run held ``paths`` to ``to``, for its conditions: the switches, and who had none."""
    free = not_held(paths)
    return (f"{to.name} ({', '.join(f'{k}={v}' for k, v in to.env().items())}; minic compiled without "
            f"LLVM's {', '.join(p + '*' for p in to.turned_off)})"
            + (f"; not held, at this CPU's best: {', '.join(free)}" if free else ""))


PATHS: dict[str, BenchPath] = {}
ALIASES = {"torch-compile": "inductor", "ort": "onnxruntime", "eager": "torch"}


def register(path: BenchPath) -> BenchPath:
    PATHS[path.name] = path
    return path


register(BenchPath("torch", "torch"))
register(BenchPath("inductor", "inductor", precisions={"f32": {}, "bf16": {"autocast": "bf16"}}))
register(BenchPath("onnxruntime", "onnxruntime", threads_option="threads", precisions={"f32": {}, **INT8}))
# int8: the QDQ file under OpenVINO's own default hint on this CPU (bf16 where it has AVX512-BF16)
# for the ops left in float, as a user who loads a quantized model gets it.
register(BenchPath("openvino", "openvino", {"precision": "f32"}, threads_option="threads",
                   precisions={"f32": {}, "bf16": {"precision": "bf16"},
                               **{k: {"precision": "bf16"} for k in INT8}}))
register(BenchPath("tvm", "tvm"))
register(BenchPath("tinygrad", "tinygrad"))
# No disk cache: the build's time and memory are a compile's, as they are for every other path.
register(BenchPath("minic", "minic", {"use_cache": False}, threads_option="num_threads",
                   precisions={"f32": {}, "bf16": {"precision": "bf16"}, **INT8, "int8-own": {"precision": "int8"}}))
register(BenchPath("iree", "iree", threads_option="threads"))
for _via in ("stablehlo", "linalg", "turbine"):
    register(BenchPath(f"iree-{_via}", "iree", {"via": _via}, threads_option="threads"))


def resolve(spec: str) -> BenchPath:
    """The bench path ``spec`` (``NAME`` or ``NAME:PRECISION``): registered here, a ``minic
    debug`` variant, or a bare backend."""
    name, _, precision = spec.strip().partition(":")
    name = ALIASES.get(name, name)
    path = _resolve(name)
    if not precision:
        return path
    at = path.at(precision)
    if at is None:
        raise UserError(f"bench path '{name}' runs at {', '.join(path.precisions)}, not '{precision}'")
    return at


def _resolve(name: str) -> BenchPath:
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


def parse(spec: str, precisions: tuple[str, ...] = ("f32",)) -> list[BenchPath]:
    """``--vs`` (comma-separated) -> paths, torch first and minic last, each once; with
    ``precisions`` (``--precision``), each path given without one at each of them that it
    has (torch, the reference, at f32 only)."""
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or not precisions:
        raise UserError(f"--precision takes {', '.join(PRECISIONS)} (comma-separated), not '{','.join(unknown)}'")
    given = [resolve(s) for s in spec.split(",") if s.strip()]
    ordered = [resolve("torch"), *[p for p in given if p.name not in ("torch", "minic")], resolve("minic")]
    paths: list[BenchPath] = []
    for path in ordered:
        variants = [path] if path.precision != "f32" or path.name == "torch" else \
            [v for p in precisions if (v := path.at(p)) is not None]
        paths += [v for v in variants if v.name not in {q.name for q in paths}]
    return paths
