"""The aarch64 cross build: IREE's llvm-cpu backend for a Cortex-A55 (+neon)."""
import zipfile

import pytest

from bridges.iree.cross import NEON_OPERAND, cross_build, elf_machine
from minic import models
from minic.errors import UserError


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    module, inputs = models.get("mlp", size="small")
    return cross_build(module, [t.numpy() for t in inputs], tmp_path_factory.mktemp("a55"), "mlp")


def test_the_embedded_elf_is_aarch64_with_neon(build):
    assert build.ok, build.summary()
    # A .vmfb is a zip: the VM module's flatbuffer, constants, and the kernels' ELF.
    with zipfile.ZipFile(build.vmfb) as z:
        names = z.namelist()
    assert "module.fb" in names and any(n.endswith("embedded_elf_arm_64.so") for n in names), names
    (exe,) = build.executables
    assert exe.machine == "AArch64" and exe.embedded
    assert any("fmla" in ln and ".4s" in ln for ln in exe.neon), exe.neon[:10]   # f32 multiply-add, 4 lanes
    assert "AArch64" in build.summary() and "ok: AArch64 code with NEON" in build.summary()


def test_elf_machine_and_neon_patterns():
    header = bytearray(b"\x7fELF\x02\x01\x01" + bytes(57))
    header[18:20] = (183).to_bytes(2, "little")
    assert elf_machine(bytes(header)) == "AArch64"
    header[18:20] = (62).to_bytes(2, "little")
    assert elf_machine(bytes(header)) == "x86-64"
    with pytest.raises(UserError, match="not an ELF file"):
        elf_machine(b"MZ\x90\x00" + bytes(60))
    assert NEON_OPERAND.search("fmla v0.4s, v21.4s, v5.s[0]")
    assert NEON_OPERAND.search("ld1 {v3.16b}, [x0]")
    assert not NEON_OPERAND.search("ldr s0, [x1, #4]") and not NEON_OPERAND.search("fmadd s0, s1, s2, s0")
