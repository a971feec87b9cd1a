"""Reproduce the performance table of the README (and benchmarks/RESULTS.md).

    python benchmarks/readme_table.py [--runs 3] [--vs torch,onnxruntime] [--out table.md]

Runs, ``--runs`` times each (the machine is shared: figures move with its load):
the matmul 512^3 benchmark (minic vs numpy), ``minic bench`` on llama-tiny and
resnet50 (against ``--vs``, each path in its own process), and the cold compile of llama-tiny from
a Graph.  Prints one markdown table of medians with every run's figure.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import json
from pathlib import Path

HERE = Path(__file__).parent


def bench(model: str, vs: str, repeat: int) -> dict[str, float]:
    """Median latency (s) of each path of one ``minic bench`` run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        subprocess.run([sys.executable, "-m", "minic", "bench", model, "--vs", vs, "--rounds", str(repeat),
                        "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
        return {r["path"]: r["median_s"] for r in json.loads(out.read_text())["rows"] if r["median_s"]}


def matmul() -> tuple[float, float]:
    text = subprocess.run([sys.executable, str(HERE / "matmul.py"), "--rounds", "5"], check=True,
                          capture_output=True, text=True).stdout
    figures = {line.split()[0]: float(line.split()[3]) for line in text.splitlines() if "GFLOPS: median" in line}
    return figures["minic"], figures["numpy"]


def compile_seconds() -> float:
    text = subprocess.run([sys.executable, str(HERE / "compile_time.py"), "llama-tiny", "--repeat", "1"],
                          check=True, capture_output=True, text=True).stdout
    return float(next(line.split()[2] for line in text.splitlines() if line.startswith("total")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vs", default="torch,onnxruntime")
    parser.add_argument("--repeat", type=int, default=10, help="rounds of minic bench (llama-tiny; resnet50 a third)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        runs.setdefault(key, []).append(value)
    for _ in range(args.runs):
        mine, blas = matmul()
        add("matmul 512^3: minic GFLOPS", mine)
        add("matmul 512^3: numpy GFLOPS", blas)
        add("matmul 512^3: minic / numpy", mine / blas)
        for model in ("llama-tiny", "resnet50"):
            times = bench(model, args.vs, args.repeat if model == "llama-tiny" else max(5, args.repeat // 3))
            for path, seconds in times.items():
                add(f"{model}: {path} ms", seconds * 1e3)
            if "onnxruntime" in times:
                add(f"{model}: minic / onnxruntime", times["minic"] / times["onnxruntime"])
        add("llama-tiny cold compile from a Graph, s", compile_seconds())
    lines = [f"Measured {time.strftime('%Y-%m-%d')}; median of {args.runs} runs (each run's figure in brackets).", "",
             "| figure | median | runs |", "| --- | --- | --- |"]
    for key, values in runs.items():
        lines.append(f"| {key} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
