// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief E4M3 ("e4m3fn") and UE4M3 codec: round-to-nearest-even encode with satfinite, decode.
//!
//! Overview: `S EEEE MMM`, bias 7, max 448 (0x7E), min normal 2^-6, min subnormal 2^-9, NaN =
//! 0x7F/0xFF, no Inf. Encoding follows CUDA's `__nv_cvt_float_to_fp8(x, __NV_SATFINITE,
//! __NV_E4M3)` bit for bit (tested for all 2^32 inputs): |x| > 464 and ±Inf saturate to ±448,
//! 464 itself ties to 448, |x| <= 2^-10 gives ±0, NaN gives 0x7F (positive NaN whatever the input
//! sign; the H200's `cvt.rn.satfinite.e4m3x2.f32` returns 0xFF for negative NaN inputs).
//! UE4M3 (the NVFP4 block scale) is this encoding restricted to non-negative values; quads
//! never produces a negative or NaN scale byte, and its decoder ignores the sign bit as cuBLAS does.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>

#include <cuda/std/cstdint>

namespace quads {

struct e4m3_t {
  ::cuda::std::uint8_t bits;
};
//! UE4M3 block scale (E4M3 bits, sign bit unused).
struct ue4m3_t {
  ::cuda::std::uint8_t bits;
};

inline constexpr float e4m3_max = 448.0f;

namespace detail {
//! The software E4M3 encoder (the host path, and the device path below sm_89).
QUADS_API constexpr ::cuda::std::uint8_t encode_e4m3_software(float x) noexcept {
  const ::cuda::std::uint32_t u = detail::to_bits(x);
  const ::cuda::std::uint32_t sign = (u >> 24) & 0x80u;
  const ::cuda::std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;
  const ::cuda::std::uint32_t e = a >> 23;  // biased fp32 exponent
  ::cuda::std::uint32_t code;
  if (e >= 121u) {  // |x| >= 2^-6: normal E4M3 (or overflow); re-bias 127 -> 7 and round 20 bits
    ::cuda::std::uint32_t r = a - (120u << 23);
    r += 0x7ffffu + ((r >> 20) & 1u);
    code = r >> 20;
    if (code > 0x7eu || e == 0xffu) code = 0x7e;
  } else if (e == 0u) {
    code = 0;  // fp32 subnormal: far below half of the smallest E4M3 subnormal
  } else {     // value / 2^-9 = (mantissa | implicit bit) * 2^(e - 141), rounded to an integer
    code = detail::shift_right_rne((a & 0x7fffffu) | 0x800000u, 141 - static_cast<int>(e));
  }
  return static_cast<::cuda::std::uint8_t>(code | sign);
}
} // namespace detail

//! float -> E4M3, round to nearest even, saturate finite values and ±Inf to ±448, NaN -> 0x7F.
//! On sm_89+ devices this is one `cvt.rn.satfinite.e4m3x2.f32`, which equals the software path
//! for every input except negative NaN (hardware 0xFF), so NaN is tested first; the GPU suite
//! compares the two for all 2^32 inputs.
QUADS_API constexpr ::cuda::std::uint8_t encode_e4m3(float x) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (!__builtin_is_constant_evaluated()) {
    if (detail::is_nan(x)) return 0x7f;
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    return static_cast<::cuda::std::uint8_t>(r & 0xffu);
  }
#endif
  return detail::encode_e4m3_software(x);
}

//! E4M3 -> float (exact). 0x7F/0xFF decode to NaN (0x7FC00000 with the byte's sign).
//! On sm_89+ devices: `cvt.rn.f16x2.e4m3x2` then `cvt.f32.f16` (both exact), NaN bytes selected
//! first (the hardware NaN has another payload); all 256 bytes equal the software path on the
//! H200 (checked 2026-11-29; the GPU suite covers it through the quantize/dequantize tests).
QUADS_API constexpr float decode_e4m3(::cuda::std::uint8_t b) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (!__builtin_is_constant_evaluated()) {
    const ::cuda::std::uint32_t sign = static_cast<::cuda::std::uint32_t>(b & 0x80u) << 24;
    unsigned int h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<unsigned short>(b)));
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h2 & 0xffffu)));
    return (b & 0x7fu) == 0x7fu ? detail::from_bits(0x7fc00000u | sign) : f;
  }
#endif
  const ::cuda::std::uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
  const ::cuda::std::uint32_t sign = static_cast<::cuda::std::uint32_t>(b & 0x80u) << 24;
  if (e == 0xfu && m == 7u) return detail::from_bits(0x7fc00000u | sign);
  const float mag = e == 0u ? static_cast<float>(m) * (1.0f / 512.0f)
                            : detail::from_bits(((e + 120u) << 23) | (m << 20));
  return detail::from_bits(detail::to_bits(mag) | sign);
}

//! UE4M3 scale -> float; the sign bit is ignored (as cuBLAS does).
QUADS_API constexpr float decode_ue4m3(::cuda::std::uint8_t b) noexcept {
  return decode_e4m3(static_cast<::cuda::std::uint8_t>(b & 0x7fu));
}
//! Non-negative float -> UE4M3 byte; the input's sign is dropped (|x| is encoded).
QUADS_API constexpr ::cuda::std::uint8_t encode_ue4m3(float x) noexcept {
  return static_cast<::cuda::std::uint8_t>(encode_e4m3(detail::abs_bits(x)) & 0x7fu);
}

} // namespace quads
