# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""bf16 and FP8 grouped MoE baselines in PyTorch, for bench/moe (run in the same device call).

The whole expert layer as an engine would run it with PyTorch's grouped GEMMs: softmax top-k
routing with renormalisation, a stable sort of the (token, expert) pairs by expert and device
offsets (no host sync), row gather, grouped gate_up GEMM, SiLU * up, grouped down GEMM, top-k
weighting and an index_add combine into [T, H].
- bf16: torch._grouped_mm (bf16 weights [E, N, K] passed as [E, K, N] column-major views);
- fp8:  torch._scaled_grouped_mm with rowwise scales (activations per row, weights per output
        channel; e4m3), h re-quantized per row; if that op is missing or refuses the shapes, a
        per-expert loop of torch._scaled_mm (needs the offsets on the host) -- reported as such.
Each variant is timed twice: the whole layer ("layer") and the two grouped GEMMs alone on
pre-computed inputs ("gemms"). Every variant is captured into a CUDA graph when possible (as a
decode engine does; falls back to eager and says so). Cold L2: a 512 MiB read sweep before each
timed launch. Median of the iterations, CUDA events.

Usage: python3 torch_baseline.py --out baseline.json [--models qwen3_30b_a3b,deepseek_v3]
                                 [--tokens 1,4,16,64,256,1024,4096]
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

MODELS = {
    "qwen3_30b_a3b": (128, 8, 2048, 768),
    "deepseek_v3": (256, 8, 7168, 2048),
}
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def rowwise_fp8(x):
    """Per-row scale (amax / 448) and the e4m3 tensor (3D stacks: one expert at a time)."""
    if x.dim() == 3:
        parts = [rowwise_fp8(x[e]) for e in range(x.shape[0])]
        return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / FP8_MAX
    return (x.float() / scale).to(FP8), scale.squeeze(-1).contiguous()


