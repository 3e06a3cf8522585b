// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The FP32 second-level scale of two-level schemes (NVFP4), in both directions.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/quant/options.hpp>
#include <quads/scheme/schemes.hpp>

namespace quads {

//! Encode direction `encode` (S_enc, multiplies inputs) and decode direction `decode`
//! (S_dec = 1 / S_enc, multiplies dequantized values; ModelOpt's `weight_scale_2`).
//! Schemes without a tensor scale use the identity {1, 1}.
struct tensor_scale {
  float encode = 1.0f;
  float decode = 1.0f;
};

//! Largest block-scale value the tensor scale maps the tensor amax to: 448, or 256 with 4/6.
template <quant_options Options>
inline constexpr float block_scale_bound =
    Options.block_rule == block_scale_rule::four_over_six ? 256.0f : e4m3_max;

//! Tensor scale from an amax (TE's rule): S_enc = min(6 * bound / amax, FLT_MAX) in fp32, 1 when
//! amax is 0 or S_enc underflows to 0 (amax = Inf); S_dec = 1 / S_enc correctly rounded.
//! A NaN amax gives S_enc = FLT_MAX (fminf semantics). Identity for schemes without one.
template <block_scaled_format Format, quant_options Options = quant_options{}>
QUADS_API constexpr tensor_scale make_tensor_scale(float amax) noexcept {
  if constexpr (!Format::has_tensor_scale) {
    return {};
  } else {
    constexpr float numerator = e2m1_max * block_scale_bound<Options>;
    if (amax == 0.0f || amax > detail::flt_max) return {1.0f, 1.0f};  // 0, or Inf: S_enc = 0
    const float enc = detail::div_rn_satfinite(numerator, amax);
    return {enc, detail::div_rn(1.0f, enc)};
  }
}

//! A decode-direction scale quads accepts: finite and >= 0 (rejects NaN, Inf and negatives).
QUADS_API constexpr bool valid_decode_scale(float decode) noexcept {
  return decode >= 0.0f && decode <= detail::flt_max;
}

//! A tensor scale quads accepts as `given`: both directions finite and > 0.
QUADS_API constexpr bool valid_tensor_scale(tensor_scale ts) noexcept {
  return ts.encode > 0.0f && ts.encode <= detail::flt_max && ts.decode > 0.0f &&
         ts.decode <= detail::flt_max;
}

//! Tensor scale from a stored decode-direction scale (a checkpoint's `weight_scale_2` or
//! `input_scale`): S_dec kept, S_enc = min(1 / S_dec, FLT_MAX) (TE's clamp). S_dec = 0 is what
//! amax = 0 gives in the decode direction, so it gets TE's amax = 0 rule: {1, 1}.
//! @pre `valid_decode_scale(decode)`; the host reference and the kernels reject other values.
QUADS_API constexpr tensor_scale tensor_scale_from_decode(float decode) noexcept {
  if (decode == 0.0f) return {1.0f, 1.0f};
  return {detail::div_rn_satfinite(1.0f, decode), decode};
}

} // namespace quads
