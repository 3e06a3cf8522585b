// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 03, GPU path: the training loop of `common.hpp` with each expert linear layer's
//! forward and backward on the GPU through `quads::trainer` (kernels::qdq fake quantization,
//! cuBLAS bf16 GEMMs with fp32 accumulation, STE kernels). Routing, SwiGLU, the loss and Adam
//! stay on the host (the model is tiny; the point is the trainer's linear path).
//!
//! What differs from the CPU trainer (`reference::linear_forward<P, float>`): the GPU path's
//! GEMM operands and outputs are bf16 (inputs x and h, the weight operand = bf16 RNE of
//! QDQ(W), y and dx), as a bf16 trainer computes; the CPU trainer keeps fp32 activations.
//! So the two runs are not equal up to summation order only: each step differs by bf16
//! rounding (unit roundoff 2^-8), and 300 Adam steps carry that along. The comparison line
//! therefore uses a loose tolerance, see `loss_tolerance`.
#include "gpu_path.hpp"

#include <quads/policy/trainer.cuh>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ex03 {
namespace {

namespace tr = quads::trainer;
using bf16 = tr::bf16;

//! |gpu - cpu| <= loss_tolerance * cpu, on the held-out trainer loss (see the file comment).
constexpr double loss_tolerance = 0.10;

[[noreturn]] void die(const char* what, cudaError_t e) {
  std::fprintf(stderr, "example 03 (GPU): %s failed: %s %s\n", what, cudaGetErrorString(e),
               tr::last_error_message());
  std::exit(1);
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(what, e);
}

template <class T>
T* device_alloc(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, count * sizeof(T) + 256), "cudaMalloc");
  return static_cast<T*>(p);
}

void upload_bf16(bf16* dst, const std::vector<float>& src) {
  std::vector<std::uint16_t> bits(src.size());
  for (std::size_t i = 0; i < src.size(); ++i)
    bits[i] = ref::bf16_bits(src[i]);
  check(cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), "upload");
}
std::vector<float> download_bf16(const bf16* src, std::size_t count) {
  std::vector<std::uint16_t> bits(count);
  check(cudaMemcpy(bits.data(), src, count * 2, cudaMemcpyDeviceToHost), "download");
  return ref::widen_bf16(bits);
}
void upload(float* dst, const std::vector<float>& src) {
  check(cudaMemcpy(dst, src.data(), src.size() * 4, cudaMemcpyHostToDevice), "upload");
}
std::vector<float> download(const float* src, std::size_t count) {
  std::vector<float> out(count);
  check(cudaMemcpy(out.data(), src, count * 4, cudaMemcpyDeviceToHost), "download");
  return out;
}

constexpr int max_pairs = 256 * top_k; // the eval batch is the largest
constexpr std::size_t w1_size = static_cast<std::size_t>(experts) * 2 * inter * d;
constexpr std::size_t w2_size = static_cast<std::size_t>(experts) * d * inter;

//! Device buffers, sized for the largest batch; workspaces carved per call and policy.
struct device_state {
  cublasHandle_t handle = nullptr;
  bf16 *x = nullptr, *y1 = nullptr, *h = nullptr, *y2 = nullptr, *dy2 = nullptr, *dh = nullptr,
       *dy1 = nullptr;
  float *w1 = nullptr, *w2 = nullptr, *dw1 = nullptr, *dw2 = nullptr, *wq = nullptr;
  quads::tensor_scale* scales = nullptr;
  float* amax = nullptr;
  void *ws1 = nullptr, *ws2 = nullptr;
  std::size_t ws_bytes = 0;

