"""CompileOptions: the one options object a user gives minic (flat, and the compile
cache's key), and the part of it each stage is handed, derived here and nowhere else:

    GraphOptions   the graph passes (minic/passes) and lowering (minic/lowering)
    Target         the schedules (minic/schedule) and codegen (minic/codegen)
    CacheOptions   the compile cache (minic/runtime) and the tuning records it reads

A stage sees only its part: codegen never sees the cache, the passes never the machine."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from minic.errors import UserError


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/minic``, else ``~/.cache/minic``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minic"


PRECISIONS = ("f32", "f16", "f16-acc", "bf16")   # what each means: minic.lowering.precision.MODES
RECORDS_FILE = "tuning.jsonl"            # the tuning records in the cache folder, unless named
SHORT_TRIPLES = {"aarch64": "aarch64-linux-gnu", "arm64": "aarch64-linux-gnu"}


def full_triple(target: str) -> str:
    """``aarch64`` -> ``aarch64-linux-gnu``; a full triple is returned as given."""
    return SHORT_TRIPLES.get(target, target)


# The CPU a cross build is for when none is named: the ARM board's core (minic/aarch64) for
# aarch64, LLVM's baseline of the architecture for any other (an ARM core name there aborts LLVM).
DEFAULT_CPUS = {"aarch64": "cortex-a55"}


def default_cpu(target: str) -> str:
    """The CPU of ``target`` (a triple or a short name) when the user names none."""
    return DEFAULT_CPUS.get(full_triple(target).split("-")[0], "generic")


@dataclass(frozen=True)
class GraphOptions:
    """The graph stages' options: the passes' -O level, and the precision that the passes
    (to-f16, to-bf16) and lowering (f32 or f16 accumulators) give the numbers (docs/f16.md); whether
    3x3 convolutions may take Winograd's form (the winograd-conv2d pass, where it pays)."""
    level: int = 2
    precision: str = "f32"
    winograd: bool = True

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UserError(f"unknown precision '{self.precision}'; available: {', '.join(PRECISIONS)}")


@dataclass(frozen=True)
class Target:
    """The schedule and codegen stages' options: the machine the code is for, LLVM's level, the threads."""
    triple: str = ""                     # "" = this machine (the JIT)
    cpu: str = ""                        # "" = the host CPU (for the host triple)
    features: str = ""                   # "" = the host CPU's features (for the host triple)
    opt_level: int = 2
    threads: int = 1                     # threads of parallel loops (CompileOptions.threads)


def converts_bf16(target: Target) -> bool:
    """Whether the target has x86's AVX512-BF16 (in the host's features or the features given):
    f32 rounded to bf16 in one instruction (vcvtneps2bf16), two bf16 products added to an f32
    in another (vdpbf16ps, the matmul micro-kernel's).  (A CPU named without features counts as
    without it: LLVM's list of a named CPU's features is not at hand, and the bit rounding is
    right everywhere.)  Asked by the schedule and by codegen (a Target, or CompileOptions)."""
    return "+avx512bf16" in _features(target)


def dots_u8s8(target: Target) -> bool:
    """Whether the target has x86's AVX512-VNNI: four u8 × s8 products added to each i32 lane in
    one instruction (vpdpbusd, the int8 matmul micro-kernel's; docs/int8.md).  Named features
    and a named CPU count as converts_bf16 says.  Asked by the schedule and by codegen."""
    return "+avx512vnni" in _features(target)


def tiles_u8s8(target: Target) -> bool:
    """Whether the int8 matmul and conv run on Intel AMX's tiles (tdpbusd: a 16 x 16 tile of i32
    sums of u8 × s8 rows and columns of 64 bytes; minic/amx.py, minic/schedule/tiles.py): the target
    has amx-tile and amx-int8, and, when those are this machine's own features (the host triple, no
    features named), Linux lets this process use the tiles' registers.  Features named for the
    host are taken at their word (the code may only be read); loading such code asks again
    (minic/codegen/jit.py).  Asked by the schedule."""
    return _tiles(target, "+amx-int8")


def tiles_bf16(target: Target) -> bool:
    """Whether the bf16 matmul runs on Intel AMX's tiles (tdpbf16ps: a 16 x 16 tile of f32 sums of
    bf16 rows and columns of 32): amx-tile and amx-bf16, as ``tiles_u8s8`` says for amx-int8."""
    return _tiles(target, "+amx-bf16")


