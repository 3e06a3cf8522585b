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
//! Bit assembly: codes 2..7 are normal fp32 numbers whose exponent and top mantissa bit are the
//! code's bits shifted into place ((m + 252) << 22); code 1 is 0.5 and code 0 is 0.
QUADS_API constexpr float decode_e2m1(::cuda::std::uint8_t code) noexcept {
  const ::cuda::std::uint32_t m = code & 7u;
  const ::cuda::std::uint32_t mag = m >= 2u ? (m + 252u) << 22 : m * 0x3f000000u;
  return detail::from_bits(mag | (static_cast<::cuda::std::uint32_t>(code & 8u) << 28));
}

//! `encode_e2m1_not_nan` as a 32-bit value (always <= 15), so vectorized callers can pack nibbles
//! without a zero-extension per element. On the device the same arithmetic is written so that
//! |x| folds into the clamp (no NaN reaches it, so fabsf and clearing the sign bit agree) and the
//! constants of the step count combine (two integer ops); the GPU suite compares the device path
//! with CUDA's device conversion for all 2^32 inputs (test/gpu/functors_test.cu).
QUADS_API constexpr ::cuda::std::uint32_t e2m1_code_not_nan(float x) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) {
    const ::cuda::std::uint32_t u = __float_as_uint(x);
    const float a = fminf(fabsf(x), e2m1_max);
    const ::cuda::std::uint32_t binade = __float_as_uint(fmaxf(a, 1.0f)) & 0x7f800000u;
    const float magic = __uint_as_float(binade + (22u << 23));
    // steps - binade - (22 << 23) + (binade >> 22) - 254, in two adds
    const ::cuda::std::uint32_t mag =
        (__float_as_uint(__fadd_rn(a, magic)) - binade - ((22u << 23) + 254u)) + (binade >> 22);
    return mag | ((u >> 28) & 8u);
  }
#endif
  const ::cuda::std::uint32_t u = detail::to_bits(x);
  const float a = detail::min_num(detail::from_bits(u & 0x7fffffffu), e2m1_max);
  const ::cuda::std::uint32_t binade = detail::to_bits(detail::max_num(a, 1.0f)) & 0x7f800000u;
  const float magic = detail::from_bits(binade + (22u << 23));  // 2^(E + 22): ulp = 2^(E - 1)
  const ::cuda::std::uint32_t steps = detail::to_bits(detail::add_rn(a, magic)) - detail::to_bits(magic);
  // steps counts grid units of the binade; binade E starts at code 2E (E = 0 -> code 0)
  const ::cuda::std::uint32_t code = (steps + (binade >> 22) - 254u) & 0xffu;
  return code | ((u >> 28) & 8u);
}

//! float -> E2M1 code for any input that is not NaN (±Inf saturates): round to nearest even,
//! saturate to ±6, sign kept on zero. Vectorized callers test for NaN once per block and call
//! this; everyone else calls `encode_e2m1`.
//! Method: clamp |x| to 6, then add 2^(E + 22) where 2^E is the binade of max(|x|, 1): the fp32
//! addition rounds |x| to the E2M1 grid spacing of that binade (0.5, 1 or 2) with ties to even,
//! and the integer difference of the bit patterns counts grid steps. One add does the rounding,
//! so the encoder is cheap on the GPU; it is tested against CUDA's converter for all 2^32 inputs.
QUADS_API constexpr ::cuda::std::uint8_t encode_e2m1_not_nan(float x) noexcept {
  return static_cast<::cuda::std::uint8_t>(e2m1_code_not_nan(x));
}

//! float -> E2M1 code, round to nearest even, saturating; NaN -> +6 (0x7); sign kept on zero.
QUADS_API constexpr ::cuda::std::uint8_t encode_e2m1(float x) noexcept {
  return detail::is_nan(x) ? ::cuda::std::uint8_t{0x7} : encode_e2m1_not_nan(x);
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