class Layer:
    def __init__(self, E, k, H, I, dtype, dev):
        self.E, self.k, self.H, self.I = E, k, H, I
        g = torch.Generator(device=dev).manual_seed(1)
        # [E, N, K] row-major; the grouped GEMMs take [E, K, N] views (column-major B)
        self.w_gu = (torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16, generator=g)
                     * H ** -0.5)
        self.w_dn = (torch.randn(E, H, I, device=dev, dtype=torch.bfloat16, generator=g)
                     * I ** -0.5)
        self.fp8 = dtype == "fp8"
        if self.fp8:
            self.q_gu, self.s_gu = rowwise_fp8(self.w_gu)  # scales [E, 2I]
            self.q_dn, self.s_dn = rowwise_fp8(self.w_dn)  # scales [E, H]
            del self.w_gu, self.w_dn
            torch.cuda.empty_cache()
        self.method = "torch._grouped_mm" if not self.fp8 else "torch._scaled_grouped_mm"

    def route(self, logits):
        p = torch.softmax(logits.float(), dim=-1)
        w, idx = torch.topk(p, self.k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        flat = idx.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.zeros(self.E, dtype=torch.int32, device=logits.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        return w.flatten()[order], order // self.k, offs

    def gemm(self, a, which, offs):
        if not self.fp8:
            w = self.w_gu if which == 0 else self.w_dn
            return torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
        q = self.q_gu if which == 0 else self.q_dn
        s = self.s_gu if which == 0 else self.s_dn
        aq, sa = rowwise_fp8(a)
        if self.method == "torch._scaled_grouped_mm":
            return torch._scaled_grouped_mm(aq, q.transpose(-2, -1), sa, s, offs=offs,
                                            out_dtype=torch.bfloat16)
        # fallback: per-expert torch._scaled_mm (host sync for the offsets)
        out = torch.empty(a.shape[0], q.shape[1], device=a.device, dtype=torch.bfloat16)
        lo = 0
        for e, hi in enumerate(offs.tolist()):
            if hi > lo:
                out[lo:hi] = torch._scaled_mm(aq[lo:hi], q[e].t(), scale_a=sa[lo:hi, None],
                                              scale_b=s[e][None, :], out_dtype=torch.bfloat16)
            lo = hi
        return out

    def forward(self, x, logits):
        w, token, offs = self.route(logits)
        xs = x[token]
        h = self.gemm(xs, 0, offs)
        g, u = h.chunk(2, dim=-1)
        a = F.silu(g) * u
        y = self.gemm(a, 1, offs).float() * w[:, None]
        out = torch.zeros(x.shape[0], self.H, device=x.device, dtype=torch.float32)
        out.index_add_(0, token, y)
        return out.to(torch.bfloat16)


def timed(fn, iters, flush, use_graph):
    """Median microseconds of fn() after an L2 read sweep; CUDA graph if possible."""
    graph_used = False
    run = fn
    if use_graph:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            run = g.replay
            graph_used = True
        except Exception as ex:  # noqa: BLE001 - report and fall back to eager
            print(f"    graph capture failed ({type(ex).__name__}: {ex}); eager timing",
                  file=sys.stderr)
            torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    sink = torch.empty((), device="cuda", dtype=torch.int64)
    for _ in range(iters):
        torch.amax(flush, dim=0, out=sink)
        a.record()
        run()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    out.sort()
    return out[len(out) // 2], graph_used


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tokens", default="1,4,16,64,256,1024,4096")
    ap.add_argument("--dtypes", default="bf16,fp8")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "has_grouped_mm": hasattr(torch, "_grouped_mm"),
            "has_scaled_grouped_mm": hasattr(torch, "_scaled_grouped_mm")}
    print("torch baseline:", info)
    flush = torch.ones(512 << 20 >> 3, device=dev, dtype=torch.int64)
    results = []
    for name in args.models.split(","):
        E, k, H, I = MODELS[name]
        for dtype in args.dtypes.split(","):
            torch.cuda.empty_cache()
            layer = Layer(E, k, H, I, dtype, dev)
            for T in [int(t) for t in args.tokens.split(",")]:
                gen = torch.Generator(device=dev).manual_seed(T)
                x = torch.randn(T, H, device=dev, dtype=torch.bfloat16, generator=gen)
                logits = torch.randn(T, E, device=dev, generator=gen) * 2
                iters = 5 if T * H * I > 2e9 else (10 if T * H * I > 2e8 else 30)
                rec = {"model": name, "dtype": dtype, "T": T}
                try:
                    if dtype == "fp8" and layer.method == "torch._scaled_grouped_mm":
                        try:
                            layer.forward(x, logits)
                            torch.cuda.synchronize()
                        except Exception as ex:  # noqa: BLE001
                            print(f"  _scaled_grouped_mm refused ({type(ex).__name__}: "
                                  f"{str(ex)[:200]}); per-expert _scaled_mm loop", file=sys.stderr)
                            layer.method = "torch._scaled_mm loop (host sync)"
                    graphable = "loop" not in layer.method
                    rec["layer_us"], rec["layer_graph"] = timed(
                        lambda: layer.forward(x, logits), iters, flush, graphable)
                    w, token, offs = layer.route(logits)
                    xs = x[token].contiguous()
                    h = layer.gemm(xs, 0, offs)
                    a = (F.silu(h[:, :I]) * h[:, I:]).contiguous()
                    rec["gemms_us"], rec["gemms_graph"] = timed(
                        lambda: (layer.gemm(xs, 0, offs), layer.gemm(a, 1, offs)), iters, flush,
                        graphable)
                    rec["gate_up_us"], _ = timed(lambda: layer.gemm(xs, 0, offs), iters, flush,
                                                 graphable)
                    rec["active"] = int((torch.diff(offs, prepend=offs.new_zeros(1)) > 0).sum())
                except Exception as ex:  # noqa: BLE001
                    rec["error"] = f"{type(ex).__name__}: {str(ex)[:300]}"
                rec["method"] = layer.method
                print(f"  {name:14s} {dtype:4s} T={T:5d} " + " ".join(
                    f"{kk}={vv:.1f}" if isinstance(vv, float) else f"{kk}={vv}"
                    for kk, vv in rec.items() if kk not in ("model", "dtype", "T")), flush=True)
                results.append(rec)
            del layer
    with open(args.out, "w") as f:
        json.dump({"info": info, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
