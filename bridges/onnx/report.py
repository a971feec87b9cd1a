"""Step 4: the whole lab in one call — export, optimize, quantize, compare, tabulate.

``python -m minic onnx compare MODEL`` prints what ``run_report`` returns: the
side-by-side node table with op histograms, the accuracy table and the latency
table.  It also writes ``<name>.onnx`` and ``<name>_opt.onnx`` (and the other
variants) to the output folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import onnx

from bridges.onnx.compare import (AccuracyRow, accuracy, cuda_status, ort_session,
                                  time_interleaved, torch_outputs)
from bridges.onnx.export import export_zoo, save
from bridges.onnx.inputs import InputSpec, accuracy_inputs
from bridges.onnx.optimize import all_variants, node_counts
from bridges.onnx.quantize import quantize_int8, text_calibration

FP32_TOLERANCE = 1e-4


@dataclass
class Report:
    name: str
    variants: dict[str, onnx.ModelProto]
    accuracy: list[AccuracyRow]
    latency_ms: dict[str, float | str]          # a str is the reason a row is missing
    files: list[Path] = field(default_factory=list)

    def text(self) -> str:
        return "\n\n".join([node_table(self.variants), histogram_table(self.variants),
                            accuracy_table(self.accuracy),
                            latency_table(self.latency_ms)])


def file_stem(name: str) -> str:
    return name.replace("-", "_")


def run_report(name: str, size: str = "full", *, count: int = 100, repeats: int = 20,
               out_dir: Path | None = None, quantize: bool = True,
               latency_shape: tuple[int, int] = (1, 64), threads: int | None = None) -> Report:
    """Export zoo model ``name``, build every variant, measure accuracy and latency.

    ``threads`` caps both PyTorch's and ONNX Runtime's intra-op threads, so that
    the latency rows compare like with like (default: each library's own).
    """
    exported, module = export_zoo(name, size)
    variants = all_variants(exported.model)
    is_tokens = exported.example_inputs[0].dtype.kind == "i"
    if quantize and is_tokens:
        variants["int8-qdq"] = quantize_int8(variants["homemade"],
                                             text_calibration(exported.input_names[0]))
    files = []
    if out_dir is not None:
        stem = file_stem(name)
        files.append(save(exported.model, out_dir / f"{stem}.onnx"))
        files.append(save(variants["homemade"], out_dir / f"{stem}_opt.onnx"))
        for label in ("onnxoptimizer", "ort-basic", "int8-qdq"):
            if label in variants:
                files.append(save(variants[label], out_dir / f"{stem}_{label}.onnx"))

    spec = InputSpec(exported.example_inputs[0], exported.dynamic_axes[0])
    batches = accuracy_inputs(spec, count, vocab=_vocab(module),
                              max_seq=getattr(module, "max_seq_len", None))
    references = torch_outputs(module, batches)
    sessions = {label: ort_session(m) for label, m in variants.items()}
    rows = [accuracy(label, s, batches, references) for label, s in sessions.items()]

    import torch
    if threads is not None:
        torch.set_num_threads(threads)
    timed = {label: ort_session(m, threads=threads) for label, m in variants.items()
             if label in ("exported", "homemade", "int8-qdq")}
    x = _latency_input(exported.example_inputs[0], is_tokens, latency_shape)
    x_torch, feed = torch.from_numpy(x), {exported.input_names[0]: x}

    def eager():
        with torch.no_grad():
            return module(x_torch)
    candidates = {"pytorch-eager": eager}
    for label, session in timed.items():
        candidates[f"ort-cpu {label}"] = (lambda s=session: s.run(None, feed))
    latency: dict[str, float | str] = dict(time_interleaved(candidates, repeats))
    reason = cuda_status()
    latency["ort-cuda homemade"] = reason or _cuda_latency(variants, feed, repeats)
    latency["_shape"] = f"input {tuple(x.shape)}, threads {threads or 'default'}"
    return Report(name, variants, rows, latency, files)


def _vocab(module) -> int | None:
    from torch import nn
    embeddings = [m for m in module.modules() if isinstance(m, nn.Embedding)]
    return embeddings[0].num_embeddings if embeddings else None


def _latency_input(example, is_tokens: bool, shape: tuple[int, int]):
    """Token models are timed on ``shape`` (batch, seq) of byte ids; others on the example."""
    import numpy as np
    if not is_tokens:
        return example
    return np.random.default_rng(0).integers(0, 256, size=shape).astype(np.int64)


def _cuda_latency(variants, feed, repeats) -> float:
    session = ort_session(variants["homemade"], provider="CUDAExecutionProvider")
    return time_interleaved({"cuda": lambda: session.run(None, feed)}, repeats)["cuda"]


# --- tables ----------------------------------------------------------------

def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with aligned columns (Markdown-compatible)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def node_table(variants: dict[str, onnx.ModelProto]) -> str:
    """Node counts per variant, and the change versus the export."""
    base_total, base_compute = node_counts(next(iter(variants.values())))
    rows = []
    for label, model in variants.items():
        total, compute = node_counts(model)
        rows.append([label, total, _pct(total, base_total), compute,
                     _pct(compute, base_compute)])
    return format_table(["variant", "nodes", "vs export", "non-Constant nodes", "vs export"],
                        rows)


def histogram_table(variants: dict[str, onnx.ModelProto]) -> str:
    """One row per op type, one column per variant: how many nodes of that op."""
    ops = sorted({n.op_type for m in variants.values() for n in m.graph.node})
    rows = [[op, *(sum(n.op_type == op for n in m.graph.node) or "." for m in variants.values())]
            for op in ops]
    return format_table(["op", *variants], rows)


def _pct(value: int, base: int) -> str:
    return f"{100.0 * (value - base) / base:+.1f}%" if base else "n/a"


def accuracy_table(rows: list[AccuracyRow]) -> str:
    headers = ["variant", "inputs", "(B, T) pairs", "max |err| synthetic", "max |err| text",
               "max |err|", f"<= {FP32_TOLERANCE:g}", "top-1 agree"]
    body = [[r.label, r.inputs, len(r.shapes), f"{r.by_kind.get('synthetic', 0):.2e}",
             f"{r.by_kind.get('text', 0):.2e}", f"{r.max_abs_error:.2e}",
             "yes" if r.within(FP32_TOLERANCE) else "no", f"{100 * r.top1_agreement:.1f}%"]
            for r in rows]
    return format_table(headers, body)


def latency_table(latency: dict[str, float | str]) -> str:
    eager = latency.get("pytorch-eager")
    rows = []
    for label, value in latency.items():
        if label.startswith("_"):
            continue
        if isinstance(value, str):
            rows.append([label, "missing", "", value])
        else:
            speedup = f"{eager / value:.2f}x" if isinstance(eager, float) else ""
            rows.append([label, f"{value:.3f}", speedup, ""])
    title = f"latency, median ms ({latency.get('_shape', '')})"
    return format_table([title, "ms", "vs eager", "note"], rows)
