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
print("| weight | M | W4A4 us | frac copy | W4A16 us | RAC50 shared us | RAC50 own us | bf16 us | fp8 us "
      "| x bf16 | x fp8 | RAC shared +% | RAC own +% |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (N, K, M), r in sorted(rows.items()):
    def us(k):
        return r[k]["us"] if k in r else float("nan")
    w = us("w4a4_nvfp4")
    fr = r["w4a4_nvfp4"]["frac_copy"] if "w4a4_nvfp4" in r else float("nan")
    print(f"| {N}x{K} | {M} | {w:.2f} | {fr:.2f} | {us('w4a16_bf16'):.2f} | "
          f"{us('w4a4_rac50_shared'):.2f} | {us('w4a4_rac50_own'):.2f} | {us('cublas_bf16'):.2f} | "
          f"{us('cublaslt_fp8'):.2f} | {us('cublas_bf16') / w:.2f} | {us('cublaslt_fp8') / w:.2f} | "
          f"{100 * (us('w4a4_rac50_shared') / w - 1):.0f} | {100 * (us('w4a4_rac50_own') / w - 1):.0f} |")
for v in variants:
    print(v)
print()
print("Pair-coded NVFP4 weights (fp16 lanes; the decode fast path) against the plain layouts:")
print("| weight | M | plain bf16 us | plain fp16 us | pair us | frac copy | x bf16 | x fp8 "
      "| pair RAC50 shared us | +% | pair RAC50 own us | +% |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (N, K, M), r in sorted(rows.items()):
    if "w4a4_pair" not in r:
        continue
    def us(k):
        return r[k]["us"] if k in r else float("nan")
    p = us("w4a4_pair")
    print(f"| {N}x{K} | {M} | {us('w4a4_nvfp4'):.2f} | {us('w4a4_nvfp4_fp16'):.2f} | {p:.2f} | "
          f"{r['w4a4_pair']['frac_copy']:.2f} | {us('cublas_bf16') / p:.2f} | {us('cublaslt_fp8') / p:.2f} | "
          f"{us('w4a4_pair_rac50_shared'):.2f} | {100 * (us('w4a4_pair_rac50_shared') / p - 1):.0f} | "
          f"{us('w4a4_pair_rac50_own'):.2f} | {100 * (us('w4a4_pair_rac50_own') / p - 1):.0f} |")
print()
print("| weight | M | tiled bf16 us | tiled pair us | frac copy | x bf16 | x fp8 | tiled pair RAC50 shared us | +% |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (N, K, M), r in sorted(rows.items()):
    if "w4a4_tiled_pair" not in r:
        continue
    def us(k):
        return r[k]["us"] if k in r else float("nan")
    p = us("w4a4_tiled_pair")
    print(f"| {N}x{K} | {M} | {us('w4a4_tiled'):.2f} | {p:.2f} | {r['w4a4_tiled_pair']['frac_copy']:.2f} | "
          f"{us('cublas_bf16') / p:.2f} | {us('cublaslt_fp8') / p:.2f} | "
          f"{us('w4a4_tiled_pair_rac50_shared'):.2f} | {100 * (us('w4a4_tiled_pair_rac50_shared') / p - 1):.0f} |")
