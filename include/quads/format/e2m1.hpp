// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief E2M1 (FP4) element codec: encode (nearest-even or stochastic), decode, nibble packing.
//!
//! Overview: 4-bit code `S EE M`, exponent bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
//! negatives; no Inf or NaN. Encoding saturates to ±6, keeps the sign of values that round to
//! zero (code 0x8 is -0), and maps NaN to +6 (code 0x7), the rule of CUDA's
//! `__nv_cvt_float_to_fp4` (tested exhaustively against it). Two codes per byte, element 2i in
//! the low nibble.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>

#include <cuda/std/cstdint>

namespace quads {

//! Two packed E2M1 codes; the first element is in the low nibble (CUDA/PTX/TE convention).
struct e2m1x2_t {
  ::cuda::std::uint8_t bits;
};

inline constexpr float e2m1_max = 6.0f;

//! Decodes one 4-bit code (the high nibble of `code` is ignored). Code 0x8 decodes to -0.0.
QUADS_API constexpr float decode_e2m1(::cuda::std::uint8_t code) noexcept {
  // Magnitude = code's low 3 bits read as a fixed-point number with one mantissa bit.
  const unsigned m = code & 7u;
  const float mag = m < 2u ? 0.5f * static_cast<float>(m)
                           : static_cast<float>(2u + (m & 1u)) * static_cast<float>(1u << ((m >> 1) - 1u)) * 0.5f;
  return (code & 8u) ? -mag : mag;
}

//! Number of positive E2M1 grid points <= |x| minus one, i.e. the magnitude code of RNE
//! rounding. Thresholds are the midpoints; "<=" at a midpoint sends the tie to the even code.
QUADS_API constexpr ::cuda::std::uint8_t e2m1_magnitude_rne(float a) noexcept {
  return static_cast<::cuda::std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) +
                                           (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f));
}

//! float -> E2M1 code, round to nearest even, saturating; NaN -> +6 (0x7); sign kept on zero.
QUADS_API constexpr ::cuda::std::uint8_t encode_e2m1(float x) noexcept {
  const ::cuda::std::uint32_t u = detail::to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7;
  const float a = detail::from_bits(u & 0x7fffffffu);
  return static_cast<::cuda::std::uint8_t>(e2m1_magnitude_rne(a) | ((u >> 28) & 8u));
}

//! float -> E2M1 code with stochastic rounding: |x| between grid points lo < |x| < hi goes to hi
//! with probability (|x| - lo) / (hi - lo) for uniformly random `rbits` (8 bits used).
//! Computed as floor-to-grid of t = |x| + (rbits / 256) * step(|x|) in fp32, the rule of TE's
//! software fallback; saturates to ±6, NaN -> +6, sign kept.
QUADS_API constexpr ::cuda::std::uint8_t encode_e2m1_stochastic(float x,
                                                                ::cuda::std::uint32_t rbits) noexcept {
  const ::cuda::std::uint32_t u = detail::to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7;
  const float a = detail::from_bits(u & 0x7fffffffu);
  const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
  const float t = detail::add_rn(a, static_cast<float>(rbits & 0xffu) * (1.0f / 256.0f) * step);
  // floor to the grid: count grid points 0.5, 1, 1.5, 2, 3, 4, 6 that are <= t
  const unsigned mag = (t >= 0.5f) + (t >= 1.0f) + (t >= 1.5f) + (t >= 2.0f) + (t >= 3.0f) +
                       (t >= 4.0f) + (t >= 6.0f);
  return static_cast<::cuda::std::uint8_t>(mag | ((u >> 28) & 8u));
}

//! Packs two codes: `first` in the low nibble.
QUADS_API constexpr e2m1x2_t pack_e2m1x2(::cuda::std::uint8_t first,
                                         ::cuda::std::uint8_t second) noexcept {
  return {static_cast<::cuda::std::uint8_t>((first & 0xfu) | ((second & 0xfu) << 4))};
}
QUADS_API constexpr ::cuda::std::uint8_t e2m1x2_first(e2m1x2_t p) noexcept { return p.bits & 0xfu; }
QUADS_API constexpr ::cuda::std::uint8_t e2m1x2_second(e2m1x2_t p) noexcept { return p.bits >> 4; }

} // namespace quads
