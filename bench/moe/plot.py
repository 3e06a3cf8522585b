# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Plot and tabulate the MoE layer benchmark (moe_bench.json from quads_bench_moe, Google
Benchmark JSON) against the PyTorch baselines (torch_baseline.json) of the same device run.

Usage: python3 bench/moe/plot.py moe_bench.json torch_baseline.json --png docs/moe_time_vs_T.png
Prints a Markdown table per model (median us; ratios to the baselines and to the NVFP4 floor).
"""
import argparse
import json
import re
from collections import defaultdict


def load_quads(path):
    with open(path) as f:
        data = json.load(f)
    out = defaultdict(dict)  # (model, policy) -> T -> record
    for b in data.get("benchmarks", []):
        m = re.match(r"moe/([^/]+)/([^/]+)/T:(\d+)", b.get("name", ""))
        if not m or "us" not in b:
            continue
        out[(m.group(1), m.group(2))][int(m.group(3))] = b
    return out, data.get("context", {})


def load_torch(path):
    with open(path) as f:
        data = json.load(f)
    out = defaultdict(dict)  # (model, dtype) -> T -> record
    for r in data["results"]:
        out[(r["model"], r["dtype"])][r["T"]] = r
    return out, data.get("info", {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quads_json")
    ap.add_argument("torch_json")
    ap.add_argument("--png", default=None)
    args = ap.parse_args()
    q, ctx = load_quads(args.quads_json)
    t, info = load_torch(args.torch_json)
    models = sorted({k[0] for k in q} | {k[0] for k in t}, key=lambda s: s != "qwen3_30b_a3b")
    pols = ["naive_w4a4", "quads_rac50", "naive_w4a4_tiled", "quads_rac50_tiled", "w4a16"]
    for model in models:
        Ts = sorted({T for k, v in q.items() if k[0] == model for T in v})
        print(f"\n#### {model}\n")
        # the ratios are of the fastest QUADS form measured (tiled pair-coded weights if present)
        best = "quads_rac50_tiled" if q.get((model, "quads_rac50_tiled")) else "quads_rac50"
        print("| T | active | floor us | naive W4A4 | QUADS RAC50 | naive W4A4 tiled pair | "
              "QUADS RAC50 tiled pair | W4A16 | torch bf16 layer | "
              "torch fp8 layer | torch bf16 GEMMs | torch fp8 GEMMs | best RAC50 x floor | "
              "fp8 layer / best RAC50 | bf16 layer / best RAC50 |")
        print("|" + "---|" * 15)
        for T in Ts:
            row = q[(model, best)].get(T, {})
            def us(p):
                r = q[(model, p)].get(T)
                return r["us"] if r else None
            def tv(d, key):
                r = t[(model, d)].get(T, {})
                return r.get(key)
            cells = [T, int(row.get("active", 0)), row.get("floor_us")]
            cells += [us(p) for p in pols]
            cells += [tv("bf16", "layer_us"), tv("fp8", "layer_us"), tv("bf16", "gemms_us"),
                      tv("fp8", "gemms_us")]
            rac = us(best)
            cells.append(row.get("x_floor"))
            cells.append(tv("fp8", "layer_us") / rac if rac and tv("fp8", "layer_us") else None)
            cells.append(tv("bf16", "layer_us") / rac if rac and tv("bf16", "layer_us") else None)
            print("| " + " | ".join("-" if c is None else (f"{c:.1f}" if isinstance(c, float)
                                                             else str(c)) for c in cells) + " |")
    print(f"\nquads context: {ctx.get('quads_device', '?')}, copy {ctx.get('quads_copy_GBps', '?')}"
          f" GB/s; torch: {info}")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 5), squeeze=False)
        for ax, model in zip(axes[0], models):
            for p, style in zip(pols, ["o-", "s-", "o--", "s--", "^-"]):
                d = q[(model, p)]
                if d:
                    Ts = sorted(d)
                    ax.plot(Ts, [d[T]["us"] for T in Ts], style, label=f"quads {p}")
            d = q[(model, "quads_rac50")]
            if d:
                Ts = sorted(d)
                ax.plot(Ts, [d[T]["floor_us"] for T in Ts], "k--", label="NVFP4 weight floor")
            for dt, style in [("bf16", "x:"), ("fp8", "d:")]:
                d = t[(model, dt)]
                Ts = sorted(T for T in d if "layer_us" in d[T])
                if Ts:
                    ax.plot(Ts, [d[T]["layer_us"] for T in Ts], style, label=f"torch {dt} layer")
                Ts = sorted(T for T in d if "gemms_us" in d[T])
                if Ts:
                    ax.plot(Ts, [d[T]["gemms_us"] for T in Ts], style, alpha=0.4,
                            label=f"torch {dt} grouped GEMMs only")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("tokens T")
            ax.set_ylabel("time per layer call (us, median, L2 flushed)")
            ax.set_title(model)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
