"""Cross-compilation: build a model for another machine (aarch64) and run it under emulation.

Read in this order: ``tensor_file.py`` (the file format inputs and outputs travel
in), ``harness.py`` (the generated C ``main``), ``build.py`` (object + weights +
harness -> static executable), ``emulate.py`` (qemu-user), ``backend.py``
(the ``minic-aarch64`` backend that ``run --target aarch64 --emulate`` uses).
The object code itself comes from ``minic.codegen.elf``.
"""
from minic.aarch64.build import CrossBuild, cross_compile, link
from minic.aarch64.emulate import EmulatedModel

__all__ = ["CrossBuild", "EmulatedModel", "cross_compile", "link"]