  device_state() {
    if (const cublasStatus_t st = cublasCreate(&handle); st != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "example 03 (GPU): cublasCreate failed (%d)\n", static_cast<int>(st));
      std::exit(1);
    }
    const std::size_t M = max_pairs;
    x = device_alloc<bf16>(M * d);
    y1 = device_alloc<bf16>(M * 2 * inter);
    h = device_alloc<bf16>(M * inter);
    y2 = device_alloc<bf16>(M * d);
    dy2 = device_alloc<bf16>(M * d);
    dh = device_alloc<bf16>(M * inter);
    dy1 = device_alloc<bf16>(M * 2 * inter);
    w1 = device_alloc<float>(w1_size);
    w2 = device_alloc<float>(w2_size);
    dw1 = device_alloc<float>(w1_size);
    dw2 = device_alloc<float>(w2_size);
    wq = device_alloc<float>(w1_size);
    scales = device_alloc<quads::tensor_scale>(static_cast<std::size_t>(experts) * 2 * inter);
    amax = device_alloc<float>(experts);
    // Generous: every buffer any policy can ask for, at the largest batch and layer.
    ws_bytes = 4 * (w1_size * 6 + M * 2 * inter * 6 + M * 16 + 4096);
    ws1 = device_alloc<unsigned char>(ws_bytes);
    ws2 = device_alloc<unsigned char>(ws_bytes);
  }
  ~device_state() {
    for (void* p : {static_cast<void*>(x), static_cast<void*>(y1), static_cast<void*>(h),
                    static_cast<void*>(y2), static_cast<void*>(dy2), static_cast<void*>(dh),
                    static_cast<void*>(dy1), static_cast<void*>(w1), static_cast<void*>(w2),
                    static_cast<void*>(dw1), static_cast<void*>(dw2), static_cast<void*>(wq),
                    static_cast<void*>(scales), static_cast<void*>(amax), ws1, ws2})
      cudaFree(p);
    cublasDestroy(handle);
  }
  device_state(const device_state&) = delete;
  device_state& operator=(const device_state&) = delete;
};

//! The GPU twin of `run_trainer<P>`: same routing, SwiGLU, loss and gradient glue on the host,
//! both linear layers (forward and backward) through `quads::trainer` on the device.
template <class P>
trainer_pass gpu_trainer(device_state& dev, const moe& m, const std::vector<float>& x, int tokens,
                         const std::vector<float>& router, const std::vector<float>* target) {
  const routing r = route(x, tokens, router);
  const std::size_t pairs = r.token.size();
  const auto s1 = quads::linear_shape::grouped(2 * inter, d, r.rows);
  const auto s2 = quads::linear_shape::grouped(d, inter, r.rows);
  if (tr::linear_workspace_bytes<P, float>(s1) > dev.ws_bytes ||
      tr::linear_workspace_bytes<P, float>(s2) > dev.ws_bytes) {
    std::fprintf(stderr, "example 03 (GPU): workspace too small\n");
    std::exit(1);
  }
  const auto ws1 = tr::carve_linear_workspace<P, float>(dev.ws1, s1);
  const auto ws2 = tr::carve_linear_workspace<P, float>(dev.ws2, s2);
  upload(dev.w1, m.w1);
  upload(dev.w2, m.w2);
  upload_bf16(dev.x, gather(x, r));

  check(tr::linear_forward<P, float>(dev.handle, dev.x, dev.w1, nullptr, dev.y1, s1, ws1),
        "linear_forward (layer 1)");
  const std::vector<float> y1 = download_bf16(dev.y1, pairs * 2 * inter);
  std::vector<float> h(pairs * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i)
      h[p * inter + i] = silu(y1[p * 2 * inter + i]) * y1[p * 2 * inter + inter + i];
  upload_bf16(dev.h, h);
  check(tr::linear_forward<P, float>(dev.handle, dev.h, dev.w2, nullptr, dev.y2, s2, ws2),
        "linear_forward (layer 2)");
  const std::vector<float> y2 = download_bf16(dev.y2, pairs * d);
  trainer_pass res;
  res.out.assign(static_cast<std::size_t>(tokens) * d, 0.0f);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int c = 0; c < d; ++c)
      res.out[r.token[p] * d + c] += r.gate[p] * y2[p * d + c];
  if (target == nullptr) return res;

  std::vector<float> dout(res.out.size());
  for (std::size_t i = 0; i < dout.size(); ++i) {
    const float diff = res.out[i] - (*target)[i];
    res.loss += static_cast<double>(diff) * diff;
    dout[i] = 2.0f * diff / static_cast<float>(dout.size());
  }
  res.loss /= static_cast<double>(dout.size());
  std::vector<float> dy2(pairs * d);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int c = 0; c < d; ++c)
      dy2[p * d + c] = r.gate[p] * dout[r.token[p] * d + c];
  upload_bf16(dev.dy2, dy2);
  check(tr::linear_backward<P, float>(dev.handle, dev.dy2, dev.h, dev.w2, dev.dh, dev.dw2, nullptr,
                                      s2, ws2),
        "linear_backward (layer 2)");
  const std::vector<float> dh = download_bf16(dev.dh, pairs * inter);
  std::vector<float> dy1(pairs * 2 * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i) {
      const float a = y1[p * 2 * inter + i], u = y1[p * 2 * inter + inter + i];
      const float sg = 1.0f / (1.0f + std::exp(-a));
      dy1[p * 2 * inter + i] = dh[p * inter + i] * u * sg * (1.0f + a * (1.0f - sg));
      dy1[p * 2 * inter + inter + i] = dh[p * inter + i] * a * sg;
    }
  upload_bf16(dev.dy1, dy1);
  check(tr::linear_backward<P, float>(dev.handle, dev.dy1, dev.x, dev.w1, nullptr, dev.dw1, nullptr,
                                      s1, ws1),
        "linear_backward (layer 1)");
  res.dw1 = download(dev.dw1, w1_size);
  res.dw2 = download(dev.dw2, w2_size);
  return res;
}

