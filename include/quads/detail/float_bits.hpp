// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit access to fp32 and explicitly rounded fp32 arithmetic shared by host and device.
#pragma once

#include <quads/config.hpp>

#include <cuda/std/bit>
#include <cuda/std/cstdint>

namespace quads::detail {

QUADS_API constexpr ::cuda::std::uint32_t to_bits(float x) noexcept {
  return ::cuda::std::bit_cast<::cuda::std::uint32_t>(x);
}
QUADS_API constexpr float from_bits(::cuda::std::uint32_t u) noexcept {
  return ::cuda::std::bit_cast<float>(u);
}
QUADS_API constexpr bool is_nan(float x) noexcept { return (to_bits(x) & 0x7fffffffu) > 0x7f800000u; }
//! |x| by clearing the sign bit (keeps NaN payloads; exact for every input).
QUADS_API constexpr float abs_bits(float x) noexcept { return from_bits(to_bits(x) & 0x7fffffffu); }
//! max that ignores a NaN operand (IEEE maxNum, like fmaxf); constexpr on the host.
QUADS_API constexpr float max_num(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return fmaxf(a, b);  // one FMNMX, same semantics
#endif
  if (is_nan(a)) return b;
  if (is_nan(b)) return a;
  return a < b ? b : a;
}
QUADS_API constexpr float min_num(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return fminf(a, b);
#endif
  if (is_nan(a)) return b;
  if (is_nan(b)) return a;
  return b < a ? b : a;
}

// nvcc contracts a*b+c into an FMA by default and the host compiler does not; the numerics
// promise bit-identical host and device results, so products that feed sums go through these.
// On the host, g++ with FMA enabled (-mfma, -march=native) fuses across inlined calls even under
// -std=c++20; __builtin_assoc_barrier (GCC 12+) pins the rounded product. clang contracts only
// within one expression, so it needs no barrier.
QUADS_API constexpr float mul_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return __fmul_rn(a, b);
#elif defined(__has_builtin) && !defined(__CUDACC__)  // nvcc's front end lacks the builtin
#  if __has_builtin(__builtin_assoc_barrier)
  return __builtin_assoc_barrier(a * b);
#  endif
#endif
  return a * b;
}
QUADS_API constexpr float add_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return __fadd_rn(a, b);
#endif
  return a + b;
}
QUADS_API constexpr float div_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return __fdiv_rn(a, b);
#endif
  return a / b;
}

inline constexpr float flt_max = 3.40282346638528859811704183484516925e+38f;

//! min(a / b, FLT_MAX) for a > 0 (b = 0 or a NaN b give FLT_MAX), usable in constant expressions:
//! compilers reject a constant division by zero or one that overflows, so the constant-evaluated
//! path divides in double, which rounds to the same float (53 >= 2 * 24 + 2 bits).
QUADS_API constexpr float div_rn_satfinite(float a, float b) noexcept {
  if (__builtin_is_constant_evaluated()) {
    if (b == 0.0f) return flt_max;
    const double q = static_cast<double>(a) / static_cast<double>(b);
    if (q >= static_cast<double>(flt_max)) return flt_max;
    return min_num(static_cast<float>(q), flt_max);
  }
  return min_num(div_rn(a, b), flt_max);
}

//! `div_rn_satfinite(1, b)`: min(1 / b, FLT_MAX) (b = 0 or NaN give FLT_MAX). On the device
//! `rcp.rn.f32` (correctly rounded, like `div.rn.f32` of 1 by b, and cheaper); the two agree
//! for all 2^32 inputs on the H200 (checked 2026-11-29).
QUADS_API constexpr float rcp_rn_satfinite(float b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return fminf(__frcp_rn(b), flt_max);
#endif
  return div_rn_satfinite(1.0f, b);
}

//! Shifts `m` right by `s` (s >= 1) rounding to nearest, ties to even.
QUADS_API constexpr ::cuda::std::uint32_t shift_right_rne(::cuda::std::uint32_t m, int s) noexcept {
  if (s >= 32) return 0;
  const ::cuda::std::uint32_t q = m >> s;
  const ::cuda::std::uint32_t rem = m & ((1u << s) - 1u);
  const ::cuda::std::uint32_t half = 1u << (s - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

} // namespace quads::detail
