"""A/B of minic against itself: a base revision and the working tree, timed fairly.

    python benchmarks/ab.py --base main --models bert-base,resnet50 --threads 2,1 [--rounds 7]

The base revision's ``minic/`` and ``bridges/`` are exported (``git archive``) to a
temporary folder; each side then runs in its own worker process of ``minic bench``
(same thread count, no disk cache, checked against PyTorch), asked in turn for
blocks, round after round (``minic.bench.harness``).  A change in the machine's
load hits both sides of a round alike, so the figure is the median over rounds of
the paired ratio work / base (below 1: the working tree is faster), with the
lowest and highest round.  The last column pairs the sides' CPU seconds per call the
same way: at one thread it leaves out the time the OS gave other processes, so on a
loaded machine it is the figure to read (both revisions must record it: the base's
worker too).  Prints the date, machine and load average with it.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import tarfile
import tempfile
from dataclasses import replace
from io import BytesIO
from pathlib import Path

from minic.bench.harness import Config, Timing, run_config
from minic.bench.paths import resolve
from minic.bench.report import Conditions, cell

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> None:
    """``minic/`` and ``bridges/`` as of ``rev``, written below ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "minic", "bridges"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git revision to compare with (default: %(default)s)")
    parser.add_argument("--models", default="bert-base")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--batch", default="1")
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    timing = Timing(args.rounds, args.calls, args.warmup)
    conditions = Conditions.now(timing)
    lines = [f"| model | B | threads | base ({args.base}) | work | work / base, paired by round | "
             "CPU time: work / base |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as tmp:
        export(args.base, Path(tmp))
        mine = resolve("minic")
        paths = [replace(mine, name="base", source_dir=tmp), replace(mine, name="work")]
        for model in args.models.split(","):
            for threads in (int(t) for t in args.threads.split(",")):
                for batch in (int(b) for b in args.batch.split(",")):
                    base, work = run_config(Config(model, batch, threads, args.size), paths, timing)
                    if not (base.blocks and work.blocks):
                        lines.append(f"| {model} | {batch} | {threads} | {base.status} {base.detail[:60]} | "
                                     f"{work.status} {work.detail[:60]} | – | – |")
                        continue
                    ratios = [w / b for w, b in zip(work.block_medians, base.block_medians)]
                    cpu = [statistics.median(w) / statistics.median(b)
                           for w, b in zip(work.cpu_blocks, base.cpu_blocks) if w and b]
                    lines.append(f"| {model} | {batch} | {threads} | {cell(base)} | {cell(work)} | "
                                 f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] | "
                                 + (f"{statistics.median(cpu):.3f} [{min(cpu):.3f}-{max(cpu):.3f}] |" if cpu else "– |"))
                    print(lines[-1], flush=True)
    conditions.finish()
    print("\n".join(conditions.lines()) + "\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
