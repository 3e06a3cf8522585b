#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""NVFP4 fake quantization (QDQ) written in plain PyTorch, timed on the GPU, against quads' kernel.

This is the baseline of issue 3's criterion 3: QDQ of a 14336x4096 bf16 weight with our kernel
must be >= 30x faster than NVFP4 emulation in plain PyTorch (lookup-table dequantize + multiply),
both measured in the same run (one machine call: tools/bench_gpu.sh runs the C++ suite first and
passes its JSON here with --ours).

The emulation is the TransformerEngine recipe (docs: shared/reference/formats.md section 2.4), in
eager PyTorch ops only:
  quantize:   S_enc = min(6*448/amax_t, FLT_MAX) (1 when amax_t == 0), S_dec = 1/S_enc;
              per 16-block: byte = e4m3(min(amax_b * (S_enc * RN(1/6)), 448)),
              mult = min(1 / (e4m3(byte) * S_dec), FLT_MAX), y = x * mult,
              code = RNE to the E2M1 grid (bucketize + ties-to-even fix-up), sign bit, pack 2/byte;
  dequantize: unpack, LUT[code] * e4m3(byte) * S_dec, cast to bf16.
Timed with CUDA events (median of --reps after --warmup), for QDQ (quantize + dequantize) and for
dequantize alone. `--check` compares the emulation on a slice with test/python/nvfp4_ref.py (an
independent NumPy reference) when it can be imported.
"""

import argparse
import json
import os
import re
import statistics
import sys

FLT_MAX = 3.4028234663852886e38


def build(torch):
    """Returns (quantize, dequantize, qdq) closures in plain torch ops."""
    f32 = torch.float32
    one_sixth = torch.tensor(1.0, dtype=f32) / torch.tensor(6.0, dtype=f32)  # RN(1/6) in fp32
    lut_values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    lut_values = lut_values + [-v for v in lut_values]

    def quantize(x):
        dev = x.device
        x32 = x.float().reshape(-1, 16)
        amax_t = x32.abs().amax()
        s_enc = torch.clamp(torch.tensor(6.0 * 448.0, device=dev) / amax_t, max=FLT_MAX)
        s_enc = torch.where((amax_t == 0) | (s_enc == 0), torch.ones_like(s_enc), s_enc)
        s_dec = torch.tensor(1.0, device=dev) / s_enc
        amax_b = x32.abs().amax(dim=1)
        scale = torch.clamp(amax_b * (s_enc * one_sixth.to(dev)), max=448.0)
        scale_byte = scale.to(torch.float8_e4m3fn)
        s = scale_byte.float()
        mult = torch.clamp(torch.tensor(1.0, device=dev) / (s * s_dec), max=FLT_MAX)
        y = x32 * mult[:, None]
        a = y.abs()
        bounds = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=dev)
        mag = torch.bucketize(a, bounds, right=False)  # ties go down ...
        tie_up = (a == 0.75) | (a == 1.75) | (a == 3.5)  # ... except where the even code is above
        mag = mag + tie_up.to(mag.dtype)
        codes = mag.to(torch.uint8) | (torch.signbit(y).to(torch.uint8) << 3)
        codes = torch.where(torch.isnan(y), torch.full_like(codes, 7), codes)
        codes = codes.reshape(-1, 2)
        packed = codes[:, 0] | (codes[:, 1] << 4)
        return packed, scale_byte, s_dec

    def dequantize(packed, scale_byte, s_dec, shape):
        lut = torch.tensor(lut_values, dtype=f32, device=packed.device)
        codes = torch.stack([packed & 0xF, packed >> 4], dim=1).reshape(-1, 16).long()
        vals = lut[codes]
        out = (vals * scale_byte.float()[:, None]) * s_dec
        return out.to(torch.bfloat16).reshape(shape)

    def qdq(x):
        packed, scale_byte, s_dec = quantize(x)
        return dequantize(packed, scale_byte, s_dec, x.shape)

    return quantize, dequantize, qdq


def time_cuda(torch, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)  # us
    return statistics.median(times), min(times)


def check_against_numpy(torch, qdq, x):
    """Bit comparison of the emulation with the independent NumPy reference on a slice."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "test", "python"))
    try:
        import numpy as np
        import nvfp4_ref
    except Exception as e:  # noqa: BLE001 - report and carry on: the check is optional
        return f"skipped ({e.__class__.__name__}: {e})"
    xs = x[:64].contiguous()
    ours = qdq(xs).float().cpu().numpy()
    x32 = xs.float().cpu().numpy().reshape(1, *xs.shape)
    ref = nvfp4_ref.quantize(x32, nvfp4_ref.Options()).deq.reshape(xs.shape)
    ref_bf16 = torch.from_numpy(ref).to(torch.bfloat16).float().numpy()
    bad = int(np.count_nonzero(ours.view(np.uint32) != ref_bf16.view(np.uint32)))
    return "bit-identical on 64x4096" if bad == 0 else f"MISMATCH: {bad} values differ"


