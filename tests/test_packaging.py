"""pyproject.toml as a user meets it: the `minic` command, the entry points torch and
minic read, the bridges as extras (a missing one named in one line), py.typed."""
from __future__ import annotations

import importlib
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from minic import backends
from minic.errors import MissingBridgeError

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def resolve(value: str):
    module, _, attr = value.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_entry_point_and_script_resolves():
    groups = {"scripts": PROJECT["project"]["scripts"], **PROJECT["project"]["entry-points"]}
    assert groups["scripts"] == {"minic": "minic.cli:main"}
    assert groups["torch_dynamo_backends"] == {"minic": "minic.dynamo:backend"}
    for group, entries in groups.items():
        if group in ("minic.backends", "minic.cli"):
            continue                    # bridges: they import their stacks lazily; resolved below by name only
        for value in entries.values():
            assert callable(resolve(value)), value


def test_each_bridge_has_its_extra_and_bridges_has_them_all():
    extras = PROJECT["project"]["optional-dependencies"]
    named = {backends.extra_of(v) for g in ("minic.backends", "minic.cli")
             for v in PROJECT["project"]["entry-points"][g].values()}
    assert named == {"onnx", "tvm", "mlir", "iree", "qnn", "openvino", "tinygrad"}
    assert named <= set(extras)
    assert extras["bridges"] == [f"minic[{','.join(sorted(named, key=list(extras).index))}]"]
    assert extras["all"] == ["minic[bridges,test]"]
    core = " ".join(PROJECT["project"]["dependencies"])
    for stack in ("tvm", "iree", "openvino", "tinygrad", "onnxruntime", "xtc-mlir"):
        assert stack not in core                      # a core install pulls no bridge's stack


def test_py_typed_ships():
    assert (ROOT / "minic" / "py.typed").is_file()
    assert "py.typed" in PROJECT["tool"]["setuptools"]["package-data"]["minic"]


@pytest.fixture
def no_tvm(monkeypatch):
    """TVM as if not installed: importing it fails as a missing module does."""
    for name in [m for m in sys.modules if m == "tvm" or m.startswith(("tvm.", "bridges.tvm"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tvm", None)
    monkeypatch.setattr(backends, "_BACKENDS", {k: v for k, v in backends._BACKENDS.items() if k != "tvm"})


def test_a_missing_bridge_names_its_extra(no_tvm, capsys):
    with pytest.raises(MissingBridgeError, match=r"backend 'tvm' needs the module 'tvm.*pip install 'minic\[tvm\]'"):
        backends.get("tvm")(__import__("minic").load("mlp", size="small"))
    code, _, err = cli(capsys, "run", "mlp", "--size", "small", "--backend", "tvm", "--repeat", "1")
    assert code == 1 and "pip install 'minic[tvm]'" in err and len(err.strip().splitlines()) == 1


def test_a_missing_module_of_minic_itself_is_not_called_an_extra(monkeypatch):
    monkeypatch.setattr(backends, "_plugins", lambda: {"ghost": EntryPoint("ghost", "bridges.ghost.backend:compile",
                                                                          "minic.backends")})
    with pytest.raises(ModuleNotFoundError, match="bridges.ghost"):
        backends.get("ghost")
