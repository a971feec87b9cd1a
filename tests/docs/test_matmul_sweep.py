"""benchmarks/matmul_sweep.py (chapter 12's sweep across the caches) runs, on tiny sizes: its
variants compile with knobs put back (CompileOptions.schedules) and match numpy."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_runs_on_tiny_sizes(capsys):
    spec = importlib.util.spec_from_file_location("matmul_sweep", ROOT / "benchmarks" / "matmul_sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    assert sweep.parse_size("48K") == 48 << 10 and sweep.parse_size("2M") == 2 << 20
    assert sweep.fits(100, [("L1", 64), ("L2", 1024)]) == "L2" and sweep.fits(2048, [("L1", 64)]) == "DRAM"
    sweep.main(["--sizes", "16,24", "--repeat", "1", "--no-primer"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] in (["16"], ["24"])]
    assert [r[0] for r in rows] == ["16", "24"] and all(r.count("GFLOPS") == 3 for r in rows)
