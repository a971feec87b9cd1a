"""Two processes compiling the same model into one cache at the same time do not
corrupt it: both get working models, and the entry left behind loads cleanly."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np

SCRIPT = textwrap.dedent("""
    import json, sys, time, numpy as np, minic
    from pathlib import Path
    from minic.runtime import CompileOptions, compile_graph
    from minic.api import graph_of
    cache, out = Path(sys.argv[1]), Path(sys.argv[2])
    source = minic.load("cnn", size="small")
    graph = graph_of(source)
    out.with_suffix(".ready").touch()
    while not out.with_name("go").exists():          # start together, so the compiles overlap
        time.sleep(0.001)
    start, cached = time.time(), len(list(cache.rglob("*.mc.bin")))
    model = compile_graph(graph, CompileOptions(cache_dir=cache))
    end = time.time()
    np.save(out, model(*source.example_inputs))
    out.with_suffix(".json").write_text(json.dumps({"start": start, "end": end, "cached": cached}))
""")


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    outs = [tmp_path / f"out{i}.npy" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(cache), str(out)],
                              stderr=subprocess.PIPE, text=True) for out in outs]
    deadline = time.time() + 600
    while not all(o.with_suffix(".ready").exists() for o in outs):      # both imported minic and the model
        assert time.time() < deadline and all(p.poll() is None for p in procs), "a process did not get ready"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "warning" not in err.lower(), err          # no corrupt entry was seen
    spans = [json.loads(o.with_suffix(".json").read_text()) for o in outs]
    assert [s["cached"] for s in spans] == [0, 0]          # both compiled: neither found the other's entry
    assert max(s["start"] for s in spans) < min(s["end"] for s in spans), spans     # and at the same time
    entries = list(cache.rglob("*.mc.bin"))
    assert len(entries) == 1 and not list(cache.rglob("*.tmp"))
    a, b = np.load(outs[0]), np.load(outs[1])
    np.testing.assert_array_equal(a, b)
    # A third process loads the entry (a hit) and gets the same numbers.
    third = tmp_path / "third"
    third.mkdir()
    (third / "go").touch()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(cache), str(third / "out.npy")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads((third / "out.json").read_text())["cached"] == 1
    np.testing.assert_array_equal(np.load(third / "out.npy"), a)
