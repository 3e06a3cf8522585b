// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A timing smoke test (QUADS_GPU_PERF=1 only): bandwidth of the main launchers against the
//! device's own copy / read bandwidth, and the small-size latency. The benchmark suite in bench/
//! is the real measurement; this lets the test run record a first look.
#include "gpu_test.cuh"

#include <algorithm>
#include <functional>

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;
namespace qk = quads::kernels;
namespace kd = quads::kernels::detail;

__global__ void fill_normalish(bf16* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const random_words4 w = philox4x32_10{seed}(i);
    // sum of 4 uniforms: a cheap bell shape in [-2, 2)
    const float u = (static_cast<float>(w[0] >> 8) + static_cast<float>(w[1] >> 8) +
                     static_cast<float>(w[2] >> 8) + static_cast<float>(w[3] >> 8)) *
                        (1.0f / 16777216.0f) -
                    2.0f;
    p[i] = __float2bfloat16_rn((w[0] & 0xff) == 0 ? u * 40.0f : u);
  }
}

__global__ void read_kernel(const uint4* p, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 1023u) *sink = acc;
}

__global__ void empty_kernel() {}

//! Median time in microseconds of `iters` runs of `f(i)` (after 3 warm-ups), one event pair each.
double median_us(int iters, const std::function<void(int)>& f) {
  for (int i = 0; i < 3; ++i)
    f(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    f(i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  return t[t.size() / 2];
}

//! Mean time per call of `calls` back-to-back launches (launch-bound regime).
double per_call_us(int calls, const std::function<void()>& f) {
  for (int i = 0; i < 10; ++i)
    f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < calls; ++i)
    f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  return ms * 1000.0 / calls;
}

void row(const char* name, double us, double bytes, double ref_gbs, const char* ref_name) {
  const double gbs = bytes / (us * 1e3);
  std::printf("  %-52s %9.2f us %8.1f GB/s %6.1f%% of %s\n", name, us, gbs, 100.0 * gbs / ref_gbs,
              ref_name);
}
} // namespace

