"""Two processes appending tuning records to one file at once: every record of
both survives and the file parses."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from minic.tune.records import read

SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from minic.tune.records import Record, append
    path, who = Path(sys.argv[1]), sys.argv[2]
    while not path.with_name("go").exists():     # start together, so the appends overlap
        time.sleep(0.001)
    for i in range(150):
        append(path, [Record(f"{who}-{i}", "t", {"rows": i + 1}, 1e-4, 2e-4, 1.0, 1)])  # knob counts are >= 1
""")


def test_two_tuners_append_to_one_records_file(tmp_path):
    path = tmp_path / "tuning.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(path), who], stderr=subprocess.PIPE, text=True)
             for who in ("a", "b")]
    time.sleep(2.0)                              # both have started and wait
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    signatures = {r.signature for r in read(path)}
    assert signatures == {f"{w}-{i}" for w in "ab" for i in range(150)}
