// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the grouped GEMM's plan and tile scheduler (quads/gemm/grouped_layout.hpp):
//!        for random routings (empty experts, 1..40 rows, slack rows), the flat item list covers
//!        every (active row, n-tile, split) exactly once, never names an empty expert, and the
//!        persistent grid bound holds.
#include <quads/gemm/grouped_layout.hpp>

#include <doctest/doctest.h>

#include <test_support/seed.hpp>

#include <random>
#include <vector>

namespace qg = quads::gemm;

namespace {

//! The prefix table the kernel builds (m-tiles of the experts before e).
std::vector<int> prefix_of(const std::vector<int>& offsets, int tile_rows) {
  const int E = static_cast<int>(offsets.size()) - 1;
  std::vector<int> p(static_cast<std::size_t>(E) + 1, 0);
  for (int e = 0; e < E; ++e)
    p[static_cast<std::size_t>(e) + 1] =
        p[static_cast<std::size_t>(e)] +
        qg::grouped_m_tiles(offsets[static_cast<std::size_t>(e) + 1] -
                                offsets[static_cast<std::size_t>(e)],
                            tile_rows);
  return p;
}

} // namespace

TEST_SUITE("gemm.grouped_schedule") {

TEST_CASE("the grouped item list covers every active row, n-tile and split exactly once") {
  auto g = quads_test::rng("gemm.grouped_schedule");
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> ex(1, 300), rows(0, 40), coin(0, 3), nd(1, 600), kd(1, 40);
    const int E = ex(g);
    std::vector<int> offsets{0};
    for (int e = 0; e < E; ++e) offsets.push_back(offsets.back() + (coin(g) == 0 ? rows(g) : 0));
    const int slack = coin(g) * 7;
    const int max_rows = offsets.back() + slack > 0 ? offsets.back() + slack : 1;
    const int N = 16 * nd(g), K = 16 * kd(g);
    const auto plan = qg::plan_grouped(max_rows, N, K, E, false, {coin(g) == 0 ? 3 : 0, {}});
    REQUIRE(plan.chunks > 0);
    REQUIRE(plan.splits >= 1);
    REQUIRE((plan.splits - 1) * plan.chunks_per_split < plan.chunks);  // no empty split
    // the persistent kernel's 16-row m-tiles and the streaming kernel's tiles of this plan
    for (const int tile : {qg::decode_layout::tokens_per_cta, plan.stream_tile_rows}) {
      const auto prefix = prefix_of(offsets, tile);
      const long total = static_cast<long>(prefix.back()) * plan.splits * plan.n_tiles;
      REQUIRE(prefix.back() <= plan.max_m_tiles(tile));
      if (tile == plan.stream_tile_rows) REQUIRE(plan.max_m_tiles(tile) == plan.stream_m_tiles);
      std::vector<int> seen(static_cast<std::size_t>(max_rows) * plan.n_tiles * plan.splits, 0);
      for (long w = 0; w < total; ++w) {
        const auto it = qg::grouped_item_at(w, prefix.data(), offsets.data(), E, plan.splits,
                                            plan.n_tiles, tile);
        REQUIRE(it.expert >= 0);
        REQUIRE(it.expert < E);
        const int lo = offsets[static_cast<std::size_t>(it.expert)],
                  hi = offsets[static_cast<std::size_t>(it.expert) + 1];
        REQUIRE(hi > lo); // never an empty expert
        REQUIRE(it.m0 >= lo);
        REQUIRE(it.m_end <= hi);
        REQUIRE(it.m0 < it.m_end);
        REQUIRE(it.m_end - it.m0 <= tile);
        for (int m = it.m0; m < it.m_end; ++m)
          ++seen[(static_cast<std::size_t>(m) * plan.n_tiles + it.n_tile) * plan.splits + it.split];
      }
      for (int m = 0; m < max_rows; ++m)
        for (int t = 0; t < plan.n_tiles; ++t)
          for (int s = 0; s < plan.splits; ++s) {
            const int want = m < offsets.back() ? 1 : 0;
            const int got =
                seen[(static_cast<std::size_t>(m) * plan.n_tiles + t) * plan.splits + s];
            if (got != want) {
              FAIL("row " << m << " n-tile " << t << " split " << s << " covered " << got
                          << " times, E=" << E << " tile rows " << tile);
            }
          }
    }
  }
}

