// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Offline weight re-layouts on the host (host-only): gate/up row interleaving for the
//!        SwiGLU epilogue.
//!
//! `interleave_gate_up` turns a fused gate/up weight stored in halves (rows [0, I) = gate,
//! [I, 2I) = up, the checkpoint order) into rows `gate_0, up_0, gate_1, up_1, ...`, so that
//! `epilogue::swiglu<pairing::interleaved>` finds each pair in adjacent output columns. It is a
//! row permutation of the packed codes, the block scales and (with `global_scale::per_row`) the
//! tensor scales: no value changes, so trainer/rollout bit-identity is kept.
#pragma once

#include <quads/config.hpp>

#include <quads/layout/scale_layouts.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace quads::gemm {

//! Output row `2 j` = input row `j` (gate), output row `2 j + 1` = input row `I + j` (up), for
//! every expert. Throws `std::invalid_argument` if the row count is odd.
template <block_scaled_format Format, scale_layout Layout>
quads::reference::quantized_tensor<Format, Layout> interleave_gate_up(
    const quads::reference::quantized_tensor<Format, Layout>& w) {
  if (w.rows % 2 != 0)
    throw std::invalid_argument("quads: interleave_gate_up needs an even row count (gate + up)");
  const int I = w.rows / 2;
  const std::size_t row_bytes = static_cast<std::size_t>(w.cols / 2);
  const int scale_cols = w.cols / Format::block_size;
  auto out = w;
  const auto layout = w.scale_layout();
  for (int e = 0; e < w.experts; ++e)
    for (int r = 0; r < w.rows; ++r) {
      const int src = (r % 2 == 0) ? r / 2 : I + r / 2;
      const std::size_t base = static_cast<std::size_t>(e) * w.rows;
      for (std::size_t b = 0; b < row_bytes; ++b)
        out.data[(base + r) * row_bytes + b] = w.data[(base + src) * row_bytes + b];
      for (int c = 0; c < scale_cols; ++c)
        out.scales[layout.offset(e, r, c)] = w.scales[layout.offset(e, src, c)];
      if (w.global == global_scale::per_row)
        out.tensor_scales[base + static_cast<std::size_t>(r)] =
            w.tensor_scales[base + static_cast<std::size_t>(src)];
    }
  return out;
}

} // namespace quads::gemm