def ours_from_json(path, name):
    """Median time (us) of benchmark `name` in a Google Benchmark JSON file, or None."""
    with open(path) as f:
        data = json.load(f)
    for b in data.get("benchmarks", []):
        clean = re.sub(r"/(iterations:\d+|manual_time|real_time|repeats:\d+)", "", b.get("name", ""))
        if clean == name and "us" in b and not b.get("error_occurred"):
            return float(b["us"])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=14336)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ours", help="Google Benchmark JSON of quads_bench_gpu from the same run")
    ap.add_argument("--ours-name", default=None,
                    help="benchmark name of our QDQ (default: qdq/nvfp4_tensor/bf16/<rows>x<cols>)")
    ap.add_argument("--json", help="write the results here (merged by tools/render_bench.py)")
    ap.add_argument("--check", action="store_true", help="compare with test/python/nvfp4_ref.py")
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("torch_emulation_bench: no CUDA device, skipping")
        return 77
    torch.manual_seed(0)
    dev = torch.device("cuda")
    # A weight-like tensor: normal values with rare large outliers (not zeros, not uniform).
    x = torch.randn(args.rows, args.cols, device=dev, dtype=torch.float32)
    x = torch.where(torch.rand_like(x) < 1e-3, x * 64, x).to(torch.bfloat16)
    quantize, dequantize, qdq = build(torch)

    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "shape": [args.rows, args.cols],
        "reps": args.reps,
    }
    if args.check:
        result["check"] = check_against_numpy(torch, qdq, x)
        print(f"torch emulation vs nvfp4_ref.py: {result['check']}")

    qdq_us, qdq_min = time_cuda(torch, lambda: qdq(x), args.warmup, args.reps)
    packed, scale_byte, s_dec = quantize(x)
    dq_us, dq_min = time_cuda(torch, lambda: dequantize(packed, scale_byte, s_dec, x.shape),
                              args.warmup, args.reps)
    q_us, _ = time_cuda(torch, lambda: quantize(x), args.warmup, args.reps)
    result.update(torch_qdq_us=qdq_us, torch_qdq_min_us=qdq_min, torch_quantize_us=q_us,
                  torch_dequantize_us=dq_us, torch_dequantize_min_us=dq_min)
    print(f"plain-PyTorch NVFP4 emulation, {args.rows}x{args.cols} bf16 ({torch.__version__}):")
    print(f"  QDQ {qdq_us:9.1f} us   quantize {q_us:9.1f} us   dequantize (LUT*scale) "
          f"{dq_us:9.1f} us   (medians of {args.reps})")

    if args.ours:
        name = args.ours_name or f"qdq/nvfp4_tensor/bf16/{args.rows}x{args.cols}"
        ours = ours_from_json(args.ours, name)
        result["ours_name"] = name
        if ours is None:
            print(f"  ours: benchmark '{name}' not found in {args.ours}")
        else:
            result.update(ours_qdq_us=ours, speedup_qdq=qdq_us / ours,
                          speedup_vs_dequant_only=dq_us / ours)
            verdict = "meets" if qdq_us / ours >= 30 else "BELOW"
            print(f"  ours ({name}): {ours:.2f} us -> {qdq_us / ours:.1f}x faster than the "
                  f"emulated QDQ ({verdict} the 30x target), {dq_us / ours:.1f}x faster than its "
                  f"dequantize alone")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
