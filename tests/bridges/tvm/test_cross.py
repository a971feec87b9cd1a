"""Cross-compilation for aarch64 Cortex-A55, checked without an Arm device."""
import tarfile

import pytest

from bridges.tvm.cross import (AARCH64_TARGET, cross_compile, find_cross_compiler, machine_name,
                               neon_instructions)
from bridges.tvm.importer import from_torch
from bridges.tvm.passes import optimize
from minic.errors import UserError


@pytest.fixture(scope="module")
def mlp_small_mod(zoo_arrays):
    module, inputs, _ = zoo_arrays("mlp", "small")
    mod, _ = optimize(from_torch(module, inputs, "mlp").mod)
    return mod


def test_target_is_the_issue_dict():
    assert AARCH64_TARGET == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a55",
                              "mattr": ["+neon"]}


@pytest.mark.skipif(find_cross_compiler() is None,
                    reason="aarch64-linux-gnu-gcc not installed (Debian package gcc-aarch64-linux-gnu)")
def test_shared_library_is_aarch64_with_neon(mlp_small_mod, tmp_path):
    report = cross_compile(mlp_small_mod, tmp_path, "mlp")
    assert report.kind == "shared library" and report.path.suffix == ".so"
    assert machine_name(report.path.read_bytes()) == "AArch64"
    assert report.all_aarch64
    assert sum(report.neon.values()) > 0


def test_object_archive_needs_no_toolchain(mlp_small_mod, tmp_path):
    report = cross_compile(mlp_small_mod, tmp_path, "mlp", archive_only=True)
    assert report.kind == "object archive"
    with tarfile.open(report.path) as archive:
        objects = [m.name for m in archive.getmembers() if m.name.endswith(".o")]
    assert objects and sorted(report.elf_machines) == sorted(objects)
    assert report.all_aarch64
    assert report.neon                 # e.g. fadd v0.4s: the vectorized bias add and relu


def test_host_build_is_not_aarch64(mlp_small_mod, tmp_path):
    report = cross_compile(mlp_small_mod, tmp_path, "host", archive_only=True,
                           target={"kind": "llvm"})
    assert set(report.elf_machines.values()) == {"x86-64"} and not report.all_aarch64


def test_elf_header_parsing():
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    header[18:20] = (183).to_bytes(2, "little")
    assert machine_name(bytes(header)) == "AArch64"
    with pytest.raises(UserError, match="not an ELF file"):
        machine_name(b"MZ\x90\x00")


def test_neon_counting_reads_vector_operands():
    asm = "\tfmla\tv0.4s, v1.4s, v2.4s\n\tfadd\ts0, s1, s2\n\tld1\t{v3.4s}, [x0]\n\tfadd\tv4.2d, v5.2d, v6.2d\n"
    assert neon_instructions(asm) == {"fmla": 1, "fadd": 1}
