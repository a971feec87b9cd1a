"""``python -m minic iree ...``, and IREE in ``verify`` and ``bench``."""
import json
import zipfile

from tests.cli_helpers import cli


def test_emit_stablehlo_leaves_out_the_weights(capsys):
    code, out, _ = cli(capsys, "iree", "mlp", "--emit", "stablehlo")
    assert code == 0
    assert "stablehlo.dot_general" in out and "func.func @main" in out
    assert "{-#" not in out and "weights (dialect_resources) left out" in out


def test_emit_linalg_and_tosa_to_files(capsys, tmp_path):
    for emit, op in (("linalg", "linalg.matmul"), ("tosa", "tosa.matmul")):
        path = tmp_path / f"mlp.{emit}.mlir"
        code, out, _ = cli(capsys, "iree", "mlp", "--emit", emit, "-o", str(path))
        assert code == 0 and f"wrote {path}" in out
        text = path.read_text()
        assert op in text and "dialect_resources" in text          # the weights are in the file


def test_emit_vmfb_and_run(capsys, tmp_path):
    path = tmp_path / "mlp.vmfb"
    code, out, _ = cli(capsys, "iree", "mlp", "--emit", "vmfb", "--via", "linalg", "-o", str(path), "--run")
    assert code == 0, out
    assert "module.fb" in zipfile.ZipFile(path).namelist()          # a .vmfb is a zip around the VM module
    assert "max |iree - torch|" in out and "(ok at 0.0001)" in out


def test_cross_command(capsys, tmp_path):
    code, out, _ = cli(capsys, "iree", "cross", "mlp", "-o", str(tmp_path))
    assert code == 0, out
    assert (tmp_path / "mlp.vmfb").is_file() and list((tmp_path / "executables").glob("*.so"))
    assert "ELF AArch64, embedded in the .vmfb" in out and "ok: AArch64 code with NEON" in out


def test_user_errors(capsys, tmp_path):
    code, _, err = cli(capsys, "iree", "mlp", "--emit", "vmfb")
    assert code == 1 and "error: --emit vmfb writes a binary: give -o FILE" in err
    code, _, err = cli(capsys, "iree", "cross", "mlp")
    assert code == 1 and "iree cross: give one model and -o DIR" in err
    code, _, err = cli(capsys, "iree", "no-such-model")
    assert code == 1 and "unknown model 'no-such-model'" in err
    code, _, err = cli(capsys, "iree", "mlp", "cnn")
    assert code == 1 and "one model at a time" in err
    code, _, err = cli(capsys, "iree", "mlp", "--run")
    assert code == 1 and "--run goes with --emit vmfb" in err


def test_compare_prints_the_table(capsys, tmp_path):
    path = tmp_path / "compare.json"
    code, out, _ = cli(capsys, "iree", "compare", "mlp", "--repeat", "2", "--json", str(path))
    assert code == 0, out
    assert "load average" in out and "| model | path | ops per dialect |" in out
    rows = {r["path"]: r for r in json.loads(path.read_text())}
    assert set(rows) == {"torch", "mlir<-minic", "mlir<-torch-mlir", "minic",
                         "iree-stablehlo", "iree-linalg", "iree-turbine"}
    for path_name, row in rows.items():
        assert row["status"] == "ok" and row["median_s"] > 0, row
        if path_name != "torch":
            assert row["max_abs_err"] < 1e-4 and row["compile_s"] > 0, row
    assert rows["mlir<-minic"]["ops"]["linalg"] > 0 and rows["mlir<-torch-mlir"]["ops"]["linalg"] > 0


def test_verify_has_an_iree_column(capsys):
    code, out, _ = cli(capsys, "verify", "mlp", "--backends", "mlir,iree", "--markdown")
    assert code == 0, out
    assert "| model | mlir | iree |" in out and out.count("| ok ") == 2


def test_bench_times_iree_paths_in_worker_processes():
    """``minic bench --vs iree,iree-linalg``: each IREE path in its own worker, on the same
    thread count as the others (the backend's ``threads`` option)."""
    from minic.bench.harness import Config, Timing, run_config
    from minic.bench.paths import parse

    paths = parse("iree,iree-linalg")
    assert [(p.name, p.options_for(1)) for p in paths] == [
        ("torch", {}), ("iree", {"threads": 1}), ("iree-linalg", {"via": "linalg", "threads": 1}),
        ("minic", {"use_cache": False, "num_threads": 1})]
    results = run_config(Config("mlp", batch=2, threads=1, size="small"), paths, Timing(rounds=1, calls=2, warmup=0))
    by = {r.path: r for r in results}
    for name in ("iree", "iree-linalg"):
        assert by[name].status == "ok" and by[name].max_abs_err < 1e-4, by[name]
        assert len(by[name].blocks[0]) == 2
