"""CompileOptions: the one explicit options object of the minic backend, and the part of
it that the codegen stage is handed (``Target``): codegen sees the machine and LLVM's
level, never the cache, the graph passes or the tuning records."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/minic``, else ``~/.cache/minic``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minic"


PRECISIONS = ("f32", "f16", "f16-acc")


@dataclass(frozen=True)
class Target:
    """The codegen stage's options: the machine the code is for, LLVM's level, the threads."""
    triple: str = ""                     # "" = this machine (the JIT)
    cpu: str = ""                        # "" = the host CPU (for the host triple)
    features: str = ""                   # "" = the host CPU's features (for the host triple)
    opt_level: int = 2
    threads: int = 1                     # threads of parallel loops (CompileOptions.threads)


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
                                         # "f16-acc" also rounds every accumulator to f16 (docs/f16.md)
    cache_dir: Path | None = None        # None = default_cache_dir()
    use_cache: bool = True
    records: Path | None = None          # tuning records (JSON lines); None = <cache dir>/tuning.jsonl

    @property
    def threads(self) -> int:
        # the CPUs we may run on, not the machine's: under `taskset -c 0` a second
        # thread would only take turns with the first
        return self.num_threads or len(os.sched_getaffinity(0)) or 1

    @property
    def target(self) -> Target:
        """What the codegen stage is handed (``minic/pipeline.py``)."""
        return Target(self.triple, self.cpu, self.features, self.opt_level, self.threads)

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
