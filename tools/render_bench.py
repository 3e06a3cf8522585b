#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Renders quads_bench_gpu's JSON (and torch_emulation_bench.py's) into Markdown and a PNG plot.

Benchmark names are `<kernel>/<variant...>/<shape>`; the counters come from bench/gpu/timing.cuh:
us (median per call), GBps (bytes read + written over the median), frac_copy (over the copy
bandwidth measured at the start of the same run, stored in the JSON context as quads_copy_GBps),
frac_read, TFLOPs (GEMM baselines).

  render_bench.py --bench bench.json [--torch torch.json] [--md out.md] [--png plot.png]
                  [--update docs/benchmarks.md]

--update replaces the text between `<!-- results:begin -->` and `<!-- results:end -->` in an
existing page. Without matplotlib the plot is skipped with a note.
"""

import argparse
import json
import math
import re
import sys
from collections import OrderedDict

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def load(path):
    with open(path) as f:
        return json.load(f)


def clean_name(name):
    """Drops Google Benchmark's suffixes (/iterations:N, /manual_time, ...)."""
    return re.sub(r"/(iterations:\d+|manual_time|real_time|repeats:\d+|threads:\d+)", "", name)


def split_name(name):
    kernel, _, shape = clean_name(name).rpartition("/")
    return (kernel or name), shape


def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.{digits}f}"


def pct(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def rows_of(bench):
    out = []
    for b in bench.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        kernel, shape = split_name(b["name"])
        out.append({
            "name": clean_name(b["name"]), "kernel": kernel, "shape": shape,
            "error": b.get("error_message") if b.get("error_occurred") else None,
            "us": b.get("us"), "us_hot": b.get("us_hot"), "GBps": b.get("GBps"), "frac_copy": b.get("frac_copy"),
            "frac_read": b.get("frac_read"), "TFLOPs": b.get("TFLOPs"),
            "bytes": b.get("bytes"), "cold": b.get("cold_l2"),
        })
    return out


def context_lines(bench, torch_result):
    c = bench.get("context", {})
    lines = [
        f"- date: {c.get('date', '?')}",
        f"- device: {c.get('quads_device', '?')} ({c.get('quads_sms', '?')} SMs, L2 "
        f"{int(c.get('quads_l2_bytes', 0)) >> 20} MiB), CUDA runtime {c.get('quads_cuda_runtime', '?')}, "
        f"driver {c.get('quads_cuda_driver', '?')}",
        f"- copy bandwidth (this run, bytes read + written, 1 GiB buffers): "
        f"**{c.get('quads_copy_GBps', '?')} GB/s** = max(cudaMemcpyAsync D2D "
        f"{c.get('quads_memcpy_GBps', '?')}, 16-byte copy kernel {c.get('quads_copy_kernel_GBps', '?')})",
        f"- read bandwidth (reduction, this run): **{c.get('quads_read_GBps', '?')} GB/s**",
    ]
    if torch_result:
        lines.append(f"- PyTorch {torch_result.get('torch', '?')} on "
                     f"{torch_result.get('device', '?')} for the emulation baseline")
    return lines


def us_str(us):
    if us is None:
        return "-"
    return fmt(us, 2) if us < 100 else fmt(us, 1)


def kernel_table(rows, with_read):
    head = "| kernel | shape | us | us hot | GB/s | of copy BW |" + (" of read BW |" if with_read else "")
    sep = "| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: |" if with_read else "")
    lines = [head, sep]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['kernel']} | {r['shape']} | error: {r['error']} | | | |" +
                         (" |" if with_read else ""))
            continue
        line = (f"| {r['kernel']} | {r['shape']} | {us_str(r['us'])} | {us_str(r['us_hot'])} | "
                f"{fmt(r['GBps'], 0)} | {pct(r['frac_copy'])} |")
        if with_read:
            line += f" {pct(r['frac_read'])} |"
        lines.append(line)
    return lines


