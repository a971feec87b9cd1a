"""Accuracy of the zoo on the (emulated) HTP, judged by the QNN tolerance policy.

For each model and mode, on the example inputs and seeded random ones drawn
like them (another seed than calibration's):

* vs PyTorch: the fp32 eager model, the reference;
* vs ORT CPU: for fp16, ONNX Runtime's CPU provider on the float model (the same
  graph in fp32); for QDQ, the CPU provider on *the same QDQ model*, which
  separates the HTP's arithmetic from the quantization error itself.

Latency is the median of the HTP session's runs **under x86 emulation**
(``libQnnHtp.so`` simulating the Hexagon tensor processor): it says how long the
emulator takes here, nothing about a device.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from statistics import median

from minic.compare import Errors, as_tuple, errors
from bridges.qnn import tolerance
from bridges.qnn.prepare import QnnConfig, calibration_feeds

EVAL_SEED = 1000            # accuracy inputs: not the calibration draws


@dataclass
class AccuracyRow:
    model: str
    size: str
    mode: str
    vs_torch: Errors
    vs_cpu: Errors
    bound_torch: float
    bound_cpu: float
    inputs: int
    htp_nodes: int
    cpu_nodes: int
    emulated_ms: float
    prepare_s: float

    @property
    def ok(self) -> bool:
        return self.vs_torch.within(self.bound_torch) and self.vs_cpu.within(self.bound_cpu)


def measure(name: str, size: str, config: QnnConfig, count: int = 4, repeats: int = 3,
            seed: int = 0) -> AccuracyRow:
    """One row: zoo model ``name`` at ``size`` through the HTP in ``config``'s mode."""
    from minic.api import load
    from bridges.onnx.backend import model_input_names, to_onnx
    import torch

    from bridges.onnx.compare import ort_session
    from bridges.qnn.prepare import prepare
    from bridges.qnn.provider import CPU_NAME, EP_NAME, session

    source = load(name, size=size, seed=seed)
    model = to_onnx(source)
    names = tuple(model_input_names(source, model))
    examples = tuple(source.example_inputs)
    t0 = time.perf_counter()
    prepared = prepare(model, names, examples, config, calibrate_on=examples)
    htp = session(prepared.model, fallback=config.fallback, io_quant=config.io_quant)
    prepare_s = time.perf_counter() - t0
    cpu = ort_session(prepared.model if config.family == "qdq" else model)
    used = {i.name for i in htp.session.get_inputs()}
    feeds = calibration_feeds(names, examples, count - 1, EVAL_SEED)
    worst_torch = worst_cpu = Errors(0.0, 0.0)
    for feed in feeds:
        with torch.no_grad():
            reference = as_tuple(source.module(*(torch.from_numpy(feed[n]) for n in names)))
        feed = {n: x for n, x in feed.items() if n in used}
        got = tuple(htp.run(feed))
        worst_torch = _worse(worst_torch, errors(got, tuple(r.numpy() for r in reference)))
        worst_cpu = _worse(worst_cpu, errors(got, tuple(cpu.run(None, feed))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        htp.run({n: x for n, x in feeds[0].items() if n in used})
        times.append((time.perf_counter() - start) * 1e3)
    act = config.types[0]
    return AccuracyRow(name, size, config.label(), worst_torch, worst_cpu,
                       tolerance.bound(config.family, act),
                       tolerance.bound(config.family, act, against="cpu-qdq"),
                       len(feeds), len(htp.nodes_on(EP_NAME)), len(htp.nodes_on(CPU_NAME)),
                       median(times), prepare_s)


def _worse(a: Errors, b: Errors) -> Errors:
    return Errors(max(a.abs, b.abs), max(a.rel, b.rel))


def markdown(rows: list[AccuracyRow]) -> str:
    lines = ["| model | size | mode | vs PyTorch abs / rel | vs ORT CPU abs / rel | bound (rel) "
             "| within | nodes HTP / CPU | emulated ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.model} | {r.size} | {r.mode} | {r.vs_torch.abs:.2e} / {r.vs_torch.rel:.2e} "
                     f"| {r.vs_cpu.abs:.2e} / {r.vs_cpu.rel:.2e} | {r.bound_torch:g} / {r.bound_cpu:g} "
                     f"| {'yes' if r.ok else 'NO'} | {r.htp_nodes} / {r.cpu_nodes} | {r.emulated_ms:.1f} |")
    return "\n".join(lines)
