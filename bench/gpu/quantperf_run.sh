#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
#
# One short device call for the quantize / QDQ / amax / RAC criteria (issues 3 and 5): the GPU
# tests of the kernels (byte identity), then quads_bench_gpu and quads_bench_rac filtered to the
# criteria sizes, the register-budget variants and the baselines, optional compute-sanitizer
# (QP_MEMCHECK=1: memcheck / racecheck on the NVFP4, turbo and RAC cases of gpu_tests, memcheck on
# quads_rac_gpu_tests), ncu on the pair, QDQ and RAC kernels (QP_NCU=0 skips, QP_NCU=rac only the
# RAC column kernel, QP_NCU=one only the quantize kernel; QP_NCU_K / QP_NCU_QK: kernel regexes of
# quantize / QDQ), and a table. QP_RAC_TESTS=0 skips quads_rac_gpu_tests; QP_MC_TC / QP_RC_TC
# replace the memcheck / racecheck test-case filters, QP_T_MC / QP_T_RC their time limits. QP_F3 / QP_F5 replace the benchmark filters, QP_T_BENCH /
# QP_T_RAC their time limits in seconds. Binaries (gpu_tests, quads_rac_gpu_tests,
# quads_bench_gpu, quads_bench_rac, libbenchmark.so*) in $QP_DIR (default carry/quantperf).
# Writes summary.txt, table.txt, ncu_summary.txt, bench.json, rac.json, logs.tgz to $OUT.
set -uo pipefail
D=${QP_DIR:-carry/quantperf}
FINAL=${OUT:-$PWD/qp-out}; mkdir -p "$FINAL"
W=$(mktemp -d)
export LD_LIBRARY_PATH="$PWD/$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
S=$W/summary.txt
{ date -u +"date: %Y-%m-%dT%H:%M:%SZ"; cat $D/commit.txt 2>/dev/null;
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } | tee "$S"
step() {
  local name=$1 t=$2; shift 2; local t0=$(date +%s)
  timeout "$t" "$@" > "$W/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
  grep -E "test cases|assertions|ERROR SUMMARY|RACECHECK SUMMARY" "$W/$name.log" | tail -3 | tee -a "$S"
  grep -B3 -A12 -E "ERROR:|FAILED" "$W/$name.log" | head -80 >> "$W/failures.txt"
  cp "$S" "$FINAL/summary.txt"
}
[ "${QP_TESTS:-1}" = 1 ] && step gpu_tests 150 $D/gpu_tests
[ "${QP_TESTS:-1}" = 1 ] && [ "${QP_RAC_TESTS:-1}" = 1 ] && step rac_gpu_tests 120 $D/quads_rac_gpu_tests
F3='^(quantize/nvfp4_swizzled_given/bf16|quantize/nvfp4_linear_given/bf16|qdq/nvfp4_given/bf16|amax/tensor/bf16|quantize/nvfp4_swizzled_tensor/bf16|quantize/nvfp4_swizzled_row/bf16|quantize/mxfp4_swizzled/bf16|dequantize/nvfp4_swizzled/bf16|amax/row/bf16|qdq/nvfp4_tensor/bf16)/(1x4096|16x4096|64x4096|8192x8192|14336x4096|16384x16384)/|^variant/|^baseline/(empty_kernel|copy_memcpy/1024MiB|read_reduce/1024MiB)'
step bench_gpu ${QP_T_BENCH:-120} $D/quads_bench_gpu --benchmark_filter="${QP_F3:-$F3}" --benchmark_out="$W/bench.json" --benchmark_out_format=json
cp "$W/bench.json" "$FINAL/" 2>/dev/null
F5='^rac/(given_shared_none(_mb2|_mb4)?/8192x4096/r(25|50)|given_shared_none/8192x4096/r(0|100)|kernels_quantize_linear_given/8192x4096|copy_same_bytes/8192x4096|given_shared_none/(16|64|256)x4096/r50|given_shared_none_fp32in/8192x4096/r50|tensor_shared_none/8192x4096/r50|given_own_none/8192x4096/r50)'
step bench_rac ${QP_T_RAC:-60} $D/quads_bench_rac --benchmark_filter="${QP_F5:-$F5}" --benchmark_out="$W/rac.json" --benchmark_out_format=json
cp "$W/rac.json" "$FINAL/" 2>/dev/null; python3 bench/gpu/quantperf_table.py "$W/bench.json" "$W/rac.json" > "$FINAL/table.txt" 2>&1
if [ "${QP_MEMCHECK:-0}" = 1 ]; then
  export QUADS_GPU_QUICK=1
  step memcheck ${QP_T_MC:-70} compute-sanitizer --tool memcheck --error-exitcode 9 $D/gpu_tests -tc="${QP_MC_TC:-*packed block amax*,*nvfp4*,*RAC*,*large calls*,*tensor amax*}"
  step racecheck ${QP_T_RC:-80} compute-sanitizer --tool racecheck --error-exitcode 9 $D/gpu_tests -tc="${QP_RC_TC:-*nvfp4 given*,*RAC*,*large calls*}"
  step memcheck_rac 60 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quads_rac_gpu_tests
  unset QUADS_GPU_QUICK
fi
if [ "${QP_NCU:-1}" = rac ]; then
  step ncu_rac 45 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:"rac_column" -s 3 -c 1 $D/quads_bench_rac --benchmark_filter='^rac/given_shared_none/8192x4096/r50/'
elif [ "${QP_NCU:-1}" = one ]; then # the quantize kernel at the criterion size only
  step ncu 45 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:"${QP_NCU_K:-pair_kernel}" -s 3 -c 1 $D/quads_bench_gpu --benchmark_filter='^quantize/nvfp4_swizzled_given/bf16/8192x8192/'
elif [ "${QP_NCU:-1}" = 1 ]; then
  step ncu 45 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats -k regex:"${QP_NCU_K:-pair_kernel}" -s 3 -c 1 $D/quads_bench_gpu --benchmark_filter='^quantize/nvfp4_swizzled_given/bf16/8192x8192/'
  step ncu_rac 45 ncu --section SpeedOfLight --section WarpStateStats -k regex:"rac_column" -s 3 -c 1 $D/quads_bench_rac --benchmark_filter='^rac/given_shared_none/8192x4096/r50/'
  step ncu_qdq 45 ncu --section SpeedOfLight --section WarpStateStats -k regex:"${QP_NCU_QK:-block_kernel}" -s 3 -c 1 $D/quads_bench_gpu --benchmark_filter='^qdq/nvfp4_given/bf16/8192x8192/'
fi
for f in ncu ncu_qdq ncu_rac; do [ -f "$W/$f.log" ] && { echo "## $f"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Ipc|No Eligible|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|L1/TEX Cache Throughput|L2 Cache Throughput|Elapsed Cycles|SM Frequency" "$W/$f.log" | head -45; }; done > "$W/ncu_summary.txt"
python3 bench/gpu/quantperf_table.py "$W/bench.json" "$W/rac.json" > "$W/table.txt" 2>&1
cp "$W/bench.json" "$W/rac.json" "$FINAL/" 2>/dev/null
[ -f "$W/failures.txt" ] && cp "$W/failures.txt" "$FINAL/"
tar czf "$FINAL/logs.tgz" -C "$W" . 2>/dev/null
cp "$S" "$FINAL/summary.txt"
cp "$W/ncu_summary.txt" "$FINAL/" 2>/dev/null
echo ======; cat "$W/ncu_summary.txt"; cat "$W/table.txt"
