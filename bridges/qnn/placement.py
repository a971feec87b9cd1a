"""Where every node runs (HTP or CPU) and, for the CPU ones, why.

Three sources, all the provider's own:

* ORT's graph-assignment record (``session.record_ep_graph_assignment_info``):
  node -> provider after partitioning;
* the QNN EP's verbose log: for each node unit "Validation FAILED ... REASON :
  ..." (no builder for the op type, a graph-boundary Q/DQ it is told not to
  take, or "Failed to add node" when the HTP backend rejects the op), and the
  backend's own ``backendValidateOpConfig() failed for node `X` of type `T`
  with error code N``;
* a second session with CPU fallback disabled: ORT refuses it exactly when
  some node is left on the CPU, and the nodes named are those that block full
  offload.

The assignment record also gives the QNN partitions (one per stretch of the
graph between CPU nodes); ORT's profiler (``enable_profiling``) shows the same
thing per run — one ``QNNExecutionProvider_..._kernel_time`` event per partition
and one per CPU node — but no reasons, so it is not read here.

Nodes of the graph that are in no provider's list were folded away by ORT's
graph optimizations before partitioning (constant subgraphs); nodes in a
provider's list that are not in the graph were added by ORT (the layout
transform's Transposes into NHWC for the HTP).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import onnx

from bridges.qnn.provider import CPU_NAME, EP_NAME, FallbackDisabledError

# QNN error codes met here (QnnOpPackage.h: QNN_MIN_ERROR_OP_PACKAGE = 3000).
QNN_ERRORS = {3110: "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE (the HTP op package rejects "
                    "this op for these data types/shapes)"}

# "... in OrtNodeUnit (Erf) :" for a node (with its Q/DQ), "... in GeluFusion (Erf) :" for a fused group.
_UNIT = re.compile(r"Validation (PASSED|FAILED) for \d+ nodes in \w+ \((\w+)\) :\n"
                   r"((?:\s*Operator type: .*\n)+)(?:\s*REASON : (.*)\n)?")
_NODE = re.compile(r"Operator type: (\S+) Node name: (.*?) Node index: \d+")
_LONE_QDQ = "QNN EP does not support a single Quantize/Dequantize node in a partition."
_BACKEND = re.compile(r"backendValidateOpConfig\(\) failed for node `(.*?)` of type `(\w+)` "
                      r"with error code (\d+)")


@dataclass
class NodePlacement:
    name: str
    op_type: str
    where: str                  # "HTP", "CPU", "folded" (or fused away by ORT), "added" (created by ORT)
    reason: str = ""


@dataclass
class PlacementReport:
    title: str
    nodes: list[NodePlacement]
    rewrites: dict[str, int] = field(default_factory=dict)
    blocking: list[str] | None = None       # with fallback disabled; None: it offloads fully
    refusal: str = ""                       # ORT's words when fallback is disabled
    cpu_with_fallback_off: list[str] = field(default_factory=list)   # what ORT still lets the CPU run
    partitions: int = 0                     # QNN subgraphs: one per stretch between CPU nodes

    def fallback_off(self) -> str:
        """What a session with CPU fallback disabled does: refused, or builds (and what stays on CPU)."""
        if self.blocking is not None:
            return "refused"
        return f"builds, {len(self.cpu_with_fallback_off)} CPU" if self.cpu_with_fallback_off else "builds, all HTP"

    def on(self, where: str) -> list[NodePlacement]:
        return [n for n in self.nodes if n.where == where]

    def by_op(self) -> dict[str, Counter]:
        table: dict[str, Counter] = {}
        for n in self.nodes:
            table.setdefault(n.op_type, Counter())[n.where] += 1
        return table

    def missing(self) -> list[tuple[str, int, str]]:
        """(op type, CPU nodes, reason) for every op type and reason that leaves nodes on the CPU."""
        rows = Counter((n.op_type, n.reason) for n in self.on("CPU"))
        return sorted(((op, k, why) for (op, why), k in rows.items()), key=lambda r: (-r[1], r[0]))

    def text(self, per_node: bool = True) -> str:
        counts = Counter(n.where for n in self.nodes)
        lines = [f"== {self.title}",
                 f"nodes: {counts['HTP']} HTP, {counts['CPU']} CPU, {counts['folded']} folded or fused "
                 f"away by ORT, {counts['added']} created by ORT (fusions, layout Transposes) on the HTP; "
                 f"{self.partitions} QNN partition(s)"]
        if self.rewrites:
            lines.append("rewrites: " + ", ".join(f"{k} x{v}" for k, v in self.rewrites.items()))
        if per_node:
            lines.append("")
            lines += [f"  {n.where:6s} {n.op_type:22s} {n.name}" + (f"  -- {n.reason}" if n.reason else "")
                      for n in self.nodes]
        lines += ["", "per op type:              HTP  CPU folded created"]
        for op, c in sorted(self.by_op().items()):
            lines.append(f"  {op:22s} {c['HTP']:5d} {c['CPU']:4d} {c['folded']:6d} {c['added']:7d}")
        missing = self.missing()
        lines.append("")
        if missing:
            lines.append("missing from the NPU coverage (op type: CPU nodes, why):")
            lines += [f"  {op}: {k} node(s) -- {why}" for op, k, why in missing]
        else:
            lines.append("missing from the NPU coverage: nothing (every node runs on the HTP)")
        if self.blocking is None and not self.cpu_with_fallback_off:
            lines.append("with CPU fallback disabled: the session builds (full offload)")
        elif self.blocking is None:
            lines.append("with CPU fallback disabled: the session builds, and ORT still runs "
                         + ", ".join(self.cpu_with_fallback_off) + " on the CPU (graph I/O QNN is told to leave)")
        else:
            lines.append(f"with CPU fallback disabled: ORT refuses the model; blocking nodes: "
                         + ", ".join(self.blocking))
        return "\n".join(lines)


def parse_log(log: str) -> dict[str, str]:
    """node name -> why the QNN EP did not take it (last word of the log wins)."""
    backend: dict[str, str] = {}
    for qnn_name, qnn_type, code in _BACKEND.findall(log):
        why = QNN_ERRORS.get(int(code), f"error {code}")
        backend[qnn_name] = f"HTP backend rejected QNN op {qnn_type}: {why}"
    reasons: dict[str, str] = {}
    for status, unit, block, reason in _UNIT.findall(log):
        members = _NODE.findall(block)
        if status == "PASSED":
            for _op, name in members:
                reasons.pop(name, None)
            continue
        main = next((name for op, name in members if op == unit), members[0][1])
        why = (reason or "").strip()
        detail = backend.get(main) or next((v for k, v in backend.items()
                                            if re.fullmatch(re.escape(main) + r"_\d+", k)), "")
        if detail and why.startswith("Failed to add node"):
            why = f"{why} {detail}"
        why = _tidy(why)
        for _op, name in members:
            reasons[name] = why if name == main else f"in the {unit} node unit of {main}: {why}"
    return reasons


def _partition_reason(op_type: str, log: str, provider: str) -> str:
    """Why a node that passed QNN's validation still went to ``provider``."""
    if op_type in ("QuantizeLinear", "DequantizeLinear") and _LONE_QDQ in log:
        return f"{_LONE_QDQ.rstrip('.')} (its neighbours run on the CPU)"
    return f"passed QNN validation; ORT's partitioner gave it to {provider}"