def _tiles(target: Target, feature: str) -> bool:
    features = _features(target)
    if not ("+amx-tile" in features and feature in features):
        return False
    if target.features:
        return True
    from minic.amx import tile_data_granted
    return tile_data_granted()


def _features(target: Target) -> list[str]:
    """The features given, else the host's (for the host triple): LLVM's names, "+avx512vnni"."""
    features = target.features
    if not features:
        import llvmlite.binding as llvm
        if not target.triple or target.triple == llvm.get_process_triple():
            features = _host_features()
    return features.split(",")


@functools.cache
def _host_features() -> str:
    """This machine's CPU features as LLVM names them (asked once: every kernel asks)."""
    import llvmlite.binding as llvm
    return llvm.get_host_cpu_features().flatten()


def host_features_without(prefixes: tuple[str, ...]) -> str:
    """This machine's features with every one whose LLVM name starts with one of ``prefixes``
    turned off: the code a lesser CPU of the family runs, compiled and timed here (``("amx",)``
    on a Xeon with AMX: a Zen 4's VNNI code; ``minic bench --isa``)."""
    return ",".join("-" + f[1:] if f[1:].startswith(prefixes) else f for f in _host_features().split(",") if f)


@dataclass(frozen=True)
class CacheOptions:
    """Where compiled code is kept (``use``: whether it is) and the tuning records compilation follows."""
    folder: Path
    records: Path                        # JSON lines, written by ``minic tune``
    use: bool = True


@dataclass(frozen=True)
class CompileOptions:
    """How ``compile_graph`` compiles.  Every field is part of the cache key."""
    opt_level: int = 2                   # LLVM's new pass manager, O0..O3; O2: the schedule already
                                         # vectorizes and unrolls, O3 costs ~40% more compile time for nothing
    triple: str = ""                     # "" = this machine (the JIT); e.g. "aarch64-linux-gnu"
    cpu: str = ""                        # "" = the host CPU (for the host triple)
    features: str = ""                   # "" = the host CPU's features (for the host triple)
    num_threads: int = 0                 # threads of parallel loops; 0 = the CPUs this process may use
    graph_opt_level: int = 2             # level given to minic.passes.optimize, when present
    precision: str = "f32"               # PRECISIONS: "f16" stores floats as f16 and computes in f32,
                                         # "f16-acc" also rounds every accumulator to f16, "bf16" stores
                                         # floats as bf16 and computes in f32 (docs/f16.md)
    winograd: bool = True                # the winograd-conv2d pass in -O2 (3x3 convolutions)
    cache_dir: Path | None = None        # None = default_cache_dir()
    use_cache: bool = True
    records: Path | None = None          # tuning records (JSON lines); None = <cache dir>/tuning.jsonl
    # Schedules put back by hand: kernel name (k3_matmul) or signature (the tuning records' key)
    # -> a function Function -> Function (the kernel scheduled, before weights are pre-packed),
    # or the contraction template's knobs (a schedule.Knobs or its dict).  A function's code is
    # no part of any key, so a compile with hand schedules is never cached.
    schedules: Mapping[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def cross(cls, target: str, cpu: str = "", features: str = "", threads: int = 4,
              opt_level: int = 3) -> CompileOptions:
        """Options for another machine's object code (never cached).  ``threads``: the host's
        core count means nothing there, so it is explicit (4: one Cortex-A55 cluster)."""
        return cls(opt_level=opt_level, triple=full_triple(target), cpu=cpu, features=features,
                   num_threads=threads, use_cache=False)

    @property
    def threads(self) -> int:
        # the CPUs we may run on, not the machine's: under `taskset -c 0` a second
        # thread would only take turns with the first
        return self.num_threads or len(os.sched_getaffinity(0)) or 1

    @property
    def graph(self) -> GraphOptions:
        return GraphOptions(self.graph_opt_level, self.precision, self.winograd)

    @property
    def target(self) -> Target:
        return Target(self.triple, self.cpu, self.features, self.opt_level, self.threads)

    @property
    def cache(self) -> CacheOptions:
        folder = Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
        return CacheOptions(folder, Path(self.records) if self.records is not None else folder / RECORDS_FILE,
                            self.use_cache and not self.schedules)
