"""Two processes compiling the same model into one cache at the same time do not
corrupt it: both get working models, and the entry left behind loads cleanly."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

SCRIPT = textwrap.dedent("""
    import sys, numpy as np, minic
    from minic.runtime import CompileOptions
    from minic.api import graph_of
    source = minic.load("cnn", size="small")
    from minic.runtime import compile_graph
    model = compile_graph(graph_of(source), CompileOptions(cache_dir=sys.argv[1]))
    np.save(sys.argv[2], model(*source.example_inputs))
""")


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(cache), str(tmp_path / f"out{i}.npy")],
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "warning" not in err.lower(), err          # no corrupt entry was seen
    entries = list(cache.rglob("*.mc.bin"))
    assert len(entries) == 1 and not list(cache.rglob("*.tmp"))
    a, b = np.load(tmp_path / "out0.npy"), np.load(tmp_path / "out1.npy")
    np.testing.assert_array_equal(a, b)
    # A third process loads the entry (a hit) and gets the same numbers.
    third = subprocess.run([sys.executable, "-c", SCRIPT, str(cache), str(tmp_path / "out2.npy")],
                           capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out2.npy"), a)
