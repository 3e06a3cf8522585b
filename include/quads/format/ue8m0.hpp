// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief UE8M0 (MX block scale) codec: round-up (RCEIL) and floor encodings, decode.
//!
//! Overview: 8 exponent bits, bias 127, value 2^(b - 127) for b in 0..254 (0x00 = 2^-127),
//! 0xFF = NaN; no zero, no sign. Both encoders take |x|.
//! - `encode_ue8m0_round_up` (RCEIL, NVIDIA: cuBLAS, TE MXFP8, CUTLASS): the smallest power of
//!   two >= |x|, saturating to 0xFE (2^127) for large finite values and Inf, NaN -> 0xFF, and
//!   0 or |x| <= 2^-127 -> 0x00. Equals `__nv_cvt_float_to_e8m0(x, __NV_SATFINITE,
//!   cudaRoundPosInf)` for every non-negative float (tested exhaustively).
//! - `encode_ue8m0_floor` (the OCP MX v1.0 shared-exponent rule): the largest power of two <= |x|,
//!   i.e. the fp32 exponent field; fp32 subnormals and 0 -> 0x00, Inf -> 0xFE, NaN -> 0xFF.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>

#include <cuda/std/cstdint>

namespace quads {

struct ue8m0_t {
  ::cuda::std::uint8_t bits;
};

QUADS_API constexpr ::cuda::std::uint8_t encode_ue8m0_round_up(float x) noexcept {
  const ::cuda::std::uint32_t a = detail::to_bits(x) & 0x7fffffffu;
  if (a > 0x7f800000u) return 0xff;
  if (a == 0x7f800000u) return 0xfe;
  ::cuda::std::uint32_t e = a >> 23;
  const ::cuda::std::uint32_t m = a & 0x7fffffu;
  // Round up when there is a fraction, except at the top (saturate) and for subnormals at or
  // below 2^-127, which are represented by 0x00 itself.
  if (m != 0u && e != 0xfeu && !(e == 0u && m <= 0x400000u)) ++e;
  return static_cast<::cuda::std::uint8_t>(e);
}

QUADS_API constexpr ::cuda::std::uint8_t encode_ue8m0_floor(float x) noexcept {
  const ::cuda::std::uint32_t a = detail::to_bits(x) & 0x7fffffffu;
  if (a > 0x7f800000u) return 0xff;
  if (a == 0x7f800000u) return 0xfe;
  return static_cast<::cuda::std::uint8_t>(a >> 23);
}

//! UE8M0 -> float: 2^(b - 127); 0x00 gives the fp32 subnormal 2^-127, 0xFF gives NaN.
QUADS_API constexpr float decode_ue8m0(::cuda::std::uint8_t b) noexcept {
  if (b == 0xffu) return detail::from_bits(0x7fc00000u);
  if (b == 0u) return detail::from_bits(0x00400000u);
  return detail::from_bits(static_cast<::cuda::std::uint32_t>(b) << 23);
}

//! The exact reciprocal of a UE8M0 scale, 2^(127 - b), as fp32 (0x00 -> 2^127, 0xFE -> 2^-127).
QUADS_API constexpr float ue8m0_reciprocal(::cuda::std::uint8_t b) noexcept {
  const int e = 254 - static_cast<int>(b);  // biased exponent of 2^(127 - b)
  if (e == 0) return detail::from_bits(0x00400000u);
  return detail::from_bits(static_cast<::cuda::std::uint32_t>(e) << 23);
}

} // namespace quads
