// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 04: compose the decode GEMM with an epilogue node of your own.
//!
//! `y = clamp(gain[n] * (alpha * A W^T), -cap, cap)` stored as bf16, where A and W are NVFP4
//! (emulated W4A4 on Hopper: both dequantized exactly to bf16 in registers, fp32 accumulation).
//! `per_column_gain` and `soft_cap` are user nodes: a struct with `arguments`, `params`,
//! `to_params` and `apply`. The same chain runs on the host reference (host pointers) and in the
//! GPU epilogue (device pointers). Without a GPU the host part runs and the device part is
//! skipped (exit 77).
#include <quads/gemm/decode.cuh>

#include <quads/epilogue/epilogue.hpp>
#include <quads/gemm/reference.hpp>
#include <quads/reference/tensor.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;

// --- the user's nodes --------------------------------------------------------------------------

//! Multiplies column n by gain[n] (say, a per-channel calibration factor).
struct per_column_gain {
  struct arguments {
    const float* gain = nullptr;  // one per output column, in the memory the epilogue runs on
  };
  struct params {
    const float* gain;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.gain}; }
  QUADS_API static float apply(float v, int /*row*/, int col, const params& p) noexcept {
    return v * p.gain[col];
  }
};

//! Clamps to [-cap, cap].
struct soft_cap {
  struct arguments {
    float cap = 30.0f;
  };
  struct params {
    float cap;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.cap}; }
  QUADS_API static constexpr float apply(float v, int, int, const params& p) noexcept {
    return v > p.cap ? p.cap : (v < -p.cap ? -p.cap : v);
  }
};

// The composition: library nodes and user nodes side by side. The device chain stores
// __nv_bfloat16; the host chain stores quads::bf16_t (the same bits).
using device_epilogue =
    qe::chain<qe::scale_alpha, per_column_gain, soft_cap, qe::store<__nv_bfloat16>>;
using host_epilogue = qe::chain<qe::scale_alpha, per_column_gain, soft_cap, qe::store<quads::bf16_t>>;

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  if (cudaMalloc(&d, h.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

int main() {
  const int M = 4, N = 96, K = 512;  // 4 tokens, a 96 x 512 weight
  std::mt19937 g(2026);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(M) * K), w(static_cast<std::size_t>(N) * K), gain(N);
  for (float& v : x) v = d(g);
  for (float& v : w) v = 0.05f * d(g);
  for (int n = 0; n < N; ++n) gain[static_cast<std::size_t>(n)] = 1.0f + 0.01f * static_cast<float>(n);

  // NVFP4 operands (per-tensor scales), exactly what the quantize kernels would produce.
  const auto wq = quads::reference::quantize<quads::nvfp4>(w, N, K);
  const auto xq = quads::reference::quantize<quads::nvfp4>(x, M, K);

  // Host: the float64 reference accumulator, then the very same chain on the host.
  const auto acc = qg::reference::w4a4(xq, wq);
  std::vector<quads::bf16_t> y_host(static_cast<std::size_t>(M) * N);
  const qe::alpha_source host_alpha{.a = xq.tensor_scales.data(), .a_mode = qe::scale_source::tensor,
                                    .w = wq.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
  qg::reference::apply_epilogue<host_epilogue>(
      acc, host_epilogue::arguments{host_alpha, {gain.data()}, {2.0f}, {y_host.data(), N}});
  std::printf("host reference: y[0][0..4] =");
  for (int n = 0; n < 4; ++n)
    std::printf(" %.5f", quads::element_traits<quads::bf16_t>::to_float(y_host[static_cast<std::size_t>(n)]));
  std::printf("\n");

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: the GPU run of the composed GEMM is skipped");
    return 77;
  }

  // Device: upload, plan the split-K, run, compare.
  auto* dw = to_device(wq.data);
  auto* dws = to_device(wq.scales);
  auto* dwt = to_device(wq.tensor_scales);
  auto* dx = to_device(xq.data);
  auto* dxs = to_device(xq.scales);
  auto* dxt = to_device(xq.tensor_scales);
  auto* dgain = to_device(gain);
  __nv_bfloat16* dy = nullptr;
  void* workspace = nullptr;
  const qg::decode_plan plan = qg::plan_decode(M, N, K, /*residual=*/false);
  cudaMalloc(&dy, static_cast<std::size_t>(M) * N * sizeof(__nv_bfloat16));
  cudaMalloc(&workspace, plan.workspace_bytes);

  const device_epilogue::arguments args{
      {.a = dxt, .a_mode = qe::scale_source::tensor, .w = dwt, .w_mode = qe::scale_source::tensor},
      {dgain},
      {2.0f},
      {dy, N}};
  const cudaError_t e = qg::decode_gemm<qg::bf16_lane, device_epilogue>(
      plan, qg::fp4_weights<quads::nvfp4>{dw, dws}, qg::fp4_activations<quads::nvfp4>{dx, dxs}, args,
      workspace, nullptr);
  if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("decode_gemm failed: %s (%s)\n", cudaGetErrorString(e),
                quads::kernels::last_error_message());
    return 1;
  }
  std::vector<__nv_bfloat16> y(static_cast<std::size_t>(M) * N);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost);
  int differ = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (__nv_bfloat16_raw(y[i]).x != y_host[i].bits) ++differ;
  std::printf("GPU (%d splits): %d of %zu bf16 outputs differ from the host chain (fp32 summation "
              "order can move a value by one bf16 ulp)\n",
              plan.splits, differ, y.size());
  for (void* p : {static_cast<void*>(dw), static_cast<void*>(dws), static_cast<void*>(dwt),
                  static_cast<void*>(dx), static_cast<void*>(dxs), static_cast<void*>(dxt),
                  static_cast<void*>(dgain), static_cast<void*>(dy), workspace})
    cudaFree(p);
  return 0;
}
