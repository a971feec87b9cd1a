"""The transformers corpus: every architecture, called with its defaults, matches
PyTorch eager on the interpreter and on the compiled path, at two sequence lengths
(one export, one compile)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from minic.compare import errors
from minic.verify.tolerance import tolerance
from minic.frontend.torch import from_torch
from minic.ir.interpret import interpret
from minic.models import corpus
from minic.runtime import CompileOptions, compile_graph


def test_corpus_is_broad():
    """Text, vision, audio behind a 1-D convolution front end, time series patched by unfold,
    and mixture-of-experts decoders."""
    kinds = [m.kind for m in corpus.MODELS]
    assert len(kinds) >= 19 and {"encoder", "decoder", "vision", "audio", "time series"} <= set(kinds)
    assert {"mixtral", "qwen2-moe", "wav2vec2", "whisper-encoder", "patchtst"} <= set(corpus.names())


@pytest.mark.parametrize("name", corpus.names())
def test_corpus_model(name, tmp_path):
    info = corpus.info(name)
    module, example = corpus.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = from_torch(module, example, info.dynamic_axes, name=name.replace("-", "_"))
    compiled = compile_graph(graph, CompileOptions(cache_dir=tmp_path))
    lengths = (7, corpus.SECOND_T) if 1 in info.dynamic_axes[0] else (7,)
    for t in lengths:
        inputs = corpus.inputs(name, seed=0, seq_len=t)
        with torch.no_grad():
            want = module(*inputs).numpy()
        assert np.abs(want).max() > 100 * tolerance(want.dtype), "an output this small would pass as zeros"
        arrays = [x.numpy() for x in inputs]
        for path, got in (("interp", interpret(graph, arrays)[0]), ("minic", compiled(*arrays))):
            assert got.shape == want.shape, (path, t)
            assert errors(got, want).within(tolerance(want.dtype)), (path, t, errors(got, want))


def test_verify_corpus_runs_the_named_models_only(capsys):
    from minic.cli import main
    assert main(["verify", "--corpus", "transformers", "convnext", "--backends", "interp", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| convnext | ok " in out and "bert" not in out
    assert main(["verify", "--corpus", "transformers", "gpt5", "--backends", "interp"]) != 0
    assert capsys.readouterr().err.strip().startswith("error: unknown corpus model 'gpt5'; available: bert,")
