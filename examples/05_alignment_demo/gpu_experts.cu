// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The demo's GPU path (see gpu_experts.hpp): per call, the input row is copied to the
//!        device, quantized there (`quads::kernels::quantize` with the per-token activation
//!        quantizer, or `quads::compensation::kernels::rac_quantize` for RAC), multiplied with
//!        the packed expert weights by `quads::gemm::decode_gemm` (epilogue: alpha = gs_x * gs_w,
//!        the RAC residual term, store fp32) and copied back.
//!
//! One token per call (M = 1), as the demo's engine decodes: this path checks that the library's
//! GPU parts give the numbers of the host emulation, it is not a fast engine (the MoE layer of
//! issue 7 batches tokens).
#include "gpu_experts.hpp"

#include <quads/compensation/rac.cuh>
#include <quads/gemm/decode.cuh>
#include <quads/kernels/quantize.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace demo {
namespace {

namespace qg = quads::gemm;
namespace qe = quads::epilogue;
namespace qk = quads::kernels;
namespace qck = quads::compensation::kernels;

using epi_plain = qe::chain<qe::scale_alpha, qe::store<float>>;
using epi_rac = qe::chain<qe::scale_alpha, qe::rac_residual, qe::store<float>>;

//! A failed CUDA call or a refused launch is a bug in this program: report and stop.
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gpu path: %s failed: %s (%s)\n", what, cudaGetErrorString(e),
               qk::last_error_message());
  std::exit(2);
}

template <class T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  check(cudaMalloc(&p, v.size() * sizeof(T) + 16), "cudaMalloc");
  check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  // A pageable copy may return before its DMA lands, and the workers' non-blocking streams do
  // not wait for the legacy stream it ran on.
  check(cudaStreamSynchronize(cudaStreamLegacy), "upload");
  return p;
}

std::vector<quads::tensor_scale> as_tensor_scales(const std::vector<float>& dec) {
  std::vector<quads::tensor_scale> ts;
  for (float d : dec)
    ts.push_back(quads::tensor_scale_from_decode(d));
  return ts;
}

//! One linear's packed weights on the device: `[E, N, K]` codes, linear scales, and one tensor
//! scale per (expert, row) so gate and up (different scales) can share one GEMM.
struct device_linear {
  int N = 0, K = 0;
  std::uint8_t* data = nullptr;
  std::uint8_t* scales = nullptr;
  quads::tensor_scale* ts = nullptr;
  std::size_t data_stride() const { return static_cast<std::size_t>(N) * K / 2; }
  std::size_t scale_stride() const { return static_cast<std::size_t>(N) * K / 16; }
};

//! Concatenates the rows of two `[E, n, k]` tensors per expert into `[E, 2n, k]`.
std::vector<std::uint8_t> cat_rows(const std::vector<std::uint8_t>& a,
                                   const std::vector<std::uint8_t>& b, int experts) {
  const std::size_t per = a.size() / static_cast<std::size_t>(experts);
  std::vector<std::uint8_t> out;
  for (int e = 0; e < experts; ++e) {
    out.insert(out.end(), a.begin() + e * per, a.begin() + (e + 1) * per);
    out.insert(out.end(), b.begin() + e * per, b.begin() + (e + 1) * per);
  }
  return out;
}

//! The device tables of one RAC selection (no permutation: the demo selects in place).
struct device_sel {
  int channels = 0, selected_blocks = 0, selected = 0;
  int* slot = nullptr;
  int* blocks = nullptr;
};

//! Buffers of one calling thread.
struct worker {
  cudaStream_t stream = nullptr;
  float* x = nullptr;       //!< input row (fp32)
  __nv_bfloat16* xb = nullptr;
  std::uint8_t* q = nullptr; //!< FP4 codes (x, or [Q(x) | Q(r_S)])
  std::uint8_t* qs = nullptr;
  quads::tensor_scale* ts = nullptr; //!< x's and the residual's tensor scale
  float* rac_ws = nullptr;
  float* y = nullptr;
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
  std::vector<float> host_y;
};

