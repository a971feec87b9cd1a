"""Saved models (minic/runtime/saved.py): a shared library + weights + manifest that
runs in a process without torch or LLVM and gives the in-process model's answers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import minic
from minic.errors import DataError, UserError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cli_helpers import cli  # noqa: E402

FRESH = textwrap.dedent("""
    import sys, numpy as np
    import minic
    model = minic.load_compiled(sys.argv[1])
    inputs = np.load(sys.argv[2])
    out = model(*(inputs[f"arr_{i}"] for i in range(len(inputs.files))))
    heavy = sorted(m for m in ("torch", "llvmlite", "sympy", "onnx", "lark") if m in sys.modules)
    np.savez(sys.argv[3], *(out if isinstance(out, tuple) else (out,)))
    print("heavy:", ",".join(heavy))
""")


def run_fresh(folder: Path, inputs: tuple, tmp_path: Path) -> tuple[list[np.ndarray], str]:
    np.savez(tmp_path / "in.npz", *inputs)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    argv = [sys.executable, "-c", FRESH, str(folder), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(tmp_path / "out.npz") as out:
        return [out[f"arr_{i}"] for i in range(len(out.files))], done.stdout


@pytest.mark.parametrize("name", ["mlp", "cnn", "llama-tiny"])
def test_saved_model_runs_without_torch_or_llvm_and_matches(name, tmp_path):
    source = minic.load(name, size="small")
    compiled = minic.compile(source)
    minic.save(compiled, tmp_path / "saved")
    want = compiled(*source.example_inputs)
    got, stdout = run_fresh(tmp_path / "saved", source.example_inputs, tmp_path)
    assert stdout.strip() == "heavy:", stdout                 # none of them imported
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)                  # the same machine code: the same bits


def test_symbolic_dims_and_bad_inputs(tmp_path):
    source = minic.load("llama-tiny", size="small")
    compiled = minic.compile(source)
    saved = minic.load_compiled(minic.save(compiled, tmp_path / "llama"))
    (ids,) = source.example_inputs
    short = np.ascontiguousarray(ids[:1, :5])                # another B and T than the example's
    np.testing.assert_array_equal(saved(short), compiled(short))
    np.testing.assert_array_equal(saved(input_ids=ids), compiled(ids))
    with pytest.raises(UserError, match=r"input 'input_ids' must be int64\[B, T\], got int32"):
        saved(ids.astype(np.int32))
    with pytest.raises(UserError, match="takes 1 inputs, got 2"):
        saved(ids, ids)
    bad = ids.copy()
    bad[0, 0] = 10_000
    with pytest.raises(DataError, match="index 10000 is out of range"):
        saved(bad)


def edit_manifest(folder: Path, **changes) -> None:
    m = json.loads((folder / "manifest.json").read_text())
    m.update(changes)
    (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("changes,words", [
    ({"minic": "0.0.1"}, "saved by minic 0.0.1; this is minic"),
    ({"machine": "riscv64"}, "built for riscv64"),
    ({"cpu_features": ["avx2", "no-such-feature"]}, "built for a CPU with no-such-feature"),
    ({"format": 99}, "saved in format 99"),
])
def test_refuses_another_version_or_cpu(tmp_path, changes, words):
    source = minic.load("mlp", size="small")
    folder = minic.save(minic.compile(source), tmp_path / "mlp")
    edit_manifest(folder, **changes)
    with pytest.raises(UserError, match=words) as e:
        minic.load_compiled(folder)
    assert "\n" not in str(e.value)


def test_save_replaces_a_save_but_not_other_files(tmp_path):
    compiled = minic.compile("mlp", size="small")
    minic.save(compiled, tmp_path / "m")
    minic.save(compiled, tmp_path / "m")                        # over an older save: fine
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["manifest.json", "model.so", "weights.bin"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not a saved minic model; refusing"):
        minic.save(compiled, tmp_path / "docs")
    assert (tmp_path / "docs" / "notes.txt").read_text() == "mine"
    with pytest.raises(UserError, match="no manifest.json"):
        minic.load_compiled(tmp_path / "docs")


def test_cli_compile_host_writes_a_loadable_folder(capsys, tmp_path):
    code, out, err = cli(capsys, "compile", "mlp", "--size", "small", "--target", "host", "-o", str(tmp_path / "m"))
    assert code == 0, err
    assert "model.so" in out and "manifest.json" in out
    saved = minic.load_compiled(tmp_path / "m")
    with np.load(tmp_path / "m" / "example_inputs.npz") as inputs:
        got = saved(**inputs)
        want = minic.compile("mlp", size="small")(*(inputs[k] for k in inputs.files))
    np.testing.assert_array_equal(got, want)


def test_cpu_flags_are_spelt_as_llvm_spells_features():
    # A model compiled here may hold AVX512-BF16 or VNNI instructions (precision="bf16"): the
    # manifest must name them, and the kernel spells them avx512_bf16, LLVM avx512bf16.
    import llvmlite.binding as llvm
    from minic.runtime.saved_library import cpu_flags
    llvm_names = {f for f, on in llvm.get_host_cpu_features().items() if on}
    flags = cpu_flags()
    assert not any(f.startswith("avx512_") for f in flags)
    assert {f for f in flags if f.startswith("avx512")} <= llvm_names
