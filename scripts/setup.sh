#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for minic: the system tools the tests use,
# then minic itself with every bridge and the test dependencies (the 'all' extra).
# Run from anywhere:
#     scripts/setup.sh
# The system tools need root (or sudo without a password); without either, they are
# skipped with a note of what each is for, and the Python part is still installed
# (into the active virtual environment, else the user's site-packages).
# Add a package here (one a line, with what needs it) when a test or a command starts
# to use a new system tool.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
    graphviz                   # dot: graph pictures (viz, report, bench --plot)
    gcc-aarch64-linux-gnu      # cross compiler: aarch64 builds (minic compile --target, TVM cross)
    binutils-aarch64-linux-gnu # aarch64-linux-gnu-objdump: NEON check of IREE's cross build (iree cross)
    libc6-dev-arm64-cross      # its C library: static aarch64 executables
    qemu-user                  # qemu-aarch64: runs those executables here (--emulate)
    chromium                   # the HTML report is checked in a headless browser
    clang                      # tinygrad's CPU device compiles with it (minic bench's tinygrad row)
    gcc                        # cc: links a saved model's shared library (minic.save, compile --target host)
)

can_apt=yes
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo)
else
    can_apt=no
fi
if [ "$can_apt" = yes ]; then
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
else
    echo "setup.sh: not root and no password-less sudo: skipping these Debian packages (install them as root):" >&2
    sed -n '/^PACKAGES=(/,/^)/{/^PACKAGES=(/d;/^)/d;p}' "$0" >&2
    echo "setup.sh: minic works without them; the commands and tests that run one say which package it is" >&2
fi

pip_args=(-q --disable-pip-version-check -e '.[all]')
if [ "$(id -u)" -ne 0 ] && ! python -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    pip_args+=(--user)          # no virtual environment and no root: the user's site-packages
fi
python -m pip install "${pip_args[@]}"