TEST_CASE("the m-tile table lists the streaming kernel's m-tiles in slot order") {
  auto g = quads_test::rng("gemm.grouped_schedule.m_tile_table");
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> ex(1, 300), rows(0, 40), coin(0, 3);
    const int E = ex(g);
    std::vector<int> offsets{0};
    for (int e = 0; e < E; ++e) offsets.push_back(offsets.back() + (coin(g) == 0 ? rows(g) : 0));
    const int max_rows = offsets.back() + coin(g) * 7 > 0 ? offsets.back() + coin(g) * 7 : 1;
    const auto plan = qg::plan_grouped(max_rows, 256, 512, E, false);
    const int tile = plan.stream_tile_rows;
    std::vector<qg::grouped_m_tile> table(static_cast<std::size_t>(plan.stream_m_tiles));
    qg::fill_m_tile_table(offsets.data(), E, max_rows, tile, plan.stream_m_tiles, table.data());
    const auto prefix = prefix_of(offsets, tile);
    for (int z = 0; z < plan.stream_m_tiles; ++z) {
      const auto& t = table[static_cast<std::size_t>(z)];
      CAPTURE(z);
      CAPTURE(E);
      CHECK(t.unused == 0);
      if (z >= prefix.back()) {  // past the routing's m-tiles: the scan path's CTAs leave
        CHECK(t.expert == -1);
        continue;
      }
      const auto it = qg::grouped_item_at(z, prefix.data(), offsets.data(), E, 1, 1, tile);
      CHECK(t.expert == it.expert);
      CHECK(t.m0 == it.m0);
      CHECK(t.m_end == it.m_end);
    }
  }
}

TEST_CASE("the m-tile table clamps offsets to the rows and drops m-tiles past its slots") {
  // expert 0: rows [0, 9) of at most 6 -> [0, 6); expert 1 starts below 0; expert 2 is empty
  const int offsets[] = {-3, 0, 9, 9};
  qg::grouped_m_tile t[4] = {};
  qg::fill_m_tile_table(offsets, 3, 6, 4, 4, t);
  CHECK(t[0].expert == 1);
  CHECK(t[0].m0 == 0);
  CHECK(t[0].m_end == 4);
  CHECK(t[1].expert == 1);
  CHECK(t[1].m0 == 4);
  CHECK(t[1].m_end == 6);
  CHECK(t[2].expert == -1);
  CHECK(t[3].expert == -1);
  qg::grouped_m_tile one[1] = {};
  qg::fill_m_tile_table(offsets, 3, 6, 4, 1, one);  // one slot: the second m-tile is dropped
  CHECK(one[0].expert == 1);
  CHECK(one[0].m_end == 4);
}

TEST_CASE("the streaming kernel's m-tile rows follow the rows per busy expert") {
  CHECK(qg::grouped_stream_tile_rows(8, 128) == 4);    // T = 1, top-8: one row per expert
  CHECK(qg::grouped_stream_tile_rows(512, 256) == 4);  // 2 rows per expert
  CHECK(qg::grouped_stream_tile_rows(512, 128) == 8);  // 4
  CHECK(qg::grouped_stream_tile_rows(513, 128) == 16); // just over 4
  CHECK(qg::grouped_stream_tile_rows(4096, 128) == 16);
  CHECK(qg::grouped_stream_tile_rows(3, 1) == 8); // one expert holds every row
  CHECK(qg::grouped_stream_tile_rows(5, 1) == 16);
  CHECK(qg::grouped_stream_tile_rows(0, 8) == 16);
}

TEST_CASE("plan_grouped splits decode-sized routings and keeps large ones unsplit") {
  // Qwen3-30B-A3B gate_up at T = 1 (top-8): 8 rows, 24 n-tiles -> split to fill the GPU
  const auto small = qg::plan_grouped(8, 1536, 2048, 128, false);
  CHECK(small.splits >= 2);
  CHECK(small.workspace_bytes == static_cast<std::size_t>(small.splits) * 8 * 1536 * 4);
  // T = 512 (4096 rows): plenty of tiles, one split
  const auto big = qg::plan_grouped(4096, 1536, 2048, 128, false);
  CHECK(big.splits == 1);
  CHECK(big.ctas == 4 * 132);
  const auto atomic = qg::plan_grouped(8, 1536, 2048, 128, true, {0, qg::reduction::atomic});
  CHECK(atomic.workspace_bytes == 2u * 8 * 1536 * 4);
}

} // TEST_SUITE
