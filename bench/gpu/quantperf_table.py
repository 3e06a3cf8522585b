# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Prints us / GB/s / fractions of the copy and read bandwidth of Google Benchmark JSON files
written by quads_bench_gpu / quads_bench_rac (bench/gpu/quantperf_run.sh)."""
import json
import sys

for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except Exception as e:  # a step that did not run leaves no file
        print(path, "unreadable:", e)
        continue
    c = d.get("context", {})
    print(f"## {path.split('/')[-1]}  copy {c.get('quads_copy_GBps', '?')} GB/s  "
          f"read {c.get('quads_read_GBps', '?')} GB/s")
    print(f"{'benchmark':60s} {'us':>9s} {'us_hot':>8s} {'GB/s':>8s} {'copy%':>6s} {'read%':>6s}")
    for b in d.get("benchmarks", []):
        if b.get("error_occurred"):
            print(f"{b['name']:60s} ERROR {b.get('error_message', '')}")
            continue
        us, hot = b.get("us", 0.0), b.get("us_hot", float("nan"))
        print(f"{b['name'][:60]:60s} {us:9.2f} {hot:8.2f} {b.get('GBps', 0):8.0f} "
              f"{100 * b.get('frac_copy', 0):6.1f} {100 * b.get('frac_read', 0):6.1f}")