class backend final : public gpu_experts {
public:
  backend(const std::vector<packed_layer>& layers, const cudaDeviceProp& prop) : prop_(prop) {
    for (const packed_layer& L : layers) {
      d_ = L.d;
      ff_ = L.ff;
      device_linear gu{2 * L.ff, L.d, upload(cat_rows(L.gate_data, L.up_data, L.experts)),
                       upload(cat_rows(L.gate_scales, L.up_scales, L.experts)), nullptr};
      std::vector<float> gu_ts;
      for (int e = 0; e < L.experts; ++e) {
        gu_ts.insert(gu_ts.end(), static_cast<std::size_t>(L.ff), L.gate_ts[e]);
        gu_ts.insert(gu_ts.end(), static_cast<std::size_t>(L.ff), L.up_ts[e]);
      }
      gu.ts = upload(as_tensor_scales(gu_ts));
      device_linear dn{L.d, L.ff, upload(L.down_data), upload(L.down_scales),
                       upload(as_tensor_scales(L.down_ts))};
      gate_up_.push_back(gu);
      down_.push_back(dn);
    }
  }

  std::string name() const override {
    return std::string(prop_.name) + " (sm_" + std::to_string(prop_.major) +
           std::to_string(prop_.minor) + ")";
  }

  void gate_up(int l, int e, gpu_act act, const float* x,
               const quads::compensation::channel_selection* sel, float* g,
               float* u) const override {
    const std::vector<float>& y = run(gate_up_[static_cast<std::size_t>(l)], e, act, x, sel, true);
    std::copy(y.begin(), y.begin() + ff_, g);
    std::copy(y.begin() + ff_, y.begin() + 2 * ff_, u);
  }

