"""The f16 modes of the compiled path, end to end: against the f32 PyTorch
reference on small zoo models, against the interpreter's f16, and the ordering
of errors that f16 accumulation causes on a long reduction."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic import backends
from minic.cli import main
from minic.compare import as_tuple
from minic.verify.precision import judge, precision_table, source
from minic.verify.tolerance import F16
from minic.errors import UserError
from minic.runtime import CompileOptions, compile_graph


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def run(name: str, precision: str, cache, backend: str = "minic"):
    src = source(name)
    options = {"cache_dir": cache} if backend == "minic" else {}
    return as_tuple(backends.get(backend)(src, precision=precision, **options)(*src.example_inputs))


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_f16_storage_matches_the_f32_reference(name, cache):
    src = minic.load(name, size="small")
    reference = as_tuple(backends.get("torch")(src)(*src.example_inputs))
    for precision in ("f16", "f16-acc"):
        outputs = as_tuple(backends.get("minic")(src, precision=precision, cache_dir=cache)(*src.example_inputs))
        assert all(y.dtype == np.float32 for y in outputs)    # callers see f32, as before
        status, errs, _ = judge(outputs, reference, precision)
        assert status == "ok", (precision, errs)
        assert errs.rel > 1e-5                                # f16 really ran: f32 would be ~1e-7


@pytest.mark.parametrize("name", ["mlp", "long-sum", "softmax-wide", "layer-norm-offset"])
def test_interpreter_and_compiled_agree_in_f16(name, cache):
    want, got = run(name, "f16", cache, "interp"), run(name, "f16", cache)
    for w, g in zip(want, got):
        assert np.max(np.abs(g - w)) <= F16 * np.max(np.abs(w))


def test_f16_accumulation_is_worse_on_a_long_reduction(cache):
    src = source("long-sum")
    exact = src.example_inputs[0].astype(np.float64).sum(axis=1)
    rel = {p: np.max(np.abs(run("long-sum", p, cache)[0] - exact)) / np.max(exact) for p in ("f32", "f16", "f16-acc")}
    assert rel["f32"] < rel["f16"] < F16 < rel["f16-acc"], rel


def test_f16_accumulation_overflows_where_f32_accumulation_does_not(cache):
    # layer_norm of 4096 values near 20: the row sum (~82000) is past f16's 65504.
    assert np.isfinite(run("layer-norm-offset", "f16", cache)[0]).all()
    assert not np.isfinite(run("layer-norm-offset", "f16-acc", cache)[0]).any()


def test_precisions_are_separate_cache_entries(cache):
    src = source("long-sum")
    outs = [compile_graph(src.graph, CompileOptions(precision=p, cache_dir=cache))(*src.example_inputs)
            for p in ("f16", "f16-acc", "f16")]
    assert not np.allclose(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_table_and_command(cache, capsys, tmp_path):
    cells = precision_table(["long-sum"], ["f32", "f16-acc"], ["minic", "interp"])
    assert [(c.backend, c.precision, c.status) for c in cells] == [
        ("minic", "f32", "ok"), ("minic", "f16-acc", "drift"), ("interp", "f32", "ok")]
    assert main(["verify", "--precision", "f16,f16-acc", "softmax-large-logits", "--json", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "| model | backend | f16 | f16-acc |" in out and "| softmax-large-logits | minic | drift:" in out


def test_bad_precisions_are_user_errors(capsys):
    src = source("long-sum")
    with pytest.raises(UserError, match="unknown precision 'f64'"):
        compile_graph(src.graph, CompileOptions(precision="f64", use_cache=False))
    with pytest.raises(UserError, match="interp: precision must be f32, f16 or bf16"):
        backends.get("interp")(src, precision="f16-acc")
    assert main(["verify", "--precision", "f16", "--backends", "torch", "long-sum"]) == 1
    assert "has no precision option" in capsys.readouterr().err