# Issue 3's performance criteria: (label, benchmark, metric, bound, comparison).
TARGETS = [
    ("quantize bf16->nvfp4, swizzled, given scale, 8192x8192", "quantize/nvfp4_swizzled_given/bf16/8192x8192", "frac_copy", 0.90, ">="),
    ("QDQ bf16->bf16 nvfp4, given scale, 8192x8192", "qdq/nvfp4_given/bf16/8192x8192", "frac_copy", 0.90, ">="),
    ("tensor amax bf16, 8192x8192 (of read BW)", "amax/tensor/bf16/8192x8192", "frac_read", 0.90, ">="),
    ("tensor amax bf16, 16384x16384 (of read BW)", "amax/tensor/bf16/16384x16384", "frac_read", 0.90, ">="),
]
SMALL_KERNELS = ["quantize/nvfp4_swizzled_given/bf16", "quantize/nvfp4_swizzled_row/bf16",
                 "quantize/mxfp4_swizzled/bf16", "qdq/nvfp4_given/bf16", "dequantize/nvfp4_swizzled/bf16",
                 "amax/tensor/bf16", "amax/row/bf16"]
SMALL_SHAPES = ["1x4096", "16x4096", "64x4096"]


def targets_table(rows, torch_result):
    by = {r["name"]: r for r in rows}
    lines = ["| criterion | measured | target | verdict |", "| --- | ---: | ---: | --- |"]

    def verdict(ok):
        return "meets" if ok else "**below**"

    for label, name, metric, bound, _ in TARGETS:
        r = by.get(name)
        if not r or r["error"] or r.get(metric) is None:
            lines.append(f"| {label} | not measured | >= {pct(bound)} | - |")
            continue
        lines.append(f"| {label} | {pct(r[metric])} ({fmt(r['GBps'], 0)} GB/s) | >= {pct(bound)} | "
                     f"{verdict(r[metric] >= bound)} |")
    for k in SMALL_KERNELS:
        vals = [by.get(f"{k}/{sh}") for sh in SMALL_SHAPES]
        vals = [v for v in vals if v and not v["error"]]
        if not vals:
            continue
        worst = max(v["us"] for v in vals)
        hot = [v["us_hot"] for v in vals if v.get("us_hot") is not None]
        worst_hot = max(hot) if hot else None
        lines.append(f"| {k}, 1x4096 .. 64x4096: slowest call, cold L2 (hot, back-to-back) | "
                     f"{us_str(worst)} us ({us_str(worst_hot)} us) | <= 5 us | "
                     f"{verdict(worst <= 5.0)} cold, {verdict(worst_hot is not None and worst_hot <= 5.0)} hot |")
    if torch_result and torch_result.get("speedup_qdq") is not None:
        sp = torch_result["speedup_qdq"]
        lines.append(f"| QDQ 14336x4096 vs plain-PyTorch emulated QDQ | {sp:.1f}x | >= 30x | {verdict(sp >= 30)} |")
    return lines


def pivot(rows, shapes, value, min_cells=2):
    """Kernel x shape table; `value(row)` gives the cell text; kernels with fewer than
    `min_cells` of the shapes are left out (they have their own table)."""
    kernels = OrderedDict()
    for r in rows:
        if r["shape"] in shapes:
            kernels.setdefault(r["kernel"], {})[r["shape"]] = r
    kernels = OrderedDict((k, v) for k, v in kernels.items() if len(v) >= min_cells)
    if not kernels:
        return []
    lines = ["| kernel | " + " | ".join(shapes) + " |", "| --- |" + " ---: |" * len(shapes)]
    for k, cells in kernels.items():
        out = []
        for sh in shapes:
            r = cells.get(sh)
            out.append("-" if r is None else ("err" if r["error"] else value(r)))
        lines.append(f"| {k} | " + " | ".join(out) + " |")
    return lines


def gemm_table(rows):
    lines = ["| baseline | shape | us | TFLOP/s | GB/s | of copy BW |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['kernel']} | {r['shape']} | error: {r['error']} | | | |")
            continue
        lines.append(f"| {r['kernel']} | {r['shape']} | {fmt(r['us'], 1)} | {fmt(r['TFLOPs'], 0)} "
                     f"| {fmt(r['GBps'], 0)} | {pct(r['frac_copy'])} |")
    return lines


