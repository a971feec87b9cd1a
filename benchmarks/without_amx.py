"""minic's int8 (or bf16) without AMX's tiles on a CPU that has them: the VNNI (or AVX512-BF16)
code a CPU without AMX runs (a Zen 4), timed on this one.

    python benchmarks/without_amx.py [resnet50] [--precision int8] [--threads 1] [--rounds 5]

The model is compiled for this CPU with its own features less amx-tile, amx-int8 and amx-bf16
(LLVM's ``-feature``), then timed as ``minic bench`` times a path: blocks of 10 calls after 3
warm-up calls, the median of each block, and the median and range over rounds.  Its rival on
the same footing is OpenVINO held to VNNI by oneDNN's own switch:

    ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI python -m minic bench resnet50 --vs openvino --precision int8 --threads 1
"""
from __future__ import annotations

import argparse
import statistics
import time

import llvmlite.binding as llvm

import minic

AMX = ("amx-tile", "amx-int8", "amx-bf16")


def features_without_amx() -> str:
    """This CPU's features as LLVM names them, AMX's turned off."""
    named = llvm.get_host_cpu_features()
    return ",".join(("-" if name in AMX else "+" if on else "-") + name for name, on in named.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="resnet50")
    ap.add_argument("--precision", default="int8", help="int8 (minic's own quantization) or bf16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    source = minic.load(args.model)
    run = minic.compile(args.model, precision=args.precision, num_threads=args.threads, use_cache=False,
                        features=features_without_amx())
    inputs = source.example_inputs
    for _ in range(3):
        run(*inputs)
    medians = []
    for _ in range(args.rounds):
        times = []
        for _ in range(10):
            start = time.perf_counter()
            run(*inputs)
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times) * 1e3)
    print(f"{args.model} {args.precision} without AMX, {args.threads} thread(s): "
          f"{statistics.median(medians):.2f} ms [{min(medians):.2f}-{max(medians):.2f}] over {args.rounds} rounds")


if __name__ == "__main__":
    main()
