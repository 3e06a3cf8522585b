// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers shared by the host quantizer tests: C-array blocks, grid neighbours, option sets.
#pragma once

#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <test_support/generators.hpp>

#include <array>
#include <cmath>
#include <cstdint>

namespace quads_test {

//! `block_quantizer` takes `const float (&)[B]`; generators return std::array.
template <int B>
struct cblock {
  float v[B];
};
template <int B>
cblock<B> to_c(const std::array<float, B>& a) {
  cblock<B> c{};
  for (int i = 0; i < B; ++i) c.v[i] = a[static_cast<std::size_t>(i)];
  return c;
}

//! Grid neighbours of a magnitude on the positive E2M1 grid: lo <= a <= hi (both 6 above 6).
struct neighbours {
  float lo;
  float hi;
};
inline neighbours grid_neighbours(float a) {
  if (a >= 6.0f) return {6.0f, 6.0f};
  float lo = 0.0f, hi = 6.0f;
  for (float p : e2m1_grid) {
    if (p <= a) lo = p;
    if (p >= a && p < hi) hi = p;
  }
  return {lo, hi};
}

//! Option sets used across the tests.
inline constexpr quads::quant_options opt_default{};
inline constexpr quads::quant_options opt_four_over_six{
    .block_rule = quads::block_scale_rule::four_over_six};
inline constexpr quads::quant_options opt_stochastic{.round = quads::rounding::stochastic};
inline constexpr quads::quant_options opt_mx_floor{.mx_rounding = quads::ue8m0_rounding::floor};
inline constexpr quads::quant_options opt_per_row{.global = quads::global_scale::per_row};
inline constexpr quads::quant_options opt_given{.global = quads::global_scale::given};

//! The real (unrounded) dequantization factor of a scale byte: scale * S_dec (two-level) or the
//! power of two (MX), as a double.
template <class Format>
double real_scale(std::uint8_t byte, quads::tensor_scale ts) {
  const double s = static_cast<double>(Format::decode_scale(byte));
  return quads::is_two_level<Format> ? s * static_cast<double>(ts.decode) : s;
}

} // namespace quads_test
