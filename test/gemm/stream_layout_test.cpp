// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the streaming decode kernel's index maps and launch arithmetic
//!        (quads/gemm/decode_layout.hpp, `stream_layout`): the staging slot of every (token,
//!        octet) is distinct and is the slot the MMA side reads for the same (token, k); the
//!        shared-memory sizes fit the H200's limits for the decode shapes; plan_decode's splits.
#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/grouped_layout.hpp>

#include <doctest/doctest.h>

#include <set>
#include <vector>

namespace qg = quads::gemm;
using SL = qg::stream_layout;
using DL = qg::decode_layout;

TEST_SUITE("gemm.stream_layout") {

TEST_CASE("every staged activation octet lands in the slot the MMA fragment reads") {
  for (int nt : {1, 2})
    for (int chunks : {1, 4, 16}) {
      std::vector<int> owner(static_cast<std::size_t>(chunks) * nt * 4 * 32, -1);
      // staging side: thread (n = token, o = octet) of chunk c writes stage_slot
      for (int c = 0; c < chunks; ++c)
        for (int n = 0; n < 8 * nt; ++n)
          for (int o = 0; o < 16; ++o) {
            const int slot = SL::stage_slot(nt, c, n, o);
            REQUIRE(slot >= 0);
            REQUIRE(slot < static_cast<int>(owner.size()));
            REQUIRE(owner[static_cast<std::size_t>(slot)] == -1);  // no two octets share a slot
            owner[static_cast<std::size_t>(slot)] = (c * 16 + n) * 16 + o;
          }
      // MMA side: lane (g, t), tile j, word w of chunk c reads token 8 j + g at k = word_k
      for (int c = 0; c < chunks; ++c)
        for (int j = 0; j < nt; ++j)
          for (int w = 0; w < DL::words_per_lane; ++w)
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane / 4, t = lane % 4;
              const int slot = c * (nt * DL::words_per_lane * 32) + (j * DL::words_per_lane + w) * 32 + lane;
              CHECK(slot == SL::act_slot(nt, c, j, w, lane));
              const int k_in_chunk = DL::word_k(c, t, w) - c * DL::chunk_k;
              const int want = (c * 16 + 8 * j + g) * 16 + k_in_chunk / 8;
              REQUIRE(owner[static_cast<std::size_t>(slot)] == want);
            }
    }
}

TEST_CASE("the C tile written per warp fits the warp's drained ring and the smem fits the H200") {
  // 16 tokens x 16 rows of fp32, twice with a residual accumulator
  CHECK(2 * 16 * 16 * 4 <= SL::stages * SL::stage_bytes);
  // two CTAs per SM need <= two_per_sm_bytes each; 2 x (112 KB + 1 KB) <= 228 KB
  CHECK(2 * (SL::two_per_sm_bytes + 1024) <= 228 * 1024);
  // the decode shapes of issue 6 at M = 16: 14336x4096 (2 splits, 16 chunks) and 8192x8192
  // (4 splits, 16 chunks) keep two CTAs per SM with resident activations
  CHECK(SL::resident_bytes(2, false, 16) <= SL::two_per_sm_bytes);
  // 4096x14336 (4 splits, 28 chunks) is resident at one CTA per SM
  CHECK(SL::resident_bytes(2, false, 28) <= SL::max_smem_bytes);
  CHECK(SL::resident_bytes(2, false, 28) > SL::two_per_sm_bytes);
  // slab mode always fits two per SM, with a RAC residual buffer too (8-chunk slabs with one
  // token tile, 4-chunk slabs with two)
  CHECK(SL::slab_chunks(1) == 8);
  CHECK(SL::slab_chunks(2) == 4);
  for (const int nt : {1, 2})
    for (const bool rac : {false, true})
      CHECK(SL::smem_bytes(nt, rac) <= SL::two_per_sm_bytes);
}

TEST_CASE("plan_decode picks small clusters and one wave for the decode shapes") {
  struct want {
    int N, K, splits;
  };
  for (const want w : {want{14336, 4096, 2}, want{4096, 14336, 4}, want{8192, 8192, 2}})
    for (int M : {1, 4, 8, 16}) {
      const auto p = qg::plan_decode(M, w.N, w.K, false, {}, 132);
      INFO("N " << w.N << " K " << w.K << " M " << M);
      CHECK(p.splits == w.splits);
      CHECK(p.splits <= SL::default_max_splits);
      const int ctas = p.splits * ((w.N + SL::rows_per_cta - 1) / SL::rows_per_cta);
      CHECK(ctas <= 2 * 132);
      CHECK(ctas >= 0.9 * 132);
    }
  // explicit splits beyond the default cap are kept (clusters up to max_splits)
  CHECK(qg::plan_decode(16, 4096, 14336, false, {8}).splits == 8);
}

