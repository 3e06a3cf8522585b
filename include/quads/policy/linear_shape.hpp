// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Shape of a dense or grouped (MoE expert) linear layer, shared by the host reference and
//! the GPU trainer path; the per-call fake-quant arguments.
//!
//! Weights are `[experts, n, k]` row-major (`experts = 1`: a dense `[n, k]` layer). Activations
//! are `[M, k]` row-major with the rows of expert `e` contiguous, `rows[e]` of them, in expert
//! order (the layout a grouped MoE GEMM takes after routing/permutation). Outputs are `[M, n]`.
#pragma once

#include <quads/config.hpp>

#include <quads/quant/tensor_scale.hpp>

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace quads {

//! Shape of `y = x W^T` for one dense layer or a stack of expert layers.
struct linear_shape {
  int experts = 1;
  int n = 0;              //!< output features (rows of W)
  int k = 0;              //!< input features (the reduction dimension, blocks run along it)
  std::vector<int> rows;  //!< tokens routed to each expert, `experts` entries (host memory)

  //! A dense layer: `m` tokens, one weight `[n, k]`.
  static linear_shape dense(int m, int n, int k) { return {1, n, k, {m}}; }
  //! An expert stack `[rows_per_expert.size(), n, k]`.
  static linear_shape grouped(int n, int k, std::vector<int> rows_per_expert) {
    const int e = static_cast<int>(rows_per_expert.size());
    return {e, n, k, std::move(rows_per_expert)};
  }

  //! Total rows M (sum of `rows`).
  std::int64_t total_rows() const {
    return std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
  }
  //! First row of expert `e`'s group.
  std::int64_t row_offset(int e) const {
    return std::accumulate(rows.begin(), rows.begin() + e, std::int64_t{0});
  }
  std::size_t weight_size() const {
    return static_cast<std::size_t>(experts) * static_cast<std::size_t>(n) *
           static_cast<std::size_t>(k);
  }
  //! nullptr when the shape is valid, else what is wrong.
  const char* check() const {
    if (experts < 1) return "quads: linear_shape.experts must be >= 1";
    if (n < 0 || k < 0) return "quads: linear_shape.n and .k must be >= 0";
    if (rows.size() != static_cast<std::size_t>(experts))
      return "quads: linear_shape.rows must have one entry per expert";
    for (int r : rows)
      if (r < 0) return "quads: linear_shape.rows entries must be >= 0";
    return nullptr;
  }
};

//! Per-call arguments of the fake quantization (host reference and GPU path alike).
//! - `*_given`: the tensor scales of `global_scale::given` (1 entry, or one per expert; for
//!   activations one per expert group). Host memory: this struct serves the host reference; the
//!   GPU path takes `trainer::device_fake_quant_args` with device pointers instead.
//! - `weight_seed`: Philox seed of stochastic rounding of the weights; block `b` of the stack
//!   uses the block index `(expert * n + row) * (k / block) + col_block`, as `reference::quantize`.
//! - `act_seed`: activations of expert group `e` are fake-quantized as their own `[rows[e], k]`
//!   tensor with seed `act_seed + e` (and their own per-tensor scale, if the policy uses one).
struct fake_quant_args {
  std::span<const tensor_scale> weight_given{};
  std::span<const tensor_scale> act_given{};
  std::uint64_t weight_seed = 0;
  std::uint64_t act_seed = 0;
};

} // namespace quads