def _tidy(reason: str) -> str:
    """QNN's "X are not supported by QNN EP.X node `n` will not be ..." -> its first sentence."""
    first = reason.split(".", 1)[0] if "are not supported by QNN EP" in reason else reason
    return first.replace("`", "")


def report(model: onnx.ModelProto, title: str, rewrites: dict[str, int] | None = None,
           io_quant: str = "htp") -> PlacementReport:
    """The placement of every node of ``model`` (the graph the session gets)."""
    from bridges.qnn.provider import session

    qnn = session(model, fallback=True, io_quant=io_quant, verbose_log=True, require=False)
    reasons = parse_log(qnn.log)
    nodes = []
    graph_names = set()
    for node in model.graph.node:
        graph_names.add(node.name)
        provider = qnn.placed.get(node.name)
        if provider is None:
            nodes.append(NodePlacement(node.name, node.op_type, "folded"))
        elif provider == EP_NAME:
            nodes.append(NodePlacement(node.name, node.op_type, "HTP"))
        else:
            why = reasons.get(node.name) or _partition_reason(node.op_type, qnn.log, provider)
            nodes.append(NodePlacement(node.name, node.op_type, "CPU", why))
    for name, provider in qnn.placed.items():
        if name not in graph_names:
            where = "added" if provider == EP_NAME else "CPU"
            nodes.append(NodePlacement(name, qnn.op_types[name], where,
                                       "" if where == "added" else reasons.get(name, "added by ORT")))
    out = PlacementReport(title, nodes, dict(rewrites or {}), partitions=qnn.partitions)
    try:
        strict = session(model, fallback=False, io_quant=io_quant, require=False)
        out.cpu_with_fallback_off = [f"{n} ({strict.op_types[n]})" for n in strict.nodes_on(CPU_NAME)]
    except FallbackDisabledError as e:
        out.blocking = [f"{n.name} ({n.op_type})" for n in out.on("CPU")]
        out.refusal = str(e)
    return out


@dataclass
class CoverageRow:
    """One line of the zoo's placement summary."""

    model: str
    mode: str
    rewrites: dict[str, int]
    report: PlacementReport

    def cells(self) -> list[str]:
        r = self.report
        counts = Counter(n.where for n in r.nodes)
        missing = "; ".join(f"{op} x{k}: {why}" for op, k, why in r.missing()) or "none"
        rewrites = ", ".join(f"{k} x{v}" for k, v in self.rewrites.items()) or "none"
        return [self.model, self.mode, rewrites, str(counts["HTP"]), str(counts["CPU"]),
                str(counts["folded"]), str(counts["added"]), r.fallback_off(), missing]


def coverage_row(model: str, mode: str, prepared, io_quant: str = "htp") -> CoverageRow:
    """The placement summary of one prepared model (``prepare.Prepared``)."""
    return CoverageRow(model, mode, dict(prepared.rewrites),
                       report(prepared.model, f"{model}, {mode}", prepared.rewrites, io_quant))


def markdown(rows: list[CoverageRow]) -> str:
    head = ["model", "mode", "rewrites", "HTP", "CPU", "folded by ORT", "created by ORT",
            "CPU fallback off", "missing from the NPU coverage"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)
