#!/bin/bash
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
# The GEMM device run of helper gemmperf: GPU tests (+ the previous build in $C/v3 if they fail),
# compute-sanitizer memcheck of a quick subset, quads_bench_gemm with summarize.py, optional ncu
# stall breakdowns (NCU / NCU2 = a --benchmark_filter), SASS counts (HMMA, LDL, STL) per mainloop.
# Stage quads_gemm_gpu_tests, quads_bench_gemm and libbenchmark.so* in $GEMM_BIN (default
# carry/gemmperf) and run from the repository root: bench/gemm/device_run.sh [nosan]
C=${GEMM_BIN:-$PWD/carry/gemmperf}
export LD_LIBRARY_PATH=$C:$LD_LIBRARY_PATH
O=${OUT:-/tmp/out}; mkdir -p $O
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee $O/summary.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $O/summary.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $O/$name.log 2>&1; local rc=$?; echo "$name rc=$rc ($(( $(date +%s) - s )) s)" | tee -a $O/summary.txt; }
step tests 90 $C/quads_gemm_gpu_tests
grep -E "test cases|assertions|ERROR|FAILED|failed" $O/tests.log | head -20 | tee -a $O/summary.txt
if ! grep -q "Status: SUCCESS" $O/tests.log; then
  echo "v4 tests failed: running v3 (dense streaming, grouped on the old kernel)" | tee -a $O/summary.txt
  grep -B2 -A8 "ERROR" $O/tests.log | head -60 > $O/failures.txt
  step tests_v3 60 $C/v3/quads_gemm_gpu_tests
  grep -E "test cases|assertions" $O/tests_v3.log | tee -a $O/summary.txt
  if [ "$V3BENCH" = 1 ]; then cp $C/v3/quads_bench_gemm $C/quads_bench_gemm; fi
fi
if [ "$1" != "nosan" ]; then
  QUADS_GPU_QUICK=1 step memcheck 80 compute-sanitizer --tool memcheck --error-exitcode 9 $C/quads_gemm_gpu_tests -tc="*grouped*,*W4A4 NVFP4 (bf16*,*RAC composition*"
  tail -3 $O/memcheck.log | tee -a $O/summary.txt
fi
step bench 120 $C/quads_bench_gemm --benchmark_format=json --benchmark_out=$O/bench.json ${BENCH_FILTER:+--benchmark_filter=$BENCH_FILTER}
python3 bench/gemm/summarize.py $O/bench.json > $O/table.txt 2>&1; cat $O/table.txt
if [ -n "$NCU" ]; then
  step ncu 60 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --print-details all --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio -k regex:stream_mainloop -c 1 $C/quads_bench_gemm --benchmark_filter="$NCU"
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers|Warp Cycles Per Issued|stalled|Stall" $O/ncu.log | grep -v "^\s*$" | awk '$NF+0 > 0.05 || /Duration|DRAM|Occupancy|Cycles/' | head -40 | tee -a $O/summary.txt
fi
if [ -n "$NCU2" ]; then
  step ncu2 60 ncu --section SpeedOfLight --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio -k regex:stream_mainloop -c 1 $C/quads_bench_gemm --benchmark_filter="$NCU2"
  grep -E "Duration|DRAM Throughput|stalled" $O/ncu2.log | awk '$NF+0 > 0.05 || /Duration|DRAM/' | head -30 | tee -a $O/summary.txt
fi
cuobjdump -sass $C/quads_gemm_gpu_tests > $O/sass.txt 2>/dev/null
python3 - $O/sass.txt <<'PY' | tee -a $O/summary.txt
import re,sys
cur=None;c={}
for l in open(sys.argv[1]):
    m=re.match(r'\s+Function : (\S+)',l)
    if m: cur=m[1]; c[cur]={'HMMA':0,'LDL':0,'STL':0}; continue
    if cur:
        for k in c[cur]:
            if re.search(r'\b'+k+r'\b',l) or (k=='HMMA' and 'HMMA' in l): c[cur][k]+=1
for f,v in c.items():
    if 'mainloop' in f: print(f[:90], v)
PY
rm -f $O/sass.txt
date -u +"end %Y-%m-%dT%H:%M:%SZ" | tee -a $O/summary.txt
