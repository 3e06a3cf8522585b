// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Chunk-tiled NVFP4 weights (host-safe): the packed codes and block scales re-laid out
//!        offline in the order the streaming decode kernel reads them.
//!
//! Why. The streaming decode kernel (decode.cuh) gives each warp 16 weight rows and walks K in
//! chunks of 128: per chunk it copies 64 code bytes and 8 scale bytes of each of its 16 rows.
//! In the row-major layout those are 32 pieces in 32 different rows (and DRAM pages); a chunk-
//! tiled weight stores the warp's chunk as one contiguous 1,024-byte run of codes (and one
//! 128-byte run of scales), and a warp's consecutive chunks next to each other, so a warp streams
//! two contiguous regions.
//!
//! What. `chunk_tiled<F>` is a weight format: the values, block size, scales and tensor scale are
//! `F`'s (NVFP4, or `pair_coded<nvfp4>`: the tiling moves whole 16-byte pieces, so it composes
//! with the word-local pair coding); only the byte order changes. For a weight `[N, K]` (N a
//! multiple of 16, K a multiple of 128) with C = K / 128 chunks, row group `G` (rows 16 G ..
//! 16 G + 15) and chunk `c` form tile `T = G * C + c`:
//! - codes: byte `1024 T + 32 l + 16 h + b` = row-major byte `(16 G + l / 4 + 8 h) * K / 2 +
//!   64 c + 16 (l % 4) + b` (lane l = 0..31, h = 0, 1, b = 0..15): the 32 bytes that lane l of
//!   the warp holds in registers;
//! - scales: byte `128 T + 8 r + j` = row-major scale byte `(16 G + r) * K / 16 + 8 c + j`
//!   (r = 0..15, j = 0..7).
//! Both arrays keep their sizes (N K / 2 and N K / 16 bytes), so an expert stack `[E, N, K]`
//! tiles expert by expert with the same strides. `tile_chunks` / `untile_chunks` convert on the
//! host; `tile_chunks_async` (chunk_tiling.cuh) on the GPU.
#pragma once

#include <quads/gemm/pair_coding.hpp>
#include <quads/scheme/schemes.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

namespace quads::gemm {

//! NVFP4 weights (plain or pair-coded) in the chunk-tiled byte order (this file).
template <block_scaled_format Base>
struct chunk_tiled : Base {
  static_assert(Base::block_size == 16 && is_two_level<Base>,
                "quads: chunk tiling is defined for NVFP4 weights (16-element blocks, UE4M3 "
                "scales), plain or pair_coded");
  using base_format = Base;
};

template <class F>
inline constexpr bool is_chunk_tiled = false;
template <class B>
inline constexpr bool is_chunk_tiled<chunk_tiled<B>> = true;

template <class B>
struct value_format<chunk_tiled<B>> {
  using type = value_format_t<B>;
};
template <class B, mma_lane Lane>
struct weight_loader<chunk_tiled<B>, Lane> {
  using type = weight_loader_t<B, Lane>;
};

namespace chunk_tiling {

inline constexpr int rows = 16;          //!< rows of a tile (one warp of the decode kernel)
inline constexpr int chunk_k = 128;      //!< K of a tile
inline constexpr int code_bytes = 1024;  //!< code bytes of a tile
inline constexpr int scale_bytes = 128;  //!< scale bytes of a tile

//! Row-major code byte of tiled code byte `i` of one `[N, K]` matrix.
constexpr std::size_t code_source(std::size_t i, int K) noexcept {
  const std::size_t C = static_cast<std::size_t>(K / chunk_k);
  const std::size_t T = i / code_bytes, G = T / C, c = T % C;
  const int in = static_cast<int>(i % code_bytes);
  const int l = in / 32, h = (in / 16) % 2, b = in % 16;
  return (rows * G + static_cast<std::size_t>(l / 4 + 8 * h)) * static_cast<std::size_t>(K / 2) +
         64 * c + static_cast<std::size_t>(16 * (l % 4) + b);
}
//! Row-major scale byte of tiled scale byte `i` of one `[N, K]` matrix.
constexpr std::size_t scale_source(std::size_t i, int K) noexcept {
  const std::size_t C = static_cast<std::size_t>(K / chunk_k);
  const std::size_t T = i / scale_bytes, G = T / C, c = T % C;
  const int in = static_cast<int>(i % scale_bytes);
  return (rows * G + static_cast<std::size_t>(in / 8)) * static_cast<std::size_t>(K / 16) + 8 * c +
         static_cast<std::size_t>(in % 8);
}

//! nullptr if `[experts, N, K]` can be tiled, else why not.
constexpr const char* check_shape(int experts, int N, int K) noexcept {
  if (experts <= 0 || N <= 0 || K <= 0) return "quads: chunk tiling: shapes must be positive";
  if (N % rows != 0) return "quads: chunk tiling: N must be a multiple of 16";
  if (K % chunk_k != 0) return "quads: chunk tiling: K must be a multiple of 128";
  return nullptr;
}

namespace detail {
template <bool Tile>
void permute(std::span<const std::uint8_t> codes, std::span<const std::uint8_t> scales,
             std::span<std::uint8_t> out_codes, std::span<std::uint8_t> out_scales, int experts,
             int N, int K) {
  if (const char* why = check_shape(experts, N, K)) throw std::invalid_argument(why);
  const std::size_t cb = static_cast<std::size_t>(N) * K / 2, sb = static_cast<std::size_t>(N) * K / 16;
  if (codes.size() != cb * experts || out_codes.size() != codes.size() ||
      scales.size() != sb * experts || out_scales.size() != scales.size())
    throw std::invalid_argument(
        "quads: chunk tiling: codes must be experts * N * K / 2 bytes and scales experts * N * "
        "K / 16 bytes, in and out");
  if (codes.data() == out_codes.data() || scales.data() == out_scales.data())
    throw std::invalid_argument("quads: chunk tiling: in and out must be different memory");
  for (int e = 0; e < experts; ++e) {
    const std::size_t co = cb * e, so = sb * e;
    for (std::size_t i = 0; i < cb; ++i) {
      const std::size_t j = code_source(i, K);
      if constexpr (Tile) out_codes[co + i] = codes[co + j];
      else out_codes[co + j] = codes[co + i];
    }
    for (std::size_t i = 0; i < sb; ++i) {
      const std::size_t j = scale_source(i, K);
      if constexpr (Tile) out_scales[so + i] = scales[so + j];
      else out_scales[so + j] = scales[so + i];
    }
  }
}
} // namespace detail

} // namespace chunk_tiling

//! Row-major packed codes and linear scales of `experts` matrices `[N, K]` -> chunk-tiled (host).
//! Throws `std::invalid_argument` on a shape the tiling does not cover (N % 16, K % 128), on
//! sizes that do not match, or when in and out share memory.
inline void tile_chunks(std::span<const std::uint8_t> codes, std::span<const std::uint8_t> scales,
                        std::span<std::uint8_t> tiled_codes, std::span<std::uint8_t> tiled_scales,
                        int N, int K, int experts = 1) {
  chunk_tiling::detail::permute<true>(codes, scales, tiled_codes, tiled_scales, experts, N, K);
}
//! The inverse of `tile_chunks`, same contract.
inline void untile_chunks(std::span<const std::uint8_t> tiled_codes,
                          std::span<const std::uint8_t> tiled_scales, std::span<std::uint8_t> codes,
                          std::span<std::uint8_t> scales, int N, int K, int experts = 1) {
  chunk_tiling::detail::permute<false>(tiled_codes, tiled_scales, codes, scales, experts, N, K);
}

} // namespace quads::gemm
