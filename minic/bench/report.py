"""What ``minic bench`` prints: the conditions of the run, then per configuration the
paths' medians with their spread, ratios, errors and memory; and the Markdown tables
of the README (latency and peak memory, one row per model and thread count)."""
from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

from minic.bench.harness import Config, Result, Timing
from minic.timing import fmt_ms, fmt_ratio

# The engines minic is measured against ("the best of ONNX Runtime, OpenVINO and Inductor").
RIVALS = ("onnxruntime", "openvino", "inductor")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass
class Conditions:
    """When, where and under what load a run was measured."""
    started: str
    machine: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    timing: Timing = field(default_factory=Timing)
    isa: str = ""                       # --isa: how the engines were held to it, and which were not

    @classmethod
    def now(cls, timing: Timing) -> "Conditions":
        cores = len(os.sched_getaffinity(0))
        return cls(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   f"{cpu_name()}, {cores} cores usable, {platform.machine()}", os.getloadavg(), timing=timing)

    def finish(self) -> None:
        self.load_after = os.getloadavg()

    def lines(self) -> list[str]:
        t = self.timing
        load = lambda la: " / ".join(f"{x:.2f}" for x in la)   # noqa: E731
        return [f"date: {self.started}; machine: {self.machine}",
                f"load average (1/5/15 min): {load(self.load_before)} before, {load(self.load_after)} after",
                f"each path in its own process, built once; {t.rounds} rounds of one block per path "
                f"(median of {t.calls} calls, {t.warmup} warm-up calls excluded); figure: median over rounds "
                f"[lowest-highest block median]; threads: torch.set_num_threads, OMP/TVM/tinygrad environment, "
                f"minic num_threads, ONNX Runtime intra_op_num_threads, OpenVINO INFERENCE_NUM_THREADS",
                *([f"instruction set: {self.isa}"] if self.isa else [])]

    def as_json(self) -> dict[str, Any]:
        return {"date": self.started, "machine": self.machine, "load_before": list(self.load_before),
                "load_after": list(self.load_after), "rounds": self.timing.rounds, "calls": self.timing.calls,
                "warmup": self.timing.warmup, "isa": self.isa}


def engine(r: Result) -> str:
    """The engine of a path at some precision: ``openvino:bf16`` -> ``openvino``."""
    return r.path.partition(":")[0]


def fastest(results: list[Result], engines: tuple[str, ...]) -> Result | None:
    """The fastest timed path of ``engines``, over every precision they ran at (a path that
    missed its precision's accuracy bound was not timed)."""
    timed = [r for r in results if engine(r) in engines and r.blocks]
    return min(timed, key=lambda r: r.median) if timed else None


def best_rival(results: list[Result]) -> Result | None:
    return fastest(results, RIVALS)


def best_line(results: list[Result]) -> str:
    """minic at its best against the best rival at its best, when more than f32 ran."""
    mine, rival = fastest(results, ("minic",)), best_rival(results)
    if mine is None or rival is None:
        return ""
    return (f"at each engine's best: {mine.path} {fmt_ratio(mine.median * 1e3)} ms / {rival.path} "
            f"{fmt_ratio(rival.median * 1e3)} ms = {fmt_ratio(mine.median / rival.median)}x")


def cell(r: Result) -> str:
    if not r.blocks:
        return r.status
    lo, hi = r.spread
    return f"{fmt_ratio(r.median * 1e3)} [{fmt_ratio(lo * 1e3)}-{fmt_ratio(hi * 1e3)}]"     # all in ms


