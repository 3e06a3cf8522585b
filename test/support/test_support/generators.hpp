// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Seeded input generators: random blocks of many shapes and adversarial blocks/values.
//!
//! Random blocks mix several distributions (Gaussian at a random power-of-two scale, outliers,
//! sparse, values on and next to the E2M1 grid and its rounding boundaries, wide dynamic range),
//! because a single distribution rarely reaches ties, saturation or scale underflow.
#pragma once

#include <test_support/seed.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace quads_test {

//! Positive E2M1 grid points and the midpoints between neighbours (the RNE decision boundaries).
inline constexpr float e2m1_grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
inline constexpr float e2m1_midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

inline float flt_max() { return std::numeric_limits<float>::max(); }
inline float flt_inf() { return std::numeric_limits<float>::infinity(); }
inline float flt_nan() { return std::numeric_limits<float>::quiet_NaN(); }
inline float flt_denorm_min() { return std::numeric_limits<float>::denorm_min(); }

//! n Gaussian values with standard deviation sigma.
inline std::vector<float> normal_values(std::mt19937_64& g, std::size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

//! One random block of B values; the distribution is picked at random per block.
template <int B>
std::array<float, B> random_block(std::mt19937_64& g) {
  std::array<float, B> x{};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind_d(0, 6), exp_d(-30, 30), wide_exp_d(-60, 40);
  std::uniform_int_distribution<int> idx_d(0, B - 1), grid_d(0, 7), mid_d(0, 6), sign_d(0, 1);
  const float scale = std::ldexp(1.0f, exp_d(g));
  switch (kind_d(g)) {
  case 0:  // Gaussian
    for (float& v : x) v = normal(g) * scale;
    break;
  case 1: {  // uniform
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : x) v = u(g) * scale;
    break;
  }
  case 2:  // Gaussian with one large outlier
    for (float& v : x) v = normal(g) * scale;
    x[static_cast<std::size_t>(idx_d(g))] = 100.0f * scale * (sign_d(g) ? -1.0f : 1.0f);
    break;
  case 3:  // sparse: mostly exact zeros (both signs)
    for (float& v : x) v = sign_d(g) ? 0.0f : -0.0f;
    for (int k = 0; k < 3; ++k) x[static_cast<std::size_t>(idx_d(g))] = normal(g) * scale;
    break;
  case 4:  // on the grid, scaled by a power of two: exactly representable after scaling
    for (float& v : x) v = e2m1_grid[grid_d(g)] * scale * (sign_d(g) ? -1.0f : 1.0f);
    x[static_cast<std::size_t>(idx_d(g))] = 6.0f * scale;
    break;
  case 5: {  // on the rounding boundaries relative to amax = 6 * scale, and one ulp either side
    for (float& v : x) {
      float m = e2m1_midpoints[mid_d(g)] * scale;
      const int side = std::uniform_int_distribution<int>(-1, 1)(g);
      if (side < 0) m = std::nextafter(m, 0.0f);
      if (side > 0) m = std::nextafter(m, flt_inf());
      v = sign_d(g) ? -m : m;
    }
    x[static_cast<std::size_t>(idx_d(g))] = 6.0f * scale;
    break;
  }
  default:  // each element at its own random power of two: wide dynamic range, underflowing codes
    for (float& v : x) v = normal(g) * std::ldexp(1.0f, wide_exp_d(g));
    break;
  }
  return x;
}

//! Fixed corner-case blocks: zeros of both signs, constants, extremes of the fp32 range,
//! subnormals, alternating signs, NaN/Inf, a single non-zero, boundary values.
template <int B>
std::vector<std::array<float, B>> adversarial_blocks() {
  std::vector<std::array<float, B>> out;
  auto filled = [](float v) {
    std::array<float, B> x{};
    x.fill(v);
    return x;
  };
  out.push_back(filled(0.0f));
  out.push_back(filled(-0.0f));
  out.push_back(filled(1.0f));
  out.push_back(filled(-6.0f));
  out.push_back(filled(flt_max()));
  out.push_back(filled(-flt_max()));
  out.push_back(filled(flt_denorm_min()));
  out.push_back(filled(std::numeric_limits<float>::min()));
  out.push_back(filled(1e-30f));
  out.push_back(filled(448.0f));
  out.push_back(filled(464.0f));
  {
    auto x = filled(0.0f);
    for (int i = 0; i < B; ++i) x[static_cast<std::size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * e2m1_grid[i % 8];
    out.push_back(x);
  }
  {  // one non-zero at the last position
    auto x = filled(0.0f);
    x[B - 1] = 3.0f;
    out.push_back(x);
  }
  {  // amax huge, the rest tiny: the small ones round to zero codes
    auto x = filled(1e-20f);
    x[0] = 1e20f;
    out.push_back(x);
  }
  {  // midpoints of the E2M1 grid for amax 6, and their neighbours
    auto x = filled(0.0f);
    x[0] = 6.0f;
    for (int i = 1; i < B; ++i) {
      const float m = e2m1_midpoints[(i - 1) % 7];
      x[static_cast<std::size_t>(i)] = (i / 7) % 3 == 0   ? m
                                       : (i / 7) % 3 == 1 ? std::nextafter(m, 0.0f)
                                                          : std::nextafter(m, 10.0f);
    }
    out.push_back(x);
  }
  {  // NaN of both signs among normal values
    auto x = filled(0.75f);
    x[1] = flt_nan();
    x[2] = -flt_nan();
    x[3] = -2.0f;
    out.push_back(x);
  }
  {  // +Inf and -Inf
    auto x = filled(1.0f);
    x[0] = flt_inf();
    x[B / 2] = -flt_inf();
    out.push_back(x);
  }
  {  // all NaN
    out.push_back(filled(flt_nan()));
  }
  {  // fp32 subnormals next to a normal amax
    auto x = filled(flt_denorm_min());
    x[3] = 1.0f;
    out.push_back(x);
  }
  return out;
}

//! Scalars that break codecs: signed zeros, subnormals, fp32 limits, Inf, NaN, the E2M1 grid and
//! its midpoints with their fp32 neighbours, E4M3 limits (448, 464).
inline std::vector<float> special_values() {
  std::vector<float> v = {0.0f, -0.0f, flt_denorm_min(), -flt_denorm_min(),
                          std::numeric_limits<float>::min(), flt_max(), -flt_max(), flt_inf(),
                          -flt_inf(), flt_nan(), -flt_nan(), 448.0f, 464.0f, 465.0f, 1e-30f};
  for (float m : e2m1_midpoints)
    for (float s : {1.0f, -1.0f}) {
      v.push_back(s * m);
      v.push_back(s * std::nextafter(m, 0.0f));
      v.push_back(s * std::nextafter(m, 10.0f));
    }
  for (float p : e2m1_grid) v.push_back(p);
  return v;
}

} // namespace quads_test
