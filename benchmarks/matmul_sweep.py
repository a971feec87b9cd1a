"""A square f32 matmul swept across the cache sizes: when packing and threads pay.

    python benchmarks/matmul_sweep.py [--sizes 64,128,256,512,1024,1536] [--repeat 5]

First a short primer on this CPU, read from the machine: its vector width (the ISA
flags: AVX-512 holds 16 f32 lanes, AVX2 8), its data caches (sysfs), the CPUs this
process may use, and the attainable peak, measured as PyTorch's sgemm at 1024 on
one thread and on all (``minic.debug.roofline.sgemm_flops``).  Then one row per
size: the working set (three n x n f32 matrices) and the cache it fits in, and the
GFLOPS of minic's micro-kernel on one thread without packing the weight panel and
with it (knobs put back with ``CompileOptions.schedules``, chapter 12), of the
default schedule on all the CPUs, and of numpy (OpenBLAS).  Each figure is the
median of ``--repeat`` calls after a warm-up; the machine may be shared, so read
the trend across sizes, not one cell.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.types import DType, TensorType
from minic.runtime import CompileOptions, compile_graph
from minic.schedule.templates import Knobs
from minic.timing import median_latency

CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def matmul_graph(n: int) -> Graph:
    x, w, y = (Value(name, TensorType((n, n), DType.f32)) for name in ("x", "w", "y"))
    return Graph("matmul", [x, w], [y], [Node("matmul", [x, w], [y], ops.get("matmul").make_attrs())], [])


def parse_size(text: str) -> int:
    """sysfs's cache size ("48K", "2048K", "32M") in bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def data_caches() -> list[tuple[str, int]]:
    """(name, bytes) of this CPU's data caches, innermost first (empty where sysfs has none)."""
    out = []
    for index in sorted(CACHE.glob("index*")):
        kind = (index / "type").read_text().strip()
        if kind in ("Data", "Unified"):
            out.append((f"L{(index / 'level').read_text().strip()}", parse_size((index / "size").read_text().strip())))
    return out


def vector_lanes() -> tuple[str, int]:
    """The widest f32 vector the CPU's flags promise: (ISA, lanes)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "unknown", 4
    words = set(flags.split())
    for isa, lanes in (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse2", 4), ("asimd", 4)):
        if isa in words:
            return isa, lanes
    return "scalar", 1


def fits(nbytes: int, caches: list[tuple[str, int]]) -> str:
    return next((name for name, size in caches if nbytes <= size), "DRAM")


def primer(caches: list[tuple[str, int]]) -> None:
    from minic.debug.roofline import sgemm_flops
    isa, lanes = vector_lanes()
    cpus = len(os.sched_getaffinity(0))
    print(f"vector width: {isa}, {lanes} f32 lanes; CPUs for this process: {cpus}")
    print("data caches:", ", ".join(f"{name} {size >> 10} KiB" for name, size in caches) or "unknown")
    one, all_ = sgemm_flops(1024, threads=1), sgemm_flops(1024, threads=cpus)
    print(f"peak (PyTorch sgemm 1024): {one / 1e9:.1f} GFLOPS on 1 thread, {all_ / 1e9:.1f} GFLOPS on {cpus}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,128,256,512,1024,1536")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-primer", action="store_true", help="skip the CPU primer (its peak takes seconds)")
    args = parser.parse_args(argv)
    caches = data_caches()
    print("load average before:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    if not args.no_primer:
        primer(caches)
    variants = {"1 thread, unpacked": dict(num_threads=1, pack=False),
                "1 thread, packed": dict(num_threads=1, pack=True),
                "default, all CPUs": dict(num_threads=0, pack=None)}
    print(f"{'n':>5} {'working set':>12} {'fits':>5}  " + "  ".join(f"{v:>18}" for v in variants) + f"  {'numpy':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        rng = np.random.default_rng(n)
        a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
        want = a @ b
        flop = 2.0 * n ** 3
        cells = []
        for how in variants.values():
            graph = matmul_graph(n)
            # The matmul is the program's one kernel, k0_matmul; None: the default schedule.
            hand = None if how["pack"] is None else {"k0_matmul": Knobs(rows=6, lanes=32, pack=how["pack"])}
            model = compile_graph(graph, CompileOptions(num_threads=how["num_threads"], use_cache=False,
                                                        schedules=hand))
            np.testing.assert_allclose(model(a, b), want, rtol=1e-3, atol=1e-3 * n ** 0.5)
            cells.append(flop / median_latency(model, (a, b), repeat=args.repeat, warmup=1) / 1e9)
        cells.append(flop / median_latency(np.matmul, (a, b), repeat=args.repeat, warmup=1) / 1e9)
        nbytes = 3 * n * n * 4
        print(f"{n:>5} {nbytes / 1024:>8.0f} KiB {fits(nbytes, caches):>5}  "
              + "  ".join(f"{c:>11.1f} GFLOPS" for c in cells[:-1]) + f"  {cells[-1]:>8.1f}")
    print("load average after:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