def print_config(console, config: Config, results: list[Result]) -> None:
    from rich.markup import escape
    from rich.table import Table
    eager = next((r.median for r in results if r.path == "torch" and r.blocks), None)
    rival = best_rival(results)
    table = Table("path", "status", "compile", "latency: median \\[spread] ms", "x eager",
                  f"x best of {'/'.join(RIVALS)}", "max abs err", "rel err", "peak RSS", "detail", title=config.label)
    for r in results:
        ok = bool(r.blocks)
        table.add_row(r.path, r.status, fmt_ms(r.compile_s) if r.status == "ok" else "", escape(cell(r)) if ok else "",
                      fmt_ratio(r.median / eager) if ok and eager else "",
                      fmt_ratio(r.median / rival.median) if ok and rival else "",
                      f"{r.max_abs_err:.2e}" if r.max_abs_err is not None else "",
                      f"{r.rel_err:.2e}" if r.rel_err is not None else "",
                      f"{r.rss_peak_mb:,.0f} MB" if r.rss_peak_mb else "", escape(r.detail[:80]))
    console.print(table)
    if any(r.path != engine(r) for r in results) and (line := best_line(results)):
        console.print(line)


def markdown(results: list[Result], paths: list[str]) -> str:
    """The README's tables: latency per (model, threads, batch) and path, the best rival
    in bold beside minic's ratio to it (each at its fastest precision within that
    precision's accuracy bound, where several ran); then each path's peak RSS."""
    keys: list[Config] = []
    for r in results:
        if r.config not in keys:
            keys.append(r.config)
    by = {(r.config, r.path): r for r in results}
    head = ["model", "B", "threads", *paths, "minic / best rival"]
    lat = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + " |"]
    mem = ["| " + " | ".join(head[:3] + paths) + " |", "| " + " | ".join(["---"] * 3 + ["---:"] * len(paths)) + " |"]
    for c in keys:
        row = [r for p in paths if (r := by.get((c, p)))]
        rival = best_rival(row)
        cells = []
        for p in paths:
            r = by.get((c, p))
            text = "–" if r is None or not r.blocks else cell(r)
            cells.append(f"**{text}**" if rival is not None and r is rival else text)
        mine = fastest(row, ("minic",))
        ratio = fmt_ratio(mine.median / rival.median) if mine and rival else "–"
        lat.append(f"| {c.model} | {c.batch} | {c.threads} | " + " | ".join(cells) + f" | {ratio} |")
        rss = [f"{by[(c, p)].rss_peak_mb:,.0f}" if (c, p) in by and by[(c, p)].status == "ok" else "–" for p in paths]
        mem.append(f"| {c.model} | {c.batch} | {c.threads} | " + " | ".join(rss) + " |")
    text = ("Latency, ms: median over rounds [lowest-highest block median]\n\n" + "\n".join(lat) +
            "\n\nPeak RSS of the worker (build + every call), MB\n\n" + "\n".join(mem) + "\n")
    cpu = cpu_table([c for c in keys if c.threads == 1], by, paths)
    return text + ("\nOne thread: CPU ms per call (the worker's threads; median over rounds of the block "
                   "medians), the figure that moves least with the machine's load\n\n" + cpu + "\n" if cpu else "")


def cpu_table(keys: list[Config], by: dict[tuple[Config, str], Result], paths: list[str]) -> str:
    """CPU milliseconds per call of the one-thread configurations, minic's ratio to the
    rival that is best by this figure."""
    lines = []
    for c in keys:
        timed = {p: by[(c, p)] for p in paths if (c, p) in by and by[(c, p)].cpu_median}
        if not timed:
            continue
        rivals = [r for r in timed.values() if engine(r) in RIVALS]
        rival = min(rivals, key=lambda r: r.cpu_median) if rivals else None
        cells = [(lambda t: f"**{t}**" if timed.get(p) is rival else t)(fmt_ratio(timed[p].cpu_median * 1e3))
                 if p in timed else "–" for p in paths]
        mine = min((r for r in timed.values() if engine(r) == "minic"), key=lambda r: r.cpu_median, default=None)
        ratio = fmt_ratio(mine.cpu_median / rival.cpu_median) if mine and rival else "–"
        lines.append(f"| {c.model} | {c.batch} | {c.threads} | " + " | ".join(cells) + f" | {ratio} |")
    if not lines:
        return ""
    head = ["model", "B", "threads", *paths, "minic / best rival"]
    return "\n".join(["| " + " | ".join(head) + " |",
                      "| " + " | ".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + " |", *lines])
