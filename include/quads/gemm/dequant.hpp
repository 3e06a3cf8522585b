// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exact E2M1 * block-scale -> bf16 / fp16 dequantization in registers (host + device):
//!        E2M1 bits placed in the 16-bit lane, then one `mul.{bf16,f16}x2` per pair.
//!
//! Overview (docs/gemm.md, kernels.md §6.3). An E2M1 code `S E1 E0 M` placed in a 16-bit lane
//! as sign -> bit 15 and `E1 E0 M` -> the lowest exponent bits and the top mantissa bit is the
//! float `e2m1 * 2^-(bias - 1)` exactly (2^-126 for bf16, 2^-14 for fp16; codes 0.5 and 0 land
//! on subnormals / zero, which is why no `.ftz` multiply may be used). One multiply by
//! `m = s * 2^(bias - 1 - c)` then gives `e2m1 * s * 2^-c`:
//! - NVFP4 (`s` = UE4M3): c = 7 for both lanes; `m` is a normal number (bf16: s * 2^119 in
//!   [2^110, 1.75 * 2^127]; fp16: s * 2^7 in [2^-2, 57344]) and the product has at most 6
//!   significant bits and is a multiple of 2^-17 in [2^-17, 2688 * 2^-7], so it is exact in both
//!   (fp16 subnormals included). Any correctly rounded multiply returns it.
//! - MXFP4 (`s` = 2^(b - 127), UE8M0): bf16 only (fp16's range cannot hold 2^±127), c = 16;
//!   `m` = 2^(b - 1 - c) is a normal bf16 for c - 125 <= b <= c + 128 and the product is exact
//!   down to bf16 subnormals, i.e. for `mx_min_byte <= b <= mx_max_byte` (block scales
//!   2^-116 .. 2^17). Bytes outside that range are not representable this way (not checked on
//!   the device; `mx_byte_in_range` checks on the host).
//! The GEMM multiplies its fp32 accumulator by 2^(c_w + c_a) once at the end (exact), so the
//! epilogue sees the true unscaled product. The FP32 tensor scales are never folded into a
//! 16-bit operand (that would not be exact); they stay in the epilogue's alpha.
//!
//! Pairs: a 32-bit word holds 8 codes (code i in bits 4i..4i+3, the packed layout of
//! `quads::reference::quantized_tensor`). `unpack_word` returns 4 lane pairs; pair i holds codes
//! (i, i + 4) in its (low, high) lanes, because codes 16 bits apart move with one 32-bit shift.
//! The GEMM pairs the activation's elements the same way, so the K order inside an MMA is a
//! permutation of the natural one (the sum is the same up to fp32 summation order).
//! Cost per 8 weights (SASS, nvcc 13.0 sm_90a): 15 integer ops (shift, and, shift, and-or per
//! pair; one shift less for pair 3; about half the shifts issued as IMAD.SHL) and 4
//! HMUL2.BF16_V2, about 2.4 instructions per weight, plus ~4 per block for the scale constant
//! (docs/gemm.md, "Operand loaders"; the pair-coded form of pair_coding.hpp is the one timed).
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

#include <concepts>

