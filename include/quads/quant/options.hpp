// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief `quant_options`: the numerics knobs, a structural value used as a template argument.
//!
//! The defaults reproduce TransformerEngine's NVFP4 recipe bit for bit (and FlashInfer's bit-exact
//! mode). Every caller of one QDQ path must use the same options, or trainer and rollout diverge.
#pragma once

#include <quads/config.hpp>

#include <cuda/std/cstdint>

namespace quads {

//! How an element is rounded to E2M1.
enum class rounding : ::cuda::std::uint8_t {
  nearest_even,  //!< default: RNE, like every NVIDIA path
  stochastic,    //!< unbiased: random bits from a caller-supplied counter-based generator
};

//! How the NVFP4 block scale and the element multiplier are computed (ignored by MX schemes,
//! whose multipliers are exact powers of two).
enum class scale_math : ::cuda::std::uint8_t {
  //! default: TE-exact. byte = e4m3(amax_b * (S_enc * RN(1/6))),
  //! multiplier = min(1 / (scale(byte) * S_dec), FLT_MAX) with IEEE division.
  ieee_divide,
  //! FlashInfer/vLLM default kernels: `rcp.approx.ftz` for 1/6, 1/S_enc and the multiplier;
  //! multiplier 0 when the scale byte is 0 (vLLM's rule). GPU-only: `rcp.approx` has no
  //! specified result, so the host cannot reproduce it; host code using it stops with a message.
  rcp_approx,
};

//! How the NVFP4 block scale is chosen.
enum class block_scale_rule : ::cuda::std::uint8_t {
  amax_to_6,      //!< default: the block amax maps to 6 (the E2M1 maximum)
  four_over_six,  //!< per block, amax -> 6 or amax -> 4, whichever has the lower squared error
                  //!< (ties keep 6); the tensor scale then uses 6 * 256 instead of 6 * 448
};

//! Where the FP32 second-level scale comes from (two-level schemes only).
enum class global_scale : ::cuda::std::uint8_t {
  per_tensor,  //!< default: from the amax of the whole tensor (of each expert, for stacks)
  per_row,     //!< one scale per row (per token), from the row amax
  given,       //!< static: supplied by the caller (calibrated), no amax pass
};

//! UE8M0 block-scale rounding (MX schemes only).
enum class ue8m0_rounding : ::cuda::std::uint8_t {
  round_up,  //!< default: RCEIL, 2^ceil(log2(amax_b * RN(1/6))): never clips (NVIDIA)
  floor,     //!< OCP MX v1.0: 2^(floor(log2 amax_b) - 2); values up to 8 occur and clip to 6
};

//! The numerics of one quantizer. A structural type: pass it as a template argument.
//! nvcc 13 cannot generate the host stub of a `__global__` template whose parameter is a class-type
//! value, so kernels take the quantizer *type* (`block_quantizer<Format, Options>`) instead.
struct quant_options {
  rounding round = rounding::nearest_even;
  scale_math math = scale_math::ieee_divide;
  block_scale_rule block_rule = block_scale_rule::amax_to_6;
  global_scale global = global_scale::per_tensor;
  ue8m0_rounding mx_rounding = ue8m0_rounding::round_up;
};

inline constexpr quant_options default_options{};

} // namespace quads
