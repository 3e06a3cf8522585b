#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
#
# One device call for the small-call rows of issue 3 (docs/benchmarks.md "Small calls, sixth
# session"): test/gpu/smallcall_probe (every knob variant side by side), the criterion rows of
# quads_bench_gpu (small calls, amax 8192 x 8192, baselines), the GPU tests, and compute-sanitizer
# memcheck / racecheck on the gpu.small_calls suite (QUADS_GPU_QUICK=1). Binaries (gpu_tests,
# smallcall_probe, quads_bench_gpu, libbenchmark.so*, commit.txt) in $SC_DIR (default
# carry/smallcalls); run from the repository root. SC_TESTS=0 / SC_SAN=0 skip the tests /
# sanitizers; SC_T_TESTS / SC_T_MC / SC_T_RC / SC_T_BENCH: time limits (s); SC_F: bench filter.
# Writes summary.txt, probe.log, bench.json, table.txt and the logs to $OUT.
set -uo pipefail
D=${SC_DIR:-carry/smallcalls}
O=${OUT:-$PWD/sc-out}; mkdir -p "$O"
export LD_LIBRARY_PATH="$PWD/$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
S=$O/summary.txt
{ date -u +"date: %Y-%m-%dT%H:%M:%SZ"; cat $D/commit.txt;
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } | tee "$S"
step() {
  local name=$1 t=$2; shift 2; local t0=$(date +%s)
  timeout "$t" "$@" > "$O/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
  grep -E "test cases|assertions|ERROR SUMMARY|RACECHECK SUMMARY" "$O/$name.log" | tail -3 | tee -a "$S"
  grep -B3 -A12 -E "ERROR:|FAILED" "$O/$name.log" | head -60 >> "$O/failures.txt"
}
step probe 90 $D/smallcall_probe
F='^(quantize/nvfp4_swizzled_given/bf16|quantize/nvfp4_linear_given/bf16|qdq/nvfp4_given/bf16|amax/tensor/bf16|quantize/nvfp4_swizzled_row/bf16|quantize/mxfp4_swizzled/bf16|quantize/nvfp4_swizzled_tensor/bf16)/(1x4096|16x4096|64x4096)/|^amax/tensor/bf16/8192x8192/|^baseline/(empty_kernel|copy_memcpy/1024MiB|read_reduce/1024MiB)'
step bench ${SC_T_BENCH:-120} $D/quads_bench_gpu --benchmark_filter="${SC_F:-$F}" --benchmark_out="$O/bench.json" --benchmark_out_format=json
[ "${SC_TESTS:-1}" = 1 ] && step gpu_tests ${SC_T_TESTS:-150} $D/gpu_tests
if [ "${SC_SAN:-1}" = 1 ]; then
  export QUADS_GPU_QUICK=1
  step memcheck ${SC_T_MC:-50} compute-sanitizer --tool memcheck --error-exitcode 9 $D/gpu_tests -ts='gpu.small_calls'
  step racecheck ${SC_T_RC:-60} compute-sanitizer --tool racecheck --error-exitcode 9 $D/gpu_tests -ts='gpu.small_calls' -tc='*tensor amax is*,*small quantize*'
  unset QUADS_GPU_QUICK
fi
python3 bench/gpu/quantperf_table.py "$O/bench.json" > "$O/table.txt" 2>&1
echo ====== ; cat "$S"; cat "$O/probe.log"; cat "$O/table.txt"; [ -f "$O/failures.txt" ] && head -40 "$O/failures.txt"