namespace quads::gemm {

//! The 16-bit MMA element: bf16 lanes.
struct bf16_lane {
  static constexpr int mag_shift = 6;      //!< lowest exponent bit - 1 (mantissa bits - 1)
  static constexpr int exponent_bias = 127;
  static constexpr const char* name = "bf16";
};
//! The 16-bit MMA element: fp16 lanes.
struct fp16_lane {
  static constexpr int mag_shift = 9;
  static constexpr int exponent_bias = 15;
  static constexpr const char* name = "fp16";
};

template <class L>
concept mma_lane = std::same_as<L, bf16_lane> || std::same_as<L, fp16_lane>;

namespace detail {

//! 16-bit lane bits -> fp32 (exact).
template <mma_lane Lane>
QUADS_API constexpr float lane_to_float(::cuda::std::uint16_t b) noexcept {
  if constexpr (std::same_as<Lane, bf16_lane>) return ::quads::detail::bf16_bits_to_float(b);
  else return ::quads::detail::fp16_bits_to_float(b);
}
//! fp32 -> 16-bit lane bits, round to nearest even.
template <mma_lane Lane>
QUADS_API constexpr ::cuda::std::uint16_t float_to_lane(float x) noexcept {
  if constexpr (std::same_as<Lane, bf16_lane>) return ::quads::detail::float_to_bf16_bits(x);
  else return ::quads::detail::float_to_fp16_bits(x);
}

//! A UE4M3 byte read as binary16 bits `byte << 7` is `s * 2^-8` exactly (normal and subnormal
//! UE4M3 alike: both formats have the same 3 mantissa bits and the exponents differ by 8).
QUADS_API constexpr float ue4m3_times_2_pow_minus_8(::cuda::std::uint8_t byte) noexcept {
  const ::cuda::std::uint16_t h = static_cast<::cuda::std::uint16_t>((byte & 0x7fu) << 7);
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  return ::quads::detail::fp16_bits_to_float(h);
}

//! Two 16-bit lanes multiplied, each rounded to nearest even (`mul.rn.{bf16,f16}x2`, no ftz).
//! The host computes the exact product in double and rounds it once, as the instruction does.
template <mma_lane Lane>
QUADS_API ::cuda::std::uint32_t mul_lanes(::cuda::std::uint32_t a, ::cuda::std::uint32_t b) noexcept {
#if defined(__CUDA_ARCH__)
  ::cuda::std::uint32_t d;
  if constexpr (std::same_as<Lane, bf16_lane>) {
#  if __CUDA_ARCH__ >= 900
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#  else
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
#  endif
  } else {
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
#else
  auto one = [](::cuda::std::uint16_t x, ::cuda::std::uint16_t y) {
    const double p = static_cast<double>(lane_to_float<Lane>(x)) *
                     static_cast<double>(lane_to_float<Lane>(y));  // exact: 2 x 11 bits
    // One rounding: fp32 keeps the exact product whenever it is representable in 16 bits, so
    // rounding the double to float first cannot double-round in the cases the loaders use;
    // other inputs are outside the loaders' contract.
    return float_to_lane<Lane>(static_cast<float>(p));
  };
  return static_cast<::cuda::std::uint32_t>(one(static_cast<::cuda::std::uint16_t>(a & 0xffffu),
                                                static_cast<::cuda::std::uint16_t>(b & 0xffffu))) |
         (static_cast<::cuda::std::uint32_t>(one(static_cast<::cuda::std::uint16_t>(a >> 16),
                                                 static_cast<::cuda::std::uint16_t>(b >> 16)))
          << 16);
#endif
}

} // namespace detail

//! The 16-bit lane bits of one E2M1 code: `e2m1 * 2^-(bias - 1)` exactly.
template <mma_lane Lane>
QUADS_API constexpr ::cuda::std::uint16_t e2m1_lane(::cuda::std::uint8_t code) noexcept {
  return static_cast<::cuda::std::uint16_t>(((code & 7u) << Lane::mag_shift) | ((code & 8u) << 12));
}

//! Pair i of a word of 8 codes: codes (i, i + 4) as (low, high) lanes, value `e2m1 * 2^-(bias-1)`.
template <mma_lane Lane, int I>
QUADS_API constexpr ::cuda::std::uint32_t unpack_pair(::cuda::std::uint32_t q) noexcept {
  static_assert(I >= 0 && I < 4);
  constexpr int sign_shift = 12 - 4 * I;            // bit 4I+3 -> 15
  constexpr int mag_shift = Lane::mag_shift - 4 * I;  // bits 4I..4I+2 -> mag_shift..
  constexpr ::cuda::std::uint32_t sign_mask = 0x80008000u;
  constexpr ::cuda::std::uint32_t mag_mask = 0x00070007u << Lane::mag_shift;
  const ::cuda::std::uint32_t s = sign_shift >= 0 ? (q << sign_shift) : (q >> -sign_shift);
  const ::cuda::std::uint32_t m = mag_shift >= 0 ? (q << mag_shift) : (q >> -mag_shift);
  return (s & sign_mask) | (m & mag_mask);
}

//! The 4 lane pairs of a word of 8 codes (see the file comment).
template <mma_lane Lane>
QUADS_API constexpr void unpack_word(::cuda::std::uint32_t q, ::cuda::std::uint32_t (&p)[4]) noexcept {
  p[0] = unpack_pair<Lane, 0>(q);
  p[1] = unpack_pair<Lane, 1>(q);
  p[2] = unpack_pair<Lane, 2>(q);
  p[3] = unpack_pair<Lane, 3>(q);
}

//! Dequantizes a block-scaled FP4 operand into 16-bit lanes (the operand loader of the GEMM).
//! `fold_log2` (c) is the power of two the lanes are scaled down by; `multiplier(byte)` the lane
//! constant of a block scale; `dequant_word(q, m, out)` the 4 pairs of 8 codes of one block.
template <block_scaled_format Format, mma_lane Lane>
struct fp4_loader {
  static_assert(is_two_level<Format> || std::same_as<Lane, bf16_lane>,
                "quads: MXFP4 operands dequantize to bf16 only: UE8M0 scales span 2^-127..2^127 "
                "and fp16 lanes cannot hold them");
  using format = Format;
  using lane = Lane;
  static constexpr int block_size = Format::block_size;
  static constexpr int fold_log2 = is_two_level<Format> ? 7 : 16;
  //! Smallest / largest UE8M0 byte an MXFP4 operand may use (see the file comment).
  static constexpr int mx_min_byte = fold_log2 - 5;
  static constexpr int mx_max_byte = fold_log2 + 128;

