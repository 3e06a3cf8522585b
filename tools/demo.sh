#!/usr/bin/env bash
# The main demo: installs what it needs, builds it, runs it. The QUADS alignment demo: the gap
# between an NVFP4 rollout engine and the trainer on a synthetic MoE transformer, per arm (CPU,
# about a minute on 2 cores). Outputs (CSV, JSON, plot) go to build/demo/. Extra arguments are
# passed on (e.g. --seed 7, --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/configure.sh
meson compile -C build quads_demo_alignment >build/demo-compile.log 2>&1 || { tail -40 build/demo-compile.log >&2; exit 1; }
mkdir -p build/demo
./build/examples/05_alignment_demo/quads_demo_alignment --out build/demo "$@"
