#!/usr/bin/env bash
# The main demo: installs what it needs, builds it, runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/configure.sh
meson compile -C build quads_demo_quantize >build/demo-compile.log 2>&1 || { tail -40 build/demo-compile.log >&2; exit 1; }
./build/examples/quads_demo_quantize "$@"
