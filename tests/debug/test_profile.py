"""profile: each path's own profiler, mapped to modules; minic kernels' FLOPs, bytes and roofline."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import minic
from minic import models
from minic.debug.paths import choose, choose_all
from minic.debug.profile import kernel_bytes, kernel_flops, profile, program_env, unscheduled
from minic.debug.roofline import Roofline, copy_bandwidth, sgemm_flops
from minic.ir.text import parse_graph
from minic.runtime import CompileOptions, prepare

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_helpers import cli  # noqa: E402


def test_flops_and_bytes_of_a_matmul_kernel_are_counted_from_its_loops():
    graph = parse_graph("""graph @mm(%a: f32[B, 48], %b: f32[48, 40]) -> (f32[B, 40]) {
  %y = matmul(%a, %b) : f32[B, 40]
  return %y
}""")
    import numpy as np
    inputs = (np.ones((24, 48), np.float32), np.ones((48, 40), np.float32))
    program = prepare(graph)
    env = program_env(program, inputs)
    assert env == {"B": 24}
    (useful,) = unscheduled(graph, CompileOptions()).kernels
    assert kernel_flops(useful, env) == 2 * 24 * 48 * 40          # one multiply and one add per term
    (kernel,) = [k for k in program.kernels if k.name == useful.name]
    assert kernel_bytes(kernel, env) == 4 * (24 * 48 + 48 * 40 + 24 * 40)
    # The schedule's 32-wide column tiles cover 40 columns as 0..31 and 8..39: 64 computed.
    assert kernel_flops(kernel, env) == 2 * 24 * 48 * 64


def test_the_roofline_bounds_by_bandwidth_below_the_ridge_and_by_the_peak_above():
    roof = Roofline(peak=100e9, bandwidths=((2 ** 20, 40e9), (2 ** 27, 10e9)))
    assert roof.attainable(1e6, 1e6) == 40e9            # 1 FLOP/byte, in cache: bandwidth-bound
    assert roof.attainable(1e7, 1e7) == 10e9            # the same intensity out of cache
    assert roof.attainable(1e8, 1e6) == 100e9           # 100 FLOP/byte: compute-bound
    # Plausible even on a loaded machine: any CPU does more than 10 MFLOP/s and copies 100 MB/s.
    assert sgemm_flops(128, calls=2) > 1e7 and copy_bandwidth(8, calls=2) > 1e8


@pytest.mark.parametrize("name", models.names())
def test_every_zoo_model_profiles_on_minic_and_onnxruntime(name):
    source = minic.load(name, size="small")
    roof = Roofline(peak=1e11, bandwidths=((2 ** 27, 1e10),))
    result = profile(source, choose_all("minic,onnxruntime"), repeat=2, roofline=roof)
    assert result.kernels and all(k.seconds > 0 and k.nbytes > 0 for k in result.kernels)
    assert result.total("minic") > 0 and result.total("onnxruntime") > 0
    heavy = max(result.kernels, key=lambda k: k.flops)
    assert any(op in heavy.name for op in ("matmul", "gemm", "conv"))
    modules = dict(result.modules())
    # The two paths cut the model differently but meet on its modules.
    both = [m for m, cells in modules.items() if "minic" in cells and "onnxruntime" in cells]
    assert both, modules
    text = result.text()
    assert "| module | minic | onnxruntime |" in text and "of roofline" in text


def test_minic_int8_profiles_its_integer_kernels():
    # minic:int8 is minic's own post-training quantization, as the minic backend compiles it:
    # the kernels timed are the integer ones
    result = profile(minic.load("mlp", size="small"), [choose("minic:int8")], repeat=2)
    names = [p.name for p in result.pieces]
    assert any("matmul_integer" in n for n in names), names
    assert result.total("minic:int8") > 0


def test_tvm_calls_are_timed_by_the_vm(capsys):
    source = minic.load("mlp", size="small")
    result = profile(source, [choose("tvm")], repeat=2)
    names = [p.name for p in result.pieces]
    assert any(n.startswith("fused_matmul") for n in names), names
    assert result.total("tvm") > 0


def test_cli_profile(capsys):
    code, out, err = cli(capsys, "profile", "llama-tiny", "--paths", "minic,onnxruntime", "--repeat", "2",
                         "--no-roofline")
    assert code == 0, err
    assert "layers.0.attention" in out and "k" in out and "onnxruntime: slowest pieces" in out
