#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
#
# One device call that runs every GPU test binary, the sanitizers and the benchmarks.
#   here:   tools/gpu_run.sh --stage <build-dir>     (copies binaries + libbenchmark into carry/run)
#   device: tools/gpu_run.sh                          (through the `run` tool, carry: ["carry/run"])
# Brings back under $OUT: summary.txt, failures.txt, results.md, benchmarks.png, bench.json,
# torch.json and logs.tgz (every log).
set -uo pipefail
if [ "${1:-}" = --stage ]; then
  b=${2:?usage: gpu_run.sh --stage <build-dir>}
  rm -rf carry/run && mkdir -p carry/run
  for f in test/gpu/gpu_tests test/policy/quads_policy_gpu_tests \
           test/compensation/quads_rac_gpu_tests test/gemm/quads_gemm_gpu_tests \
           test/moe/quads_moe_gpu_tests test/prefill/quads_prefill_gpu_tests \
           examples/04_custom_epilogue/quads_demo_custom_epilogue \
           examples/05_alignment_demo/quads_demo_alignment \
           bench/quads_bench_gpu bench/rac/quads_bench_rac bench/gemm/quads_bench_gemm \
           bench/moe/quads_bench_moe bench/prefill/quads_bench_prefill; do
    [ -x "$b/$f" ] && cp -f "$b/$f" carry/run/
  done
  lib=$(ldd "$b/bench/quads_bench_gpu" | awk '/libbenchmark/ {print $3}')
  [ -n "$lib" ] && cp -fL "$lib" "carry/run/$(basename "$lib")"
  ls -la carry/run; exit 0
fi
R=carry/run
FINAL=${OUT:-$PWD/gpu-out}; mkdir -p "$FINAL"
OUT=$(mktemp -d)  # work folder; the device tool brings back at most 8 files, so logs are packed
export LD_LIBRARY_PATH="$PWD/$R:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
S=$OUT/summary.txt
{ date -u +"date: %Y-%m-%dT%H:%M:%SZ"; git rev-parse --short HEAD 2>/dev/null;
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$S"
step() {  # name, timeout, command...
  local name=$1 t=$2; shift 2; local t0=$(date +%s)
  timeout "$t" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
  grep -E "test cases|assertions|ERROR SUMMARY|RACECHECK SUMMARY|Status:" "$OUT/$name.log" | tail -4 | tee -a "$S"
  grep -B3 -A10 -E "ERROR:|FAILED" "$OUT/$name.log" | head -60 >> "$OUT/failures.txt"
  cp "$S" "$FINAL/summary.txt"  # what ran so far comes back even if the call runs out of time
}
TESTS="gpu_tests quads_policy_gpu_tests quads_rac_gpu_tests quads_gemm_gpu_tests quads_moe_gpu_tests quads_prefill_gpu_tests"
for t in $TESTS; do
  [ -x "$R/$t" ] && step "$t" 200 "$R/$t"
done
[ -x "$R/quads_demo_custom_epilogue" ] && step example-04 60 "$R/quads_demo_custom_epilogue"
[ -x "$R/quads_demo_alignment" ] && step example-05-gpu 120 "$R/quads_demo_alignment" --quick --require-gpu --threads 8 --out "$OUT/demo"
for t in $TESTS; do
  filter=()  # the prefill suite's large GEMMs are too slow under the sanitizer: its small cases
  [ "$t" = quads_prefill_gpu_tests ] && filter=(-tc="*tiny*,*refuses*,*bf16 store*,*SwiGLU*")
  [ -x "$R/$t" ] && QUADS_GPU_QUICK=1 QUADS_MOE_QUICK=1 step "memcheck-$t" 150 \
    compute-sanitizer --tool memcheck --print-limit 20 "$R/$t" "${filter[@]}"
done
QUADS_GPU_QUICK=1 step racecheck-gpu_tests 120 compute-sanitizer --tool racecheck --print-limit 20 "$R/gpu_tests"
[ -x "$R/quads_bench_rac" ] && step bench-rac 120 "$R/quads_bench_rac" --benchmark_counters_tabular=true
if [ -x "$R/quads_bench_gemm" ]; then
  step bench-gemm 180 "$R/quads_bench_gemm" --benchmark_format=json --benchmark_out="$OUT/gemm_bench.json"
  python3 bench/gemm/summarize.py "$OUT/gemm_bench.json" > "$OUT/gemm_table.txt" 2>&1
fi
[ -x "$R/quads_bench_prefill" ] && step bench-prefill 180 "$R/quads_bench_prefill" 15
if [ -x "$R/quads_bench_moe" ]; then
  step bench-moe 240 "$R/quads_bench_moe" --benchmark_format=json --benchmark_out="$OUT/moe_bench.json"
  step torch-moe 120 python3 bench/moe/torch_baseline.py --out "$OUT/moe_torch.json"
fi
if [ -x "$R/quads_bench_gpu" ]; then
  mkdir -p "$OUT/bench"
  OUT=$OUT/bench QUADS_BENCH_DIR=$R step bench-gpu 300 bash tools/bench_gpu.sh
fi
for f in summary.txt failures.txt gemm_table.txt; do [ -f "$OUT/$f" ] && cp "$OUT/$f" "$FINAL/"; done
for f in results.md benchmarks.png bench.json torch.json; do
  [ -f "$OUT/bench/$f" ] && cp "$OUT/bench/$f" "$FINAL/"
done
tar czf "$FINAL/logs.tgz" -C "$OUT" .
cat "$S"; echo "---- failures"; head -c 5000 "$OUT/failures.txt" 2>/dev/null
