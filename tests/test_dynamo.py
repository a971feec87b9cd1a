"""``torch.compile(model, backend="minic")`` (minic/dynamo.py): matches eager, leaves
what minic lacks to PyTorch, honours dynamic=True, runs a Hugging Face generate()."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch

from minic import models
from minic.dynamo import backend

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "minic.dynamo"]


@pytest.mark.parametrize("name", ["mlp", "cnn", "llama-tiny"])
def test_zoo_matches_eager(name, caplog):
    caplog.set_level(logging.INFO, logger="minic.dynamo")
    module, inputs = models.get(name, size="small")
    module.eval()
    with torch.no_grad():
        got, want = torch.compile(module, backend=backend)(*inputs), module(*inputs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    messages = compiled_messages(caplog)
    assert any("minic compiled it" in m for m in messages), messages
    assert not any("PyTorch runs it" in m for m in messages), messages      # the whole model ran in minic


class Broken(torch.nn.Module):
    """A graph break (print) and an op minic lacks (lgamma) between two minic regions."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.a(x)) * 2
        print("side effect")                         # Dynamo breaks the graph here
        h = torch.tanh(self.b(h)) + 1
        h = torch.lgamma(h.abs() + 1)                # no minic converter: stays in PyTorch
        return torch.sigmoid(self.c(h)) * 3 - 1


def test_graph_break_and_unsupported_op(caplog, capsys):
    caplog.set_level(logging.INFO, logger="minic.dynamo")
    m = Broken().eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        got, want = torch.compile(m, backend=backend)(x), m(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert "side effect" in capsys.readouterr().out
    messages = compiled_messages(caplog)
    graphs = [m for m in messages if m.startswith("graph ")]
    assert len(graphs) == 2, messages                                        # the print split it
    assert "lgamma" in graphs[1].split("left to PyTorch:")[1]
    assert sum("minic compiled it" in m for m in messages) >= 2, messages   # both sides of the break


def test_dynamic_shapes_compile_once(caplog):
    caplog.set_level(logging.INFO, logger="minic.dynamo")
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    c = torch.compile(m, backend=backend, dynamic=True)
    with torch.no_grad():
        for n in (3, 7):
            x = torch.randn(n, 8)
            torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    compiled = [m for m in compiled_messages(caplog) if "minic compiled it" in m]
    assert len(compiled) == 1 and "(symbolic: s" in compiled[0], compiled


def test_outputs_share_minic_memory_and_inputs_are_not_copied():
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval()
    c = torch.compile(m, backend=backend)
    x = torch.randn(2, 8)
    with torch.no_grad():
        y1, y2 = c(x), c(x)
    assert y1.data_ptr() != y2.data_ptr()                                   # fresh outputs per call
    torch.testing.assert_close(y1, y2)


def test_unknown_option_is_refused():
    # torch wraps a backend's error in its own BackendCompilerFailed; the message is minic's
    with pytest.raises(Exception, match=r"backend='minic'\): unknown option\(s\) \['nope'\]"):
        torch.compile(torch.nn.ReLU(), backend=backend, options={"nope": 1})(torch.randn(2))


@pytest.mark.slow
def test_a_transformers_corpus_model():
    """One decoder of the corpus (benchmarks/dynamo_corpus.py runs all 19: each matched eager)."""
    from minic.models import corpus
    module, inputs = corpus.get("gpt2")
    with torch.no_grad():
        got, want = torch.compile(module, backend=backend)(*inputs), module(*inputs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_hugging_face_generate_of_a_tiny_decoder(caplog):
    caplog.set_level(logging.INFO, logger="minic.dynamo")
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 5))
    want = model.generate(ids, max_new_tokens=2, do_sample=False)
    model.forward = torch.compile(model.forward, backend=backend, dynamic=True)
    got = model.generate(ids, max_new_tokens=2, do_sample=False)
    assert got.tolist() == want.tolist()
    assert any("minic compiled it" in m for m in compiled_messages(caplog))


def test_backend_found_by_name_without_importing_minic():
    """torch finds "minic" through the torch_dynamo_backends entry point of the installed
    package (pyproject.toml): the child process never imports minic before torch.compile."""
    declared = 'torch_dynamo_backends' in (ROOT / "pyproject.toml").read_text()
    installed = "minic" in entry_points(group="torch_dynamo_backends").names
    assert declared
    assert installed, ("pyproject.toml declares the torch_dynamo_backends entry point but the installed minic "
                       "does not: reinstall it (pip install -e .)")
    code = textwrap.dedent("""
        import sys, torch
        assert "minic" not in sys.modules
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
        x = torch.randn(3, 4)
        with torch.no_grad():
            torch.testing.assert_close(torch.compile(m, backend="minic")(x), m(x), rtol=1e-4, atol=1e-5)
        assert "minic.dynamo" in sys.modules
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
