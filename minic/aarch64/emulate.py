"""Run a cross-compiled model under qemu-user, as if it were a function of numpy arrays.

qemu-user (Debian: ``qemu-user``, or ``qemu-user-static``) translates the
target's instructions on the fly and passes its system calls to this kernel,
so a static aarch64 executable runs here unchanged.  Each call writes a
tensor file, runs the executable once under qemu and reads the outputs back.
Timings from an emulator measure the emulator: they are reported as
"emulated" and say nothing about a real Cortex-A55.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from minic import tools
from minic.aarch64 import tensor_file
from minic.aarch64.build import CrossBuild
from minic.errors import UserError

TIMING = re.compile(r"minic-harness: (\d+) run\(s\), median ([\d.]+) ms, min ([\d.]+) ms")
DATA_CHECK = re.compile(r"minic-harness: data check (\d+) failed on value (-?\d+)")


def run_emulated(build: CrossBuild, input_path: Path, output_path: Path, repeat: int = 1,
                 timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run ``build``'s executable under qemu on a tensor file (the raw process result)."""
    if build.executable is None:
        raise UserError(f"{build.directory}: the model is not linked")
    qemu = tools.qemu(build.options.triple)
    command = [qemu, str(build.executable), str(input_path), str(output_path), str(repeat)]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(f"{build.executable} under {qemu}: no answer after {timeout_s:.0f} s") from None


class EmulatedModel:
    """Call a cross-compiled model like a CompiledModel: arrays in, arrays out.

    ``run_times_s`` collects, per call, the harness's own median time of the
    model call (inside the emulator, after a warm-up run, without qemu's
    start-up or the file transfers)."""

    def __init__(self, build: CrossBuild, repeat: int = 1) -> None:
        self.build = build
        self.repeat = repeat
        self.run_times_s: list[float] = []
        self.folder = None                   # a TemporaryDirectory holding the build, if it owns one

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        inputs = tensor_file.inputs_for(self.build.layout, arrays)      # UserError on bad arrays
        with tempfile.TemporaryDirectory(prefix="minic-emulate-") as tmp:
            src, dst = Path(tmp) / "inputs.bin", Path(tmp) / "outputs.bin"
            tensor_file.write(src, inputs)
            done = run_emulated(self.build, src, dst, self.repeat)
            failed = DATA_CHECK.search(done.stderr)
            if failed:
                raise self.build.layout.data_error(int(failed.group(1)), int(failed.group(2)))
            if done.returncode != 0:
                reason = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
                raise UserError(f"the {self.build.options.triple} executable failed: {reason[0]}")
            outputs = tensor_file.read(dst).arrays
        timing = TIMING.search(done.stdout)
        if timing:
            self.run_times_s.append(float(timing.group(2)) / 1e3)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self) -> str:
        return f"EmulatedModel({self.build.layout.name}, {self.build.options.triple}, {self.build.directory})"
