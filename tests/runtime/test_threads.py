"""One compiled model called from several threads at once gives every call the
answer it gives alone (the native call releases the GIL; each call has its own
arena of temporaries and its own status word), and a call whose data fails a
check raises while the calls beside it return their answers."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import minic
from minic.api import graph_of
from minic.errors import DataError
from minic.runtime import CompileOptions, compile_graph

THREADS, CALLS = 4, 1000            # per model: 4,000 calls, each compared with its sequential answer


@pytest.fixture(scope="module", params=["cnn", "bert-base"])
def zoo(request, tmp_path_factory):
    """A small CNN and a small encoder (embeddings, attention, GELU), both with the pool (2 threads)."""
    source = minic.load(request.param, size="small")
    model = compile_graph(graph_of(source), CompileOptions(cache_dir=tmp_path_factory.mktemp("cache"),
                                                          num_threads=2))
    x = source.example_inputs[0]
    rng = np.random.default_rng(1)
    if x.dtype.kind == "f":
        inputs = [rng.standard_normal(x.shape).astype(x.dtype) for _ in range(8)]
    else:
        inputs = [rng.integers(0, 1000, x.shape).astype(x.dtype) for _ in range(8)]   # the vocabulary: 1,000
    return request.param, model, inputs


def hammer(call, threads: int = THREADS) -> list:
    """Run call(thread, k) for k < CALLS on each thread at once; the exceptions raised outside the call."""
    start, errors = threading.Barrier(threads), []

    def work(t: int) -> None:
        try:
            start.wait()
            for k in range(CALLS):
                call(t, k)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return errors


def test_threads_get_the_sequential_answers(zoo):
    name, model, inputs = zoo
    expected = [model(x) for x in inputs]
    wrong = []

    def call(t: int, k: int) -> None:
        j = (t * 3 + k) % len(inputs)                   # the threads run different inputs side by side
        if not np.array_equal(model(inputs[j]), expected[j]):
            wrong.append((t, k))
    assert hammer(call) == []
    assert wrong == [], f"{name}: {len(wrong)} of {THREADS * CALLS} calls gave another answer"


@pytest.mark.parametrize("zoo", ["bert-base"], indirect=True)     # the CNN has no data checks
def test_a_failed_check_is_reported_to_its_own_call(zoo):
    """Every fifth call of each thread has a token id out of range: exactly those raise a
    DataError, and the others, running beside them, return their answers."""
    _, model, inputs = zoo
    bad = inputs[0].copy()
    bad.flat[3] = 1000                                   # one past the vocabulary
    with pytest.raises(DataError):
        model(bad)
    expected = [model(x) for x in inputs]
    wrong, missed = [], []

    def call(t: int, k: int) -> None:
        if (t + k) % 5 == 0:
            try:
                model(bad)
                missed.append((t, k))
            except DataError:
                pass
        else:
            j = k % len(inputs)
            if not np.array_equal(model(inputs[j]), expected[j]):   # a DataError here fails the test
                wrong.append((t, k))
    assert hammer(call) == []
    assert missed == [] and wrong == []
