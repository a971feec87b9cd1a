"""The QNN execution provider as a plugin of ONNX Runtime, and sessions on it.

``onnxruntime-qnn`` ships the QNN EP as a *plugin* library: it is registered
with ``ort.register_execution_provider_library`` and attached to a session with
``SessionOptions.add_provider_for_devices`` (the HTP backend library and the
SoC model as options).  The classic ``providers=[("QNNExecutionProvider", {...})]``
does not reach the plugin: ORT warns (or, once the plugin is registered, says
nothing) and runs every node on its CPU provider.  Such a session is refused
here: ``require_qnn`` checks ORT's own record of which provider got each node.

HTP here is the x86-64 *emulation* in ``libQnnHtp.so``: results are the HTP's
arithmetic, timings are not a device's.

The EP explains its choices only in ORT's verbose log (``LogNodeSupport``:
"Validation FAILED ... REASON : ...").  ORT's logger writes to the process's
stderr, so ``session`` captures that file descriptor while the session is
built (and stdout, where the emulator prints a banner) and hands the text back.
"""
from __future__ import annotations

import contextlib
import os
from collections import Counter
import sys
import tempfile
from pathlib import Path
from dataclasses import dataclass
from typing import Iterator

import onnx

from minic.errors import UnsupportedError, UserError

EP_NAME = "QNNExecutionProvider"
CPU_NAME = "CPUExecutionProvider"
SOC_MODEL = "60"        # Snapdragon 8 Gen 3's HTP (v75); without it the emulator ran out of memory
ASSIGNMENT_KEY = "session.record_ep_graph_assignment_info"
FALLBACK_KEY = "session.disable_cpu_ep_fallback"


class SilentCpuError(UserError):
    """A session meant for QNN has no node on the QNN provider."""


class FallbackDisabledError(UnsupportedError):
    """With CPU fallback disabled, some nodes cannot be placed on QNN."""


_registered = False


def register() -> None:
    """Register the QNN plugin library with ONNX Runtime (once per process)."""
    global _registered
    if _registered:
        return
    import onnxruntime as ort
    import onnxruntime_qnn

    try:
        ort.register_execution_provider_library(EP_NAME, onnxruntime_qnn.get_library_path())
    except Exception as e:  # ORT raises a bare Fail for "already registered"
        if "already registered" not in str(e):
            raise
    _registered = True


def devices() -> list:
    """The ``OrtEpDevice`` entries the plugin offers (the HTP)."""
    import onnxruntime as ort

    register()
    found = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if not found:
        raise UnsupportedError("the QNN plugin is registered but offers no device")
    return found


def htp_options(io_quant: str = "htp") -> dict[str, str]:
    """Provider options: the HTP backend, the SoC, fp32 run as fp16, where graph-I/O
    (de)quantization runs ("htp", or "cpu" as QNN's own default)."""
    import onnxruntime_qnn

    if io_quant not in ("htp", "cpu"):
        raise UserError(f"io_quant must be htp or cpu, not '{io_quant}'")
    return {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), "soc_model": SOC_MODEL,
            "enable_htp_fp16_precision": "1",
            "offload_graph_io_quantization": "1" if io_quant == "cpu" else "0"}