TEST_SUITE("gpu.perf") {
  TEST_CASE("sm90: perf smoke (runs only with QUADS_GPU_PERF=1)") {
    if (std::getenv("QUADS_GPU_PERF") == nullptr) return;
    using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
    using q_tensor = block_quantizer<nvfp4>;
    using q_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
    using m_up = block_quantizer<mxfp4>;
    constexpr int M = 8192, K = 8192, NB = 3; // three rotating sets: 384 MiB of inputs
    const std::size_t n = static_cast<std::size_t>(M) * K;
    std::vector<bf16*> xs(NB), ys(NB);
    std::vector<std::uint8_t*> ds(NB), ss(NB);
    for (int i = 0; i < NB; ++i) {
      REQUIRE(cudaMalloc(&xs[i], n * 2) == cudaSuccess);
      REQUIRE(cudaMalloc(&ys[i], n * 2) == cudaSuccess);
      REQUIRE(cudaMalloc(&ds[i], n / 2) == cudaSuccess);
      REQUIRE(cudaMalloc(&ss[i], n / 16 + 4096) == cudaSuccess);
      fill_normalish<<<132 * 8, 256>>>(xs[i], n, seed() + i);
    }
    device_buffer<tensor_scale> given(1), ts(M);
    given.upload({make_tensor_scale<nvfp4>(80.0f)});
    device_buffer<float> amax(M);
    device_buffer<unsigned> sink(1);
    sync_ok();

    const double copy_bytes = 2.0 * n * 2;
    const double t_copy = median_us(10, [&](int i) {
      cudaMemcpyAsync(ys[i % NB], xs[(i + 1) % NB], n * 2, cudaMemcpyDeviceToDevice);
    });
    const double copy_gbs = copy_bytes / (t_copy * 1e3);
    const double t_read = median_us(10, [&](int i) {
      read_kernel<<<132 * 8, 512>>>(reinterpret_cast<const uint4*>(xs[i % NB]), n * 2 / 16,
                                    sink.ptr);
    });
    const double read_gbs = n * 2.0 / (t_read * 1e3);
    std::printf(
        "perf smoke, %dx%d bf16 (device copy %.1f GB/s read+write, read-only sweep %.1f GB/s)\n", M,
        K, copy_gbs, read_gbs);
    const qk::tensor_shape shape{1, M, K, 0, 0};
    const qk::scale_args args{given.ptr, 1, amax.ptr, 0};
    const double q_bytes = n * 2.0 + n / 2.0 + n / 16.0;

    row("tensor_amax", median_us(20, [&](int i) { qk::tensor_amax(xs[i % NB], shape, amax.ptr); }),
        n * 2.0, read_gbs, "read");
    row("quantize nvfp4 swizzled, given scale",
        median_us(20,
                  [&](int i) {
                    qk::quantize<q_given, swizzled_128x4>(xs[i % NB], shape,
                                                          {ds[i % NB], ss[i % NB], ts.ptr}, args);
                  }),
        q_bytes, copy_gbs, "copy");
    { // the same through Quantizer::quantize (the comparison-chain encoder) for the record
      using sink_t = kd::quant_sink<nvfp4, swizzled_128x4>;
      const swizzled_128x4 l{M, K / 16};
      constexpr auto kernel = kd::block_kernel<q_given, bf16, sink_t, false>;
      const unsigned gx = kd::grid_for<kernel>(kd::block_threads, n / 16 / 2, 8);
      row("  same, core encoder (Quantizer::quantize per block)",
          median_us(20,
                    [&](int i) {
                      const sink_t sk{ds[i % NB], ss[i % NB], l, l.size(), M, K / 16};
                      kernel<<<gx, kd::block_threads>>>(
                          xs[i % NB], kd::fast_divmod(K / 16), static_cast<std::uint32_t>(n / 16),
                          M, K, 0, kd::scale_source<q_given>{given.ptr, 1, nullptr, nullptr}, sk,
                          0);
                    }),
          q_bytes, copy_gbs, "copy");
    }
    row("quantize nvfp4 swizzled, per-tensor (amax + quantize)",
        median_us(20,
                  [&](int i) {
                    qk::quantize<q_tensor, swizzled_128x4>(xs[i % NB], shape,
                                                           {ds[i % NB], ss[i % NB], ts.ptr}, args);
                  }),
        q_bytes, copy_gbs, "copy");
    row("quantize nvfp4 swizzled, per-row (fused)",
        median_us(20,
                  [&](int i) {
                    qk::quantize<q_row, swizzled_128x4>(xs[i % NB], shape,
                                                        {ds[i % NB], ss[i % NB], ts.ptr}, args);
                  }),
        q_bytes, copy_gbs, "copy");
    row("quantize mxfp4 swizzled",
        median_us(20,
                  [&](int i) {
                    qk::quantize<m_up, swizzled_128x4>(xs[i % NB], shape,
                                                       {ds[i % NB], ss[i % NB], nullptr}, args);
                  }),
        n * 2.0 + n / 2.0 + n / 32.0, copy_gbs, "copy");
    row("qdq bf16 -> bf16, given scale",
        median_us(20, [&](int i) { qk::qdq<q_given>(xs[i % NB], ys[i % NB], shape, args); }),
        n * 4.0, copy_gbs, "copy");
    row("dequantize nvfp4 swizzled -> bf16",
        median_us(20,
                  [&](int i) {
                    qk::dequantize<q_given, swizzled_128x4>({ds[i % NB], ss[i % NB], ts.ptr},
                                                            ys[i % NB], shape);
                  }),
        q_bytes, copy_gbs, "copy");
    row("rmsnorm_quantize nvfp4 swizzled, per-row",
        median_us(20,
                  [&](int i) {
                    qk::rmsnorm_quantize<q_row, swizzled_128x4>(
                        xs[i % NB], xs[(i + 1) % NB], 1e-6f, shape,
                        {ds[i % NB], ss[i % NB], ts.ptr}, args);
                  }),
        q_bytes, copy_gbs, "copy");
    row("silu_mul_quantize nvfp4 swizzled, given ([M, K] gate and up)",
        median_us(20,
                  [&](int i) {
                    qk::silu_mul_quantize<q_given, swizzled_128x4>(
                        xs[i % NB], xs[(i + 1) % NB], shape, {ds[i % NB], ss[i % NB], ts.ptr},
                        args);
                  }),
        q_bytes + n * 2.0, copy_gbs, "copy");
    {
      const qk::tensor_shape w{1, 14336, 4096, 0, 0};
      row("qdq 14336x4096 bf16 weight, per-tensor scale",
          median_us(20, [&](int i) { qk::qdq<q_tensor>(xs[i % NB], ys[i % NB], w, args, ts.ptr); }),
          14336.0 * 4096 * 4, copy_gbs, "copy");
    }
    std::printf("  small sizes (mean of 2000 back-to-back calls; empty kernel launch: %.2f us)\n",
                per_call_us(2000, [] { empty_kernel<<<1, 32>>>(); }));
    for (int m : {1, 4, 16, 64}) {
      const qk::tensor_shape s{1, m, 4096, 0, 0};
      const double us = per_call_us(2000, [&] {
        qk::quantize<q_given, swizzled_128x4>(xs[0], s, {ds[0], ss[0], ts.ptr}, args);
      });
      const double us_row = per_call_us(2000, [&] {
        qk::quantize<q_row, swizzled_128x4>(xs[0], s, {ds[0], ss[0], ts.ptr}, args);
      });
      const double us_rms = per_call_us(2000, [&] {
        qk::rmsnorm_quantize<q_row, swizzled_128x4>(xs[0], xs[1], 1e-6f, s, {ds[0], ss[0], ts.ptr},
                                                    args);
      });
      std::printf(
          "  %2dx4096: quantize given %.2f us, per-row %.2f us, rmsnorm+quantize per-row %.2f us\n",
          m, us, us_row, us_rms);
    }
    for (int i = 0; i < NB; ++i) {
      cudaFree(xs[i]);
      cudaFree(ys[i]);
      cudaFree(ds[i]);
      cudaFree(ss[i]);
    }
    sync_ok();
  }
}
