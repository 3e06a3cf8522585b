// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host-side problem generators of the GEMM tests (quantized weights and activations, RAC
//!        operands), shared by the host emulation tests and the GPU tests.
//!
//! Values: Gaussian rows with a per-row power-of-two spread and a few outliers, so block scales
//! vary (including small UE4M3 and some subnormal ones) and the per-tensor scale matters. MXFP4
//! data stays within the loader's exact byte range (checked).
#pragma once

#include <quads/config.hpp>

#include <quads/compensation/reference.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/gemm/dequant.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/seed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads_gemm_test {

//! Gaussian values with a per-row scale 2^[-4, 4], 1 % outliers x 20 and 2 % exact zeros.
inline std::vector<float> random_matrix(std::mt19937_64& g, int rows, int cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-4, 4);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const float s = std::ldexp(1.0f, e(g));
    for (int c = 0; c < cols; ++c) {
      const float p = u(g);
      float v = normal(g) * s;
      if (p < 0.01f) v *= 20.0f;
      else if (p < 0.03f) v = 0.0f;
      x[static_cast<std::size_t>(r) * cols + c] = v;
    }
  }
  return x;
}

template <class Format, quads::quant_options Options = quads::quant_options{}>
quads::reference::quantized_tensor<Format> quantize(const std::vector<float>& x, int rows, int cols) {
  auto q = quads::reference::quantize<Format, Options>(x, rows, cols);
  if constexpr (!quads::is_two_level<Format>) {
    using L = quads::gemm::fp4_loader<Format, quads::gemm::bf16_lane>;
    for (std::uint8_t b : q.scales)
      if (!L::byte_in_range(b))
        throw std::runtime_error("test data: MXFP4 scale byte " + std::to_string(b) +
                                 " outside the loader's exact range");
  }
  return q;
}

//! Dense 16-bit activations: the bits and their exact float values.
struct dense16 {
  std::vector<std::uint16_t> bits;
  std::vector<float> values;
};

template <class Lane>
dense16 to_dense16(const std::vector<float>& x) {
  dense16 d;
  d.bits.resize(x.size());
  d.values.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    d.bits[i] = quads::gemm::detail::float_to_lane<Lane>(x[i]);
    d.values[i] = quads::gemm::detail::lane_to_float<Lane>(d.bits[i]);
  }
  return d;
}

//! A RAC operand for `x` `[rows, K]`: every `stride`-th block (from `first`) selected, no
//! permutation, NVFP4, given residual scale mode.
struct rac_problem {
  quads::compensation::channel_selection sel;
  quads::compensation::reference::rac_activation<quads::nvfp4> act;
};

inline rac_problem make_rac(const std::vector<float>& x, int rows, int K, int stride, int first,
                            quads::compensation::residual_scale mode) {
  std::vector<int> blocks;
  for (int b = first; b < K / 16; b += stride) blocks.push_back(b);
  rac_problem p{quads::compensation::select_blocks(K, blocks, 16), {}};
  quads::compensation::reference::rac_args args;
  args.residual = mode;
  p.act = quads::compensation::reference::quantize_activation<quads::nvfp4>(x, rows, p.sel, args);
  return p;
}

//! A user-written element node, as example 04 shows: clamp to [lo, hi] (host and device).
struct clamp_node {
  struct arguments {
    float lo = -1.0f;
    float hi = 1.0f;
  };
  struct params {
    float lo, hi;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.lo, a.hi}; }
  QUADS_API static constexpr float apply(float v, int, int, const params& p) noexcept {
    return v < p.lo ? p.lo : (v > p.hi ? p.hi : v);
  }
};

} // namespace quads_gemm_test
