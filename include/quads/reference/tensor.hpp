// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host reference: quantize, dequantize and fake-quantize row-major tensors and expert stacks.
//!
//! This is the specification in code that GPU kernels are tested against byte for byte. It uses
//! `block_quantizer` for every block (the one QDQ path) and adds only the tensor-level rules:
//! - the input is `[experts, rows, cols]` row-major fp32 (`experts = 1` for a plain matrix), blocks
//!   run along `cols` (K); `cols % block_size != 0` throws `std::invalid_argument`;
//! - tensor scales: `per_tensor` from the amax of each expert's `[rows, cols]` slice, `per_row`
//!   from each row's amax, `given` from `quantize_args::given` (one per expert, or one for all);
//! - stochastic rounding draws block `b`'s bits from `philox4x32_10{seed}` at the block's global
//!   index `b = (expert * rows + row) * (cols / block_size) + col_block`;
//! - scales go to `batched<Layout>{experts, Layout{rows, cols / block_size}}`, padding zero.
#pragma once

#include <quads/config.hpp>

#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads::reference {

//! A quantized `[experts, rows, cols]` tensor held on the host.
template <block_scaled_format Format, scale_layout Layout = linear_scales>
struct quantized_tensor {
  int experts = 1;
  int rows = 0;
  int cols = 0;
  global_scale global = global_scale::per_tensor;
  std::vector<std::uint8_t> data;          //!< `experts * rows * cols / 2` packed codes
  std::vector<std::uint8_t> scales;        //!< `scale_layout().size()` bytes
  std::vector<tensor_scale> tensor_scales; //!< one per expert, or one per row with `per_row`

  batched<Layout> scale_layout() const { return {experts, Layout{rows, cols / Format::block_size}}; }
  //! The tensor scale that applies to `row` of `expert`.
  tensor_scale scale_of(int expert, int row) const {
    return global == global_scale::per_row
               ? tensor_scales[static_cast<std::size_t>(expert) * rows + row]
               : tensor_scales[static_cast<std::size_t>(expert)];
  }
};

struct quantize_args {
  int experts = 1;
  std::span<const tensor_scale> given{};  //!< `global_scale::given`: 1 or `experts` entries
  std::uint64_t seed = 0;                 //!< stochastic rounding seed
};

//! max |x| ignoring NaN (the amax the tensor scale is computed from).
inline float amax(std::span<const float> x) {
  float m = 0.0f;
  for (float v : x) m = detail::max_num(m, detail::abs_bits(v));
  return m;
}

namespace detail {
inline void check_shape(std::size_t n, int experts, int rows, int cols, int block) {
  if (experts < 1 || rows < 0 || cols < 0)
    throw std::invalid_argument("quads: negative or empty shape");
  if (cols % block != 0)
    throw std::invalid_argument("quads: K (cols = " + std::to_string(cols) +
                                ") must be a multiple of the block size " + std::to_string(block) +
                                "; pad explicitly if you mean to");
  if (n != static_cast<std::size_t>(experts) * rows * cols)
    throw std::invalid_argument("quads: input has " + std::to_string(n) + " values, expected " +
                                std::to_string(static_cast<std::size_t>(experts) * rows * cols));
}
} // namespace detail

//! Quantizes `x` (`[experts, rows, cols]` row-major). Throws `std::invalid_argument` on a bad
//! shape or a missing given scale.
template <block_scaled_format Format, quant_options Options = quant_options{},
          scale_layout Layout = linear_scales>
