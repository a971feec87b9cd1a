"""Untuned and tuned builds: correctness, the database, resuming."""
import numpy as np
import pytest

from bridges.tvm.build import VMRunner, apply_database, as_target, build
from bridges.tvm.tune import extract_tasks, open_database, trials_in_database, tune, tune_global
from minic.errors import UserError


def _runner(mlp, work_dir=None):
    imported = mlp["imported"]
    return VMRunner(build(mlp["mod"], as_target(None), work_dir), imported.input_shapes, imported.input_dtypes)


def test_untuned_matches_pytorch(mlp):
    np.testing.assert_allclose(_runner(mlp)(*mlp["inputs"]), mlp["reference"], atol=1e-4, rtol=1e-4)


def test_tuning_fills_a_database_per_kernel(mlp, mlp_tuned):
    work_dir, reports = mlp_tuned
    assert (work_dir / "database_tuning_record.json").is_file()
    assert (work_dir / "database_workload.json").is_file()
    assert [r.name for r in reports] == [t.task_name for t in extract_tasks(mlp["mod"], as_target(None))]
    for r in reports:           # every kernel got its own budget, none starved
        assert r.trials_before == 0 and r.trials_run == 8 and r.best_us is not None


def test_tuned_matches_pytorch(mlp, mlp_tuned):
    output = _runner(mlp, mlp_tuned[0])(*mlp["inputs"])
    np.testing.assert_allclose(output, mlp["reference"], atol=1e-4, rtol=1e-4)


def test_the_tuned_build_applies_the_database(mlp, mlp_tuned):
    """Each tuned kernel is swapped for its scheduled PrimFunc (how much faster it runs is a
    benchmark's business, `python -m minic tvm bench`, not a test's: tests never time)."""
    target, tasks = as_target(None), extract_tasks(mlp["mod"], as_target(None))
    applied = apply_database(mlp["mod"], target, mlp_tuned[0])
    for task in tasks:
        func = applied[task.task_name]
        assert func.attrs is not None and bool(func.attrs.get("tirx.is_scheduled", False)), task.task_name
        assert func.script() != mlp["mod"][task.task_name].script(), task.task_name


def test_tuning_resumes_from_the_database(mlp, mlp_tuned):
    work_dir, _ = mlp_tuned
    reports = tune(mlp["mod"], as_target(None), work_dir, trials_per_task=8, out=None)
    assert all(r.trials_before == 8 and r.trials_run == 0 for r in reports)
    database = open_database(work_dir)
    for task in extract_tasks(mlp["mod"], as_target(None)):
        assert trials_in_database(database, task.dispatched[0]) == 8


def test_a_global_budget_reaches_untouched_kernels_first_and_resumes(mlp, tmp_path):
    """--total-trials: one batch (8) goes to the first kernel; the next step's batch goes to
    the kernel that has no record yet; asking for the same total again measures nothing."""
    target = as_target(None)
    names = [t.task_name for t in extract_tasks(mlp["mod"], target)]

    def trials(reports):
        return {r.name: r.trials_before + r.trials_run for r in reports}

    first = tune_global(mlp["mod"], target, tmp_path, total_trials=8, population=64, threads=1, out=None)
    assert trials(first) == {names[0]: 8, names[1]: 0}
    second = tune_global(mlp["mod"], target, tmp_path, total_trials=16, population=64, threads=1, out=None)
    assert trials(second) == {names[0]: 8, names[1]: 8}
    assert all(r.best_us is not None for r in second)
    again = tune_global(mlp["mod"], target, tmp_path, total_trials=16, population=64, out=None)
    assert [r.trials_run for r in again] == [0, 0]
    output = _runner(mlp, tmp_path)(*mlp["inputs"])
    np.testing.assert_allclose(output, mlp["reference"], atol=1e-4, rtol=1e-4)


def test_the_runtime_thread_count_can_be_set(mlp):
    import os

    import tvm

    from bridges.tvm.build import set_threads
    _runner(mlp)(*mlp["inputs"])              # the pool exists now, sized for every core
    set_threads(1)
    assert tvm.runtime.num_threads() == 1
    set_threads(None)
    assert tvm.runtime.num_threads() == int(os.environ["TVM_NUM_THREADS"])
    with pytest.raises(UserError, match="cannot use 64"):
        set_threads(64)
    with pytest.raises(UserError, match="--threads must be >= 1"):
        set_threads(0)


