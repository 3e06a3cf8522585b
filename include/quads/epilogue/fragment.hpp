// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The unit an epilogue works on (`fragment<W>`: W consecutive output columns of one row)
//!        and the 16-bit output element types with their exact fp32 conversions (host + device).
//!
//! Overview: after the GEMM's K reduction, the epilogue sees one output row `row` and the columns
//! `col .. col + count - 1` (`count <= W`; smaller only in the last fragment of a row) as fp32
//! values `v`. `r` holds the residual accumulator of RAC composition (b) with its own scale (read
//! by `rac_residual` only; zero otherwise). Width-changing nodes (SwiGLU) return a narrower
//! fragment whose `col` / `count` are in output columns.
//!
//! `bf16_t` / `fp16_t` are bit-compatible with `__nv_bfloat16` / `__half` and exist so that the
//! host-safe headers can name 16-bit outputs without the CUDA headers. Conversions from fp32 round
//! to nearest even (the rounding of `__float2bfloat16_rn` / `__float2half_rn`), NaN -> canonical
//! quiet NaN (0x7FFF / 0x7FFF), overflow -> Inf.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>

#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

namespace quads {

//! One bfloat16 value's bits (same layout as `__nv_bfloat16`).
struct bf16_t {
  ::cuda::std::uint16_t bits;
};
//! One IEEE binary16 value's bits (same layout as `__half`).
struct fp16_t {
  ::cuda::std::uint16_t bits;
};

namespace detail {

//! fp32 -> bf16 bits, round to nearest even; NaN -> 0x7FFF with the sign kept.
QUADS_API constexpr ::cuda::std::uint16_t float_to_bf16_bits(float x) noexcept {
  const ::cuda::std::uint32_t u = to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<::cuda::std::uint16_t>(((u >> 16) & 0x8000u) | 0x7fffu);
  const ::cuda::std::uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<::cuda::std::uint16_t>(r >> 16);
}

//! bf16 bits -> fp32 (exact).
QUADS_API constexpr float bf16_bits_to_float(::cuda::std::uint16_t b) noexcept {
  return from_bits(static_cast<::cuda::std::uint32_t>(b) << 16);
}

//! fp32 -> binary16 bits, round to nearest even, subnormals kept, overflow -> Inf, NaN -> 0x7FFF
//! with the sign kept.
QUADS_API constexpr ::cuda::std::uint16_t float_to_fp16_bits(float x) noexcept {
  const ::cuda::std::uint32_t u = to_bits(x);
  const ::cuda::std::uint32_t sign = (u >> 16) & 0x8000u;
  const ::cuda::std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<::cuda::std::uint16_t>(sign | 0x7fffu);
  const int e = static_cast<int>(a >> 23) - 127;  // unbiased exponent of |x|
  if (e >= 16) return static_cast<::cuda::std::uint16_t>(sign | 0x7c00u);  // >= 2^16: Inf
  if (e >= -14) {  // normal range: keep 10 of 23 mantissa bits, RNE may carry into the exponent
    const ::cuda::std::uint32_t m = a & 0x7fffffu;
    const ::cuda::std::uint32_t h = (static_cast<::cuda::std::uint32_t>(e + 15) << 10) | (m >> 13);
    const ::cuda::std::uint32_t rem = m & 0x1fffu;
    const ::cuda::std::uint32_t up = (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;
    return static_cast<::cuda::std::uint16_t>(sign | (h + up));  // h + up <= 0x7c00 (Inf)
  }
  if (e < -25) return static_cast<::cuda::std::uint16_t>(sign);  // below half the smallest
  // subnormal: value / 2^-24 = (1.m) * 2^(e + 24), rounded to an integer
  const ::cuda::std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return static_cast<::cuda::std::uint16_t>(sign | shift_right_rne(m, -e - 1));
}

//! binary16 bits -> fp32 (exact, subnormals included).
QUADS_API constexpr float fp16_bits_to_float(::cuda::std::uint16_t h) noexcept {
  const ::cuda::std::uint32_t sign = static_cast<::cuda::std::uint32_t>(h & 0x8000u) << 16;
  const ::cuda::std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float mag;
  if (e == 0u) mag = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24, exact
  else if (e == 31u) mag = from_bits(0x7f800000u | (m << 13));
  else mag = from_bits(((e + 112u) << 23) | (m << 13));
  return from_bits(to_bits(mag) | sign);
}

} // namespace detail

//! How an epilogue reads and writes an element type. Specialized for `float`, `bf16_t` and
//! `fp16_t` here, and for `__nv_bfloat16` / `__half` in `quads/gemm/decode.cuh`.
template <class T>
struct element_traits;

template <>
struct element_traits<float> {
  QUADS_API static constexpr float to_float(float x) noexcept { return x; }
  QUADS_API static constexpr float from_float(float x) noexcept { return x; }
};
template <>
struct element_traits<bf16_t> {
  QUADS_API static constexpr float to_float(bf16_t x) noexcept {
    return detail::bf16_bits_to_float(x.bits);
  }
  QUADS_API static constexpr bf16_t from_float(float x) noexcept {
    return {detail::float_to_bf16_bits(x)};
  }
};
template <>
struct element_traits<fp16_t> {
  QUADS_API static constexpr float to_float(fp16_t x) noexcept {
    return detail::fp16_bits_to_float(x.bits);
  }
  QUADS_API static constexpr fp16_t from_float(float x) noexcept {
    return {detail::float_to_fp16_bits(x)};
  }
};

//! An element type the epilogue nodes can load (`bias`) and store (`store`).
template <class T>
concept epilogue_element = requires(const T& x, float f) {
  { element_traits<T>::to_float(x) } -> ::cuda::std::same_as<float>;
  { element_traits<T>::from_float(f) } -> ::cuda::std::same_as<T>;
};

namespace epilogue {

//! W consecutive output values of one row (see the file comment). `r` is the residual
//! accumulator of RAC composition (b) with `residual_scale::own`, zero otherwise.
template <int W>
struct fragment {
  static_assert(W > 0, "quads: a fragment holds at least one column");
  static constexpr int width = W;
  int row;
  int col;
  int count;  //!< valid values: v[0 .. count)
  float v[W];
  float r[W];
};

} // namespace epilogue
} // namespace quads
