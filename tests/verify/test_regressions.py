"""Every saved random-graph regression, on the path where it once failed and on
interp against PyTorch (through ``to_torch``).  A regression that shows a
production tool's bug carries ``// xfail: docs/production-bugs.md#...`` and is
expected to fail (strictly: the day the tool is fixed, the test says so)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from minic.verify.fuzz import prepare, run
from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Node, Value
from minic.ir.text import parse_graph
from minic.ir.types import DType, TensorType
from minic.ir.verify import infer_node

FOLDER = Path(__file__).parent / "regressions"


def header(text: str) -> dict[str, str]:
    return dict(re.findall(r"^// ([a-z-]+): (.*)$", text, re.M))


def cases():
    for path in sorted(FOLDER.glob("*.mc")):
        meta = header(path.read_text())
        for backend in (meta["backend"], "interp"):
            marks = ()
            if "xfail" in meta and backend == meta["backend"]:
                marks = pytest.mark.xfail(strict=True, reason=meta["xfail"])
            yield pytest.param(path, backend, marks=marks, id=f"{path.stem}-{backend}")


@pytest.mark.parametrize("path,backend", list(cases()))
def test_regression(path: Path, backend: str):
    text = path.read_text()
    meta = header(text)
    case = prepare(parse_graph(text, path), int(meta["input-seed"]))
    assert case is not None, f"{path.name}: its reference is no longer finite and well-conditioned"
    cell = run(case, backend)
    assert cell.status == "ok", f"{path.name} on {backend}: {cell.status}: {cell.detail}"


def test_every_regression_names_its_backend_and_input_seed():
    for path in FOLDER.glob("*.mc"):
        meta = header(path.read_text())
        assert {"backend", "input-seed", "failure"} <= set(meta), path.name
        assert path.stem.startswith(meta["backend"] + "_")
        if "xfail" in meta:
            anchor = meta["xfail"].split("#")[1]
            doc = (Path(__file__).parents[2] / "docs" / "production-bugs.md").read_text()
            assert f"## {anchor}\n" in doc, f"{path.name}: no section '{anchor}' in docs/production-bugs.md"


def test_gemm_rejects_a_bias_that_would_widen_the_result():
    """Found by random graphs: gemm's inference accepted c = [3, 4] for a [3, 1]
    result, and the reference then returned [3, 4] (ONNX: c broadcasts one way only)."""
    a, b, c = (Value(n, TensorType(s, DType.f32)) for n, s in (("a", (3, 2)), ("b", (2, 1)), ("c", (3, 4))))
    with pytest.raises(UserError, match="does not broadcast"):
        infer_node(Node("gemm", [a, b, c], [], ops.get("gemm").make_attrs()))
    ok = Value("c", TensorType((1,), DType.f32))
    assert infer_node(Node("gemm", [a, b, ok], [], ops.get("gemm").make_attrs()))[0].shape == (3, 1)
