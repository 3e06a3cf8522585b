// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The weight-sync contract (host): trainer master weights -> the packed NVFP4/MXFP4
//! weights and scales the rollout engine loads.
//!
//! Contract: for a policy `P` with `P::quantizes_weights`, master weights `W` (`[E, n, k]`,
//! fp32 values, or bf16 widened exactly) and the same `fake_quant_args`,
//! @code
//!   reference::dequantize<F, O>(reference::sync_weights<P, Layout>(W, E, n, k, args))
//!     == reference::fake_quant_weights<P>(W, E, n, k, args).values      // bit for bit
//! @endcode
//! for either scale layout, every option of `P::weight_quantizer` (rounding, including
//! stochastic with the same `weight_seed`; tensor scales per expert, per row, or given;
//! four_over_six; MX round-up or floor). So the rollout, decoding the packed weights with
//! `block_quantizer<F, O>::decode` (or any bit-exact NVFP4/MXFP4 dequantizer), computes with
//! exactly the weights the trainer's forward pass used. The GPU twin is
//! `trainer::sync_weights` in `policy/trainer.cuh` (kernels::quantize), with the same bytes.
//!
//! The per-expert tensor scales travel with the packed data (`quantized_tensor::tensor_scales`;
//! ModelOpt calls the decode direction `weight_scale_2`, see `interop/modelopt.hpp`).
#pragma once

#include <quads/config.hpp>

#include <quads/layout/scale_layouts.hpp>
#include <quads/policy/linear_shape.hpp>
#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>
#include <quads/reference/tensor.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace quads {

//! The format and options of a weight-quantizing policy's weight quantizer.
template <fake_quant_policy P>
  requires P::quantizes_weights
using weight_format_t = typename P::weight_quantizer::format;
template <fake_quant_policy P>
  requires P::quantizes_weights
inline constexpr quant_options weight_options_v = P::weight_quantizer::options;

namespace reference {

//! Packs the master weights `w` (`[experts, n, k]` fp32) for the rollout engine: E2M1 codes,
//! block scales in `Layout` (per expert), tensor scales. Throws `std::invalid_argument` on a bad
//! shape. See the file comment for the contract.
template <fake_quant_policy P, scale_layout Layout = linear_scales>
  requires P::quantizes_weights
quantized_tensor<weight_format_t<P>, Layout> sync_weights(std::span<const float> w, int experts,
                                                          int n, int k,
                                                          const fake_quant_args& args = {}) {
  return quantize<weight_format_t<P>, weight_options_v<P>, Layout>(
      w, n, k, quantize_args{experts, args.weight_given, args.weight_seed});
}

//! `sync_weights` for bf16 master weights (raw bf16 bits), widened exactly to fp32 first.
template <fake_quant_policy P, scale_layout Layout = linear_scales>
  requires P::quantizes_weights
quantized_tensor<weight_format_t<P>, Layout> sync_weights(std::span<const std::uint16_t> w_bf16,
                                                          int experts, int n, int k,
                                                          const fake_quant_args& args = {}) {
  const std::vector<float> w = widen_bf16(w_bf16);
  return sync_weights<P, Layout>(std::span<const float>(w), experts, n, k, args);
}

//! What the rollout computes with: the packed weights decoded to fp32 `[experts, n, k]`.
template <fake_quant_policy P, scale_layout Layout>
  requires P::quantizes_weights
std::vector<float> rollout_weights(const quantized_tensor<weight_format_t<P>, Layout>& packed) {
  return dequantize<weight_format_t<P>, weight_options_v<P>, Layout>(packed);
}

} // namespace reference
} // namespace quads