def torch_lines(t):
    if not t:
        return ["(the PyTorch emulation baseline was not run)"]
    lines = [f"NVFP4 QDQ of a {t['shape'][0]}x{t['shape'][1]} bf16 weight, medians of "
             f"{t.get('reps', '?')} CUDA-event timings, same machine call:", "",
             "| what | us |", "| --- | ---: |",
             f"| plain-PyTorch emulation: QDQ (quantize + LUT dequantize) | {fmt(t.get('torch_qdq_us'))} |",
             f"| plain-PyTorch emulation: quantize only | {fmt(t.get('torch_quantize_us'))} |",
             f"| plain-PyTorch emulation: dequantize only (LUT * scale) | "
             f"{fmt(t.get('torch_dequantize_us'))} |"]
    if t.get("ours_qdq_us") is not None:
        lines.append(f"| quads QDQ kernel (`{t.get('ours_name')}`) | {fmt(t['ours_qdq_us'], 2)} |")
        lines += ["", f"**Speedup: {t['speedup_qdq']:.0f}x** over the emulated QDQ "
                      f"(target >= 30x), {t['speedup_vs_dequant_only']:.0f}x over its dequantize "
                      f"alone."]
    if t.get("check"):
        lines += ["", f"Emulation checked against test/python/nvfp4_ref.py: {t['check']}."]
    return lines


SWEEP = ["1x2048", "1x4096", "16x4096", "64x4096", "256x4096", "1024x4096", "4096x4096",
         "8192x8192", "14336x4096", "16384x16384"]
TOKENS = [1, 16, 64, 256, 1024, 4096]
STACKS = ["E128x1536x2048", "E128x2048x768", "E32x4096x7168"]


def render_md(bench, torch_result, png_name, png_note):
    rows = rows_of(bench)
    base = [r for r in rows if r["kernel"].startswith("baseline/")]
    gemm = [r for r in base if "gemm" in r["kernel"]]
    bw = [r for r in base if r not in gemm]
    kern = [r for r in rows if not r["kernel"].startswith("baseline/")]
    cell = lambda r: f"{us_str(r['us'])} ({pct(r['frac_copy'])})"  # noqa: E731
    out = ["### Run", ""] + context_lines(bench, torch_result) + [""]
    out += ["### Issue 3 targets", ""] + targets_table(rows, torch_result) + [""]
    out += ["### Method", "",
            "- `us`: median per call over CUDA-event timings. Calls moving >= 32 MiB: back-to-back "
            "batches over a ring of buffer sets together > 3x the L2 (cold L2, steady state). "
            "Smaller calls: one launch timed after a read-only sweep of 4x the L2 (cold L2, isolated "
            "call, includes the event/launch floor below).",
            "- `us hot` (small calls only): per-call time of 20 back-to-back launches on the same "
            "buffers (inputs L2-resident).",
            "- GB/s: bytes each call must read + write (each input once, each output once, "
            "swizzle padding included) over `us`; fractions are of this run's copy (read) "
            "bandwidth.", ""]
    floor = {r["shape"]: r for r in bw if r["kernel"] == "baseline/empty_kernel"}
    if floor:
        f = floor.get("flush")
        out += [f"Launch-bound floor (empty kernel timed the same way): isolated "
                f"{us_str(f['us'] if f else None)} us, back-to-back "
                f"{us_str(f['us_hot'] if f else None)} us per launch.", ""]
    if kern:
        out += ["### Size sweep: us per call (fraction of copy BW)", ""]
        out += pivot(kern, SWEEP, cell) + [""]
        for cols, what in ((2048, "hidden 2048 (Qwen3-30B-A3B) / intermediate 2048"),
                           (7168, "hidden 7168 (DeepSeek-V3-like)"),
                           (768, "intermediate 768 (Qwen3-30B-A3B)")):
            shapes = [f"{t}x{cols}" for t in TOKENS]
            table = pivot(kern, shapes, cell)
            if table:
                out += [f"### MoE activations, tokens x {what}: us (fraction of copy BW)", ""]
                out += table + [""]
        out += ["### Expert stacks [E, N, K]: us (fraction of copy BW)", ""]
        out += pivot(kern, STACKS, cell, min_cells=1) + [""]
    else:
        out += ["(no kernel benchmarks in this run)", ""]
    out += ["### Baselines (same run)", ""] + kernel_table(bw, with_read=True)
    if gemm:
        out += [""] + gemm_table(gemm)
    out += ["", "### Plain-PyTorch emulation", ""] + torch_lines(torch_result)
    if png_name:
        out += ["", f"![fraction of copy bandwidth]({png_name})"]
    elif png_note:
        out += ["", f"(plot: {png_note})"]
    if kern:
        out += ["", "<details><summary>All kernel results</summary>", ""]
        out += kernel_table(kern, with_read=True) + ["", "</details>"]
    return "\n".join(out) + "\n"


