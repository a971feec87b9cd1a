"""Cross objects, target assembly and the tensor file: no cross toolchain needed (llvmlite only)."""
import re

import numpy as np
import pytest

from minic import pipeline
from minic.codegen.elf import check_machine, elf_machine
from minic.options import full_triple
from minic.aarch64 import tensor_file
from minic.aarch64.harness import c_string, harness_source
from minic.errors import UserError
from minic.runtime import CompileOptions, prepare
from minic.runtime.layout import EntryLayout

A55 = CompileOptions.cross("aarch64", "cortex-a55")


def test_object_is_an_aarch64_elf(scale_shift):
    obj = pipeline.run(scale_shift, "object", A55)
    assert obj[:4] == b"\x7fELF" and obj[4] == 2          # ELFCLASS64
    assert elf_machine(obj) == 183                        # EM_AARCH64
    assert b"minic_entry" in obj


def test_an_object_for_another_machine_is_refused(scale_shift):
    host = pipeline.run(scale_shift, "object", CompileOptions(use_cache=False))
    with pytest.raises(UserError, match="not aarch64 \\(183\\)"):
        check_machine(host, "aarch64-linux-gnu")


def test_short_target_names():
    assert full_triple("aarch64") == "aarch64-linux-gnu"
    assert full_triple("riscv64-linux-gnu") == "riscv64-linux-gnu"


def test_cortex_a55_assembly_has_neon_for_an_elementwise_kernel(scale_shift):
    asm = pipeline.run(prepare(scale_shift, A55), "asm", A55, start="scheduled")
    # NEON (ASIMD): four f32 lanes of a 128-bit v register per instruction.
    vector_ops = set(re.findall(r"\b(fmla|fmul|fadd|fmax)\s+v\d+\.4s", asm))
    assert {"fmax"} <= vector_ops and vector_ops & {"fmla", "fmul", "fadd"}, sorted(vector_ops)


def test_tensor_file_round_trip():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, -2]], np.int64),
              np.array([True, False]), np.zeros((0, 4), np.float16)]
    f = tensor_file.TensorFile([2, 3], arrays, 128, [0, 64])
    back = tensor_file.decode(tensor_file.encode(f))
    assert back.sizes == [2, 3] and back.arena_bytes == 128 and back.offsets == [0, 64]
    for a, b in zip(arrays, back.arrays):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("mangle, message", [
    (lambda d: b"NOTMINIC" + d[8:], "bad magic"),
    (lambda d: d[:10], "truncated"),
    (lambda d: d[:-1], "runs past the end"),
    (lambda d: d + b"\0", "unexpected bytes"),
])
def test_tensor_file_rejects_malformed_files(mangle, message):
    data = tensor_file.encode(tensor_file.TensorFile([2], [np.ones((2, 3), np.float32)]))
    with pytest.raises(UserError, match=message):
        tensor_file.decode(mangle(data))


def test_inputs_carry_symbols_and_a_buffer_plan(scale_shift):
    layout = EntryLayout.of(prepare(scale_shift, A55))
    f = tensor_file.inputs_for(layout, [np.ones((5, 256), np.float32)])
    assert f.sizes == [5]
    assert len(f.offsets) == len(layout.temps()) and all(o % 64 == 0 for o in f.offsets)
    with pytest.raises(UserError, match="input 'x' axis 1"):
        tensor_file.inputs_for(layout, [np.ones((5, 255), np.float32)])


def test_harness_source_describes_the_model(scale_shift):
    program = prepare(scale_shift, A55)
    layout = EntryLayout.of(program)
    c = harness_source(layout, [0, 1024], A55.triple)
    assert "#define N_INPUTS 1" in c and "#define N_SIZES 1" in c and '{"x", 0, 2, {{1, 1, {0}}, {256, 0, {0}}}}' in c
    assert "static const uint64_t CONST_OFFSET[N_CONSTS + 1] = {0, 1024, 0};" in c
    assert c_string('a"b\\c\n') == '"a\\042b\\134c\\012"'