TEST_CASE("token tiles and RAC residual columns: one rule for dense calls and grouped m-tiles") {
  for (int rows = 1; rows <= SL::tokens_per_cta; ++rows) {
    INFO("rows " << rows);
    CHECK(SL::token_tiles(rows) == (rows <= 8 ? 1 : 2));
    // RAC: one tile only while the residual columns fit beside the tokens (4 + 4)
    const int rac_tiles = SL::token_tiles(rows, true);
    CHECK(rac_tiles == (rows <= 4 ? 1 : 2));
    // a dense RAC call or grouped RAC m-tile of at most 8 tokens stages its residuals in spare
    // columns
    if (rows <= 8) CHECK(rows <= SL::rac_col_capacity(rac_tiles));
    // a residual buffer (second MMA per step) above 8 rows only: decode_gemm runs one-tile calls
    // without `ResidualColumns` and 5-8 tokens with it; grouped_gemm passes it when the m-tile
    // fits the columns
    const bool cols = rows <= SL::rac_col_capacity(rac_tiles);
    CHECK(SL::residual_buffer(true, rac_tiles == 2 && cols, rac_tiles, false) == (rows > 8));
    CHECK(SL::residual_buffer(true, cols, rac_tiles, true) == (rows > 8));
    CHECK_FALSE(SL::residual_buffer(false, false, rac_tiles, true));
  }
  // token n's residual is column n + 4 of one n8 tile, or column n of the second tile
  CHECK(SL::rac_col_capacity(1) == 4);
  CHECK(SL::rac_col_capacity(2) == 8);
}

TEST_CASE("grouped n-tiles per CTA: two for grids of more than one wave") {
  CHECK(qg::grouped_n_tiles_per_cta(0, 264) == 1);
  CHECK(qg::grouped_n_tiles_per_cta(264, 264) == 1);  // one wave already
  CHECK(qg::grouped_n_tiles_per_cta(265, 264) == 2);
  CHECK(qg::grouped_n_tiles_per_cta(448, 264) == 2);  // DeepSeek-V3 down, T = 1
  CHECK(qg::grouped_n_tiles_per_cta(528, 264) == 2);
  CHECK(qg::grouped_n_tiles_per_cta(529, 264) == 2);  // three waves -> two
  CHECK(qg::grouped_n_tiles_per_cta(4096, 264) == 2);
}

} // TEST_SUITE

TEST_SUITE("gemm.stream_layout.reduction") {

TEST_CASE("the push-form split-K slots cover every fragment once and fit the drained rings") {
  for (const int W : {1, 2, 4, 8, 16, 32})
    for (int splits = 1; splits <= SL::max_splits; ++splits)
      for (const int which_count : {1, 2}) {
        INFO("W " << W << " splits " << splits << " accumulators " << which_count);
        const int per_row = SL::rows_per_cta / W;
        const int frags = SL::tokens_per_cta * per_row;
        const int locals = SL::reduce_locals(W, splits);
        const int floats = SL::reduce_floats(W, which_count);
        // every fragment has exactly one (owner, local index), and back
        std::vector<int> seen(static_cast<std::size_t>(splits * locals), 0);
        for (int f = 0; f < frags; ++f) {
          const int owner = f % splits, lf = f / splits;
          REQUIRE(lf < locals);
          REQUIRE(lf * splits + owner == f);
          ++seen[static_cast<std::size_t>(owner * locals + lf)];
        }
        for (int v : seen) REQUIRE(v <= 1);
        // receive slots (which, src, lf) are disjoint W-float ranges inside the area
        std::vector<int> used(static_cast<std::size_t>(floats), 0);
        for (int which = 0; which < which_count; ++which)
          for (int src = 0; src < splits; ++src)
            for (int lf = 0; lf < locals; ++lf) {
              const int s0 = SL::reduce_slot(W, splits, which, src, lf);
              REQUIRE(s0 >= 0);
              REQUIRE(s0 + W <= floats);
              for (int i = 0; i < W; ++i) REQUIRE(++used[static_cast<std::size_t>(s0 + i)] == 1);
            }
        // the area fits the rings of the shallowest ring the tuning allows (2 stages)
        CHECK(floats * 4 <= SL::warps * 2 * SL::stage_bytes);
      }
}

} // TEST_SUITE