PLOT_KERNELS = [
    "quantize/nvfp4_swizzled_given/bf16", "quantize/nvfp4_swizzled_tensor/bf16",
    "quantize/nvfp4_swizzled_row/bf16", "quantize/mxfp4_swizzled/bf16",
    "qdq/nvfp4_given/bf16", "qdq/nvfp4_tensor/bf16", "dequantize/nvfp4_swizzled/bf16",
    "amax/tensor/bf16", "rmsnorm_quantize/nvfp4_swizzled_given/bf16",
    "silu_mul_quantize/nvfp4_swizzled_given/bf16", "baseline/copy_memcpy", "baseline/copy_kernel",
]


def plot(bench, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return f"skipped, matplotlib unavailable ({e.__class__.__name__})"
    series = OrderedDict((k, []) for k in PLOT_KERNELS)
    floor = None
    for r in rows_of(bench):
        if r["kernel"] == "baseline/empty_kernel" and r["shape"] == "flush" and not r["error"]:
            floor = r
        if r["error"] or not r["bytes"] or r["kernel"] not in series:
            continue
        # One shape family per curve: the size sweep; tokens x 2048 for the fused producers.
        fused = "rmsnorm" in r["kernel"] or "silu" in r["kernel"]
        if not r["kernel"].startswith("baseline/") and not (
                r["shape"].endswith("x2048") if fused else r["shape"] in SWEEP):
            continue
        # amax only reads: its bound is the read bandwidth.
        f = r["frac_read"] if r["kernel"].startswith("amax/") else r["frac_copy"]
        series[r["kernel"]].append((r["bytes"], f, r["us"], r.get("us_hot")))
    cmap = plt.get_cmap("tab20")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 6.5))
    for i, (k, pts) in enumerate(series.items()):
        if not pts:
            continue
        pts.sort()
        base = k.startswith("baseline")
        label = k + (" (of read BW)" if k.startswith("amax/") else "")
        style = dict(marker="o", ms=3, label=label, lw=2.5 if base else 1.3,
                     color="black" if base else cmap(i % 20), ls=":" if k.endswith("memcpy") else "-")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], **style)
        small = [p for p in pts if p[0] < (32 << 20)]
        if small and not base:
            bx.plot([p[0] for p in small], [p[2] for p in small], **style)
    ax.axhline(0.9, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("bytes read + written per call")
    ax.set_ylabel("fraction of this run's copy bandwidth")
    ax.set_ylim(0, 1.15)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.axhline(5.0, color="grey", ls="--", lw=0.8, label="5 us target")
    if floor:
        bx.axhline(floor["us"], color="black", ls=":", lw=1.2,
                   label=f"empty kernel, isolated ({floor['us']:.2f} us)")
    bx.set_xlabel("bytes read + written per call (< 32 MiB: one call after an L2 flush)")
    bx.set_ylabel("us per call (median)")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=7, loc="upper left")
    c = bench.get("context", {})
    fig.suptitle(f"quads kernels (size sweep; fused: tokens x 2048) on {c.get('quads_device', '?')}: copy {c.get('quads_copy_GBps', '?')} "
                 f"GB/s, read {c.get('quads_read_GBps', '?')} GB/s ({c.get('date', '')})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--torch")
    ap.add_argument("--md", help="write the Markdown fragment here")
    ap.add_argument("--png", help="write the plot here (needs matplotlib)")
    ap.add_argument("--png-link", help="path of the plot as the Markdown should link it")
    ap.add_argument("--update", help="replace the results section of this Markdown page")
    args = ap.parse_args()

    bench = load(args.bench)
    torch_result = None
    if args.torch:
        try:
            torch_result = load(args.torch)
        except (OSError, ValueError) as e:
            print(f"render_bench: cannot read {args.torch}: {e}", file=sys.stderr)
    note = None
    png_link = None
    if args.png:
        note = plot(bench, args.png)
        if note is None:
            png_link = args.png_link or args.png
        else:
            print(f"render_bench: plot {note}", file=sys.stderr)
    elif args.png_link:
        png_link = args.png_link
    md = render_md(bench, torch_result, png_link, note)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.update:
        with open(args.update) as f:
            page = f.read()
        pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
        if not pattern.search(page):
            print(f"render_bench: no results markers in {args.update}", file=sys.stderr)
            return 1
        page = pattern.sub(lambda _: BEGIN + "\n" + md + END, page)
        with open(args.update, "w") as f:
            f.write(page)
    if not args.md and not args.update:
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
