#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for minic: the system tools the tests use,
# then minic itself with its test dependencies.  Run from anywhere:
#     scripts/setup.sh
# Works as root; otherwise it uses sudo for apt-get.  Add a package here (one a line,
# with what needs it) when a test or a command starts to use a new system tool.
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
)

if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null

python -m pip install -q --disable-pip-version-check -e '.[test]'