  void down(int l, int e, gpu_act act, const float* h,
            const quads::compensation::channel_selection* sel, float* y) const override {
    const std::vector<float>& r = run(down_[static_cast<std::size_t>(l)], e, act, h, sel, false);
    std::copy(r.begin(), r.begin() + d_, y);
  }

private:
  worker& this_worker() const {
    thread_local worker w;
    if (w.stream == nullptr) {
      const int kmax = 2 * std::max(d_, ff_); // K' <= 2K with RAC 100 %
      check(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking), "stream");
      check(cudaMalloc(&w.x, kmax * sizeof(float)), "cudaMalloc");
      check(cudaMalloc(&w.xb, kmax * sizeof(__nv_bfloat16)), "cudaMalloc");
      check(cudaMalloc(&w.q, kmax), "cudaMalloc");
      check(cudaMalloc(&w.qs, kmax), "cudaMalloc");
      check(cudaMalloc(&w.ts, 2 * sizeof(quads::tensor_scale)), "cudaMalloc");
      check(cudaMalloc(&w.rac_ws, qck::rac_workspace_floats(1) * sizeof(float)), "cudaMalloc");
      check(cudaMalloc(&w.y, 2 * std::max(d_, ff_) * sizeof(float)), "cudaMalloc");
    }
    return w;
  }

  const device_sel& selection(const quads::compensation::channel_selection& s) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sels_.find(&s);
    if (it != sels_.end()) return it->second;
    const qck::selection_tables t = qck::make_selection_tables(s);
    device_sel d{s.channels, static_cast<int>(t.blocks.size()), s.selected, upload(t.slot),
                 upload(t.blocks.empty() ? std::vector<int>{0} : t.blocks)};
    return sels_.emplace(&s, d).first->second;
  }

  void ensure_workspace(worker& w, std::size_t bytes) const {
    if (bytes <= w.ws_bytes) return;
    if (w.ws != nullptr) check(cudaFree(w.ws), "cudaFree");
    check(cudaMalloc(&w.ws, bytes), "cudaMalloc");
    w.ws_bytes = bytes;
  }

  template <class Epi, class Act>
  void gemm(worker& w, const device_linear& L, int e, const Act& a,
            const typename Epi::arguments& args, bool residual) const {
    const qg::decode_plan plan = qg::plan_decode(1, L.N, L.K, residual, {}, prop_.multiProcessorCount);
    ensure_workspace(w, plan.workspace_bytes);
    const qg::fp4_weights<quads::nvfp4> wt{L.data + e * L.data_stride(),
                                           L.scales + e * L.scale_stride()};
    check(qg::decode_gemm<qg::bf16_lane, Epi>(plan, wt, a, args, w.ws, w.stream), "decode_gemm");
  }

  const std::vector<float>& run(const device_linear& L, int e, gpu_act act, const float* x,
                                const quads::compensation::channel_selection* sel,
                                bool ts_per_row) const {
    worker& w = this_worker();
    const int K = L.K;
    const quads::tensor_scale* wts = L.ts + static_cast<std::size_t>(e) * (ts_per_row ? L.N : 1);
    const qe::scale_source wmode = ts_per_row ? qe::scale_source::col : qe::scale_source::tensor;
    const qe::store<float>::arguments out{w.y, L.N};
    if (act == gpu_act::bf16) {
      // W4A16: the engine's inputs are bf16 values already (it casts at every op boundary).
      std::vector<__nv_bfloat16> xb(static_cast<std::size_t>(K));
      for (int k = 0; k < K; ++k)
        xb[k] = __float2bfloat16_rn(x[k]);
      check(cudaMemcpyAsync(w.xb, xb.data(), K * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice,
                            w.stream),
            "copy in");
      const qe::alpha_source alpha{.w = wts, .w_mode = wmode};
      gemm<epi_plain>(w, L, e, qg::dense_activations<qg::bf16_lane>{w.xb},
                      epi_plain::arguments{alpha, out}, false);
    } else {
      check(cudaMemcpyAsync(w.x, x, K * sizeof(float), cudaMemcpyHostToDevice, w.stream),
            "copy in");
      if (act == gpu_act::fp4) {
        const qk::quantized_view q{w.q, w.qs, w.ts};
        check(qk::quantize<rollout_act_quantizer>(w.x, qk::tensor_shape{1, 1, K}, q, {}, w.stream),
              "quantize");
        const qe::alpha_source alpha{.a = w.ts, .a_mode = qe::scale_source::row, .w = wts,
                                     .w_mode = wmode};
        gemm<epi_plain>(w, L, e, qg::fp4_activations<quads::nvfp4>{w.q, w.qs},
                        epi_plain::arguments{alpha, out}, false);
      } else {
        const device_sel& s = selection(*sel);
        const qck::device_selection ds{s.channels, s.selected_blocks, nullptr, s.slot, s.blocks};
        const qck::rac_view v{w.q, w.qs, w.ts, w.ts + 1};
        qck::rac_args ra;
        ra.residual = quads::compensation::residual_scale::own;
        ra.workspace = w.rac_ws;
        check(qck::rac_quantize<rollout_act_quantizer>(w.x, 1, ds, v, ra, w.stream), "rac_quantize");
        const qe::alpha_source ax{.a = w.ts, .a_mode = qe::scale_source::row, .w = wts,
                                  .w_mode = wmode};
        const qe::alpha_source ar{.a = w.ts + 1, .a_mode = qe::scale_source::row, .w = wts,
                                  .w_mode = wmode};
        const qg::rac_activations<quads::nvfp4> a{w.q, w.qs, s.slot, s.selected,
                                                  quads::compensation::residual_scale::own};
        gemm<epi_rac>(w, L, e, a, epi_rac::arguments{ax, ar, out}, true);
      }
    }
    w.host_y.resize(static_cast<std::size_t>(L.N));
    check(cudaMemcpyAsync(w.host_y.data(), w.y, L.N * sizeof(float), cudaMemcpyDeviceToHost,
                          w.stream),
          "copy out");
    check(cudaStreamSynchronize(w.stream), "synchronize");
    return w.host_y;
  }

  cudaDeviceProp prop_;
  int d_ = 0, ff_ = 0;
  std::vector<device_linear> gate_up_, down_;
  mutable std::mutex mu_;
  mutable std::map<const void*, device_sel> sels_;
};

} // namespace

std::unique_ptr<gpu_experts> gpu_experts::create(const std::vector<packed_layer>& layers,
                                                 std::string& why) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    why = "no CUDA device";
    return nullptr;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (prop.major < 9) {
    why = std::string("device ") + prop.name + " is below sm_90 (the decode GEMM needs sm_90)";
    return nullptr;
  }
  return std::make_unique<backend>(layers, prop);
}

} // namespace demo