def test_backend_applies_a_records_directory(mlp, mlp_tuned):
    import minic
    run = minic.compile(mlp["module"], mlp["inputs"], backend="tvm", records=mlp_tuned[0])
    np.testing.assert_allclose(run(*mlp["inputs"]), mlp["reference"], atol=1e-4, rtol=1e-4)


def test_backend_recompiles_for_a_new_batch_size(zoo_arrays):
    import torch

    import minic
    module, inputs, _ = zoo_arrays("mlp", "small")
    run = minic.compile(module, inputs, backend="tvm")
    x = np.random.default_rng(1).standard_normal((5, inputs[0].shape[1]), dtype=np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run(x), expected, atol=1e-4, rtol=1e-4)


def test_bad_options_and_inputs_are_user_errors(mlp, tmp_path):
    import minic
    with pytest.raises(UserError, match="unknown option 'tunned'"):
        minic.compile(mlp["module"], mlp["inputs"], backend="tvm", tunned=True)
    with pytest.raises(UserError, match="does not exist"):
        minic.compile(mlp["module"], mlp["inputs"], backend="tvm", records=tmp_path / "nope")
    with pytest.raises(UserError, match="--trials must be >= 0"):
        tune(mlp["mod"], as_target(None), tmp_path, trials_per_task=-1, out=None)
    with pytest.raises(UserError, match="--total-trials must be >= 0"):
        tune_global(mlp["mod"], as_target(None), tmp_path, total_trials=-1, out=None)
    with pytest.raises(UserError, match="invalid TVM target"):
        as_target({"kind": "no-such-target"})
    with pytest.raises(UserError, match=r"input 0: expected float32\[8, 784\]"):
        _runner(mlp)(np.ones((8, 783), np.float32))


def test_a_corrupt_database_is_moved_aside_and_rebuilt(tmp_path):
    import warnings

    from bridges.tvm.tune import DATABASE_FILES, open_database
    (tmp_path / DATABASE_FILES[0]).write_text('["truncated\n')
    (tmp_path / DATABASE_FILES[1]).write_text("[1, 2\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        database = open_database(tmp_path)
    assert any("corrupt" in str(w.message) for w in caught)
    assert len(database) == 0
    aside = list(tmp_path.glob("corrupt-*"))
    assert len(aside) == 1 and (aside[0] / DATABASE_FILES[0]).read_text() == '["truncated\n'


def test_a_database_prefix_rebuilds_an_earlier_budget(mlp, mlp_tuned, tmp_path):
    from bridges.tvm.curve import curve, truncate
    work_dir, _ = mlp_tuned                  # 8 records per kernel
    assert truncate(work_dir, tmp_path / "k3", first_per_kernel=3) == 6
    assert truncate(work_dir, tmp_path / "n5", first_records=5) == 5
    database = open_database(tmp_path / "k3")
    for task in extract_tasks(mlp["mod"], as_target(None)):
        assert trials_in_database(database, task.dispatched[0]) == 3
    result = curve(mlp["module"], mlp["inputs"], "mlp", work_dir, per_kernel=(1, 8), repeat=3)
    assert [(p.label, p.records) for p in result.points] == [("1 trials/kernel", 2), ("8 trials/kernel", 16)]
    assert all(p.median_s > 0 and p.predicted_s > 0 for p in result.points)
    assert result.points[1].predicted_s <= result.points[0].predicted_s     # more records, best can only fall
    with pytest.raises(UserError, match="no tuning database"):
        truncate(tmp_path / "nothing", tmp_path / "x", first_records=1)


def test_tuning_keeps_a_handler_without_a_name_on_metaschedules_logger(mlp, tmp_path):
    """MetaSchedule's logging set-up names every handler of its logger; one without a name
    (added by a program, or by pytest >= 9.1's log capture) must neither break it nor be lost."""
    import logging

    from bridges.tvm.tune import METASCHEDULE_LOGGER
    logger = logging.getLogger(METASCHEDULE_LOGGER)
    handler = logging.NullHandler()                        # no name
    logger.addHandler(handler)
    try:
        for round_ in range(2):                            # the second set-up is the one that used to fail
            tune_global(mlp["mod"], as_target(None), tmp_path, total_trials=8 * (round_ + 1), population=16,
                        threads=1, out=None)
            assert handler in logger.handlers and handler.get_name() is None
    finally:
        logger.removeHandler(handler)
