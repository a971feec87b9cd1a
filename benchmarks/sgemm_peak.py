"""The machine's sgemm peak: GFLOPS of PyTorch (1 and 2 threads) and NumPy, interleaved.

    python benchmarks/sgemm_peak.py [--sizes 512,1024] [--rounds 7]

Used as the roofline that compiler speeds are read against (bridges/tvm/README.md,
"The machine's peak"): a vendor sgemm on a large square matrix is about as close to
the FMA units' limit as code gets.  Each round times every path in turn (one
warm-up call, then 5 timed calls), so a burst of load hits all paths alike; the
median and the best call are printed, with the load average before and after.
``minic.debug.roofline.sgemm_flops`` is the same measurement as a function (best of
N calls), which ``python -m minic profile`` uses for its roofline.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,1024")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("load average before:", os.getloadavg())
    for n in (int(s) for s in args.sizes.split(",")):
        a = np.random.default_rng(0).random((n, n), dtype=np.float32)
        t = torch.from_numpy(a)
        paths = {"torch 1 thread": (1, lambda: t @ t), "torch 2 threads": (2, lambda: t @ t),
                 "numpy": (None, lambda: a @ a)}
        times: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.rounds):
            for name, (threads, fn) in paths.items():
                if threads:
                    torch.set_num_threads(threads)
                fn()
                for _ in range(5):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
        for name, ts in times.items():
            flops = 2 * n ** 3
            print(f"sgemm {n}^3 {name}: median {flops / statistics.median(ts) / 1e9:.0f} GFLOPS, "
                  f"best {flops / min(ts) / 1e9:.0f}")
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    main()
