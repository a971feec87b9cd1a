"""Start-up time and peak memory of a process that loads a saved model and runs it once:
minic's saved model (``minic.load_compiled``) against ONNX Runtime's ``InferenceSession``
on the same zoo model, and minic compiling in the process (``minic.compile``, the
compile cache warm) as the way it was before.

    python benchmarks/saved_startup.py [mlp,cnn,...] [--size small|full] [--rounds 5] [--kinds K,K]

Each figure is a fresh process (the three kinds interleaved round by round): the
time from the process's start to the first answer (interpreter start, imports,
loading, one call; median over rounds) and its peak resident set (VmHWM, the
peak RSS of the process image; median).  A bare ``python -c "import numpy"`` is the floor.  Memory barely moves
with the machine's load; time does, so compare within one run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = {
    "numpy only": "import numpy as np",
    "minic saved": "import numpy as np, minic\n"
                   "m = minic.load_compiled(FOLDER)\n"
                   "m(*INPUTS)",
    "onnxruntime": "import numpy as np, onnxruntime as ort\n"
                   "s = ort.InferenceSession(ONNX, providers=['CPUExecutionProvider'])\n"
                   "s.run(None, dict(zip([i.name for i in s.get_inputs()], INPUTS)))",
    "minic compile": "import numpy as np, minic\n"
                     "m = minic.compile(NAME, size=SIZE)\n"
                     "m(*INPUTS)",
}

# The peak resident set of this process image: VmHWM (ru_maxrss would keep the forking
# parent's figure across exec on Linux).
FOOTER = """
import json, re
hwm = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"peak_mb": hwm / 1024}))
"""


def prepare(name: str, size: str, folder: Path) -> None:
    import minic
    from minic.debug.expose import export_onnx
    source = minic.load(name, size=size)
    minic.save(minic.compile(source), folder / "saved")          # also warms the compile cache
    (folder / "model.onnx").write_bytes(export_onnx(source).SerializeToString())
    np.savez(folder / "inputs.npz", *source.example_inputs)


def child(kind: str, name: str, size: str, folder: Path) -> tuple[float, float]:
    header = (f"FOLDER, ONNX, NAME, SIZE = {str(folder / 'saved')!r}, {str(folder / 'model.onnx')!r}, "
              f"{name!r}, {size!r}\n")
    inputs = "import numpy as _np\n_z = _np.load(%r)\nINPUTS = [_z[f'arr_{i}'] for i in range(len(_z.files))]\n" % (
        str(folder / "inputs.npz"))
    code = header + (inputs if kind != "numpy only" else "") + CHILD[kind] + FOOTER
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{kind} on {name} failed:\n{done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="?", default="mlp,cnn,resnet50,bert-base,llama-tiny")
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", default=",".join(CHILD), help="the processes to time (default: %(default)s)")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",")]
    unknown = [k for k in kinds if k not in CHILD]
    if unknown:
        raise SystemExit(f"unknown kind(s) {unknown}; known: {', '.join(CHILD)}")
    print(f"| model ({args.size}) | " + " | ".join(f"{k}: start-up, peak RSS" for k in kinds) + " |")
    print("| --- |" + " ---: |" * len(kinds))
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            prepare(name, args.size, folder)
            runs: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
            for _ in range(args.rounds):
                for kind in kinds:
                    runs[kind].append(child(kind, name, args.size, folder))
            cells = [f"{statistics.median(t for t, _ in r) * 1e3:.0f} ms, {statistics.median(m for _, m in r):.0f} MB"
                     for r in runs.values()]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
