"""Reading an .onnx file: the checks a file on disk needs (there, not empty, a model with a
graph) and its external data, resolved next to it; each failure a one-line UserError."""
from __future__ import annotations

from pathlib import Path

from minic.errors import UserError


def read_onnx_file(path: Path):
    """The ModelProto in ``path``, its external data loaded."""
    import onnx
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise UserError(f"{path}: the file is empty")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds on garbage
        raise UserError(f"{path}: not a valid ONNX file ({type(e).__name__}: {str(e)[:200]})") from None
    if not model.graph.node and not model.graph.output:
        raise UserError(f"{path}: not a valid ONNX file (no graph)")
    _load_external_data(model, path.parent)
    return model


def _load_external_data(model, folder: Path) -> None:
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data
    for t in model.graph.initializer:
        if uses_external_data(t):
            where = {e.key: e.value for e in t.external_data}.get("location", "?")
            if not (folder / where).is_file():
                raise UserError(f"initializer '{t.name}': external data file '{where}' not found next to the model")
    try:
        load_external_data_for_model(model, str(folder))
    except Exception as e:  # noqa: BLE001
        raise UserError(f"external data could not be read: {e}") from None