@dataclass
class QnnSession:
    """A session on QNN, with where ORT put each node and the EP's verbose log."""

    session: object
    placed: dict[str, str]                  # node name -> provider name
    op_types: dict[str, str]                # node name -> op type (as ORT saw it)
    log: str = ""
    partitions: int = 0                     # QNN subgraphs (each CPU fallback between them splits one)

    def nodes_on(self, provider: str) -> list[str]:
        return [n for n, p in self.placed.items() if p == provider]

    def run(self, feed: dict):
        return self.session.run(None, feed)


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Capture what native code writes to fd 1 and 2 (ORT's log, the HTP
    emulator's banner) into the yielded list, as one text."""
    box: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield box
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            box.append(sink.read().decode("utf-8", "replace"))


def assignment(session) -> tuple[dict[str, str], dict[str, str]]:
    """(node -> provider, node -> op type) from ORT's graph-assignment record."""
    placed, ops = {}, {}
    for subgraph in session.get_provider_graph_assignment_info():
        for node in subgraph.get_nodes():
            placed[node.name] = subgraph.ep_name
            ops[node.name] = node.op_type
    return placed, ops


def require_qnn(session) -> dict[str, str]:
    """Refuse a session that silently runs on the CPU: it must hold QNN nodes.

    Works on any ``InferenceSession`` built with the assignment record on
    (``ASSIGNMENT_KEY``); returns node -> provider.
    """
    try:
        placed, ops = assignment(session)
    except Exception as e:   # the record was not enabled on this session
        raise UserError(f"cannot tell where the nodes run: build the session with "
                        f"'{ASSIGNMENT_KEY}' = '1' ({e})") from None
    if not placed:
        return placed                   # ORT folded the whole graph: nothing runs anywhere
    if EP_NAME in session.get_providers() and EP_NAME not in set(placed.values()):
        counts = Counter(ops.values())
        raise UnsupportedError(f"the QNN EP took none of the model's {len(placed)} node(s) ("
                               + ", ".join(f"{op} x{k}" for op, k in counts.most_common())
                               + "); `python -m minic qnn placement MODEL` says why")
    if EP_NAME not in set(placed.values()):
        raise SilentCpuError(
            f"no node of this session runs on {EP_NAME} (providers: {', '.join(session.get_providers())}): "
            "it silently runs on the CPU; the QNN plugin is attached with "
            "register_execution_provider_library + add_provider_for_devices, not providers=[...]")
    return placed


def session(model: onnx.ModelProto | Path, *, fallback: bool = True, io_quant: str = "htp",
            verbose_log: bool = False, extra_config: dict[str, str] | None = None,
            require: bool = True) -> QnnSession:
    """A session on the HTP (emulated) through the plugin; CPU fallback on or off.

    ``model`` is a ModelProto or a file (an EPContext model must be read from its
    file: its context binary is found beside it).  ``require``: refuse a session
    with no node on QNN (the placement report asks for it anyway, to say why).

    With fallback off ORT refuses a model that has a node QNN cannot take; that
    becomes ``FallbackDisabledError`` naming the blocking nodes (found with a
    second, fallback-on session).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry(ASSIGNMENT_KEY, "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not fallback:
        options.add_session_config_entry(FALLBACK_KEY, "1")
    for key, value in (extra_config or {}).items():
        options.add_session_config_entry(key, value)
    if verbose_log:
        options.log_severity_level = 0
    options.add_provider_for_devices(devices(), htp_options(io_quant))
    # ORT's log (the EP's warnings, its verbose reasons) is captured, not shown;
    # when the session fails for another reason than fallback, its tail is kept.
    with captured_output() as log:
        try:
            sess = ort.InferenceSession(str(model) if isinstance(model, Path) else
                                        model.SerializeToString(), options)
        except Exception as e:
            failure = e
        else:
            failure = None
    if failure is not None:
        if not fallback and "fallback to CPU EP has been explicitly disabled" in str(failure):
            # Asked again with fallback on (and no extra config: no context file written).
            blocked = session(model, fallback=True, io_quant=io_quant, require=False)
            names = [f"{n} ({blocked.op_types[n]})" for n in blocked.nodes_on(CPU_NAME)]
            raise FallbackDisabledError(
                f"CPU fallback is disabled and {len(names)} node(s) cannot run on the HTP: "
                + ", ".join(names)) from None
        errors = [line for line in log[0].splitlines() if "[E:" in line][-3:]
        raise UnsupportedError(f"QNN could not build the session: {str(failure).strip().splitlines()[0]}"
                               + (f" (log: {' | '.join(errors)})" if errors else "")) from None
    placed, ops = assignment(sess)
    if require:
        require_qnn(sess)
    partitions = sum(g.ep_name == EP_NAME for g in sess.get_provider_graph_assignment_info())
    return QnnSession(sess, placed, ops, log[0] if verbose_log else "", partitions)
