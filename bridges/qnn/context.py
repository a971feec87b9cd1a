"""The context binary: the HTP graph compiled once, saved, and loaded to run.

On a device this is what ships: QNN's ``qnn-context-binary-generator`` turns a
model into a context binary the Hexagon runtime loads without compiling.  The
SDK's tools are not in the wheel; the QNN EP does the same job when asked
(``ep.context_enable=1``): building the session writes an *EPContext* model, an
ONNX file whose one ``EPContext`` node points at the context binary (``.bin``)
beside it (``ep.context_embed_mode=0``).

``compile_to`` writes DIR/{stem}.onnx (the graph the HTP got), the EPContext
model and its .bin, and the example inputs; then it reloads the EPContext model
in a fresh session, runs it, and compares with the run of the session that
compiled it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from minic.compare import Errors, errors


@dataclass
class ContextBinary:
    directory: Path
    prepared: Path                  # the graph given to the HTP
    context_model: Path             # the EPContext model
    binaries: list[Path]            # its context binaries (.bin)
    inputs: Path                    # example inputs (.npz)
    ep_context_nodes: int
    in_memory_vs_reloaded: Errors
    reloaded_placement: dict[str, str]

    def text(self) -> str:
        sizes = ", ".join(f"{b.name} ({b.stat().st_size / 1e6:.2f} MB)" for b in self.binaries)
        same = self.in_memory_vs_reloaded
        return "\n".join([
            f"wrote {self.prepared}", f"wrote {self.context_model} ({self.ep_context_nodes} EPContext node(s))",
            f"wrote {sizes}", f"wrote {self.inputs}",
            f"reloaded {self.context_model.name} in a fresh session: "
            f"{len(self.reloaded_placement)} node(s), all on "
            f"{', '.join(sorted(set(self.reloaded_placement.values())))}",
            f"reloaded vs in-memory run: max |diff| {same.abs:.3g} (rel {same.rel:.3g})"])


def compile_to(model: onnx.ModelProto, feed: dict[str, np.ndarray], directory: Path, stem: str,
               io_quant: str = "htp") -> ContextBinary:
    """Compile ``model`` (already prepared for the HTP) into a context binary in ``directory``."""
    from bridges.qnn.provider import session

    directory.mkdir(parents=True, exist_ok=True)
    prepared = directory / f"{stem}.onnx"
    onnx.save(model, str(prepared))
    context_model = directory / f"{stem}_ctx.onnx"
    context_model.unlink(missing_ok=True)        # the EP refuses to overwrite one
    before = set(directory.glob("*.bin"))
    config = {"ep.context_enable": "1", "ep.context_file_path": str(context_model),
              "ep.context_embed_mode": "0"}
    try:
        compiling = session(prepared, fallback=False, io_quant=io_quant, extra_config=config)
    except Exception:
        # ORT may have written the EPContext model before refusing the session.
        context_model.unlink(missing_ok=True)
        for stray in set(directory.glob("*.bin")) - before:
            stray.unlink()
        raise
    in_memory = compiling.run(feed)
    inputs = directory / f"{stem}_inputs.npz"
    np.savez(inputs, **feed)
    binaries = sorted(set(directory.glob("*.bin")) - before) or sorted(directory.glob(f"{stem}*.bin"))
    reloaded = session(context_model, fallback=False, io_quant=io_quant)
    again = reloaded.run(dict(np.load(inputs)))
    nodes = sum(n.op_type == "EPContext" for n in onnx.load(str(context_model)).graph.node)
    return ContextBinary(directory, prepared, context_model, binaries, inputs, nodes,
                         errors(tuple(again), tuple(in_memory)), reloaded.placed)
