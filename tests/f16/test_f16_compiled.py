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
from minic.verify.tolerance import BF16, F16
from minic.errors import UserError
from minic.runtime import CompileOptions, compile_graph


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


@pytest.mark.parametrize("precision, name", [(p, n) for n in ("mlp", "long-sum", "softmax-wide", "layer-norm-offset")
                                             for p in ("f16", "bf16") if (p, n) != ("bf16", "softmax-wide")])
def test_interpreter_and_compiled_agree(precision, name, run):
    want, got = run(name, precision, "interp"), run(name, precision)
    unit = {"f16": F16, "bf16": BF16}[precision]
    for w, g in zip(want, got):
        assert np.max(np.abs(g - w)) <= unit * np.max(np.abs(w))


def test_f16_accumulation_is_worse_on_a_long_reduction(run):
    src = source("long-sum")
    exact = src.example_inputs[0].astype(np.float64).sum(axis=1)
    rel = {p: np.max(np.abs(run("long-sum", p)[0] - exact)) / np.max(exact) for p in ("f32", "f16", "f16-acc")}
    assert rel["f32"] < rel["f16"] < F16 < rel["f16-acc"], rel


def test_f16_accumulation_overflows_where_f32_accumulation_does_not(run):
    # layer_norm of 4096 values near 20: the row sum (~82000) is past f16's 65504.
    assert np.isfinite(run("layer-norm-offset", "f16")[0]).all()
    assert not np.isfinite(run("layer-norm-offset", "f16-acc")[0]).any()


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
    with pytest.raises(UserError, match="interp: precision must be f32, f16, bf16 or int8"):
        backends.get("interp")(src, precision="f16-acc")
    assert main(["verify", "--precision", "f16", "--backends", "torch", "long-sum"]) == 1
    assert "has no precision option" in capsys.readouterr().err
