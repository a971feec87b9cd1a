"""One bench path in a process of its own: ``python -m minic.bench.worker SPEC``.

SPEC (JSON) names the model, batch, thread count and path.  The worker sets the
thread count (the parent has already put ``paths.THREAD_ENV`` in its environment),
builds the zoo model, computes PyTorch eager's output as the reference, compiles
the path (at an int8 precision, on the model its recipe quantized), checks the path's
output against the reference within its precision's bound, runs the warm-up calls, and answers
the parent's requests on its private pipe, one JSON line each:

    (after build)                      -> {"status": "ok", "compile_s": ..., "max_abs_err": ..., "rss_base_mb": ...}
    {"cmd": "block", "calls": N, ...}  -> {"times": [...], "cpu": [...]}   one untimed call, then up to N timed
                                                                            calls (wall and CPU seconds each)
    {"cmd": "stop"}                    -> {"rss_peak_mb": ...}   peak RSS of the whole process: build and run

Everything the libraries print goes to stderr: the worker keeps the original stdout
for its answers, so no warning can corrupt them.
"""
from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from minic.timing import timed_block


def peak_rss_mb() -> float:
    """The peak resident set of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    import psutil
    return psutil.Process().memory_info().rss / 2**20


def batched(inputs: tuple, axes: tuple[dict[int, str], ...], batch: int) -> tuple:
    """``inputs`` with their batch axis (the one named ``B``) repeated to ``batch``."""
    import numpy as np
    out = []
    for i, x in enumerate(inputs):
        named = axes[i] if i < len(axes) else {}
        axis = next((a for a, s in named.items() if s == "B"), None)
        if axis is None or x.shape[axis] == batch:
            out.append(x)
            continue
        reps = -(-batch // x.shape[axis])
        out.append(np.ascontiguousarray(np.take(np.concatenate([x] * reps, axis=axis), range(batch), axis=axis)))
    return tuple(out)


def build(spec: dict[str, Any]):
    """(answer, runner, inputs): the path compiled and checked on the spec's model."""
    import torch
    import minic
    from minic.api import load
    from minic.verify.matrix import check
    from minic.errors import UserError
    from minic import backends
    from minic.bench.paths import TOLERANCE, BenchPath

    torch.set_num_threads(spec["threads"])
    from minic.inputs import given
    source = load(spec["model"], given(spec.get("inputs"), spec.get("shapes", ()), spec["seed"]),
                  size=spec["size"], seed=spec["seed"])
    if spec["batch"] != 1:
        if not any("B" in a.values() for a in source.dynamic_axes):
            raise UserError(f"model '{spec['model']}' has no batch axis; --batch {spec['batch']} cannot apply")
        source.example_inputs = batched(source.example_inputs, source.dynamic_axes, spec["batch"])
    _, reference = backends.reference(source)
    path = BenchPath(**spec["path"])
    recipe = backends.recipe(path.precision)
    if recipe is not None:               # int8: the quantizer's model (its f32 reference stays)
        source = recipe(source, spec["seed"])
    base = current_rss_mb()
    cell = check(source, path.backend, source.example_inputs, reference, TOLERANCE[path.precision],
                 **path.options_for(spec["threads"]))
    answer = {"status": cell.status, "detail": cell.detail, "compile_s": cell.compile_s,
              "max_abs_err": cell.errors.abs if cell.errors else None,
              "rel_err": cell.errors.rel if cell.errors else None, "rss_base_mb": base,
              "torch_threads": torch.get_num_threads(), "pid": os.getpid(),
              "source": str(Path(minic.__file__).resolve().parent.parent)}
    inputs = source.example_inputs
    # The path keeps what it needs; the torch module and the reference can go (memory).
    del source, reference
    cell.outputs = ()
    gc.collect()
    return answer, cell.runner, inputs


def serve(spec: dict[str, Any], answers) -> None:
    def say(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    try:
        answer, runner, inputs = build(spec)
    except Exception as e:  # noqa: BLE001 - the parent shows it as the path's row
        say({"status": "crash", "detail": f"{type(e).__name__}: {str(e)[:300]}"})
        return
    if answer["status"] == "ok":
        for _ in range(spec["warmup"]):
            runner(*inputs)
    answer["rss_after_build_mb"] = peak_rss_mb()
    say(answer)
    if answer["status"] != "ok":
        return
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "block":
            cpu: list[float] = []
            times = timed_block(lambda: runner(*inputs), request["calls"], request.get("budget_s", 1e9), cpu)
            say({"times": times, "cpu": cpu})
        elif request["cmd"] == "stop":
            say({"rss_peak_mb": peak_rss_mb()})
            return


def main() -> None:
    spec = json.loads(sys.argv[1])
    answers = os.fdopen(os.dup(1), "w")       # the private pipe: the original stdout
    os.dup2(2, 1)                             # whatever the libraries print goes to stderr
    sys.stdout = sys.stderr
    t0 = time.perf_counter()
    serve(spec, answers)
    print(f"worker {spec['path']['name']}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
