// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Tiling of the wgmma prefill GEMM (host + device): CTA tile, pipeline stages, shared
//!        memory map, and the k permutation the activation pre-pass applies (`prefill_position`).
//!
//! The prefill kernel computes `y^T = W A^T`: weights on the wgmma M side (dequantized in
//! registers, the RS form), tokens on N (bf16 in shared memory, loaded by TMA). A CTA owns 128
//! weight rows x 256 tokens; each of its two consumer warpgroups 64 rows x 256 tokens
//! (`wgmma.m64n256k16`, 128 fp32 accumulators per thread). k-tile = 64.
//!
//! Why a k permutation: in a k-tile, thread (g, t) of a warp reads 16 consecutive codes (8
//! bytes, one NVFP4 block) of its two rows g and g + 8, and `unpack_word` pairs codes (i, i + 4)
//! of a 32-bit word into one register (one shift + mask per pair, quads/gemm/dequant.hpp). The
//! A fragment of wgmma wants, per k-step of 16, the pair at MMA k positions (2t, 2t + 1) and
//! (2t + 8, 2t + 9). So MMA position `p` of k-step `s` holds logical k
//! `16 t + 8 (s / 2) + 2 (s % 2) + hi + 4 e` with `t = (p % 8) / 2`, `e = p % 2`, `hi = p / 8`.
//! The activation pre-pass writes the bf16 activations in that order (`prefill_position`), so
//! operand B in shared memory matches: the sum over k is the same up to fp32 summation order.
#pragma once

#include <quads/config.hpp>

#include <cstddef>

namespace quads::gemm {

struct prefill_layout {
  static constexpr int tile_n = 128; //!< weight rows per CTA (wgmma M side)
  static constexpr int tile_m = 256; //!< tokens per CTA (wgmma N)
  static constexpr int tile_k = 64;  //!< k per pipeline stage
  static constexpr int stages = 6;
  static constexpr int consumers = 2; //!< consumer warpgroups (64 weight rows each)
  static constexpr int threads = 128 * (1 + consumers);
  static constexpr int b_stage_bytes = tile_m * tile_k * 2;  //!< bf16 tokens, 128B-swizzled
  static constexpr int w_stage_bytes = tile_n * tile_k / 2;  //!< packed E2M1 codes
  static constexpr int s_stage_bytes = tile_n * tile_k / 16; //!< UE4M3 block scales
  static constexpr int w_offset = stages * b_stage_bytes;
  static constexpr int s_offset = w_offset + stages * w_stage_bytes;
  static constexpr int bar_offset = s_offset + stages * s_stage_bytes;
  static constexpr int smem_bytes = bar_offset + 2 * stages * 8;
  //! Dynamic shared memory requested: the map plus slack to align its base to 1024 bytes
  //! (the 128-byte swizzle atom of TMA and wgmma).
  static constexpr int smem_request = smem_bytes + 1024;
  //! Epilogue staging (reuses the B stages): per consumer, 256 tokens x 64 rows of fp32, rows
  //! padded to 68 floats so the accumulator scatter is free of bank conflicts.
  static constexpr int staging_pitch = 68;
  static constexpr int staging_floats = tile_m * staging_pitch;

  static_assert(consumers * staging_floats * 4 <= w_offset, "staging must fit the B stages");
  static_assert(smem_request <= 232448, "above the 227 KB of shared memory an sm_90 CTA may use");
};

//! Where logical k (0 <= k) of a token row is stored by the activation pre-pass (see the file
//! comment): a permutation of each 64-aligned group of 64.
QUADS_API constexpr int prefill_position(int k) noexcept {
  const int c = k / 64, l = k % 64;
  const int t = l / 16, w = (l / 8) % 2, j = l % 8;
  const int e = j / 4, i = j % 4, h = i / 2, hi = i % 2;
  return 64 * c + 16 * (2 * w + h) + 2 * t + e + 8 * hi;
}

//! The plan of one prefill GEMM: shape and the workspace the activation pre-pass writes
//! (M x K bf16, 256-byte rounded).
struct prefill_plan {
  int M = 0, N = 0, K = 0;
  std::size_t workspace_bytes = 0;
  //! wgmma groups each consumer warpgroup keeps in flight: 1 (the default) or 2 (never drains
  //! its own queue; correct on the H200 but 5-10 % slower at M = 4096, docs/gemm.md Table 3).
  int mma_depth = 1;
};

//! Plans `y[M, N] = Epi(A[M, K] W[N, K]^T)`. Shapes are checked by the launcher, not here.
inline prefill_plan plan_prefill(int M, int N, int K, int mma_depth = 1) noexcept {
  prefill_plan p{M, N, K, 0, mma_depth};
  if (M > 0 && K > 0) {
    const std::size_t b = static_cast<std::size_t>(M) * static_cast<std::size_t>(K) * 2;
    p.workspace_bytes = (b + 255) / 256 * 256;
  }
  return p;
}

} // namespace quads::gemm