quantized_tensor<Format, Layout> quantize(std::span<const float> x, int rows, int cols,
                                          const quantize_args& args = {}) {
  static_assert(Options.math != scale_math::rcp_approx,
                "quads: scale_math::rcp_approx is GPU-only; the host reference cannot reproduce it");
  using quantizer = block_quantizer<Format, Options>;
  constexpr int B = Format::block_size;
  const int E = args.experts;
  detail::check_shape(x.size(), E, rows, cols, B);
  const int nkb = cols / B;
  const std::size_t slice = static_cast<std::size_t>(rows) * cols;

  quantized_tensor<Format, Layout> q;
  q.experts = E;
  q.rows = rows;
  q.cols = cols;
  q.global = Format::has_tensor_scale ? Options.global : global_scale::per_tensor;
  q.data.assign(slice * E / 2, 0);
  q.scales.assign(q.scale_layout().size(), 0);

  if (!Format::has_tensor_scale) {
    q.tensor_scales.assign(E, tensor_scale{});
  } else if (Options.global == global_scale::given) {
    if (args.given.size() != 1 && args.given.size() != static_cast<std::size_t>(E))
      throw std::invalid_argument("quads: global_scale::given needs 1 or `experts` tensor scales");
    for (const tensor_scale& g : args.given)
      if (!valid_tensor_scale(g))
        throw std::invalid_argument("quads: a given tensor scale must be finite and positive in "
                                    "both directions (see tensor_scale_from_decode)");
    for (int e = 0; e < E; ++e) q.tensor_scales.push_back(args.given[args.given.size() == 1 ? 0 : e]);
  } else if (Options.global == global_scale::per_row) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(E) * rows; ++r)
      q.tensor_scales.push_back(
          make_tensor_scale<Format, Options>(amax(x.subspan(r * cols, static_cast<std::size_t>(cols)))));
  } else {
    for (int e = 0; e < E; ++e)
      q.tensor_scales.push_back(make_tensor_scale<Format, Options>(amax(x.subspan(e * slice, slice))));
  }

  const auto layout = q.scale_layout();
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < rows; ++r) {
      const tensor_scale ts = q.scale_of(e, r);
      for (int kb = 0; kb < nkb; ++kb) {
        const std::size_t first = e * slice + static_cast<std::size_t>(r) * cols + kb * B;
        float block[B];
        for (int i = 0; i < B; ++i) block[i] = x[first + i];
        const packed_block<Format> pb =
            quantizer::quantize(block, ts, quantizer::bits_for(args.seed, first / B));
        for (int i = 0; i < B / 2; ++i) q.data[first / 2 + i] = pb.codes[i];
        q.scales[layout.offset(e, r, kb)] = pb.scale;
      }
    }
  return q;
}

//! Dequantizes to fp32 `[experts, rows, cols]`.
template <block_scaled_format Format, quant_options Options = quant_options{},
          scale_layout Layout = linear_scales>
std::vector<float> dequantize(const quantized_tensor<Format, Layout>& q) {
  using quantizer = block_quantizer<Format, Options>;
  constexpr int B = Format::block_size;
  const int nkb = q.cols / B;
  const auto layout = q.scale_layout();
  std::vector<float> out(q.data.size() * 2);
  for (int e = 0; e < q.experts; ++e)
    for (int r = 0; r < q.rows; ++r) {
      const tensor_scale ts = q.scale_of(e, r);
      for (int kb = 0; kb < nkb; ++kb) {
        const std::size_t first =
            (static_cast<std::size_t>(e) * q.rows + r) * q.cols + static_cast<std::size_t>(kb) * B;
        packed_block<Format> pb{};
        for (int i = 0; i < B / 2; ++i) pb.codes[i] = q.data[first / 2 + i];
        pb.scale = q.scales[layout.offset(e, r, kb)];
        float block[B];
        quantizer::dequantize(pb, ts, block);
        for (int i = 0; i < B; ++i) out[first + i] = block[i];
      }
    }
  return out;
}

//! Fake quantization of a tensor: `dequantize(quantize(x))`.
template <block_scaled_format Format, quant_options Options = quant_options{}>
std::vector<float> qdq(std::span<const float> x, int rows, int cols, const quantize_args& args = {}) {
  return dequantize<Format, Options>(quantize<Format, Options>(x, rows, cols, args));
}

} // namespace quads::reference