//! The fp32 weights the GPU forward fake-quantizes (before its bf16 operand cast):
//! `trainer::fake_quant_weights` on the device; the master weights for `no_fake_quant`.
template <class P>
void gpu_trainer_weights(device_state& dev, const moe& m, std::vector<float>& w1,
                         std::vector<float>& w2) {
  if constexpr (P::quantizes_weights) {
    upload(dev.w1, m.w1);
    upload(dev.w2, m.w2);
    check(tr::fake_quant_weights<P, float>(dev.w1, dev.wq, experts, 2 * inter, d, dev.scales,
                                           dev.amax),
          "fake_quant_weights (layer 1)");
    w1 = download(dev.wq, w1_size);
    check(tr::fake_quant_weights<P, float>(dev.w2, dev.wq, experts, d, inter, dev.scales, dev.amax),
          "fake_quant_weights (layer 2)");
    w2 = download(dev.wq, w2_size);
  } else {
    (void)dev;
    w1 = m.w1;
    w2 = m.w2;
  }
}

} // namespace

int run_gpu_path(const setup& s, const std::array<train_result, policy_count>& cpu) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError(); // no GPU: the CPU table is the whole output
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("\nGPU trainer path on %s: the same loop, linear layers through\n"
              "quads::trainer::linear_forward/backward (kernels::qdq + cuBLAS bf16 GEMMs, fp32 "
              "accumulation, STE kernels).\n\n",
              prop.name);
  print_table_header();
  device_state dev;
  std::array<train_result, policy_count> gpu{};
  std::array<const char*, policy_count> labels{};
  int i = 0;
  for_each_policy([&]<class P, class RolloutFormat>(const char* label) {
    auto pass = [&](const moe& m, const std::vector<float>& x, int tokens,
                    const std::vector<float>* target) {
      return gpu_trainer<P>(dev, m, x, tokens, s.router, target);
    };
    auto weights = [&](const moe& m, std::vector<float>& w1, std::vector<float>& w2) {
      gpu_trainer_weights<P>(dev, m, w1, w2);
    };
    labels[static_cast<std::size_t>(i)] = label;
    gpu[static_cast<std::size_t>(i++)] = train<P, RolloutFormat>(label, s, pass, weights);
  });
  std::printf("\nGPU vs CPU trainer (held-out 'train' loss; tolerance |gpu - cpu| <= %.2f * cpu, "
              "since the GPU\npath rounds GEMM operands and outputs to bf16 and the CPU path "
              "keeps fp32 activations):\n",
              loss_tolerance);
  int bad = 0;
  for (std::size_t p = 0; p < policy_count; ++p) {
    const double rel = std::fabs(gpu[p].train_eval - cpu[p].train_eval) / cpu[p].train_eval;
    const bool ok = rel <= loss_tolerance;
    bad += !ok;
    std::printf("%-26s cpu %9.6f  gpu %9.6f  rel diff %.4f  %s   (last step: cpu %8.5f gpu "
                "%8.5f)\n",
                labels[p], cpu[p].train_eval, gpu[p].train_eval, rel, ok ? "ok" : "OUTSIDE",
                cpu[p].last_step_loss, gpu[p].last_step_loss);
  }
  return bad == 0 ? 0 : 1;
}

} // namespace ex03
