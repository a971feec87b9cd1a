"""The pool in compiled code (codegen/pool.py) tags its chunk counter with the loop's
generation in 32 bits: past 2**32 parallel loops in one process (days of serving) the
tag must still match, or every thread refuses the loop's chunks and the caller waits
forever.  Run in a child process, so that a hang fails the test instead of the run."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import ctypes, numpy as np, minic
    from minic.api import graph_of
    from minic.codegen.pool import F
    from minic.runtime import CompileOptions, compile_graph
    source = minic.load("bert-base", size="small")
    model = compile_graph(graph_of(source), CompileOptions(use_cache=False, num_threads=2))
    expected = model(*source.example_inputs)
    gen = ctypes.c_int64.from_address(model._code.global_address("minic.pool") + F["gen"])
    start = gen.value
    assert start > 0, "the model did not use its pool"
    gen.value = 2**32 - 3                       # the next calls' loops cross 2**32 generations
    for _ in range(3):
        assert np.array_equal(model(*source.example_inputs), expected)
    assert gen.value > 2**32, gen.value
    print("ok", gen.value - (2**32 - 3), "loops")
""")


def test_parallel_loops_past_two_to_the_32_generations():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=root, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr
