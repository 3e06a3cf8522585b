#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Prints the decode GEMM table from quads_bench_gemm's JSON: per (shape, M) the median us of
W4A4 / W4A16 / RAC 50 % shared / own, the fraction of copy bandwidth of W4A4, the speed-ups over
cuBLAS bf16 and cuBLASLt FP8, and the RAC overhead; then the grouped cases."""
import json
import re
import sys

d = json.load(open(sys.argv[1]))
copy = float(d["context"].get("quads_copy_GBps", "0"))
rows = {}
variants = []
for b in d["benchmarks"]:
    if "error_message" in b:
        print("ERROR", b["name"], b["error_message"])
        continue
    n = b["name"]
    m = re.match(r"gemm/decode/(\w+)/M(\d+)_W(\d+)x(\d+)/deterministic/(splits\d)", n)
    if m:
        variants.append(f"{m[5]} {m[1]} M{m[2]} {m[3]}x{m[4]}: {b['us']:.2f} us ({b['frac_copy']:.2f} of copy)")
        continue
    m = re.match(r"gemm/decode/(\w+)/M(\d+)_W(\d+)x(\d+)/", n)
    if m:
        rows.setdefault((int(m[3]), int(m[4]), int(m[2])), {})[m[1]] = b
        continue
    m = re.match(r"baseline/(cublas_bf16|cublaslt_fp8)/M(\d+)_W(\d+)x(\d+)", n)
    if m:
        rows.setdefault((int(m[3]), int(m[4]), int(m[2])), {})[m[1]] = b
        continue
    if n.startswith("gemm/grouped"):
        print(f"{n}: {b['us']:.2f} us, {b['GBps']:.0f} GB/s, {b['frac_copy']:.2f} of copy, "
              f"splits {b.get('splits', 0):.0f}")
print(f"copy bandwidth {copy:.0f} GB/s")
NAN = float("nan")


def table(title, header, key, cells):
    """One markdown table: a row per (shape, M) that has benchmark `key`; `cells(us, frac)` gives
    the cells after the shape and M (`us(name)` = median us of a benchmark, nan if absent)."""
    if title:
        print(title)
    print("| weight | M | " + " | ".join(header) + " |")
    print("|---|---:|" + "---:|" * len(header))
    for (N, K, M), r in sorted(rows.items()):
        if key not in r:
            continue
        us = lambda k: r[k]["us"] if k in r else NAN  # noqa: E731
        print(f"| {N}x{K} | {M} | " + " | ".join(cells(us, r[key]["frac_copy"])) + " |")


def pct(a, b):
    return f"{100 * (a / b - 1):.0f}"


table("", ["W4A4 us", "frac copy", "W4A16 us", "RAC50 shared us", "RAC50 own us", "bf16 us",
           "fp8 us", "x bf16", "x fp8", "RAC shared +%", "RAC own +%"], "w4a4_nvfp4",
      lambda us, fr: [f"{us('w4a4_nvfp4'):.2f}", f"{fr:.2f}", f"{us('w4a16_bf16'):.2f}",
                      f"{us('w4a4_rac50_shared'):.2f}", f"{us('w4a4_rac50_own'):.2f}",
                      f"{us('cublas_bf16'):.2f}", f"{us('cublaslt_fp8'):.2f}",
                      f"{us('cublas_bf16') / us('w4a4_nvfp4'):.2f}",
                      f"{us('cublaslt_fp8') / us('w4a4_nvfp4'):.2f}",
                      pct(us('w4a4_rac50_shared'), us('w4a4_nvfp4')),
                      pct(us('w4a4_rac50_own'), us('w4a4_nvfp4'))])
for v in variants:
    print(v)
print()
table("Pair-coded NVFP4 weights (fp16 lanes) against the plain layouts:",
      ["plain bf16 us", "plain fp16 us", "pair us", "frac copy", "x bf16", "x fp8",
       "pair RAC50 shared us", "+%", "pair RAC50 own us", "+%"], "w4a4_pair",
      lambda us, fr: [f"{us('w4a4_nvfp4'):.2f}", f"{us('w4a4_nvfp4_fp16'):.2f}",
                      f"{us('w4a4_pair'):.2f}", f"{fr:.2f}",
                      f"{us('cublas_bf16') / us('w4a4_pair'):.2f}",
                      f"{us('cublaslt_fp8') / us('w4a4_pair'):.2f}",
                      f"{us('w4a4_pair_rac50_shared'):.2f}",
                      pct(us('w4a4_pair_rac50_shared'), us('w4a4_pair')),
                      f"{us('w4a4_pair_rac50_own'):.2f}",
                      pct(us('w4a4_pair_rac50_own'), us('w4a4_pair'))])
print()
table("Chunk-tiled weights (plain with bf16 lanes, pair-coded with fp16 lanes):",
      ["tiled bf16 us", "tiled pair us", "frac copy", "x bf16", "x fp8",
       "tiled pair RAC50 shared us", "+%"], "w4a4_tiled_pair",
      lambda us, fr: [f"{us('w4a4_tiled'):.2f}", f"{us('w4a4_tiled_pair'):.2f}", f"{fr:.2f}",
                      f"{us('cublas_bf16') / us('w4a4_tiled_pair'):.2f}",
                      f"{us('cublaslt_fp8') / us('w4a4_tiled_pair'):.2f}",
                      f"{us('w4a4_tiled_pair_rac50_shared'):.2f}",
                      pct(us('w4a4_tiled_pair_rac50_shared'), us('w4a4_tiled_pair'))])
