#!/bin/bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
# One H200 run of the prefill GEMM: GPU tests, the cuBLAS-bf16 comparison, memcheck, ncu.
# Build here, stage, run there:
#   meson compile -C build-prefill test/prefill/quads_prefill_gpu_tests \
#     bench/prefill/quads_bench_prefill
#   mkdir -p carry/prefill && cp build-prefill/test/prefill/quads_prefill_gpu_tests \
#     build-prefill/bench/prefill/quads_bench_prefill bench/prefill/device_run.sh carry/prefill/
#   (device, carry ["carry/prefill"]) bash carry/prefill/device_run.sh
# Writes logs to $OUT (default ./prefill-run); prints a summary last.
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/prefill-run}
mkdir -p "$OUT"
T=./quads_prefill_gpu_tests
B=./quads_bench_prefill
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/summary.txt"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee -a "$OUT/summary.txt"
s() { echo "== $1 rc=$2" | tee -a "$OUT/summary.txt"; }
timeout 90 $T > "$OUT/tests.log" 2>&1; rc=$?; s tests $rc
if [ $rc -eq 124 ]; then tail -30 "$OUT/tests.log"; exit 0; fi
timeout 90 $B "${REPS:-15}" > "$OUT/bench.log" 2>&1; s bench $?
timeout 40 compute-sanitizer --tool memcheck $T -tc="*tiny*,*refuses*,*bf16 store*,*SwiGLU*" \
  > "$OUT/memcheck.log" 2>&1; s memcheck $?
if [ -n "$NCU" ]; then
  timeout 40 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis \
    -k regex:prefill_kernel -c 1 $B 1 4096 > "$OUT/ncu.log" 2>&1; s ncu $?
fi
date -u +"end %Y-%m-%dT%H:%M:%SZ" | tee -a "$OUT/summary.txt"
echo "---- tests"; grep -E "ERROR|FAIL|test cases|assertions" "$OUT/tests.log" | head -20
echo "---- memcheck"; grep -E "ERROR SUMMARY|test cases" "$OUT/memcheck.log"
echo "---- bench"; grep -v json "$OUT/bench.log"
cat "$OUT/summary.txt"
