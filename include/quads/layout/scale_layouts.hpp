// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Block-scale layouts as types: `linear_scales`, `swizzled_128x4`, and `batched<L>`.
//!
//! A layout maps (row, scale column) to a byte offset, and back. `rows` counts rows of the
//! quantized matrix (M for activations, N for weights), `cols` counts scale columns (K / block).
//! Layouts with padding (swizzled_128x4) report `size()` including the padding, which holders
//! must zero-fill; `coords()` of a padding byte returns `valid == false`.
#pragma once

#include <quads/config.hpp>

#include <cuda/std/cstddef>
#include <cuda/std/cstdint>

#include <concepts>

namespace quads {

//! Where a scale byte belongs. `valid` is false for padding bytes.
struct scale_coord {
  int row;
  int col;
  bool valid;
};

//! Row-major `[rows, cols]`, no padding (ModelOpt checkpoints, FlashInfer LINEAR).
struct linear_scales {
  int rows = 0;
  int cols = 0;

  QUADS_API constexpr ::cuda::std::size_t size() const noexcept {
    return static_cast<::cuda::std::size_t>(rows) * static_cast<::cuda::std::size_t>(cols);
  }
  QUADS_API constexpr ::cuda::std::size_t offset(int row, int col) const noexcept {
    return static_cast<::cuda::std::size_t>(row) * static_cast<::cuda::std::size_t>(cols) +
           static_cast<::cuda::std::size_t>(col);
  }
  QUADS_API constexpr scale_coord coords(::cuda::std::size_t off) const noexcept {
    return {static_cast<int>(off / static_cast<::cuda::std::size_t>(cols)),
            static_cast<int>(off % static_cast<::cuda::std::size_t>(cols)), off < size()};
  }
};

//! cuBLASLt VEC16_UE4M3 / VEC32_UE8M0 and CUTLASS SM100 block-scaled layout: tiles of 128 rows x
//! 4 scale columns (512 bytes), K-tile fastest within an M-tile; inside a tile row r = 32 i + j
//! is stored at j * 16 + i * 4 + (col % 4). Rows pad to 128 and columns to 4.
struct swizzled_128x4 {
  int rows = 0;
  int cols = 0;

  QUADS_API constexpr int row_tiles() const noexcept { return (rows + 127) / 128; }
  QUADS_API constexpr int col_tiles() const noexcept { return (cols + 3) / 4; }
  QUADS_API constexpr ::cuda::std::size_t size() const noexcept {
    return static_cast<::cuda::std::size_t>(row_tiles()) *
           static_cast<::cuda::std::size_t>(col_tiles()) * 512u;
  }
  QUADS_API constexpr ::cuda::std::size_t offset(int row, int col) const noexcept {
    const ::cuda::std::size_t tile = static_cast<::cuda::std::size_t>(row / 128) *
                                         static_cast<::cuda::std::size_t>(col_tiles()) +
                                     static_cast<::cuda::std::size_t>(col / 4);
    return tile * 512u + static_cast<::cuda::std::size_t>((row % 32) * 16 + ((row / 32) % 4) * 4 +
                                                          (col % 4));
  }
  QUADS_API constexpr scale_coord coords(::cuda::std::size_t off) const noexcept {
    const ::cuda::std::size_t tile = off / 512u;
    const int in_tile = static_cast<int>(off % 512u);
    const int row = static_cast<int>(tile / static_cast<::cuda::std::size_t>(col_tiles())) * 128 +
                    ((in_tile >> 2) & 3) * 32 + (in_tile >> 4);
    const int col = static_cast<int>(tile % static_cast<::cuda::std::size_t>(col_tiles())) * 4 +
                    (in_tile & 3);
    return {row, col, off < size() && row < rows && col < cols};
  }
};

//! A scale layout: built from `{rows, cols}`, gives `size()`, `offset(row, col)` and its inverse
//! `coords(offset)`.
template <class L>
concept scale_layout = requires(const L& l, int r, int c, ::cuda::std::size_t off) {
  L{r, c};
  { l.size() } -> std::same_as<::cuda::std::size_t>;
  { l.offset(r, c) } -> std::same_as<::cuda::std::size_t>;
  { l.coords(off) } -> std::same_as<scale_coord>;
};
static_assert(scale_layout<linear_scales> && scale_layout<swizzled_128x4>);

//! Per-expert (batched) scales: `batches` copies of `Layout`, each `layout.size()` bytes apart.
template <scale_layout Layout>
struct batched {
  int batches = 0;
  Layout layout{};

  QUADS_API constexpr ::cuda::std::size_t size() const noexcept {
    return static_cast<::cuda::std::size_t>(batches) * layout.size();
  }
  QUADS_API constexpr ::cuda::std::size_t offset(int batch, int row, int col) const noexcept {
    return static_cast<::cuda::std::size_t>(batch) * layout.size() + layout.offset(row, col);
  }
  //! Batch index of an offset; the rest via `layout.coords(off % layout.size())`.
  QUADS_API constexpr int batch_of(::cuda::std::size_t off) const noexcept {
    return static_cast<int>(off / layout.size());
  }
};

//! Packed E2M1 data of a row-major `[rows, K]` matrix: byte `row * K/2 + k/2`, nibble `k % 2`.
QUADS_API constexpr ::cuda::std::size_t packed_offset(int row, int k, int K) noexcept {
  return static_cast<::cuda::std::size_t>(row) * static_cast<::cuda::std::size_t>(K / 2) +
         static_cast<::cuda::std::size_t>(k / 2);
}

} // namespace quads
