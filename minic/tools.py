"""The system programs minic runs, found on PATH, each with the Debian package that has it.

graphviz's ``dot`` draws graphs, a cross gcc links aarch64 executables, qemu-user
runs them, chromium checks the HTML report, clang compiles tinygrad's kernels.  ``scripts/setup.sh`` installs them
all; where one is missing, ``require`` is a one-line ``MissingToolError`` naming
the package, before any library reaches for the program and fails deep inside.
"""
from __future__ import annotations

import shutil

from minic.errors import UserError

SETUP = "scripts/setup.sh installs every tool minic's tests use"


class MissingToolError(UserError):
    """A system program minic needs is not installed."""


def find(*programs: str) -> str | None:
    """The path of the first of ``programs`` on PATH, or None when none is."""
    for program in programs:
        path = shutil.which(program)
        if path is not None:
            return path
    return None


def missing(program: str, package: str, purpose: str) -> str:
    """The one line that says ``program`` is missing and how to install it."""
    return f"{purpose} needs '{program}', which is not installed (Debian: apt-get install {package}; {SETUP})"


def require(program: str, package: str, purpose: str, *alternatives: str) -> str:
    """The path of ``program`` (or of one of its ``alternatives``); MissingToolError when absent.

    ``package``: the Debian package(s) that install it; ``purpose``: what needs it,
    as the start of the message ("drawing a graph", "linking for aarch64")."""
    path = find(program, *alternatives)
    if path is None:
        raise MissingToolError(missing(program, package, purpose))
    return path


# The programs minic runs, and their packages: one place to read them.
def dot(purpose: str = "drawing a graph") -> str:
    """graphviz's ``dot`` (the ``graphviz`` Python package runs it)."""
    return require("dot", "graphviz", purpose)


def cross_gcc(triple: str, purpose: str | None = None) -> str:
    """``{triple}-gcc``, the cross compiler that links a static executable for ``triple``."""
    arch = triple.split("-")[0]
    package = CROSS_PACKAGES.get(arch, f"gcc-{triple}")
    return require(f"{triple}-gcc", package, purpose or f"linking for {triple}")


def qemu(triple: str, purpose: str | None = None) -> str:
    """``qemu-{arch}`` (or its ``-static`` build), which runs ``triple``'s executables here."""
    arch = triple.split("-")[0]
    return require(f"qemu-{arch}", "qemu-user", purpose or f"running {arch} code under emulation",
                   f"qemu-{arch}-static")


def chromium(purpose: str = "checking the HTML report in a browser") -> str:
    return require("chromium", "chromium", purpose, "chromium-browser")


def clang(purpose: str = "tinygrad's CPU device") -> str:
    """Debian's ``clang``: tinygrad compiles its CPU kernels with it (``minic bench``'s tinygrad row)."""
    return require("clang", "clang", purpose)


CROSS_PACKAGES = {"aarch64": "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"}