  //! The lane constant `s * 2^(bias - 1 - c)` of a block scale byte (exact, a normal number).
  QUADS_API static constexpr ::cuda::std::uint16_t multiplier(::cuda::std::uint8_t byte) noexcept {
    if constexpr (is_two_level<Format>) {
      // s * 2^-8 (exact) times 2^(bias + 7 - c): a power of two, so the product is exact.
      const float f = ::quads::detail::mul_rn(
          detail::ue4m3_times_2_pow_minus_8(byte),
          ::quads::detail::from_bits(
              static_cast<::cuda::std::uint32_t>(127 + Lane::exponent_bias + 7 - fold_log2) << 23));
      if constexpr (std::same_as<Lane, bf16_lane>)
        return static_cast<::cuda::std::uint16_t>(::quads::detail::to_bits(f) >> 16);  // <= 4 bits
      else
        return detail::float_to_lane<Lane>(f);  // exact: a normal fp16 with <= 4 bits
    } else {
      // 2^(b - 127) * 2^(126 - c) = 2^(b - 1 - c): biased bf16 exponent b + 126 - c.
      return static_cast<::cuda::std::uint16_t>(((static_cast<unsigned>(byte) + 126u - fold_log2) & 0xffu)
                                                << 7);
    }
  }
  //! Both lanes set to `multiplier(byte)`.
  QUADS_API static constexpr ::cuda::std::uint32_t multiplier2(::cuda::std::uint8_t byte) noexcept {
    if constexpr (is_two_level<Format> && std::same_as<Lane, fp16_lane>) {
#if defined(__CUDA_ARCH__)
      if (!__builtin_is_constant_evaluated()) {
        // `byte << 7` is s * 2^-8 as binary16 (ue4m3_times_2_pow_minus_8), and one f16x2
        // multiply by 2^(bias + 7 - c) gives `multiplier(byte)` in both lanes, exactly (a normal
        // product): 3 instructions where the float path's software fp16 rounding took ~40 with
        // 8 branches per scale (the activation fill of every fp16-lane kernel runs this)
        constexpr ::cuda::std::uint32_t e = 2 * Lane::exponent_bias + 7 - fold_log2;
        static_assert(e > 0 && e < 31, "quads: the fold's power of two must be a normal fp16");
        constexpr ::cuda::std::uint32_t pow2 = (e << 10) * 0x10001u;
        const ::cuda::std::uint32_t h = (static_cast<::cuda::std::uint32_t>(byte) & 0x7fu) << 7;
        ::cuda::std::uint32_t d;
        asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(h * 0x10001u), "r"(pow2));
        return d;
      }
#endif
    }
    const ::cuda::std::uint32_t m = multiplier(byte);
    return m | (m << 16);
  }
  //! The 4 dequantized pairs of 8 codes in `q`, lanes `e2m1 * s * 2^-c`.
  QUADS_API static void dequant_word(::cuda::std::uint32_t q, ::cuda::std::uint32_t m2,
                                     ::cuda::std::uint32_t (&out)[4]) noexcept {
    ::cuda::std::uint32_t p[4];
    unpack_word<Lane>(q, p);
    for (int i = 0; i < 4; ++i) out[i] = detail::mul_lanes<Lane>(p[i], m2);
  }
  //! The value one code dequantizes to (as float): `e2m1 * s * 2^-c`, via the lane path.
  QUADS_API static float dequant_one(::cuda::std::uint8_t code, ::cuda::std::uint8_t byte) noexcept {
    const ::cuda::std::uint32_t d =
        detail::mul_lanes<Lane>(e2m1_lane<Lane>(code), multiplier(byte));
    return detail::lane_to_float<Lane>(static_cast<::cuda::std::uint16_t>(d & 0xffffu));
  }
  //! Whether a block scale byte is inside the exact range (always true for NVFP4's UE4M3 bytes
  //! 0..0x7E; MXFP4 bytes in [mx_min_byte, mx_max_byte]).
  QUADS_API static constexpr bool byte_in_range(::cuda::std::uint8_t byte) noexcept {
    if constexpr (is_two_level<Format>) return (byte & 0x7fu) != 0x7fu;
    else return byte >= mx_min_byte && byte <= mx_max_byte;
  }
};

//! Pairs 8 consecutive 16-bit activation values `x[0..8)` the way `unpack_word` pairs codes:
//! out[i] = (x[i], x[i + 4]) as (low, high) lanes.
QUADS_API constexpr void pair_octet(const ::cuda::std::uint16_t (&x)[8],
                                    ::cuda::std::uint32_t (&out)[4]) noexcept {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<::cuda::std::uint32_t>(x[i]) |
             (static_cast<::cuda::std::uint32_t>(x[i + 4]) << 16);
}

//! The same from 4 words holding x[0..8) as (x0|x1<<16, x2|x3<<16, x4|x5<<16, x6|x7<<16)
//! (a 16-byte vector load of 8 bf16/fp16 values).
QUADS_API constexpr void pair_octet_words(const ::cuda::std::uint32_t (&w)[4],
                                          ::cuda::std::uint32_t (&out)[4]) noexcept {
  // (x0, x4) = low halves of w0 and w2; (x1, x5) = high halves; (x2, x6), (x3, x7) from w1, w3.
  out[0] = (w[0] & 0xffffu) | (w[2] << 16);
  out[1] = (w[0] >> 16) | (w[2] & 0xffff0000u);
  out[2] = (w[1] & 0xffffu) | (w[3] << 16);
  out[3] = (w[1] >> 16) | (w[3] & 0xffff0000u);
}

} // namespace quads::gemm
