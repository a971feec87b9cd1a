"""Step 1 of the pipeline: a torch model -> a checked ONNX ``ModelProto``.

We use the TorchScript-based exporter (``dynamo=False``): it is the one whose
output the seed lab studies, with the Shape -> Gather -> Unsqueeze -> Concat
chains that the homemade passes fold.  (The newer ``dynamo=True`` exporter runs
its own optimizer first and leaves little for a learner to do.)

Dynamic axes: each input gets its named axes (``B``, ``T``) from the zoo's
``info(name).dynamic_axes``; every output's leading axes get the same names so
that ONNX Runtime accepts any batch and sequence length at run time.
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from minic.errors import UnsupportedError, UserError

DEFAULT_OPSET = 17
# torch 2.13's TorchScript exporter writes opsets 7..20; newer on request, within that.
SUPPORTED_OPSETS = range(9, 21)


@dataclass
class Exported:
    """An exported model with what is needed to feed it."""

    model: onnx.ModelProto
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: tuple[dict[int, str], ...]     # per input
    example_inputs: tuple[np.ndarray, ...]


def _raised_in_torch_onnx(e: BaseException) -> bool:
    """Whether the innermost frame of ``e`` is torch.onnx's own code (a conversion it refuses)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "/torch/onnx/" in Path(tb.tb_frame.f_code.co_filename).as_posix()


def export_module(module, example_inputs: tuple, *, input_names: tuple[str, ...],
                  dynamic_axes: tuple[dict[int, str], ...], opset: int = DEFAULT_OPSET,
                  output_names: tuple[str, ...] = ("output",)) -> Exported:
    """Export ``module`` traced on ``example_inputs`` and run the full ONNX checker."""
    import torch

    if opset not in SUPPORTED_OPSETS:
        raise UnsupportedError(f"opset {opset} is not supported by the TorchScript exporter "
                               f"(use {SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1})")
    axes: dict[str, dict[int, str]] = dict(zip(input_names, dynamic_axes))
    # The outputs share the leading named axes of the first input (batch, then seq).
    leading = dynamic_axes[0] if dynamic_axes else {}
    for name in output_names:
        axes[name] = dict(leading)
    inputs = tuple(torch.as_tensor(x) for x in example_inputs)
    buffer = io.BytesIO()
    module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # "legacy exporter": chosen on purpose
        try:
            torch.onnx.export(module, inputs, buffer, opset_version=opset, dynamo=False,
                              input_names=list(input_names), output_names=list(output_names),
                              dynamic_axes=axes, do_constant_folding=True)
        except (torch.onnx.errors.OnnxExporterError, AssertionError) as e:   # e.g. aten::sinh at opset 17
            # The exporter refuses some conversions with a bare AssertionError (SDPA with
            # enable_gqa=True); one raised by the model's own code stays what it is.
            if not isinstance(e, torch.onnx.errors.OnnxExporterError) and not _raised_in_torch_onnx(e):
                raise
            raise UnsupportedError(f"torch.onnx.export: {str(e).strip().splitlines()[0]}") from None
    model = onnx.load_from_string(buffer.getvalue())
    check(model)
    return Exported(model, tuple(input_names), tuple(output_names), tuple(dynamic_axes),
                    tuple(x.numpy() for x in inputs))


def export_zoo(name: str, size: str = "full", *, opset: int = DEFAULT_OPSET,
               seed: int = 0) -> tuple[Exported, object]:
    """Export zoo model ``name``; also return the torch module (the reference)."""
    import minic.models as zoo

    info = zoo.info(name)
    module, inputs = zoo.get(name, size=size, seed=seed)
    exported = export_module(module, inputs, input_names=info.input_names,
                             dynamic_axes=info.dynamic_axes, opset=opset,
                             output_names=("logits",) if name == "llama-tiny" else ("output",))
    return exported, module


def check(model: onnx.ModelProto) -> None:
    """``onnx.checker.check_model`` with ``full_check`` (types and shapes too)."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0]
        raise UserError(f"ONNX checker rejected the model: {first}") from None


def load(path: str | Path) -> onnx.ModelProto:
    """Read an ``.onnx`` file, with a one-line error for a missing or corrupt file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such ONNX file")
    try:
        return onnx.load(str(path))
    except Exception as err:   # protobuf raises DecodeError, onnx raises others
        raise UserError(f"{path}: not a readable ONNX model ({type(err).__name__})") from None


def save(model: onnx.ModelProto, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
