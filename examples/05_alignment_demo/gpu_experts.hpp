// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The demo's GPU path: the rollout engine's FP4 expert linears (gate/up and down) run
//!        through the library's GPU kernels (activation quantize / RAC quantize, decode GEMM with
//!        an epilogue chain) instead of the host emulation. Host-only interface; the
//!        implementation (gpu_experts.cu) is built when CUDA is enabled.
//!
//! What stays on the host: attention, router, lm_head, SwiGLU, the bf16 casts of the rollout
//! engine, and the arms whose rollout weights are not FP4 (floor, FP8). The GPU computes
//! `alpha * sum_k Q(x)_k Q(W)_k` (exact products, fp32 sums in the kernel's order), the host
//! emulation `sum_k dq(x)_k dq(W)_k` in its own order: the same numbers up to summation order.
#pragma once

#include <quads/compensation/selection.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/scheme/schemes.hpp>

#include <memory>
#include <string>
#include <vector>

namespace demo {

//! Packed NVFP4 expert weights of one layer as `sync_weights` makes them (host memory).
struct packed_layer {
  int experts = 0, d = 0, ff = 0;
  std::vector<std::uint8_t> gate_data, gate_scales, up_data, up_scales, down_data, down_scales;
  std::vector<float> gate_ts, up_ts, down_ts; //!< tensor scale (decode) per expert
};

//! The rollout's per-token activation quantizer (`w4a4<nvfp4>::activation_quantizer`; model.hpp
//! checks that the types agree). Spelled with a literal option value because nvcc's host stubs
//! cannot name a kernel instantiated through `w4a4`'s default argument `per_row_options` (a
//! constexpr variable), so the .cu file does not include the policy headers.
using rollout_act_quantizer =
    quads::block_quantizer<quads::nvfp4,
                           quads::quant_options{.global = quads::global_scale::per_row}>;

//! How a rollout linear quantizes its input on the GPU.
enum class gpu_act { bf16, fp4, fp4_rac };

class gpu_experts {
public:
  //! A backend on device 0, or nullptr with `why` set (built without CUDA, no device, or compute
  //! capability below 9.0: the decode GEMM needs sm_90).
  static std::unique_ptr<gpu_experts> create(const std::vector<packed_layer>& layers,
                                             std::string& why);
  virtual ~gpu_experts() = default;
  //! Device name and compute capability, for the log.
  virtual std::string name() const = 0;
  //! `g = W_gate x`, `u = W_up x` (fp32, before the engine's bf16 cast) for expert `e` of layer
  //! `l`; `x` has `d` values. `sel` is the layer's expert-input RAC selection (fp4_rac only).
  //! Thread-safe (each calling thread gets its own stream and buffers).
  virtual void gate_up(int l, int e, gpu_act act, const float* x,
                       const quads::compensation::channel_selection* sel, float* g,
                       float* u) const = 0;
  //! `y = W_down h` for expert `e` of layer `l`; `h` has `ff` values.
  virtual void down(int l, int e, gpu_act act, const float* h,
                    const quads::compensation::channel_selection* sel, float* y) const = 0;
};

} // namespace demo
