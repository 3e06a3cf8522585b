// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the policy tests: option sets, random weights/activations with outliers,
//! bf16 rounding, bit comparison of float vectors.
#pragma once

#include <quads/policy/reference.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace policy_test {

inline constexpr quads::quant_options o_default{};
inline constexpr quads::quant_options o_stochastic{.round = quads::rounding::stochastic};
inline constexpr quads::quant_options o_four_six{.block_rule =
                                                     quads::block_scale_rule::four_over_six};
inline constexpr quads::quant_options o_four_six_sr{
    .round = quads::rounding::stochastic, .block_rule = quads::block_scale_rule::four_over_six};
inline constexpr quads::quant_options o_given{.global = quads::global_scale::given};
inline constexpr quads::quant_options o_per_row{.global = quads::global_scale::per_row};
inline constexpr quads::quant_options o_mx_floor{.mx_rounding = quads::ue8m0_rounding::floor};
inline constexpr quads::quant_options o_mx_floor_sr{.round = quads::rounding::stochastic,
                                                    .mx_rounding = quads::ue8m0_rounding::floor};

//! Sets `block[0]` to 1.75 * 2^j above the largest magnitude of the 32-element `block`: under the
//! MX floor rule the block scale becomes 2^(j-2) and that element maps to 7, so it saturates
//! whatever the random draw (tests that must see a saturated element plant one).
inline void plant_mx_floor_saturation(std::span<float> block) {
  float amax = 0.0f;
  for (const float v : block.first(32))
    amax = std::max(amax, std::fabs(v));
  block[0] = std::ldexp(1.75f, std::ilogb(amax) + 1);
}

//! `experts` stacked `[rows, cols]` matrices, Gaussian, magnitudes differing per expert, a few
//! outlier rows and columns (LLM-like), rounded to bf16 if asked.
inline std::vector<float> weights(std::mt19937_64& g, int experts, int rows, int cols,
                                  bool bf16 = true) {
  std::vector<float> w =
      quads_test::normal_values(g, static_cast<std::size_t>(experts) * rows * cols, 0.05f);
  std::uniform_int_distribution<int> coin(0, 40);
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float& v = w[(static_cast<std::size_t>(e) * rows + r) * cols + c];
        v = std::ldexp(v, e % 3 - 1);
        if (coin(g) == 0) v *= 12.0f; // sparse outliers
        if (c % 37 == 5) v *= 4.0f;   // an outlier channel
        if (bf16) v = quads::reference::round_bf16(v);
      }
  return w;
}

//! Bit-identical float vectors (a failing CHECK prints the first mismatch).
inline std::string diff(std::span<const float> a, std::span<const float> b) {
  return quads_test::mismatch_report(a, b);
}

template <class T>
std::vector<float> to_float(const std::vector<T>& v) {
  return std::vector<float>(v.begin(), v.end());
}

} // namespace policy_test
