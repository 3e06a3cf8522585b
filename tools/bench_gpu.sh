#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
#
# Runs the GPU benchmark suite on the device and renders the results. Run from the repo root:
#
#   tools/bench_gpu.sh [google-benchmark args, e.g. --benchmark_filter=qdq]
#
# Expects the binary and Google Benchmark's shared library in $QUADS_BENCH_DIR (default
# carry/bench: the device has no libbenchmark, so both are built here and carried). Writes to
# $OUT (default ./bench-out): bench.json (Google Benchmark JSON), bench.log, torch.json,
# results.md (table) and benchmarks.png (plot, when matplotlib is there), nvidia-smi.txt.
# Environment: QUADS_BENCH_SKIP_TORCH=1 skips the PyTorch emulation baseline.
#
# On the build machine, `tools/bench_gpu.sh --stage <build-dir>` copies the binary and
# libbenchmark.so* into carry/bench (git-ignored) for the device call to carry.
set -uo pipefail

if [ "${1:-}" = --stage ]; then
  build=${2:?usage: bench_gpu.sh --stage <build-dir>}
  mkdir -p carry/bench
  cp -f "$build/bench/quads_bench_gpu" carry/bench/
  lib=$(ldd "$build/bench/quads_bench_gpu" | awk '/libbenchmark/ {print $3}')
  [ -n "$lib" ] && cp -fL "$lib" "carry/bench/$(basename "$lib")"
  ls -la carry/bench
  exit 0
fi

BIN_DIR=${QUADS_BENCH_DIR:-carry/bench}
OUT=${OUT:-$PWD/bench-out}
mkdir -p "$OUT"
BIN="$BIN_DIR/quads_bench_gpu"
[ -x "$BIN" ] || { echo "bench_gpu.sh: $BIN not found (build it and copy it there)"; exit 2; }

export LD_LIBRARY_PATH="$BIN_DIR:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# cuBLAS: the toolkit's if present, else the copy inside PyTorch's nvidia-* wheels.
if ldd "$BIN" | grep -q 'libcublas.*not found'; then
  wheel_lib=$(python3 - <<'PY' 2>/dev/null
import glob, os, nvidia
for root in list(nvidia.__path__):
    hits = glob.glob(os.path.join(root, "**", "libcublas.so.*"), recursive=True)
    if hits:
        print(os.path.dirname(hits[0]))
        break
PY
)
  [ -n "$wheel_lib" ] && export LD_LIBRARY_PATH="$wheel_lib:$LD_LIBRARY_PATH"
fi
if ldd "$BIN" | grep 'not found'; then echo "bench_gpu.sh: missing shared libraries"; exit 2; fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv > "$OUT/nvidia-smi.txt" 2>&1 || true
cat "$OUT/nvidia-smi.txt"

rc=0
"$BIN" --benchmark_out_format=json --benchmark_out="$OUT/bench.json" \
  --benchmark_counters_tabular=true "$@" 2>&1 | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
echo "quads_bench_gpu exit status: $rc"
[ "$rc" = 0 ] || exit "$rc"

torch_args=()
if [ "${QUADS_BENCH_SKIP_TORCH:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 python3 tools/torch_emulation_bench.py --check --ours "$OUT/bench.json" \
    --json "$OUT/torch.json" && torch_args=(--torch "$OUT/torch.json")
fi

python3 tools/render_bench.py --bench "$OUT/bench.json" "${torch_args[@]}" \
  --md "$OUT/results.md" --png "$OUT/benchmarks.png" --png-link benchmarks.png
